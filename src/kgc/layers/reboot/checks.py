"""The reboot layer's pure evaluators."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgc.core.model import Outcome, Registry, Severity, errored, failed, passed, skipped
from kgc.core.profile import DeviceSelector, Profile
from kgc.layers.common import (
    PREBIND_WHY,
    RebindDev,
    boot_binding_skip,
    dra_binding_skip,
    host_driver,
    judge_rebindable,
    unprebind_fix,
)
from kgc.layers.reboot.collect import RebootEvidence

CHECKS = Registry()


def _sel(row: Mapping[str, Any], bdf: str, sels: tuple[DeviceSelector, ...]) -> bool:
    return any(s.matches(bdf, row.get("vendor"), row.get("device"), row.get("class"))
               for s in sels)


def _gate(ev: RebootEvidence) -> Outcome | None:
    """Nothing but a ``done`` record with two different boot_ids is a reboot to judge."""
    if ev.status != "done":
        return _not_done(ev)
    if not ev.boot_id_before or not ev.boot_id_after:
        return errored(
            "the reboot record says done but lacks the boot_id "
            + ("before and after" if not (ev.boot_id_before or ev.boot_id_after) else
               "before" if not ev.boot_id_before else "after")
            + " the reboot, so a reboot is not shown",
            "Record the reboot again (kgc snapshot --allow-reboot, or a live run with "
            "--allow-reboot); a hand-edited or truncated record proves nothing.",
            boot_id_before=ev.boot_id_before, boot_id_after=ev.boot_id_after)
    if ev.boot_id_before == ev.boot_id_after:
        return failed(f"boot_id {ev.boot_id_before} is the same before and after: the node did "
                      "not reboot", "Check that the reboot command really restarts the node "
                      "(not a container or a soft restart of userspace).",
                      boot_id_before=ev.boot_id_before, boot_id_after=ev.boot_id_after)
    return None


def _not_done(ev: RebootEvidence) -> Outcome:
    if ev.status == "timeout":
        return errored(ev.message, "The node did not return: check its console (attached as "
                       "evidence) and boot logs; the binding after reboot is unknown.",
                       timeout_s=ev.timeout_s, waited_s=ev.waited_s,
                       console_log_tail=ev.console_tail or "(no console log known to kgc)")
    if ev.status == "failed-to-start":
        return errored(ev.message, "Allow the connecting user to reboot the node (root/sudo).")
    if ev.status in ("not-allowed", "refused", "not-recorded"):
        return skipped(ev.message)
    return errored(f"unknown reboot record status {ev.status!r}: {ev.message}",
                   "Record the reboot again with this version of kgc.")


@CHECKS.check(
    "reboot.returned",
    title="The node reboots and returns with a new boot_id",
    remediation="Fix the node's boot (see the console log) so it returns after a reboot",
    severity=Severity.BLOCKER,
)
def returned(ev: RebootEvidence, profile: Profile) -> Outcome:
    if (gate := _gate(ev)) is not None:
        return gate
    return passed(f"rebooted in {ev.waited_s} s: boot_id {ev.boot_id_before} -> "
                  f"{ev.boot_id_after}", boot_id_before=ev.boot_id_before,
                  boot_id_after=ev.boot_id_after, waited_s=ev.waited_s)


def _before_targets(ev: RebootEvidence, pt: Any) -> list[str]:
    """The targets (profile's passthrough selection) present before the reboot."""
    return [b for b, row in ev.before.items() if _sel(row, b, pt.targets)]


@CHECKS.check(
    "reboot.binding-persists",
    title="After a real reboot every target is bound to vfio-pci again",
    remediation="Persist the binding (see persistence.coverage): driverctl set-override <BDF> "
    "vfio-pci, or modprobe.d ids + softdep + update-initramfs -u",
    severity=Severity.BLOCKER,
)
def binding_persists(ev: RebootEvidence, profile: Profile) -> Outcome:
    if (dra := dra_binding_skip(profile, "reboot.binding-persists")) is not None:
        return dra
    if (gate := _gate(ev)) is not None:
        return gate
    pt = profile.host.passthrough
    allowed = set(pt.allowed_drivers)
    targets = _before_targets(ev, pt)
    if not targets:
        return skipped("no target device was present before the reboot")
    rows = {b: f"{ev.before[b].get('driver') or 'none'} -> "
               f"{(ev.after.get(b) or {}).get('driver') or 'none'}" for b in targets}
    lost = [b for b in targets if (ev.after.get(b) or {}).get("driver") not in allowed]
    if lost:
        return failed("binding not restored after the reboot: "
                      + "; ".join(f"{b}: {rows[b]}" for b in lost)
                      + (" (vanished)" if any(b not in ev.after for b in lost) else ""),
                      devices=rows, boot_id_before=ev.boot_id_before,
                      boot_id_after=ev.boot_id_after)
    return passed("every target is bound again after the reboot: "
                  + "; ".join(f"{b}: {r}" for b, r in rows.items()), devices=rows,
                  boot_id_before=ev.boot_id_before, boot_id_after=ev.boot_id_after)


@CHECKS.check(
    "reboot.host-kept",
    title="After the reboot, devices the host keeps are still on host drivers",
    remediation="Remove the host-kept device's ID from vfio-pci ids= (use per-device binding)",
    severity=Severity.CRITICAL,
)
def host_kept(ev: RebootEvidence, profile: Profile) -> Outcome:
    if (gate := _gate(ev)) is not None:
        return gate
    pt = profile.host.passthrough
    vfio = set(pt.allowed_drivers) | {"pci-stub"}
    kept = [b for b, row in ev.after.items() if _sel(row, b, pt.host_keeps)]
    rows = {b: f"{(ev.before.get(b) or {}).get('driver') or 'none'} -> "
               f"{ev.after[b].get('driver') or 'none'}" for b in kept}
    captured = [b for b in kept if ev.after[b].get("driver") in vfio]
    if not kept:
        return skipped("no host-kept device on this node (host.passthrough.host_keeps matches "
                       "nothing), so there is nothing to protect from capture")
    if captured:
        return failed("host-kept device(s) captured by vfio after the reboot: "
                      + "; ".join(f"{b}: {rows[b]}" for b in captured), devices=rows)
    return passed(f"{len(kept)} host-kept device(s) on host drivers after the reboot"
                  + (": " + "; ".join(f"{b}: {r}" for b, r in rows.items()) if rows else ""),
                  devices=rows)


@CHECKS.check(
    "reboot.rebindable",
    title="Under binding: dra, after a real reboot every target is back on its host driver "
    "(not pre-bound to vfio-pci) and rebindable",
    remediation="Remove the boot-time vfio-pci binding of the targets; stop what holds "
    "/dev/nvidia<N> after boot (nvidia-persistenced)",
    severity=Severity.BLOCKER,
)
def rebindable(ev: RebootEvidence, profile: Profile) -> Outcome:
    """A new id, not reboot.binding-persists with another meaning: under ``dra`` the reboot
    must prove the opposite of "bound to vfio-pci again" -- that the node comes back with
    each target on its host driver and rebindable (:func:`kgc.layers.common.judge_rebindable`,
    judged on the PCI bindings and the holder scan taken after the reboot, once the boot
    finished). A target back on vfio-pci fails, naming where the node pre-binds it (the boot-time
    configuration recorded before the reboot; see :data:`kgc.layers.common.PREBIND_WHY`). A
    record without the post-reboot holder scan (an older kgc, or recorded under ``boot``)
    is an error, never a pass. Under ``boot``: a skip naming reboot.binding-persists."""
    if (boot := boot_binding_skip(profile, "reboot.rebindable")) is not None:
        return boot
    if (gate := _gate(ev)) is not None:
        return gate
    pt = profile.host.passthrough
    allowed = tuple(pt.allowed_drivers)
    targets = _before_targets(ev, pt)
    if not targets:
        return skipped("no target device was present before the reboot")
    gone = [b for b in targets if b not in ev.after]
    if gone:
        return failed(f"target(s) {', '.join(gone)} did not come back after the reboot (not in "
                      "the PCI inventory): the DRA driver cannot publish them",
                      "Check the node's firmware and kernel log for the missing device(s).",
                      boot_id_after=ev.boot_id_after)
    if ev.use_after is None:
        return errored("the reboot record holds no holder scan from after the reboot "
                       "(recorded by an older kgc, or under binding: boot), so whether the "
                       "targets came back rebindable is not known",
                       "Record the reboot again with this kgc under binding: dra "
                       "(--allow-reboot).")

    def dev(b: str) -> RebindDev:
        r = ev.after[b]
        return RebindDev(b, f"{r.get('vendor') or '????'}:{r.get('device') or '????'}",
                         r.get("class"), r.get("driver"), r.get("iommu_group"))

    rows = {b: f"{ev.before[b].get('driver') or 'none'} -> {ev.after[b].get('driver') or 'none'}"
            for b in targets}
    pre = [b for b in targets if ev.after[b].get("driver") in allowed]
    groups: dict[str, list[RebindDev]] = {}
    for b, r in ev.after.items():
        if r.get("iommu_group") is not None:
            groups.setdefault(str(r["iommu_group"]), []).append(dev(b))
    rest = judge_rebindable([dev(b) for b in targets if b not in pre], groups, ev.use_after,
                            host_driver=host_driver(profile), allowed=allowed,
                            when="after the reboot")
    settled = (f" (holders scanned once the boot finished: {ev.settled})"
               if ev.settled else "")
    if pre:
        def where(b: str) -> str:
            if ev.prebound is None:
                return "the boot-time configuration was not recorded"
            srcs = ev.prebound.get(b, ())
            return ("pre-bound by " + ", ".join(srcs) if srcs else
                    "no boot-time configuration recorded binds it: something bound it during "
                    "boot, or a claim was prepared on it since")
        fixes = [unprebind_fix(k, w, b) for b in pre
                 for k, _, w in (s.partition(": ") for s in (ev.prebound or {}).get(b, ()))
                 if w]
        reason = ("the node came back with target(s) pre-bound to vfio-pci: "
                  + "; ".join(f"{b} ({rows[b]}): {where(b)}" for b in pre)
                  + f"; {PREBIND_WHY}")
        if rest.status.value in ("fail", "error"):
            reason += f"; and {rest.reason}"
        fix = ("Leave the targets to the DRA driver: " + "; ".join(dict.fromkeys(fixes))
               if fixes else "Find what binds the target(s) to vfio-pci at boot (see "
               "persistence.coverage) and remove it") + "."
        return failed(reason, fix, devices=rows, prebound=dict(ev.prebound or {}),
                      boot_id_before=ev.boot_id_before, boot_id_after=ev.boot_id_after)
    return Outcome(rest.status, rest.reason + settled,
                   {**rest.evidence, "devices": rows, "boot_id_before": ev.boot_id_before,
                    "boot_id_after": ev.boot_id_after, "settled": ev.settled},
                   rest.remediation, rest.expected, rest.found)

