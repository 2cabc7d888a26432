"""Layer 2 — VFIO binding checks (pure evaluators over :class:`VfioEvidence`)."""

from __future__ import annotations

from typing import Any

from kgc.core.model import Outcome, Registry, Severity, failed, passed, skipped, warned
from kgc.core.profile import Profile
from kgc.evidence.pci import PciDevice
from kgc.evidence.vfio_config import INITRAMFS_FIX, early_boot, mod
from kgc.layers.common import no_targets
from kgc.layers.vfio.collect import VfioEvidence

CHECKS = Registry()

IOMMU_OFF = (
    "the kernel has not enabled the IOMMU (/sys/kernel/iommu_groups is empty), so vfio-pci "
    "cannot bind any device; fix the IOMMU first (see iommu.enabled)"
)
IOMMU_FIX = (
    "Enable the IOMMU: add intel_iommu=on (Intel; AMD-Vi is on by default when the firmware "
    "has an IVRS table) and iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX in "
    "/etc/default/grub, then update-grub), enable VT-d/AMD-Vi in the firmware, and reboot."
)
STUB_DRIVERS = ("pci-stub",)


def _targets(ev: VfioEvidence, profile: Profile) -> list[PciDevice]:
    return sorted(ev.pci.targets(profile), key=lambda d: d.bdf)


def _allowed(profile: Profile) -> tuple[str, ...]:
    return tuple(profile.host.passthrough.allowed_drivers)


def _bind_fix(bdfs: list[str]) -> str:
    cmds = "; ".join(f"driverctl set-override {b} vfio-pci" for b in bdfs)
    return (
        f"Bind per device and persistently: {cmds} (Debian package driverctl). Without "
        "driverctl: echo vfio-pci > /sys/bus/pci/devices/<BDF>/driver_override; echo <BDF> > "
        "/sys/bus/pci/devices/<BDF>/driver/unbind; echo <BDF> > /sys/bus/pci/drivers_probe "
        "(runtime only; persist it, see persistence.coverage)."
    )



@CHECKS.check(
    "vfio.driver",
    title="Every passthrough target is bound to vfio-pci (or an allowed vfio variant)",
    remediation="Bind each target to vfio-pci: driverctl set-override <BDF> vfio-pci",
    severity=Severity.BLOCKER,
)
def driver(ev: VfioEvidence, profile: Profile) -> Outcome:
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    allowed = _allowed(profile)
    bad = [d for d in targets if d.driver not in allowed]
    rows = {d.bdf: d.driver or "(none)" for d in targets}
    if not bad:
        return passed(f"all {len(targets)} target(s) use an allowed driver: "
                      + ", ".join(f"{d.bdf}={d.driver}" for d in targets), drivers=rows)
    what = "; ".join(f"{d.bdf} [{d.ident}] is on {d.driver or 'no driver'}" for d in bad)
    reason = f"{len(bad)} of {len(targets)} target(s) not bound to {'/'.join(allowed)}: {what}"
    fix = _bind_fix([d.bdf for d in bad])
    if not ev.iommu_on:
        reason += f"; {IOMMU_OFF}"
        fix = IOMMU_FIX + " Then: " + fix
    out = failed(reason, fix, drivers=rows, iommu_groups=len(ev.pci.groups))
    return Outcome(out.status, out.reason, out.evidence, out.remediation,
                   expected=f"driver in {list(allowed)}",
                   found=", ".join(f"{d.bdf}={d.driver or 'none'}" for d in bad))


@CHECKS.check(
    "vfio.device-node",
    title="Each bound target's VFIO device node exists (/dev/vfio/<group> or iommufd cdev)",
    remediation="Load vfio-pci and bind the device; check that /dev/vfio/<group> appears",
    severity=Severity.BLOCKER,
)
def device_node(ev: VfioEvidence, profile: Profile) -> Outcome:
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if not ev.iommu_on:
        return failed(f"no VFIO device node can exist: {IOMMU_OFF}", IOMMU_FIX,
                      dev_vfio=list(ev.vfio_nodes or ()))
    found: dict[str, str] = {}
    missing: list[str] = []
    for d in targets:
        g = ev.pci.group_of(d.bdf)
        cdevs = ev.vfio_dev.get(d.bdf, ())
        if d.driver not in _allowed(profile):
            missing.append(f"{d.bdf} (on {d.driver or 'no driver'}, not bound to vfio-pci)")
        elif g is not None and g in (ev.vfio_nodes or ()):
            found[d.bdf] = f"/dev/vfio/{g}"
        elif cdevs and any(c in (ev.iommufd_nodes or ()) for c in cdevs):
            found[d.bdf] = f"/dev/vfio/devices/{cdevs[0]}"
        else:
            missing.append(f"{d.bdf} (bound, but /dev/vfio/{g or '?'} is absent: "
                           "udev/devtmpfs?)")
    ev_: dict[str, Any] = {"nodes": found, "dev_vfio": list(ev.vfio_nodes or ()),
           "iommu_units": list(ev.iommu_units)}
    if missing:
        return failed("no VFIO device node for " + "; ".join(missing),
                      "Bind the device to vfio-pci (vfio.driver); /dev/vfio/<group> is created "
                      "by the vfio module when the first device of the group binds. Check "
                      "`ls -l /dev/vfio` and `dmesg | grep -i vfio`.", **ev_)
    return passed("VFIO device nodes present: " + ", ".join(f"{b} -> {n}" for b, n in
                                                             found.items()), **ev_)


def _viable_member(d: PciDevice, allowed: tuple[str, ...]) -> bool:
    return d.driver is None or d.driver in allowed or d.driver in STUB_DRIVERS or d.is_bridge


@CHECKS.check(
    "vfio.group-viable",
    title="The whole IOMMU group of every target is viable for VFIO",
    remediation="Bind every device of the group to vfio-pci (or unbind it), or move the card "
    "to a slot with its own IOMMU group (ACS)",
    severity=Severity.BLOCKER,
)
def group_viable(ev: VfioEvidence, profile: Profile) -> Outcome:
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if not ev.iommu_on:
        return skipped(f"group viability cannot be judged: {IOMMU_OFF}",
                       iommu_units=list(ev.iommu_units))
    allowed = _allowed(profile)
    problems: list[str] = []
    offenders: list[str] = []
    groups: dict[str, list[str]] = {}
    for d in targets:
        g = ev.pci.group_of(d.bdf)
        if g is None:
            problems.append(f"{d.bdf} has no IOMMU group (not behind an IOMMU)")
            continue
        members = [ev.pci.devices[b] for b in ev.pci.groups.get(g, ()) if b in ev.pci.devices]
        groups[g] = [m.describe() for m in members]
        for m in members:
            if m.bdf == d.bdf or _viable_member(m, allowed):
                continue
            msg = (f"group {g} of target {d.bdf}: peer {m.bdf} [{m.ident}] is bound to host "
                   f"driver {m.driver}")
            if msg not in problems:
                problems.append(msg)
                offenders.append(m.bdf)
    if problems:
        fix = ("Make the group viable: bind the peer(s) too -- "
               + "; ".join(f"driverctl set-override {b} vfio-pci" for b in offenders)
               + " -- or unbind them, or move the target to a slot with its own IOMMU group "
               "(a slot behind an ACS-capable root port).") if offenders else IOMMU_FIX
        return failed("; ".join(problems), fix, groups=groups, offenders=offenders)
    return passed(f"{len(groups)} group(s) viable: every member is vfio-bound, pci-stub, "
                  "driverless or a bridge", groups=groups)


@CHECKS.check(
    "vfio.competing-driver",
    title="No host driver can claim a target before vfio-pci",
    remediation="Pin the device (driverctl set-override <BDF> vfio-pci) or add "
    "`softdep <driver> pre: vfio-pci` to /etc/modprobe.d/vfio.conf",
    severity=Severity.CRITICAL,
)
def competing_driver(ev: VfioEvidence, profile: Profile) -> Outcome:
    """Now and at boot: a host driver bound now, one that matches the device's modalias
    with nothing (softdep/blacklist/override) putting vfio-pci first, or one that the
    initramfs carries without vfio-pci -- the same early-boot judgement as
    persistence.initramfs."""
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if ev.candidates is None:
        return skipped("the drivers matching each device's modalias could not be resolved: "
                       f"{ev.candidates_error or '`modprobe -R` failed on the node'}; which "
                       "host driver could claim a target is unknown")
    allowed = {mod(a) for a in _allowed(profile)}
    risks: list[str] = []
    cautions: list[str] = []
    fixes: list[str] = []
    detail: dict[str, str] = {}
    for d in targets:
        if d.driver is not None and mod(d.driver) not in allowed | {"pci_stub"}:
            risks.append(f"{d.bdf} is claimed by host driver {d.driver} now")
            fixes.append(f"driverctl set-override {d.bdf} vfio-pci")
            detail[d.bdf] = f"claimed by {d.driver}"
            continue
        host_mods = [m for m in ev.candidates.get(d.bdf, ())
                     if m not in allowed and not m.startswith("vfio") and m != "pci_stub"]
        pinned = bool(d.driver_override and mod(d.driver_override) in allowed)
        if not host_mods:
            detail[d.bdf] = ("pinned: driver_override=" + str(d.driver_override) if pinned
                             else "no host driver matches its modalias")
            continue
        boot = early_boot(ev.initramfs, ev.modprobe, host_mods)
        if pinned:
            detail[d.bdf] = f"pinned: driver_override={d.driver_override}"
            if boot.state in ("fails", "stale"):
                cautions.append(f"{d.bdf} is pinned to vfio-pci now (driver_override), but at "
                                f"boot {boot.why}; a per-device override re-applied at boot "
                                "(driverctl) takes it back only after the host driver had it")
                fixes.append(INITRAMFS_FIX)
                detail[d.bdf] += f"; at boot: {boot.state}"
            continue
        unguarded = [m for m in host_mods if ev.modprobe.vfio_first(m) is None]
        if not unguarded:
            guards = "; ".join(ev.modprobe.vfio_first(m) or "" for m in host_mods)
            detail[d.bdf] = guards
            if boot.state == "fails":
                risks.append(f"{d.bdf} [{d.ident}] is guarded on the root filesystem ({guards}), "
                             f"but {boot.why}")
                fixes.append(INITRAMFS_FIX)
                detail[d.bdf] += "; initramfs: host driver without vfio_pci"
            elif boot.state == "stale":
                cautions.append(f"{d.bdf} [{d.ident}] is guarded on the root filesystem "
                                f"({guards}), but {boot.why}")
                fixes.append("Rebuild the initramfs: update-initramfs -u -k all (dracut -f)")
                detail[d.bdf] += "; initramfs: stale"
            elif boot.state == "unknown":
                detail[d.bdf] += f" (early boot not checked: {boot.why})"
            continue
        loaded = [m for m in unguarded if ev.loaded_modules and m in ev.loaded_modules]
        state = f"loaded: {', '.join(loaded)}" if loaded else "not loaded now, auto-loads by alias"
        risks.append(f"{d.bdf} [{d.ident}] can be claimed first by {', '.join(unguarded)} "
                     f"({state}); its driver_override is "
                     f"{d.driver_override or 'unset'} and no softdep/blacklist puts vfio-pci first")
        fixes += [f"echo 'softdep {m} pre: vfio-pci' >> /etc/modprobe.d/vfio.conf"
                  for m in unguarded] + [f"or: driverctl set-override {d.bdf} vfio-pci"]
        detail[d.bdf] = f"unguarded host drivers: {', '.join(unguarded)}"
    if risks:
        return failed("; ".join(risks + cautions), "; ".join(dict.fromkeys(fixes)),
                      per_device=detail)
    if cautions:
        return warned("; ".join(cautions), "; ".join(dict.fromkeys(fixes)), per_device=detail)
    return passed("no host driver can claim a target first: "
                  + "; ".join(f"{b}: {v}" for b, v in detail.items()), per_device=detail)


@CHECKS.check(
    "vfio.host-kept",
    title="Devices the profile keeps for the host are not captured by vfio",
    remediation="Remove the device's ID from vfio-pci ids= / new_id and rebind it to its "
    "host driver",
    severity=Severity.CRITICAL,
)
def host_kept(ev: VfioEvidence, profile: Profile) -> Outcome:
    if not profile.host.passthrough.host_keeps:
        return skipped("the profile names no host-kept devices (host.passthrough.host_keeps), "
                       "so there is nothing to protect from capture")
    if not ev.pci.devices:
        return skipped("no PCI device could be read from /sys/bus/pci/devices, so whether a "
                       "host-kept device is captured is unknown")
    kept = sorted(ev.pci.host_kept(profile), key=lambda d: d.bdf)
    if not kept:
        sels = ", ".join(s.describe() for s in profile.host.passthrough.host_keeps)
        return skipped(f"no device on this node matches host.passthrough.host_keeps ({sels}), "
                       "so there is nothing to protect from capture")
    allowed = {mod(a) for a in _allowed(profile)} | {"pci_stub"}
    captured = []
    for d in kept:
        if d.driver is not None and mod(d.driver) in allowed:
            captured.append(f"{d.bdf} [{d.ident}] is bound to {d.driver}")
        elif d.driver_override and mod(d.driver_override) in allowed:
            captured.append(f"{d.bdf} [{d.ident}] has driver_override={d.driver_override} "
                            "(vfio takes it at the next probe)")
    rows = {d.bdf: d.driver or "(none)" for d in kept}
    if captured:
        bdfs = [c.split()[0] for c in captured]
        return failed(
            "host-kept device(s) captured: " + "; ".join(captured),
            "Give it back to the host: "
            + "; ".join(f"driverctl unset-override {b} (or echo > /sys/bus/pci/devices/{b}/"
                        f"driver_override; echo {b} > /sys/bus/pci/devices/{b}/driver/unbind; "
                        f"echo {b} > /sys/bus/pci/drivers_probe)" for b in bdfs)
            + ". Remove its vendor:device from `options vfio-pci ids=` / `vfio-pci.ids=` "
            "(an ID rule captures every card of that model).",
            drivers=rows,
        )
    return passed(f"{len(kept)} host-kept device(s) on host drivers: "
                  + ", ".join(f"{b}={v}" for b, v in rows.items()), drivers=rows)
