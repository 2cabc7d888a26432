"""Evaluator helpers shared by several host layers (pure, no I/O)."""

from __future__ import annotations

from kgc.core.model import Outcome, errored, skipped
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
    """What a boot-binding rule gives under ``platform.gpu.binding: dra`` (None: the rule
    applies). Never a pass: what such a node needs instead — each GPU's IOMMU group viable
    and nothing holding ``/dev/nvidia*``, so that the driver can rebind it — is not judged by
    this release. ``vfio.driver`` (a blocker) is an ``error`` saying so, so that no gate
    certifies a DRA node's host layers on the checks that remain (the default policy needs
    only one judged check per layer); the other rules skip, naming it."""
    platform = getattr(profile, "platform", None)
    binding = getattr(getattr(platform, "gpu", None), "binding", "boot")
    if binding != "dra" or check_id not in BOOT_BINDING_RULES:
        return None
    why = ("platform.gpu.binding: dra: the DRA driver binds each GPU to vfio-pci only when a "
           "claim is prepared (kubernetes-sigs/dra-driver-nvidia-gpu, PassthroughSupport), so "
           f"{check_id}'s boot-time vfio-pci rule does not apply")
    if check_id == DRA_UNJUDGED:
        return errored(
            f"{why}; whether the GPUs are rebindable (IOMMU group viable with the GPU on its "
            "host driver, nothing holding /dev/nvidia*) is not judged by this release, so "
            "the node's binding is not judged and the node cannot be certified",
            "Certify this node with binding: boot (GPUs bound to vfio-pci at boot, the "
            "device-plugin path), or waive vfio.driver in the profile's policy for DRA nodes "
            "and judge their rebinding by hand until kgc judges it")
    return skipped(f"{why}; not judged under dra (see {DRA_UNJUDGED})")


# the one boot-binding rule that says "not judged" as an error under binding: dra
DRA_UNJUDGED = "vfio.driver"
