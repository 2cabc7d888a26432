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


def binding(profile: Profile) -> str:
    """``platform.gpu.binding``: ``boot`` (vfio-pci at boot) or ``dra`` (rebound per claim)."""
    platform = getattr(profile, "platform", None)
    return str(getattr(getattr(platform, "gpu", None), "binding", "boot"))


def host_driver(profile: Profile) -> str:
    """``platform.gpu.host_driver``: where a GPU sits between claims under ``dra``."""
    platform = getattr(profile, "platform", None)
    return str(getattr(getattr(platform, "gpu", None), "host_driver", "nvidia"))


# the node checks whose rule is "bound to vfio-pci at boot and after every reboot": on a node
# whose GPUs the DRA driver rebinds per claim (``platform.gpu.binding: dra``) that rule is
# wrong by design, and its fixes (vfio-pci ids at boot) fight the driver. Under ``dra`` each
# skips naming the check that judges the node instead (the rebindability rule, or
# persistence.coverage, which under ``dra`` reports a boot-time vfio-pci binding).
DRA_REPLACEMENT = {
    "vfio.driver": "vfio.rebindable",
    "vfio.device-node": "vfio.rebindable",
    "vfio.group-viable": "vfio.rebindable",
    "vfio.competing-driver": "vfio.rebindable",
    "persistence.load-order": "persistence.coverage",
    "persistence.initramfs": "persistence.coverage",
    "persistence.cmdline": "persistence.coverage",
    "reboot.binding-persists": "reboot.rebindable",
}
BOOT_BINDING_RULES = frozenset(DRA_REPLACEMENT)
# the checks that judge a DRA node instead: under ``boot`` they skip naming the boot rule
DRA_RULES = {"vfio.rebindable": "vfio.driver", "reboot.rebindable": "reboot.binding-persists"}


def dra_binding_skip(profile: Profile, check_id: str) -> Outcome | None:
    """What a boot-binding rule gives under ``platform.gpu.binding: dra`` (None: the rule
    applies): a skip naming the check that judges the node instead, never a pass. Each node
    layer keeps a judged check under ``dra`` (vfio.rebindable, persistence.coverage,
    reboot.rebindable), so the default per-layer policy never certifies a DRA node's host
    layers on skips alone."""
    if binding(profile) != "dra" or check_id not in BOOT_BINDING_RULES:
        return None
    return skipped(
        "platform.gpu.binding: dra: the DRA driver binds each GPU to vfio-pci only when a "
        f"claim is prepared ({DRA_SOURCE}), so {check_id}'s boot-time vfio-pci rule does not "
        f"apply; {DRA_REPLACEMENT[check_id]} judges the node instead")


def boot_binding_skip(profile: Profile, check_id: str) -> Outcome | None:
    """What a DRA-only rule gives under ``platform.gpu.binding: boot`` (None: it applies)."""
    if binding(profile) == "dra" or check_id not in DRA_RULES:
        return None
    return skipped(f"the profile binds the GPUs at boot (platform.gpu.binding: boot), so "
                   f"whether the DRA driver could rebind them is not asked; "
                   f"{DRA_RULES[check_id]} judges the binding")


DRA_SOURCE = "kubernetes-sigs/dra-driver-nvidia-gpu, PassthroughSupport"
