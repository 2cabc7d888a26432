"""Reboot evidence: record the binding and boot_id, reboot through the target's transport,
wait (bounded) for a new boot_id, record again."""


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

from kgc.core.engine import Context
from kgc.core.hostfs import (
    HostQuery,
    HostSnapshot,
    want_list,
    want_mapping,
    want_number,
    want_str,
)
from kgc.core.model import EvidenceError
from kgc.core.target import NodeTarget, TargetError
from kgc.evidence.holders import QUERY as HOLDERS_QUERY
from kgc.evidence.holders import DeviceUse, parse_device_use
from kgc.evidence.pci import PCI_QUERY, parse_pci
from kgc.evidence.vfio_config import parse_boot_binding
from kgc.layers.common import prebind_sources
from kgc.progress import Waiting, note

BOOT_ID = "/proc/sys/kernel/random/boot_id"
QUERY = PCI_QUERY | HostQuery(files=(BOOT_ID,))
# under binding: dra, once the node is back and its boot has finished: who holds the GPU
# nodes then (nvidia-persistenced starts late in the boot, after the node first answers)
AFTER_QUERY = QUERY | HOLDERS_QUERY
# bounded wait for the boot to finish (systemd: "running" or "degraded"; else says so)
SETTLE_SCRIPT = (
    "if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then "
    "timeout 180 systemctl is-system-running --wait 2>&1; true; "
    "else echo no-systemd; fi"
)

# Detached: the session returns at once; the reboot starts 2 s later, after SSH has closed.
REBOOT_SCRIPT = (
    "if command -v systemd-run >/dev/null 2>&1 && [ -d /run/systemd/system ]; then "
    "systemd-run --quiet --no-block --on-active=2 --timer-property=AccuracySec=100ms "
    "/bin/systemctl reboot && echo kgc-reboot-scheduled; else "
    "nohup sh -c 'sleep 2; reboot' >/dev/null 2>&1 </dev/null & echo kgc-reboot-scheduled; fi"
)

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
    # binding: dra only (None: not recorded -- binding: boot, or an older kgc): who held the
    # GPU nodes after the reboot, once the boot finished (``settled``: systemd's state then),
    # and per target, the boot-time vfio-pci bindings the node had configured before it
    use_after: DeviceUse | None = None
    settled: str | None = None
    prebound: Mapping[str, tuple[str, ...]] | None = None

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}  # absent when not recorded: older records stay as they were
        if self.use_after is not None:
            extra["use_after"] = self.use_after.to_dict()
        if self.settled is not None:
            extra["settled"] = self.settled
        if self.prebound is not None:
            extra["prebound"] = {k: list(v) for k, v in self.prebound.items()}
        return {
            "status": self.status, "message": self.message,
            "boot_id_before": self.boot_id_before, "boot_id_after": self.boot_id_after,
            "before": {k: dict(v) for k, v in self.before.items()},
            "after": {k: dict(v) for k, v in self.after.items()},
            "waited_s": self.waited_s, "timeout_s": self.timeout_s,
            "console_tail": self.console_tail,
            **extra,
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "reboot") -> RebootEvidence:
        """Load a recorded reboot record; anything of the wrong shape raises one
        :class:`EvidenceError` line naming the field."""
        d = want_mapping(d, where)
        if "status" not in d:
            raise EvidenceError(f"{where}.status: missing")

        def rows(name: str) -> dict[str, dict[str, Any]]:
            out: dict[str, dict[str, Any]] = {}
            for bdf, row in want_mapping(d.get(name, {}), f"{where}.{name}").items():
                w = f"{where}.{name}[{bdf!r}]"
                r = dict(want_mapping(row, w))
                for k, v in r.items():
                    want_str(v, f"{w}.{k}", optional=True)
                out[bdf] = r
            return out

        return cls(
            status=want_str(d["status"], f"{where}.status"),
            message=want_str(d.get("message", ""), f"{where}.message"),
            boot_id_before=want_str(d.get("boot_id_before"), f"{where}.boot_id_before",
                                    optional=True),
            boot_id_after=want_str(d.get("boot_id_after"), f"{where}.boot_id_after",
                                   optional=True),
            before=rows("before"),
            after=rows("after"),
            waited_s=want_number(d.get("waited_s"), f"{where}.waited_s", optional=True),
            timeout_s=want_number(d.get("timeout_s"), f"{where}.timeout_s", optional=True),
            console_tail=want_str(d.get("console_tail"), f"{where}.console_tail", optional=True),
            use_after=(None if d.get("use_after") is None
                       else DeviceUse.from_dict(d["use_after"], f"{where}.use_after")),
            settled=want_str(d.get("settled"), f"{where}.settled", optional=True),
            prebound=None if d.get("prebound") is None else {
                k: tuple(want_str(x, f"{where}.prebound[{k!r}][{i}]")
                         for i, x in enumerate(want_list(v, f"{where}.prebound[{k!r}]")))
                for k, v in want_mapping(d["prebound"], f"{where}.prebound").items()},
        )


def bindings(snap: HostSnapshot) -> dict[str, dict[str, Any]]:
    inv = parse_pci(snap)
    return {
        b: {"vendor": d.vendor, "device": d.device, "class": d.pci_class, "driver": d.driver,
            "driver_override": d.driver_override, "iommu_group": d.iommu_group}
        for b, d in sorted(inv.devices.items())
    }


def _refusal(ctx: Context, snap: HostSnapshot) -> str | None:
    """After the target's own refusal (checked before any connection): an alias or a
    forwarded port can still lead back to this machine — compare boot ids."""
    t = ctx.target
    try:
        mine = Path(BOOT_ID).read_text().strip()
    except OSError:
        mine = ""
    if mine and snap.text(BOOT_ID) == mine:
        return (f"refusing to reboot {t.name}: it has the boot_id of the machine running kgc "
                "(it is this machine)")
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
    """Live only, and only with --allow-reboot (the engine's gate): a bundle replays its
    record, a run without the flag skips."""
    t = ctx.target
    why = t.reboot_refusal() if isinstance(t, NodeTarget) else f"{t.name} is not a live node"
    if why:
        return RebootEvidence("refused", why)
    snap = ctx.host()  # the pre-reboot snapshot every host layer judges (collected once)
    why = _refusal(ctx, snap)
    if why:
        return RebootEvidence("refused", why)
    target: NodeTarget = ctx.target  # type: ignore[assignment]
    timeout = float(ctx.options.get("reboot_timeout_s") or 600)
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
    note("reboot: %s is rebooting; waiting up to %.0f s for it to answer with a new boot_id",
         target.name, timeout)
    waiting = Waiting(f"{target.name} to come back from its reboot", timeout)

    def probe() -> HostSnapshot | None:
        try:
            s = target.collect(QUERY)
        except TargetError as exc:
            last_error[:] = [str(exc)[:300]]
            waiting.update(f"not answering ({last_error[0][:120]})")
            raise
        bid = s.text(BOOT_ID)
        if not bid or bid == old:
            waiting.update("answering with the old boot_id (not rebooted yet)")
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
    dra: dict[str, Any] = {}
    if _binding(ctx) == "dra":
        dra = _after_dra(ctx, target, snap, after_snap)
        after_snap = dra.pop("snap")
    return RebootEvidence(
        "done", "rebooted", boot_id_before=old, boot_id_after=after_snap.text(BOOT_ID),
        before=before, after=bindings(after_snap), waited_s=round(time.monotonic() - t0, 1),
        timeout_s=timeout, **dra)


def _binding(ctx: Context) -> str:
    gpu = getattr(getattr(getattr(ctx, "profile", None), "platform", None), "gpu", None)
    return str(getattr(gpu, "binding", "boot"))


def _after_dra(ctx: Context, target: NodeTarget, before: HostSnapshot,
               after: HostSnapshot) -> dict[str, Any]:
    """Under binding: dra: the boot-time vfio bindings configured before the reboot (None
    when the snapshot lacks the configuration), and -- once the boot finished -- the PCI
    bindings and holders after it (the holder scan's error says when it could not run)."""
    prebound: dict[str, tuple[str, ...]] | None = None
    if before.command("udev_driver_override") is not None:  # the binding config was read
        b = parse_boot_binding(before)
        pt = ctx.profile.host.passthrough
        prebound = {d.bdf: tuple(f"{m}: {w}" for m, w in
                                 prebind_sources(b, d, pt.allowed_drivers))
                    for d in parse_pci(before).targets(ctx.profile)}
    try:
        rc, out, err = target.run(SETTLE_SCRIPT, limit_s=200)
        settled = (out + err).strip().splitlines()[-1][:80] if (out + err).strip() else f"rc {rc}"
        snap = target.collect(AFTER_QUERY)
        use = parse_device_use(snap)
    except TargetError as exc:
        settled, snap = f"unknown ({str(exc)[:120]})", after
        use = DeviceUse(error=f"the node stopped answering after the reboot: {str(exc)[:200]}")
    return {"snap": snap, "use_after": use, "settled": settled, "prebound": prebound}


