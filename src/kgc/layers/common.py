"""Evaluator helpers shared by several host layers (pure, no I/O).

Rebindability under ``platform.gpu.binding: dra`` (:func:`judge_rebindable`, one judgement
for ``vfio.rebindable``, the node as it is, and ``reboot.rebindable``, the node after a real
reboot): whether NVIDIA's DRA driver can rebind each target GPU. What it needs, from its
source (kubernetes-sigs/dra-driver-nvidia-gpu at 95932046, 2026-08-07,
``cmd/gpu-kubelet-plugin/vfio-device.go``; the go-nvlib ``pkg/nvpassthrough`` v0.12.0 it
vendors):

* **the driver**: ``Configure`` skips a GPU already on its vfio driver, rebinds one on
  ``nvidia``, and refuses any other ("GPU … is bound to … driver, expected vfio-pci or
  nvidia"); a GPU with no driver fails earlier (its ``driver`` link cannot be read). Its
  ``gpu`` devices are enumerated through NVML, which sees only GPUs on ``nvidia`` -- nouveau
  is not nvidia: a GPU on nouveau is refused and never published as a ``gpu`` device. The
  host driver is ``platform.gpu.host_driver`` (``nvidia``; a lab stand-in names its own).
* **nothing holding the GPU's node**: ``WaitForGPUFree`` polls ``fuser /dev/nvidia<minor>``
  for 60 s, then the prepare fails (nvidia-persistenced: dra-driver-nvidia-gpu#1037; any
  process: #1076). See :mod:`kgc.evidence.holders`.
* **the whole IOMMU group viable once the GPU is on vfio-pci**: the kernel's rule that every
  endpoint of the group is on a vfio driver, pci-stub, no driver, or a bridge -- the same
  rule as ``vfio.group-viable`` (:func:`viable_peer`). The driver moves only the GPU: go-nvlib
  ``Unbind`` also unbinds the GPU's graphics auxiliary function (the ``consumer:pci:<bdf>``
  device link of a VGA-class GPU, its HDMI audio) and ``BindToDriver`` binds the GPU alone,
  so that function ends driverless (viable); any other peer stays where it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kgc.core.model import Outcome, errored, failed, passed, skipped, warned
from kgc.core.profile import Profile
from kgc.evidence.holders import DeviceUse, Holder
from kgc.evidence.pci import BRIDGE_CLASSES
from kgc.evidence.vfio_config import (
    ALL_MECHANISMS,
    BootBinding,
    boot_mechanisms,
    cmdline_words,
    vfio_ids_in,
)

if TYPE_CHECKING:
    from kgc.evidence.pci import PciDevice

STUB_DRIVERS = ("pci-stub",)
PERSISTENCED = "nvidia-persiste"  # nvidia-persistenced's comm, cut at 15 characters
DRA_SOURCE = "kubernetes-sigs/dra-driver-nvidia-gpu, PassthroughSupport"


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


# Why a boot-time vfio-pci binding is a finding under ``dra`` (persistence.coverage warns,
# reboot.rebindable fails when the node comes back pre-bound). From the driver's source:
# nvlib.go ``enumerateGpuVfioDevices`` still publishes a GPU already on vfio-pci as a vfio
# device (found through sysfs; "the parent is nil because the GPU is prepared in passthrough
# mode") and ``Configure`` skips it -- but NVML does not see it, so its ``gpu`` device is
# never published, and the first unprepare moves it to nvidia (``Unconfigure``;
# device_state.go creates the manager with nvidiaEnabled hard-wired true): the boot
# configuration and the driver disagree on where the GPU lives, and the node's state
# depends on its history (vfio-pci after a reboot, nvidia after a claim).
PREBIND_WHY = ("the DRA driver expects it on its host driver between claims: pre-bound, it "
               "is published only as a vfio device (NVML does not see it: no gpu device), and "
               "the first unprepare moves it to nvidia anyway, so the boot configuration and "
               "the driver disagree (dra-driver-nvidia-gpu nvlib.go enumerateGpuVfioDevices, "
               "vfio-device.go Unconfigure)")


def prebind_sources(b: BootBinding, d: PciDevice,
                    allowed: Iterable[str]) -> list[tuple[str, str]]:
    """(mechanism, where) of every boot-time configuration that binds ``d`` to a vfio driver
    (any mechanism, accepted by the profile or not), the running command line included."""
    out = boot_mechanisms(b, d, allowed, ALL_MECHANISMS)
    for r in vfio_ids_in(cmdline_words(b.proc_cmdline or "")):
        if r.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device):
            out.append(("cmdline", f"/proc/cmdline (this boot): vfio-pci.ids={r}"))
    return list(dict.fromkeys(out))


def unprebind_fix(kind: str, where: str, bdf: str) -> str:
    """How to remove one boot-time binding, from where it is configured."""
    path = where.split(":", 1)[0].split(" (")[0]
    if kind == "driverctl":
        return f"driverctl unset-override {bdf} (it is {where})"
    if kind == "udev":
        return f"remove the driver_override rule in {path}, then `udevadm control --reload`"
    if kind == "modprobe":
        return (f"remove the ID from `{where.split(': ', 1)[-1]}` in {path}, then "
                "update-initramfs -u (dracut -f)")
    if path == "/proc/cmdline":
        return (f"{where} is on the running command line: remove vfio-pci.ids from the boot "
                "loader config, update-grub, and reboot")
    return f"remove vfio-pci.ids from {path} (then update-grub / kernel-install) and reboot"


def viable_peer(driver: str | None, pci_class: str | None, allowed: Iterable[str]) -> bool:
    """The kernel's group-viability rule for one peer: on an allowed vfio driver, pci-stub,
    no driver, or a bridge."""
    return (driver is None or driver in tuple(allowed) or driver in STUB_DRIVERS
            or (pci_class or "")[:4] in BRIDGE_CLASSES)


@dataclass(frozen=True)
class RebindDev:
    """A PCI function as both layers know it (the live inventory, or a reboot record row)."""

    bdf: str
    ident: str
    pci_class: str | None
    driver: str | None
    group: str | None


def _fix_holder(h: Holder, bdf: str) -> str:
    if h.comm.startswith(PERSISTENCED):
        return (f"stop nvidia-persistenced (pid {h.pid}) holding {h.path}: `systemctl disable "
                f"--now nvidia-persistenced` (NVIDIA's unit; `systemctl status {h.pid}` names "
                "the one that started it), or turn persistence mode off for the GPU "
                f"(`nvidia-smi -i {bdf} -pm 0`) before a claim is prepared "
                "(kubernetes-sigs/dra-driver-nvidia-gpu#1037)")
    return (f"stop pid {h.pid} ({h.comm}) holding {h.path} (`systemctl status {h.pid}` names its "
            "unit), or keep GPU clients off the GPUs the DRA driver passes through")


def _fix_driver(d: RebindDev, host: str) -> str:
    if d.driver is None:
        return (f"give {d.bdf} its host driver: `modprobe {host}; echo {d.bdf} > "
                "/sys/bus/pci/drivers_probe`")
    if d.driver == "nouveau":
        return (f"{d.bdf} is on nouveau: blacklist it (`blacklist nouveau` and `options nouveau "
                "modeset=0` in /etc/modprobe.d/blacklist-nouveau.conf, update-initramfs -u), "
                f"install the {host} driver and reboot")
    return (f"move {d.bdf} from {d.driver} to {host}: `echo {d.bdf} > /sys/bus/pci/devices/"
            f"{d.bdf}/driver/unbind; echo {d.bdf} > /sys/bus/pci/drivers/{host}/bind`, and stop "
            f"whatever binds it to {d.driver} at boot")


def judge_rebindable(targets: list[RebindDev], groups: Mapping[str, list[RebindDev]],
                     use: DeviceUse, *, host_driver: str, allowed: tuple[str, ...],
                     when: str = "now") -> Outcome:
    """Per target: its driver, its group's peers, the holders of its nodes. ``when`` words
    the reason ("now", "after the reboot")."""
    problems: list[str] = []
    fixes: list[str] = []
    cautions: list[str] = []
    per: dict[str, str] = {}
    gpu_nodes = use.gpu_node_holders()
    for d in targets:
        on_vfio = d.driver is not None and d.driver in allowed
        if not on_vfio and d.driver != host_driver:
            why = ("has no driver: the DRA driver cannot read its driver link and fails to "
                   "prepare it" if d.driver is None else
                   f"is on {d.driver}, not {host_driver}: the DRA driver prepares a GPU only "
                   f"from {host_driver} or {'/'.join(allowed)} (Configure refuses it: "
                   f"'bound to {d.driver} driver, expected vfio-pci or nvidia')")
            if d.driver == "nouveau":
                why += ("; nouveau is not nvidia, and NVML, through which the driver "
                        "enumerates its gpu devices, does not see a GPU on nouveau")
            problems.append(f"{d.bdf} [{d.ident}] {why}")
            fixes.append(_fix_driver(d, host_driver))
            per[d.bdf] = f"driver {d.driver or 'none'}"
        else:
            per[d.bdf] = f"on {d.driver}"
        # the group: every peer viable once the GPU is on vfio-pci
        aux = set(use.aux.get(d.bdf, ())) if (d.pci_class or "").startswith("0300") else set()
        if d.group is None:
            problems.append(f"{d.bdf} [{d.ident}] has no IOMMU group: vfio cannot take it")
            fixes.append("enable the IOMMU (see iommu.enabled)")
        for p in groups.get(d.group or "", []):
            if p.bdf == d.bdf or viable_peer(p.driver, p.pci_class, allowed) or p.bdf in aux:
                continue
            problems.append(
                f"group {d.group} of {d.bdf}: peer {p.bdf} [{p.ident}] is on host driver "
                f"{p.driver}, which the DRA driver does not move (it rebinds the GPU and "
                "unbinds only a VGA GPU's consumer-linked audio function): the group is not "
                "viable once the GPU is on vfio-pci")
            fixes.append(f"bind peer {p.bdf} to vfio-pci or unbind it (`echo {p.bdf} > "
                         f"/sys/bus/pci/devices/{p.bdf}/driver/unbind`), or move the GPU to a "
                         "slot with its own IOMMU group (ACS)")
        # holders: of /dev/nvidia<minor> on the host driver, of /dev/vfio/<group> on vfio
        if on_vfio:
            held = [h for h in use.holders if d.group is not None
                    and h.path.endswith(f"/vfio/{d.group}")]
            if held:
                cautions.append(f"{d.bdf} is on {d.driver} and in use: "
                                + "; ".join(h.describe() for h in held)
                                + " -- a claim's guest; if no claim is prepared on it, that "
                                "process keeps the driver from giving it back to "
                                f"{host_driver} at unprepare")
            continue
        if d.driver != host_driver:
            continue
        minor = use.minors.get(d.bdf.lower())
        held = (use.node_holders(f"nvidia{minor}") if minor is not None else gpu_nodes)
        if held:
            which = (f"/dev/nvidia{minor}" if minor is not None else
                     "a /dev/nvidia<N> node (its minor is unknown: /proc/driver/nvidia/gpus/"
                     f"{d.bdf}/information is not in the evidence, so every GPU node counts)")
            problems.append(f"{d.bdf} [{d.ident}]: {which} is held open by "
                            + ", ".join(f"pid {h.pid} ({h.comm})" for h in held)
                            + ": the DRA driver waits 60 s for it to be free, then fails the "
                            "claim (WaitForGPUFree)")
            fixes += [_fix_holder(h, d.bdf) for h in held]
            per[d.bdf] += "; held by " + ", ".join(f"{h.pid}/{h.comm}" for h in held)
    ev: dict[str, Any] = {"per_target": per,
                          "holders": [h.describe() for h in use.holders][:32],
                          "holders_complete": use.complete, "nvidia_minors": dict(use.minors)}
    gap = use.gap()
    if problems:
        return failed(f"{len(problems)} reason(s) the DRA driver cannot rebind a target "
                      f"{when}: " + "; ".join(problems)
                      + (f" (and: {gap})" if gap else ""),
                      "; ".join(dict.fromkeys(fixes)) + ".", **ev)
    if gap:
        return errored(
            f"every target's driver and IOMMU group allow the rebind {when}, but whether a "
            f"process holds a GPU's device node is not known: {gap}",
            "Collect as root (kgc snapshot --sudo, or pytest --sudo) with this kgc version: "
            "the holder scan reads every /proc/<pid>/fd; nothing is judged from part of it.",
            **ev)
    if cautions:
        return warned("; ".join(cautions),
                      "If no claim holds the GPU, stop the named process.", **ev)
    return passed(f"all {len(targets)} target(s) rebindable {when}: "
                  + ", ".join(f"{b} {v}" for b, v in per.items())
                  + f"; IOMMU groups viable; no process holds a target's node "
                  f"({use.scanned} processes scanned)", **ev)
