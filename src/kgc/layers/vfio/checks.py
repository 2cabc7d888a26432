"""Layer 2 — VFIO binding checks (pure evaluators over :class:`VfioEvidence`)."""

from __future__ import annotations

from typing import Any

from kgc.core.model import Outcome, Registry, Severity, failed, passed, skipped, warned
from kgc.core.profile import Profile
from kgc.evidence.pci import PciDevice
from kgc.evidence.vfio_config import (
    INITRAMFS_FIX,
    REBUILD_INITRAMFS,
    PendingBoot,
    early_boot,
    mod,
    pending_boot,
    softdep_edit,
)
from kgc.layers.common import (
    RebindDev,
    boot_binding_skip,
    dra_binding_skip,
    host_driver,
    judge_rebindable,
    no_targets,
    viable_peer,
)
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


def _pending(ev: VfioEvidence, d: PciDevice, profile: Profile) -> PendingBoot | None:
    """The device's configured-for-next-boot binding (None: nothing binds it at boot). The
    host drivers that may claim it: the one it is on now, and those its modalias matches."""
    hosts = [x for x in ((d.driver,) if d.driver else ()) + tuple(
        (ev.candidates or {}).get(d.bdf, ())) if mod(x) not in {mod(a) for a in
                                                                  _allowed(profile)}]
    return pending_boot(ev.binding, d, hosts, _allowed(profile),
                        profile.host.persistence.accepted_mechanisms)


def _rebind(ev: VfioEvidence, devs: list[PciDevice],
            profile: Profile) -> tuple[dict[str, str], str, list[dict[str, Any]]]:
    """One story per device for a check that fails because ``devs`` are not on vfio-pci:
    (bdf -> "configured ..., pending reboot" for the configured ones, the remedy, the
    machine-applicable steps). A configured binding gets the reboot (and what must come
    before it), never a second mechanism; an unconfigured one gets per-device driverctl."""
    stories: dict[str, str] = {}
    fixes: list[str] = []
    steps: list[dict[str, Any]] = []
    loose: list[str] = []
    for d in devs:
        p = _pending(ev, d, profile)
        if p is None:
            loose.append(d.bdf)
        elif not ev.iommu_on:
            # with the IOMMU off vfio-pci binds nothing: the cause is the IOMMU, not a reboot
            stories[d.bdf] = (f"its binding is configured ({'; '.join(p.where)}), but vfio-pci "
                              "cannot bind it while the IOMMU is off" if p.where else
                              p.story() + "; and vfio-pci cannot bind it while the IOMMU is off")
        else:
            stories[d.bdf] = p.story()
            fixes.append(p.fix())
            steps += [s for s in p.fix_steps() if s not in steps]
    if not ev.iommu_on:
        fixes.insert(0, IOMMU_FIX + (" The configured binding applies at that reboot."
                                     if stories else ""))
        steps = [{"run": "enable the IOMMU (see iommu.enabled)"}, {"run": "reboot"}]
    if loose:
        fixes.append(("Then: " if not ev.iommu_on else "") + _bind_fix(loose))
        steps += [{"run": f"driverctl set-override {b} vfio-pci"} for b in loose]
    return stories, " ".join(dict.fromkeys(fixes)), steps



@CHECKS.check(
    "vfio.driver",
    title="Every passthrough target is bound to vfio-pci (or an allowed vfio variant)",
    remediation="Bind each target to vfio-pci: driverctl set-override <BDF> vfio-pci",
    severity=Severity.BLOCKER,
)
def driver(ev: VfioEvidence, profile: Profile) -> Outcome:
    """Under ``platform.gpu.binding: dra`` a skip naming vfio.rebindable, which judges a DRA
    node's GPUs instead (on their host driver or vfio-pci, group viable, nothing holding
    them) and is the vfio layer's judged blocker there."""
    if (dra := dra_binding_skip(profile, "vfio.driver")) is not None:
        return dra
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    allowed = _allowed(profile)
    bad = [d for d in targets if d.driver not in allowed]
    rows = {d.bdf: d.driver or "(none)" for d in targets}
    if not bad:
        return passed(f"all {len(targets)} target(s) use an allowed driver: "
                      + ", ".join(f"{d.bdf}={d.driver}" for d in targets), drivers=rows)
    stories, fix, steps = _rebind(ev, bad, profile)
    what = "; ".join(f"{d.bdf} [{d.ident}] is on {d.driver or 'no driver'}"
                     + (f": {stories[d.bdf]}" if d.bdf in stories else "") for d in bad)
    reason = f"{len(bad)} of {len(targets)} target(s) not bound to {'/'.join(allowed)}: {what}"
    if not ev.iommu_on:
        reason += f"; {IOMMU_OFF}"
    out = failed(reason, fix, drivers=rows, iommu_groups=len(ev.pci.groups), fix=steps)
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
    if (dra := dra_binding_skip(profile, "vfio.device-node")) is not None:
        return dra
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if not ev.iommu_on:
        return failed(f"no VFIO device node can exist: {IOMMU_OFF}", IOMMU_FIX,
                      dev_vfio=list(ev.vfio_nodes or ()))
    found: dict[str, str] = {}
    missing: list[str] = []
    unbound = [d for d in targets if d.driver not in _allowed(profile)]
    stories, rebind_fix, steps = _rebind(ev, unbound, profile)
    for d in targets:
        g = ev.pci.group_of(d.bdf)
        cdevs = ev.vfio_dev.get(d.bdf, ())
        if d.driver not in _allowed(profile):
            missing.append(f"{d.bdf} (on {d.driver or 'no driver'}, not bound to vfio-pci"
                           + (f": {stories[d.bdf]}" if d.bdf in stories else "") + ")")
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
        node_fix = ("/dev/vfio/<group> is created by the vfio module when the first device of "
                    "the group binds. Check `ls -l /dev/vfio` and `dmesg | grep -i vfio`.")
        if unbound:
            return failed("no VFIO device node for " + "; ".join(missing),
                          f"{rebind_fix} {node_fix}", **ev_, fix=steps)
        return failed("no VFIO device node for " + "; ".join(missing), node_fix, **ev_)
    return passed("VFIO device nodes present: " + ", ".join(f"{b} -> {n}" for b, n in
                                                             found.items()), **ev_)


def _viable_member(d: PciDevice, allowed: tuple[str, ...]) -> bool:
    return viable_peer(d.driver, d.pci_class, allowed)


@CHECKS.check(
    "vfio.group-viable",
    title="The whole IOMMU group of every target is viable for VFIO",
    remediation="Bind every device of the group to vfio-pci (or unbind it), or move the card "
    "to a slot with its own IOMMU group (ACS)",
    severity=Severity.BLOCKER,
)
def group_viable(ev: VfioEvidence, profile: Profile) -> Outcome:
    if (dra := dra_binding_skip(profile, "vfio.group-viable")) is not None:
        return dra
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if not ev.iommu_on:
        return skipped(f"group viability cannot be judged: {IOMMU_OFF}",
                       iommu_units=list(ev.iommu_units))
    allowed = _allowed(profile)
    problems: list[str] = []
    offenders: list[PciDevice] = []
    groups: dict[str, list[str]] = {}
    for d in targets:
        g = ev.pci.group_of(d.bdf)
        if g is None:
            problems.append(f"{d.bdf} has no IOMMU group (not behind an IOMMU)")
            continue
        members = [ev.pci.devices[b] for b in ev.pci.groups.get(g, ()) if b in ev.pci.devices]
        groups[g] = [m.describe() for m in members]
        for m in members:
            if m.bdf == d.bdf or _viable_member(m, allowed) or m in offenders:
                continue
            offenders.append(m)
    if not problems and not offenders:
        return passed(f"{len(groups)} group(s) viable: every member is vfio-bound, pci-stub, "
                      "driverless or a bridge", groups=groups)
    stories, rebind_fix, steps = _rebind(ev, offenders, profile)
    for m in offenders:
        g = ev.pci.group_of(m.bdf)
        of = [d.bdf for d in targets if ev.pci.group_of(d.bdf) == g and d.bdf != m.bdf]
        problems.append(f"group {g} of target {', '.join(of)}: peer {m.bdf} [{m.ident}] is "
                        f"bound to host driver {m.driver}"
                        + (f" ({stories[m.bdf]})" if m.bdf in stories else ""))
    if offenders and len(stories) == len(offenders):
        fix = f"Make the group viable: {rebind_fix}"
    elif offenders:
        fix = (f"Make the group viable: bind the peer(s) too -- {rebind_fix} -- or unbind "
               "them, or move the target to a slot with its own IOMMU group (a slot behind "
               "an ACS-capable root port).")
    else:
        fix, steps = IOMMU_FIX, []
    fix_ev: dict[str, Any] = {"fix": steps} if steps else {}
    return failed("; ".join(problems), fix, groups=groups,
                  offenders=[m.bdf for m in offenders], **fix_ev)


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
    if (dra := dra_binding_skip(profile, "vfio.competing-driver")) is not None:
        return dra
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
    steps: list[dict[str, Any]] = []
    detail: dict[str, str] = {}
    claimed = [d for d in targets
               if d.driver is not None and mod(d.driver) not in allowed | {"pci_stub"}]
    if claimed:  # one remedy for every device a host driver holds now
        stories, fix, steps = _rebind(ev, claimed, profile)
        fixes.append(fix)
    for d in targets:
        if d in claimed:
            risks.append(f"{d.bdf} is claimed by host driver {d.driver} now"
                         + (f": {stories[d.bdf]}" if d.bdf in stories else ""))
            detail[d.bdf] = f"claimed by {d.driver}" + ("; configured for the next boot"
                                                         if d.bdf in stories else "")
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
                fixes.append("Rebuild the initramfs: " + REBUILD_INITRAMFS)
                detail[d.bdf] += "; initramfs: stale"
            elif boot.state == "unknown":
                detail[d.bdf] += f" (early boot not checked: {boot.why})"
            continue
        loaded = [m for m in unguarded if ev.loaded_modules and m in ev.loaded_modules]
        state = f"loaded: {', '.join(loaded)}" if loaded else "not loaded now, auto-loads by alias"
        risks.append(f"{d.bdf} [{d.ident}] can be claimed first by {', '.join(unguarded)} "
                     f"({state}); its driver_override is "
                     f"{d.driver_override or 'unset'} and no softdep/blacklist puts vfio-pci first")
        edits = [softdep_edit(ev.modprobe, m) for m in unguarded]
        fixes += [e.describe() for e in edits] + [f"or: driverctl set-override {d.bdf} vfio-pci"]
        steps += [e.to_dict() for e in edits if e.to_dict() not in steps]
        detail[d.bdf] = f"unguarded host drivers: {', '.join(unguarded)}"
    fix_ev: dict[str, Any] = {"fix": steps} if steps else {}
    fix = "; ".join(dict.fromkeys(f.rstrip(".") for f in fixes))
    if risks:
        return failed("; ".join(risks + cautions), fix, per_device=detail, **fix_ev)
    if cautions:
        return warned("; ".join(cautions), fix, per_device=detail, **fix_ev)
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


def _dev(d: PciDevice) -> RebindDev:
    return RebindDev(d.bdf, d.ident, d.pci_class, d.driver, d.iommu_group)


@CHECKS.check(
    "vfio.rebindable",
    title="Under binding: dra, the DRA driver can rebind every target (host driver or vfio-pci, "
    "whole IOMMU group viable, no process holding its device node)",
    remediation="Stop what holds /dev/nvidia<N> (nvidia-persistenced: systemctl disable --now "
    "nvidia-persistenced), keep the GPU on nvidia, make its IOMMU group viable",
    severity=Severity.BLOCKER,
)
def rebindable(ev: VfioEvidence, profile: Profile) -> Outcome:
    """Only under ``platform.gpu.binding: dra`` (a skip naming vfio.driver under ``boot``):
    the judgement of :func:`kgc.layers.common.judge_rebindable` on the node as it is now. A
    snapshot without the holder scan (recorded by an older kgc), or one whose scan could not
    read every process, is an error naming that -- never a pass."""
    if (boot := boot_binding_skip(profile, "vfio.rebindable")) is not None:
        return boot
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if not ev.iommu_on:
        # NewVfioPciManager refuses passthrough without IOMMU groups (vfio-device.go)
        return failed(f"the DRA driver refuses VFIO passthrough on this node: {IOMMU_OFF}",
                      IOMMU_FIX, iommu_units=list(ev.iommu_units))
    groups: dict[str, list[RebindDev]] = {}
    for d in targets:
        g = ev.pci.group_of(d.bdf)
        if g is not None and g not in groups:
            groups[g] = [_dev(ev.pci.devices[b]) for b in ev.pci.groups.get(g, ())
                         if b in ev.pci.devices]
    devs = [RebindDev(d.bdf, d.ident, d.pci_class, d.driver, ev.pci.group_of(d.bdf))
            for d in targets]
    return judge_rebindable(devs, groups, ev.use, host_driver=host_driver(profile),
                            allowed=_allowed(profile))

