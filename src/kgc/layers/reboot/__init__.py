"""Layer 4 — the live reboot test (markers ``reboot`` and ``destructive``).

Only with the explicit option ``allow_reboot`` (``--allow-reboot``). Never reboots the
machine that runs kgc (``local://``) nor a directory tree (``chroot://``, ``KGC_ROOT``).

It records every PCI device's binding and ``/proc/sys/kernel/random/boot_id`` (from the
node's one batched host snapshot, so the host layers judge the state *before* the reboot),
reboots the node through the target's own transport with the reboot detached from the
session, waits -- bounded, with tenacity -- until the node answers with a new boot_id,
collects the binding again and compares device by device. A node that does not come back
yields ``error`` with the timeout and, when the lab knows it, the console log.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception_type,
    retry_if_result,
    stop_after_delay,
    wait_fixed,
)

from kgc.core.engine import Context, Layer
from kgc.core.hostfs import HostQuery, HostSnapshot
from kgc.core.model import (
    Outcome,
    Registry,
    Severity,
    errored,
    failed,
    passed,
    skipped,
)
from kgc.core.profile import DeviceSelector, Profile
from kgc.core.target import LiveTarget, TargetError
from kgc.layers.pci import PCI_QUERY, parse_pci

BOOT_ID = "/proc/sys/kernel/random/boot_id"
QUERY = PCI_QUERY | HostQuery(files=(BOOT_ID,))

# Detached: the session returns at once; the reboot starts 2 s later, after SSH has closed.
REBOOT_SCRIPT = (
    "if command -v systemd-run >/dev/null 2>&1 && [ -d /run/systemd/system ]; then "
    "systemd-run --quiet --no-block --on-active=2 --timer-property=AccuracySec=100ms "
    "/bin/systemctl reboot && echo kgc-reboot-scheduled; else "
    "nohup sh -c 'sleep 2; reboot' >/dev/null 2>&1 </dev/null & echo kgc-reboot-scheduled; fi"
)

CHECKS = Registry()


@dataclass(frozen=True)
class RebootEvidence:
    """What the reboot test saw. ``status``: done, not-allowed, refused, timeout,
    failed-to-start, not-recorded."""

    status: str
    message: str = ""
    boot_id_before: str | None = None
    boot_id_after: str | None = None
    before: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    after: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    waited_s: float | None = None
    timeout_s: float | None = None
    console_tail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "message": self.message,
            "boot_id_before": self.boot_id_before, "boot_id_after": self.boot_id_after,
            "before": {k: dict(v) for k, v in self.before.items()},
            "after": {k: dict(v) for k, v in self.after.items()},
            "waited_s": self.waited_s, "timeout_s": self.timeout_s,
            "console_tail": self.console_tail,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RebootEvidence:
        return cls(**{k: d.get(k) for k in (
            "status", "message", "boot_id_before", "boot_id_after", "waited_s", "timeout_s",
            "console_tail")} | {"before": d.get("before") or {}, "after": d.get("after") or {}})


def bindings(snap: HostSnapshot) -> dict[str, dict[str, Any]]:
    inv = parse_pci(snap)
    return {
        b: {"vendor": d.vendor, "device": d.device, "class": d.pci_class, "driver": d.driver,
            "driver_override": d.driver_override, "iommu_group": d.iommu_group}
        for b, d in sorted(inv.devices.items())
    }


def _refusal(ctx: Context) -> str | None:
    t = ctx.target
    if not isinstance(t, LiveTarget):
        return f"target {t.name} is not a live node"
    spec = t.spec
    if spec in ("", "local", "local://") or spec.startswith("local://"):
        return ("refusing to reboot the machine that runs kgc (local:// target); run the "
                "reboot test against a remote node: --hosts ssh://root@NODE --allow-reboot")
    if spec.startswith(("chroot://", "docker://", "podman://", "lxc://")) or t.root:
        return f"refusing to reboot {spec}: not a whole machine (container, chroot or KGC_ROOT)"
    return None


def _console_tail(ctx: Context, n: int = 80) -> str | None:
    p = ctx.options.get("console_log")
    if not p:
        return None
    try:
        lines = Path(p).read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"(console log {p} unreadable: {exc})"
    return "\n".join(lines[-n:])


def gather(ctx: Context) -> RebootEvidence:
    if ctx.offline:
        rec = ctx.bundle_extra("reboot")
        if not rec:
            return RebootEvidence("not-recorded", "the evidence bundle holds no reboot record "
                                  "(it was captured without --allow-reboot)")
        return RebootEvidence.from_dict(rec)
    if not ctx.options.get("allow_reboot"):
        return RebootEvidence("not-allowed", "the reboot test is destructive and runs only "
                              "with --allow-reboot")
    why = _refusal(ctx)
    if why:
        return RebootEvidence("refused", why)
    target: LiveTarget = ctx.target  # type: ignore[assignment]
    timeout = float(ctx.options.get("reboot_timeout_s") or 600)
    snap = ctx.host()  # the pre-reboot snapshot every host layer judges (collected once)
    before, old = bindings(snap), snap.text(BOOT_ID)
    if not old:
        return RebootEvidence("failed-to-start", f"{BOOT_ID} unreadable before the reboot",
                              before=before)
    rc, out, err = target.run(REBOOT_SCRIPT)
    if rc != 0 or "kgc-reboot-scheduled" not in out:
        return RebootEvidence("failed-to-start", f"the reboot command failed (exit {rc}): "
                              f"{(out + err).strip()[:500]}", boot_id_before=old, before=before)
    t0 = time.monotonic()
    last_error: list[str] = []

    def probe() -> HostSnapshot | None:
        try:
            s = target.collect(QUERY)
        except TargetError as exc:
            last_error[:] = [str(exc)[:300]]
            raise
        bid = s.text(BOOT_ID)
        return s if bid and bid != old else None

    try:
        after_snap = Retrying(
            stop=stop_after_delay(timeout), wait=wait_fixed(3),
            retry=retry_if_exception_type(TargetError) | retry_if_result(lambda s: s is None),
        )(probe)
    except RetryError:
        last_err = last_error[0] if last_error else "none, it kept answering with the old boot_id"
        return RebootEvidence(
            "timeout",
            f"the node did not come back with a new boot_id within {timeout:.0f} s after the "
            f"reboot (old boot_id {old}; last error: {last_err})",
            boot_id_before=old, before=before, waited_s=round(time.monotonic() - t0, 1),
            timeout_s=timeout, console_tail=_console_tail(ctx))
    assert after_snap is not None  # the retry only returns a snapshot with a new boot_id
    return RebootEvidence(
        "done", "rebooted", boot_id_before=old, boot_id_after=after_snap.text(BOOT_ID),
        before=before, after=bindings(after_snap), waited_s=round(time.monotonic() - t0, 1),
        timeout_s=timeout)


def _sel(row: Mapping[str, Any], bdf: str, sels: tuple[DeviceSelector, ...]) -> bool:
    return any(s.matches(bdf, row.get("vendor"), row.get("device"), row.get("class"))
               for s in sels)


def _not_done(ev: RebootEvidence) -> Outcome:
    if ev.status == "timeout":
        return errored(ev.message, "The node did not return: check its console (attached as "
                       "evidence) and boot logs; the binding after reboot is unknown.",
                       timeout_s=ev.timeout_s, waited_s=ev.waited_s,
                       console_log_tail=ev.console_tail or "(no console log known to kgc)")
    if ev.status == "failed-to-start":
        return errored(ev.message, "Allow the connecting user to reboot the node (root/sudo).")
    return skipped(ev.message)


@CHECKS.check(
    "reboot.returned",
    title="The node reboots and returns with a new boot_id",
    remediation="Fix the node's boot (see the console log) so it returns after a reboot",
    severity=Severity.BLOCKER,
)
def returned(ev: RebootEvidence, profile: Profile) -> Outcome:
    if ev.status != "done":
        return _not_done(ev)
    return passed(f"rebooted in {ev.waited_s} s: boot_id {ev.boot_id_before} -> "
                  f"{ev.boot_id_after}", boot_id_before=ev.boot_id_before,
                  boot_id_after=ev.boot_id_after, waited_s=ev.waited_s)


@CHECKS.check(
    "reboot.binding-persists",
    title="After a real reboot every target is bound to vfio-pci again",
    remediation="Persist the binding (see persistence.coverage): driverctl set-override <BDF> "
    "vfio-pci, or modprobe.d ids + softdep + update-initramfs -u",
    severity=Severity.BLOCKER,
)
def binding_persists(ev: RebootEvidence, profile: Profile) -> Outcome:
    if ev.status != "done":
        return _not_done(ev)
    pt = profile.host.passthrough
    allowed = set(pt.allowed_drivers)
    targets = [b for b, row in ev.before.items() if _sel(row, b, pt.targets)]
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
    if ev.status != "done":
        return _not_done(ev)
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


LAYER = Layer(name="reboot", checks=CHECKS, gather=gather, query=QUERY, host=False)

__all__ = ["LAYER", "QUERY", "RebootEvidence", "bindings", "gather"]
