"""Layer 2 — persistence: which mechanism binds each target at the next boot (static)."""

from __future__ import annotations

from typing import Any

from kgc.core.model import Outcome, Registry, Severity, failed, passed, skipped, warned
from kgc.core.profile import Profile
from kgc.evidence.pci import PciDevice
from kgc.evidence.vfio_config import (
    INITRAMFS_FIX,
    REBUILD_INITRAMFS,
    EarlyBoot,
    Edit,
    boot_mechanisms,
    early_boot,
    generated_boot,
    ids_fix,
    mod,
    shadowed_for,
    shadowed_ids,
    softdep_edit,
)
from kgc.layers.common import (
    PREBIND_WHY,
    binding,
    dra_binding_skip,
    no_targets,
    prebind_sources,
    unprebind_fix,
)
from kgc.layers.persistence.collect import PersistenceEvidence

CHECKS = Registry()


def _allowed(profile: Profile) -> set[str]:
    return {mod(d) for d in profile.host.passthrough.allowed_drivers}


def mechanisms(ev: PersistenceEvidence, d: PciDevice, profile: Profile) -> list[tuple[str, str]]:
    """(mechanism, where) pairs that bind ``d`` to vfio at the next boot."""
    return boot_mechanisms(ev.binding, d, profile.host.passthrough.allowed_drivers,
                           profile.host.persistence.accepted_mechanisms)


def _targets(ev: PersistenceEvidence, profile: Profile) -> list[PciDevice]:
    return sorted(ev.pci.targets(profile), key=lambda d: d.bdf)



@CHECKS.check(
    "persistence.coverage",
    title="Every target is covered by a boot-time binding mechanism",
    remediation="Persist the binding per device: driverctl set-override <BDF> vfio-pci",
    severity=Severity.BLOCKER,
)
def coverage(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    """A device bound now but covered by nothing loses its binding at the next boot.

    Under ``platform.gpu.binding: dra`` the rule turns round (:func:`dra_prebind`): a target
    that a boot-time mechanism binds to vfio-pci is the finding (a warning naming where it is
    configured), none is the pass."""
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if binding(profile) == "dra":
        return dra_prebind(ev, targets, profile)
    allowed = _allowed(profile)
    table: dict[str, list[str]] = {}
    uncovered: list[str] = []
    for d in targets:
        mech = mechanisms(ev, d, profile)
        table[d.bdf] = [f"{m}: {w}" for m, w in mech]
        if not mech:
            bound = d.driver is not None and mod(d.driver) in allowed
            # an ids rule that names it but that another one replaces binds nothing
            shadow = "; ".join(shadowed_for(ev.binding, d))
            if bound and shadow:
                what = f"is bound to vfio-pci now, but nothing binds it at the next boot: {shadow}"
            elif bound:
                what = ("is bound to vfio-pci now, but no mechanism binds it at boot: the "
                        "binding is runtime-only (new_id/driver_override) and is lost at the "
                        "next reboot")
            else:
                what = (f"(now on {d.driver or 'no driver'}) is covered by no boot-time "
                        "mechanism" + (f": {shadow}" if shadow else ""))
            uncovered.append(f"{d.bdf} [{d.ident}] {what}")
    if uncovered:
        bare = [d for d in targets if not table[d.bdf]]
        accepted = profile.host.persistence.accepted_mechanisms
        fix, steps = _coverage_fix(ev, bare, profile)
        return failed("; ".join(uncovered), fix, coverage=table,
                      mechanisms_accepted=list(accepted), fix=steps)
    return passed("every target is covered: " + "; ".join(
        f"{b} by {', '.join(sorted({m.split(':')[0] for m in ms}))}" for b, ms in table.items()),
        coverage=table)


def dra_prebind(ev: PersistenceEvidence, targets: list[PciDevice],
                profile: Profile) -> Outcome:
    """Under ``dra``: which target the node binds to vfio-pci at boot, and where. A warning,
    not a failure: the DRA driver still prepares a pre-bound GPU (``Configure`` skips one
    already on vfio-pci), but the boot configuration and the driver disagree on where it
    lives (:data:`kgc.layers.common.PREBIND_WHY`); the reboot test (reboot.rebindable) fails
    a node that does come back pre-bound."""
    allowed = profile.host.passthrough.allowed_drivers
    found: dict[str, list[str]] = {}
    fixes: list[str] = []
    for d in targets:
        srcs = prebind_sources(ev.binding, d, allowed)
        if srcs:
            found[d.bdf] = [f"{m}: {w}" for m, w in srcs]
            fixes += [unprebind_fix(m, w, d.bdf) for m, w in srcs]
    if found:
        return warned("platform.gpu.binding: dra, but the node pre-binds target(s) to vfio-pci "
                      "at boot: " + "; ".join(f"{b} by {', '.join(w)}" for b, w in found.items())
                      + f"; {PREBIND_WHY}",
                      "Leave the targets to the DRA driver: " + "; ".join(dict.fromkeys(fixes))
                      + ".", prebound=found)
    return passed(f"no boot-time mechanism binds any of the {len(targets)} target(s) to "
                  "vfio-pci (modprobe.d ids, kernel command line, driverctl, udev): the DRA "
                  "driver finds them on their host driver", prebound={})


def _coverage_fix(ev: PersistenceEvidence, bare: list[PciDevice],
                  profile: Profile) -> tuple[str, list[dict[str, Any]]]:
    """Per device (driverctl) when accepted, else by ID in the ids rule that takes effect
    (:func:`ids_fix`: the last modprobe.d ids= extended, never a second options line, or
    the command line's vfio-pci.ids= when the boot loader sets one; a softdep for each host
    driver that could claim the device first, in the line that is there)."""
    accepted = profile.host.persistence.accepted_mechanisms
    per_dev = [f"driverctl set-override {d.bdf} vfio-pci" for d in bare]
    edits: list[Edit] = []
    regen: list[str] = []
    ids = ids_fix(ev.binding, list(dict.fromkeys(d.ident for d in bare if d.vendor and d.device)))
    if ids is not None:
        edits += ids[1]
        regen += ids[2]
    hosts = dict.fromkeys(m for d in bare for m in _host_drivers(ev, d, profile)
                          if ev.modprobe.vfio_first(m) is None)
    edits += [softdep_edit(ev.modprobe, m) for m in hosts]
    if not ev.modules_load.get("vfio_pci"):
        edits.append(Edit("/etc/modules-load.d/vfio.conf", "vfio-pci"))
    by_id = "; ".join([e.describe() for e in edits] + regen + ["then " + REBUILD_INITRAMFS])
    id_steps = ([e.to_dict() for e in edits] + [{"run": r} for r in regen]
                + [{"run": REBUILD_INITRAMFS}])
    if "driverctl" in accepted:
        return (f"Persist per device: {'; '.join(per_dev)}. Or by ID (captures every card of "
                f"the model): {by_id}.", [{"run": c} for c in per_dev])
    return f"Persist by ID (captures every card of the model): {by_id}.", id_steps


def _host_drivers(ev: PersistenceEvidence, d: PciDevice, profile: Profile) -> list[str]:
    """The host drivers that could claim ``d``: its modalias matches when they are known,
    else the profile's competing drivers."""
    allowed = _allowed(profile)
    if ev.candidates is None:
        return [mod(c) for c in profile.host.persistence.competing_drivers]
    return [m for m in ev.candidates.get(d.bdf, ()) if m not in allowed
            and not m.startswith("vfio") and m != "pci_stub"]


def _per_device(kinds: set[str]) -> bool:
    return bool(kinds & {"driverctl", "udev"})


@CHECKS.check(
    "persistence.load-order",
    title="For ID-based binding, vfio-pci loads before any competing host driver",
    remediation="Add `softdep <host driver> pre: vfio-pci` to /etc/modprobe.d/vfio.conf and "
    "`vfio-pci` to /etc/modules-load.d/vfio.conf",
    severity=Severity.CRITICAL,
)
def load_order(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    """Judged on the root filesystem (softdep/blacklist) and in early boot (the initramfs,
    the same judgement as persistence.initramfs)."""
    if (dra := dra_binding_skip(profile, "persistence.load-order")) is not None:
        return dra
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    id_only = []
    unbound = []
    for d in targets:
        kinds = {m for m, _ in mechanisms(ev, d, profile)}
        if kinds and kinds <= {"modprobe", "cmdline"}:
            id_only.append(d)
        elif not kinds:
            unbound.append(d.bdf)
    if not id_only:
        if unbound:
            return skipped("no boot-time binding to put in order for "
                           + ", ".join(unbound) + " (see persistence.coverage)")
        return passed("every target is bound per device (driverctl/udev driver_override), "
                      "so module load order does not decide the binding")
    problems: list[str] = []
    cautions: list[str] = []
    fixes: list[str] = []
    steps: list[dict[str, Any]] = []
    detail: dict[str, str] = {}
    loads = ev.modules_load.get("vfio_pci")
    pre_any = any("vfio_pci" in ev.modprobe.pre_of(m) for m in ev.modprobe.softdeps_pre)
    in_initramfs = "vfio_pci" in ev.initramfs.modules()
    if not (loads or pre_any or in_initramfs):
        problems.append("nothing loads vfio-pci at boot (not in modules-load.d, no softdep, "
                        "not in the initramfs), so its ids= never take effect for devices "
                        "that have no host driver")
        fixes.append("add `vfio-pci` to /etc/modules-load.d/vfio.conf")
        steps.append(Edit("/etc/modules-load.d/vfio.conf", "vfio-pci").to_dict())
    if ev.candidates is None:
        why = (f"the drivers matching each device's modalias could not be resolved: "
               f"{ev.candidates_error or '`modprobe -R` failed on the node'}")
        if problems:
            return failed("; ".join(problems) + f" (and {why})", "; ".join(fixes))
        return skipped(f"{why}; which host driver competes with vfio-pci is unknown")
    for d in id_only:
        host = _host_drivers(ev, d, profile)
        guards = {m: ev.modprobe.vfio_first(m) for m in host}
        bad = [m for m, g in guards.items() if g is None]
        detail[d.bdf] = "; ".join(f"{m}: {g or 'unguarded'}" for m, g in guards.items()) or \
            "no host driver matches"
        if bad:
            problems.append(f"{d.bdf} [{d.ident}] is bound by ID only, and host driver(s) "
                            f"{', '.join(bad)} may claim it before vfio-pci at boot")
            edits = [softdep_edit(ev.modprobe, m) for m in bad]
            fixes += [e.describe() for e in edits]
            steps += [e.to_dict() for e in edits if e.to_dict() not in steps]
            continue
        if not host:
            continue
        boot = early_boot(ev.initramfs, ev.modprobe, host)
        if boot.state == "fails":
            problems.append(f"{d.bdf} [{d.ident}] is bound by ID only and guarded on the root "
                            f"filesystem, but {boot.why}")
            fixes.append(INITRAMFS_FIX)
            detail[d.bdf] += "; early boot: host driver in the initramfs without vfio_pci"
        elif boot.state == "stale":
            cautions.append(f"{d.bdf} [{d.ident}]: {boot.why}")
            fixes.append("Rebuild the initramfs: " + REBUILD_INITRAMFS)
            detail[d.bdf] += "; early boot: stale initramfs"
        elif boot.state == "unknown":
            detail[d.bdf] += f" (early boot not checked: {boot.why})"
    ev_: dict[str, Any] = {"per_device": detail, "vfio_pci_loaded_by": loads,
                           "softdep_pre_vfio": pre_any, "vfio_pci_in_initramfs": in_initramfs}
    if steps:
        ev_["fix"] = [*steps, {"run": REBUILD_INITRAMFS}]
    if problems:
        if INITRAMFS_FIX not in fixes:
            fixes.append("then " + REBUILD_INITRAMFS)
        return failed("; ".join(problems + cautions), "; ".join(dict.fromkeys(fixes)), **ev_)
    if cautions:
        return warned("; ".join(cautions), "; ".join(dict.fromkeys(fixes)), **ev_)
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
    """Per target: the host drivers that match it (its modalias; the profile's competing
    drivers when that is unknown) against the initramfs listing (see :func:`early_boot`)."""
    if (dra := dra_binding_skip(profile, "persistence.initramfs")) is not None:
        return dra
    targets = _targets(ev, profile)
    if not targets:
        return no_targets(profile)
    if ev.initramfs.error is not None:
        return skipped(f"initramfs contents unknown: {ev.initramfs.error}")
    mods = ev.initramfs.modules()
    per: dict[str, EarlyBoot] = {}
    soft: set[str] = set()
    for d in targets:
        per[d.bdf] = early_boot(ev.initramfs, ev.modprobe, _host_drivers(ev, d, profile))
        kinds = {m for m, _ in mechanisms(ev, d, profile)}
        if _per_device(kinds) and not kinds & {"modprobe", "cmdline"}:
            soft.add(d.bdf)
    present = sorted({m for e in per.values() for m in e.host_drivers})
    ev_: dict[str, Any] = {"image": ev.initramfs.image, "host_drivers_in_initramfs": present,
                           "vfio_in_initramfs": sorted(m for m in mods if m.startswith("vfio")),
                           "config_files": sorted(ev.initramfs.config_files()),
                           "per_target": {b: e.state for b, e in per.items()}}
    vfio_mods = ", ".join(sorted(m for m in mods if m.startswith("vfio"))) or "none"
    fails = [b for b, e in per.items() if e.state == "fails" and b not in soft]
    soft_fails = [b for b, e in per.items() if e.state == "fails" and b in soft]
    stale = [b for b, e in per.items() if e.state == "stale"]

    def why(b: str) -> str:
        return per[b].why.replace(" (see persistence.initramfs)", "")

    if fails:
        return failed(f"target(s) {', '.join(fails)}: {why(fails[0])}", INITRAMFS_FIX, **ev_)
    if soft_fails or stale:
        parts = []
        if soft_fails:
            parts.append(f"target(s) {', '.join(soft_fails)}: {why(soft_fails[0])}; their "
                         "per-device override (driverctl/udev) takes them back only after the "
                         "host driver had them")
        if stale:
            parts.append(f"target(s) {', '.join(stale)}: {why(stale[0])}")
        return warned("; ".join(parts), INITRAMFS_FIX if soft_fails else
                      "Rebuild it: update-initramfs -u -k all (dracut: dracut -f)", **ev_)
    if not present:
        return passed(f"{ev.initramfs.image}: no host driver for a target in the initramfs "
                      f"(vfio modules: {vfio_mods})", **ev_)
    return passed(f"{ev.initramfs.image}: vfio_pci and its configuration are present alongside "
                  f"{', '.join(present)}", **ev_)


@CHECKS.check(
    "persistence.over-capture",
    title="No ID-based rule also captures a device the host keeps",
    remediation="Use per-device binding (driverctl set-override <BDF> vfio-pci) instead of "
    "an ID rule, or drop that ID from vfio-pci ids=",
    severity=Severity.NORMAL,
)
def over_capture(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    if not profile.host.passthrough.host_keeps:
        return skipped("the profile names no host-kept devices (host.passthrough.host_keeps), "
                       "so no rule can over-capture one")
    if not ev.pci.devices:
        return skipped("no PCI device could be read from /sys/bus/pci/devices, so which "
                       "devices an ID rule captures is unknown")
    kept = sorted(ev.pci.host_kept(profile), key=lambda d: d.bdf)
    if not kept:
        sels = ", ".join(s.describe() for s in profile.host.passthrough.host_keeps)
        return skipped(f"no device on this node matches host.passthrough.host_keeps ({sels})")
    # only the ids rules that take effect capture anything (the last ids= assignment: see
    # ModprobeConfig.vfio_ids); the effective modprobe.d one unless every boot loader file
    # sets vfio-pci.ids= (which replaces it): while they disagree it may still apply
    srcs = ev.boot.ids_sources()
    replaced = bool(srcs) and set(srcs) == set(ev.boot.sources)
    rules = [("modprobe", f, r) for f, r in ev.modprobe.vfio_ids() if not replaced]
    rules += [("cmdline", f, r) for f, r in ev.boot.ids()]
    rules += [("cmdline", "/proc/cmdline", r) for r in ev.running_ids()]
    counted = {(f, r) for _k, f, r in rules}
    shadowed = [why for f, r, why in shadowed_ids(ev.binding)
                if (f, r) not in counted]
    # named only when there are some (the evidence of every other node stays as it was)
    shadow: dict[str, Any] = {"shadowed": shadowed} if shadowed else {}
    not_counted = (f" ({len(shadowed)} shadowed ID rule(s) bind nothing and are not counted: "
                   "see the evidence)" if shadowed else "")
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
        return warned("; ".join(hits) + not_counted,
                      "An ID rule binds every device of that vendor:device. Remove the ID "
                      "and bind the intended devices one by one: driverctl set-override "
                      "<BDF> vfio-pci.", rules=[f"{f}: {r}" for _k, f, r in rules], **shadow)
    return passed(f"{len(rules)} ID rule(s); none matches the {len(kept)} host-kept device(s): "
                  + ", ".join(d.bdf for d in kept) + not_counted,
                  rules=[f"{f}: {r}" for _k, f, r in rules], **shadow)


_generated = generated_boot

@CHECKS.check(
    "persistence.cmdline",
    title="The running kernel command line and the boot loader config agree on vfio-pci.ids",
    remediation="Put vfio-pci.ids= in the boot loader config (GRUB_CMDLINE_LINUX in "
    "/etc/default/grub, then update-grub) and reboot",
    severity=Severity.NORMAL,
)
def cmdline(ev: PersistenceEvidence, profile: Profile) -> Outcome:
    if (dra := dra_binding_skip(profile, "persistence.cmdline")) is not None:
        return dra
    if ev.proc_cmdline is None:
        return skipped("/proc/cmdline is not in the evidence (an offline tree has no running "
                       "kernel), so the running command line cannot be compared")
    running = sorted(str(r) for r in ev.running_ids())
    configured: dict[str, list[str]] = {}
    for f, r in ev.boot.ids():
        configured.setdefault(f, []).append(str(r))
    ev_: dict[str, Any] = {"running": running, "configured": configured,
                           "boot_configs": sorted(ev.boot.sources)}
    if not ev.boot_files_read and not ev.boot.sources:
        return skipped("no boot loader config found (/etc/default/grub, /boot/grub*/grub.cfg, "
                       "/etc/kernel/cmdline, loader entries), so what the next boot's command "
                       "line holds is unknown", **ev_)
    if not running and not configured:
        return passed("vfio-pci.ids is not used on the kernel command line (running, nor in "
                      + ", ".join(sorted(ev.boot.sources) or ev.boot_files_read) + ")", **ev_)
    if running and not configured:
        return failed(f"/proc/cmdline has vfio-pci.ids={','.join(running)} but no boot loader "
                      f"config ({', '.join(sorted(ev.boot.sources)) or 'none found'}) does: "
                      "it was set by hand for this boot and is lost at the next one", **ev_)
    want = sorted({i for ids in configured.values() for i in ids})
    stale_gen = sorted(f for f in ev.boot.sources if _generated(f)
                       and sorted(configured.get(f, [])) != want)
    src_has = sorted(f for f in configured if not _generated(f))
    if stale_gen and src_has:
        return warned(
            f"vfio-pci.ids={','.join(want)} is in {', '.join(src_has)} but not in "
            f"{', '.join(stale_gen)}, which the boot loader really reads: the boot loader "
            "config was not regenerated"
            + (f" (running: {','.join(running) or 'none'})" if running != want else ""),
            "Regenerate the boot loader config (Debian/Ubuntu: update-grub; RHEL: "
            "grub2-mkconfig -o /boot/grub2/grub.cfg or grubby; systemd-boot: kernel-install), "
            "then reboot.", **ev_)
    differ = [f for f, ids in configured.items() if sorted(ids) != running]
    if differ and not running:
        return warned(
            f"vfio-pci.ids={','.join(want)} is configured in {', '.join(sorted(configured))} "
            "but the running kernel was booted without it: configured, pending reboot",
            "Reboot the node to apply it; the boot loader config already has it.", **ev_)
    if differ:
        return warned(f"running vfio-pci.ids={','.join(running)} differs from "
                      + "; ".join(f"{f}: {','.join(configured[f])}" for f in differ)
                      + ": the next boot binds a different set",
                      "Decide which set is right: reboot to apply the configured ids, or change "
                      f"vfio-pci.ids in {', '.join(differ)} to the running set.", **ev_)
    return passed(f"vfio-pci.ids={','.join(running)} in /proc/cmdline and in "
                  + ", ".join(sorted(configured)), **ev_)
