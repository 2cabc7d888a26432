"""Layer 3 — persistence: which mechanism binds each target at the next boot (static)."""

from __future__ import annotations

import fnmatch
from typing import Any

from kgc.core.model import Outcome, Registry, Severity, failed, passed, skipped, warned
from kgc.core.profile import Profile
from kgc.evidence.pci import PciDevice
from kgc.evidence.vfio_config import (
    mod,
)
from kgc.layers.common import no_targets
from kgc.layers.persistence.collect import PersistenceEvidence

CHECKS = Registry()


def _allowed(profile: Profile) -> set[str]:
    return {mod(d) for d in profile.host.passthrough.allowed_drivers}


def mechanisms(ev: PersistenceEvidence, d: PciDevice, profile: Profile) -> list[tuple[str, str]]:
    """(mechanism, where) pairs that bind ``d`` to vfio at the next boot."""
    accepted = set(profile.host.persistence.accepted_mechanisms)
    allowed = _allowed(profile)
    out: list[tuple[str, str]] = []
    if "modprobe" in accepted:
        for f, rule in ev.modprobe.vfio_ids():
            if rule.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device):
                out.append(("modprobe", f"{f}: options vfio-pci ids={rule}"))
    if "cmdline" in accepted:
        for f, rule in ev.boot.ids():
            if rule.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device):
                out.append(("cmdline", f"{f}: vfio-pci.ids={rule}"))
    if "driverctl" in accepted and d.bdf in ev.driverctl:
        drv, f = ev.driverctl[d.bdf]
        if mod(drv) in allowed:
            out.append(("driverctl", f"{f}: {drv}"))
    if "udev" in accepted:
        for u in ev.udev:
            if mod(u.driver) not in allowed:
                continue
            if u.kernel is not None and not fnmatch.fnmatchcase(d.bdf, u.kernel):
                continue
            if u.vendor is not None and u.vendor != d.vendor:
                continue
            if u.device is not None and u.device != d.device:
                continue
            if u.kernel is None and u.vendor is None and u.device is None:
                continue
            out.append(("udev", f"{u.file}: ATTR{{driver_override}}=\"{u.driver}\""))
    return out


def _targets(ev: PersistenceEvidence, profile: Profile) -> list[PciDevice]:
    return sorted(ev.pci.targets(profile), key=lambda d: d.bdf)



@CHECKS.check(
    "persistence.coverage",
    title="Every target is covered by a boot-time binding mechanism",
    remediation="Persist the binding per device: driverctl set-override <BDF> vfio-pci",
    severity=Severity.BLOCKER,
)
def coverage(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    """A device bound now but covered by nothing loses its binding at the next boot."""
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    allowed = _allowed(profile)
    table: dict[str, list[str]] = {}
    uncovered: list[str] = []
    for d in targets:
        mech = mechanisms(ev, d, profile)
        table[d.bdf] = [f"{m}: {w}" for m, w in mech]
        if not mech:
            bound = d.driver is not None and mod(d.driver) in allowed
            uncovered.append(
                f"{d.bdf} [{d.ident}] "
                + ("is bound to vfio-pci now, but no mechanism binds it at boot: the binding "
                   "is runtime-only (new_id/driver_override) and is lost at the next reboot"
                   if bound else f"(now on {d.driver or 'no driver'}) is covered by no "
                   "boot-time mechanism")
            )
    if uncovered:
        fix = ("Persist per device: " + "; ".join(
            f"driverctl set-override {d.bdf} vfio-pci" for d in targets if not table[d.bdf])
            + ". Or by ID (captures every card of the model): `options vfio-pci ids=VVVV:DDDD` "
            "+ `softdep <host driver> pre: vfio-pci` in /etc/modprobe.d/vfio.conf, "
            "`vfio-pci` in /etc/modules-load.d/vfio.conf, then update-initramfs -u.")
        return failed("; ".join(uncovered), fix, coverage=table,
                      mechanisms_accepted=list(profile.host.persistence.accepted_mechanisms))
    return passed("every target is covered: " + "; ".join(
        f"{b} by {', '.join(sorted({m.split(':')[0] for m in ms}))}" for b, ms in table.items()),
        coverage=table)


@CHECKS.check(
    "persistence.load-order",
    title="For ID-based binding, vfio-pci loads before any competing host driver",
    remediation="Add `softdep <host driver> pre: vfio-pci` to /etc/modprobe.d/vfio.conf and "
    "`vfio-pci` to /etc/modules-load.d/vfio.conf",
    severity=Severity.CRITICAL,
)
def load_order(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    id_only = []
    for d in targets:
        kinds = {m for m, _ in mechanisms(ev, d, profile)}
        if kinds and kinds <= {"modprobe", "cmdline"}:
            id_only.append(d)
    if not id_only:
        return passed("no target relies on an ID rule alone (per-device overrides or none)")
    problems: list[str] = []
    fixes: list[str] = []
    detail: dict[str, str] = {}
    loads = ev.modules_load.get("vfio_pci")
    pre_any = any("vfio_pci" in ev.modprobe.pre_of(m) for m in ev.modprobe.softdeps_pre)
    in_initramfs = "vfio_pci" in ev.initramfs.modules()
    if not (loads or pre_any or in_initramfs):
        problems.append("nothing loads vfio-pci at boot (not in modules-load.d, no softdep, "
                        "not in the initramfs), so its ids= never take effect for devices "
                        "that have no host driver")
        fixes.append("echo vfio-pci > /etc/modules-load.d/vfio.conf")
    if ev.candidates is None:
        return skipped("the drivers matching each device's modalias could not be resolved "
                       "(`modprobe -R` failed on the node)")
    allowed = _allowed(profile)
    for d in id_only:
        host = [m for m in ev.candidates.get(d.bdf, ()) if m not in allowed
                and not m.startswith("vfio") and m != "pci_stub"]
        guards = {m: ev.modprobe.vfio_first(m) for m in host}
        bad = [m for m, g in guards.items() if g is None]
        detail[d.bdf] = "; ".join(f"{m}: {g or 'unguarded'}" for m, g in guards.items()) or \
            "no host driver matches"
        if bad:
            problems.append(f"{d.bdf} [{d.ident}] is bound by ID only, and host driver(s) "
                            f"{', '.join(bad)} may claim it before vfio-pci at boot")
            fixes += [f"echo 'softdep {m} pre: vfio-pci' >> /etc/modprobe.d/vfio.conf"
                      for m in bad]
    ev_: dict[str, Any] = {"per_device": detail, "vfio_pci_loaded_by": loads,
                           "softdep_pre_vfio": pre_any, "vfio_pci_in_initramfs": in_initramfs}
    if problems:
        return failed("; ".join(problems), "; ".join(dict.fromkeys(fixes))
                      + "; then update-initramfs -u", **ev_)
    return passed("vfio-pci is loaded at boot and ahead of every competing host driver: "
                  + "; ".join(f"{b}: {v}" for b, v in detail.items()), **ev_)


@CHECKS.check(
    "persistence.initramfs",
    title="The initramfs carries vfio-pci (and its config) whenever it carries a host driver "
    "for a target",
    remediation="Add vfio, vfio_iommu_type1, vfio_pci to /etc/initramfs-tools/modules (dracut: "
    "add_drivers+=\" vfio vfio_iommu_type1 vfio_pci \") and run update-initramfs -u",
    severity=Severity.CRITICAL,
)
def initramfs(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if ev.initramfs.error is not None:
        return skipped(f"initramfs contents unknown: {ev.initramfs.error}")
    mods = ev.initramfs.modules()
    competing = {mod(c) for c in profile.host.persistence.competing_drivers}
    for d in targets:
        competing |= {m for m in (ev.candidates or {}).get(d.bdf, ())
                      if not m.startswith("vfio") and m != "pci_stub"}
    present = sorted(competing & mods)
    ev_: dict[str, Any] = {"image": ev.initramfs.image, "host_drivers_in_initramfs": present,
           "vfio_in_initramfs": sorted(m for m in mods if m.startswith("vfio")),
           "config_files": sorted(ev.initramfs.config_files())}
    vfio_mods = ", ".join(sorted(m for m in mods if m.startswith("vfio"))) or "none"
    if not present:
        return passed(f"{ev.initramfs.image}: no competing host driver in the initramfs "
                      f"(vfio modules: {vfio_mods})", **ev_)
    if "vfio_pci" not in mods:
        return failed(
            f"{ev.initramfs.image} contains host driver(s) {', '.join(present)} but not "
            "vfio_pci: the host driver binds the target in early boot, before the root "
            "filesystem's vfio configuration is read", **ev_)
    # vfio is there; its binding config must be there too
    cfg_files = {f for f, _r in ev.modprobe.vfio_ids()} | {
        f for m in present for f, pres in ev.modprobe.softdeps_pre.get(m, ())
        if "vfio_pci" in pres}
    stale = sorted(f for f in cfg_files if f.startswith("/etc/") and f not in
                   ev.initramfs.config_files())
    if stale:
        return warned(f"{ev.initramfs.image} has vfio_pci but not {', '.join(stale)}: the "
                      "initramfs is older than the vfio configuration",
                      "Rebuild it: update-initramfs -u -k all (dracut: dracut -f)", **ev_)
    return passed(f"{ev.initramfs.image}: vfio_pci is present alongside {', '.join(present)}",
                  **ev_)


@CHECKS.check(
    "persistence.over-capture",
    title="No ID-based rule also captures a device the host keeps",
    remediation="Use per-device binding (driverctl set-override <BDF> vfio-pci) instead of "
    "an ID rule, or drop that ID from vfio-pci ids=",
    severity=Severity.NORMAL,
)
def over_capture(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    kept = sorted(ev.pci.host_kept(profile), key=lambda d: d.bdf)
    rules = [("modprobe", f, r) for f, r in ev.modprobe.vfio_ids()]
    rules += [("cmdline", f, r) for f, r in ev.boot.ids()]
    rules += [("cmdline", "/proc/cmdline", r) for r in ev.running_ids()]
    hits = []
    for d in kept:
        for kind, f, r in rules:
            if r.matches(d.vendor, d.device, d.subsystem_vendor, d.subsystem_device):
                hits.append(f"{f}: vfio-pci ids {r} ({kind}) also captures host-kept {d.bdf} "
                            f"[{d.ident}]")
        for u in ev.udev:
            if mod(u.driver) in _allowed(profile) and u.kernel is None and u.vendor == d.vendor \
                    and (u.device is None or u.device == d.device):
                hits.append(f"{u.file}: udev driver_override rule also captures host-kept "
                            f"{d.bdf} [{d.ident}]")
    hits = list(dict.fromkeys(hits))
    if hits:
        return warned("; ".join(hits),
                      "An ID rule binds every device of that vendor:device. Remove the ID "
                      "and bind the intended devices one by one: driverctl set-override "
                      "<BDF> vfio-pci.", rules=[f"{f}: {r}" for _k, f, r in rules])
    return passed(f"{len(rules)} ID rule(s); none matches the {len(kept)} host-kept device(s)",
                  rules=[f"{f}: {r}" for _k, f, r in rules])


@CHECKS.check(
    "persistence.cmdline",
    title="The running kernel command line and the boot loader config agree on vfio-pci.ids",
    remediation="Put vfio-pci.ids= in the boot loader config (GRUB_CMDLINE_LINUX in "
    "/etc/default/grub, then update-grub) and reboot",
    severity=Severity.NORMAL,
)
def cmdline(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    running = sorted(str(r) for r in ev.running_ids())
    configured: dict[str, list[str]] = {}
    for f, r in ev.boot.ids():
        configured.setdefault(f, []).append(str(r))
    ev_: dict[str, Any] = {"running": running, "configured": configured,
           "boot_configs": sorted(ev.boot.sources)}
    if not running and not configured:
        return passed("vfio-pci.ids is not used on the kernel command line", **ev_)
    if running and not configured:
        return failed(f"/proc/cmdline has vfio-pci.ids={','.join(running)} but no boot loader "
                      f"config ({', '.join(sorted(ev.boot.sources)) or 'none found'}) does: "
                      "it was set by hand for this boot and is lost at the next one", **ev_)
    differ = [f for f, ids in configured.items() if sorted(ids) != running]
    if differ:
        return warned(f"running vfio-pci.ids={','.join(running) or '(none)'} differs from "
                      + "; ".join(f"{f}: {','.join(configured[f])}" for f in differ)
                      + ": the next boot binds a different set", **ev_)
    return passed(f"vfio-pci.ids={','.join(running)} in /proc/cmdline and in "
                  + ", ".join(sorted(configured)), **ev_)
