"""Evaluator helpers shared by several host layers (pure, no I/O)."""

from __future__ import annotations

from kgc.core.model import Outcome, skipped
from kgc.core.profile import Profile


def no_targets(profile: Profile) -> Outcome:
    """The skip every per-target check gives on a node without passthrough targets."""
    sels = ", ".join(s.describe() for s in profile.host.passthrough.targets) or "(none)"
    return skipped(
        f"no PCI device on this node matches the profile's targets ({sels}); "
        "see iommu.targets-present"
    )


# the node checks whose rule is "bound to vfio-pci at boot and after every reboot": on a node
# whose GPUs the DRA driver rebinds per claim (``platform.gpu.binding: dra``) that rule is
# wrong by design, and its fixes (vfio-pci ids at boot) fight the driver
BOOT_BINDING_RULES = frozenset({
    "vfio.driver", "vfio.device-node", "vfio.group-viable", "vfio.competing-driver",
    "persistence.coverage", "persistence.load-order", "persistence.initramfs",
    "persistence.cmdline", "reboot.binding-persists",
})


def dra_binding_skip(profile: Profile, check_id: str) -> Outcome | None:
    """The skip a boot-binding rule gives under ``platform.gpu.binding: dra`` (None: the rule
    applies). Not a pass: what such a node needs instead — each GPU's IOMMU group viable and
    nothing holding ``/dev/nvidia*`` so that the driver can rebind it — is not judged by this
    release, so the node layers cannot certify a DRA node (the gate counts a skipped blocker
    as not judged)."""
    platform = getattr(profile, "platform", None)
    binding = getattr(getattr(platform, "gpu", None), "binding", "boot")
    if binding != "dra" or check_id not in BOOT_BINDING_RULES:
        return None
    return skipped(
        f"platform.gpu.binding: dra: the DRA driver binds each GPU to vfio-pci only when a "
        f"claim is prepared (kubernetes-sigs/dra-driver-nvidia-gpu, PassthroughSupport), so "
        f"{check_id}'s boot-time vfio-pci rule does not apply; whether the GPUs are "
        "rebindable (IOMMU group viable, nothing holding /dev/nvidia*) is not judged yet, "
        "so this node is not certified by the node layers")
