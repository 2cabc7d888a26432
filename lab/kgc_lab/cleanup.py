"""``kgc lab cleanup``: stop everything the labs started and left behind.

It reads every lab record (``kgc_lab.ledger``) — also those of runs that were SIGKILLed
and never tore down — and for each:

1. sweeps NRI probe pods off the lab's container runtimes through CRI while they still run
   (``kgc_lab.cri_sweep``);
2. stops SSH clients of the lab's VMs, then the recorded processes newest first, then
   their helpers (processes the record says it owns, e.g. containerd shims) and every
   descendant (the containers under a shim) — each only if it is still the process the
   lab started (pid *and* start time, and its executable);
3. unmounts whatever is mounted under the lab's directories (deepest first);
4. removes the unix sockets those processes listened on and the paths the record names;
5. checks that nothing is left and only then forgets the record.

Nothing here signals a process the lab did not start.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kgc_lab import procs
from kgc_lab.ledger import LabRecord, records

MNT_DETACH = 2


@dataclass
class CleanupReport:
    stopped: list[str] = field(default_factory=list)
    swept: list[str] = field(default_factory=list)
    unmounted: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)  # records of labs now fully gone
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.left

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "clean": self.clean}

    def lines(self) -> list[str]:
        out = []
        for title, items in (("stopped", self.stopped), ("swept", self.swept),
                             ("unmounted", self.unmounted), ("removed", self.removed),
                             ("forgot record", self.forgotten), ("note", self.notes),
                             ("LEFT", self.left)):
            out += [f"{title}: {i}" for i in items]
        return out or ["nothing to clean up"]


def _umount(path: str) -> bool:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    return int(libc.umount2(path.encode(), MNT_DETACH)) == 0


def _kill_set(pids: list[int], rep: CleanupReport, what: str, grace_s: float) -> None:
    """SIGTERM all, then SIGKILL each that still runs — only while a pid still has the
    start time seen here (a pid reused meanwhile is left alone)."""
    seen = {p: (procs.proc_start(p), procs.exe_name(p)) for p in pids}
    for p, (start, _name) in seen.items():
        if start is not None and procs.is_same(p, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p, signal.SIGTERM)
    for p, (start, name) in seen.items():
        if start is None:
            continue
        if procs.stop(p, start, grace_s=grace_s):
            rep.stopped.append(f"{what} {name or '?'} (pid {p})")
        else:
            rep.left.append(f"{what} {name or '?'} pid {p} still running")


def clean_record(rec: LabRecord, rep: CleanupReport, dry_run: bool = False,
                 grace_s: float = 10.0) -> None:
    tag = rec.id
    entries = rec.processes
    live = [e for e in entries if procs.is_same(e["pid"], e.get("start"), e.get("exe"))]
    owned: list[int] = []
    for prefix, exes in rec.owns:
        owned += [p for p in procs.referencing(prefix, exes) if p not in owned]
    recorded = {int(e["pid"]) for e in live}
    owned = [p for p in owned if p not in recorded]
    ssh = [p for port in rec.ssh_ports for p in procs.clients_of_port(port)
           if procs.exe_name(p) == "ssh" or (procs.cmdline(p)[:1] or [""])[0].startswith("ssh")]
    tree = procs.descendants([*recorded, *owned])
    # process groups only of leaders verified above: a dead leader's pid may since lead
    # an unrelated group
    members = [p for p in procs.group_members({int(e["pid"]) for e in live if e.get("group")})
               if p not in recorded]
    tree += [p for p in members if p not in tree]
    everyone = [*ssh, *recorded, *owned, *tree]
    sockets = procs.unix_listeners(everyone)

    if dry_run:
        rep.stopped += [f"{tag}: would stop {e['name']} (pid {e['pid']})" for e in live]
        rep.stopped += [f"{tag}: would stop helper pid {p} ({procs.exe_name(p)})"
                        for p in [*ssh, *owned, *tree]]
        for prefix in rec.mounts:
            rep.unmounted += [f"{tag}: would unmount {m}" for m in procs.mounts_under(prefix)]
        rep.removed += [f"{tag}: would remove {p}" for p in [*sockets, *rec.paths]
                        if os.path.lexists(p)]
        return

    # 1. probe pods, while the runtime still answers
    if live:
        from kgc_lab.cri_sweep import sweep_probe_pods

        for sock in rec.cri:
            if os.path.exists(sock):
                swept, errors = sweep_probe_pods(sock)
                rep.swept += [f"{tag}: {s}" for s in swept]
                rep.notes += [f"{tag}: probe sweep: {e}" for e in errors]
    # 2. processes: SSH clients of the VMs, the recorded ones newest first, then helpers
    if ssh:
        _kill_set(ssh, rep, f"{tag}: ssh client", 3.0)
    for e in reversed(live):
        pid, start = int(e["pid"]), e.get("start")
        if procs.stop(pid, start, group=bool(e.get("group")), grace_s=grace_s):
            rep.stopped.append(f"{tag}: {e.get('name', '?')} (pid {pid})")
        else:
            rep.left.append(f"{tag}: {e.get('name', '?')} pid {pid} still running")
    rest = [p for p in [*owned, *procs.descendants([*recorded, *owned]), *tree]
            if procs.alive(p)]
    if rest:
        _kill_set(list(dict.fromkeys(rest)), rep, f"{tag}: helper", 3.0)
    stragglers = [p for p in procs.group_members({int(e["pid"]) for e in live
                                                  if e.get("group")}) if p not in recorded]
    if stragglers:
        _kill_set(stragglers, rep, f"{tag}: process-group member", 2.0)
    # 3. mounts
    for prefix in rec.mounts:
        for mp in procs.mounts_under(prefix):
            if _umount(mp):
                rep.unmounted.append(f"{tag}: {mp}")
        for mp in procs.mounts_under(prefix):
            rep.left.append(f"{tag}: still mounted: {mp}")
    # 4. sockets and paths
    for s in sockets:
        if procs.remove_socket(s):
            rep.removed.append(f"{tag}: socket {s}")
    for p in rec.paths:
        path = Path(p)
        if not os.path.lexists(path):
            continue
        if any(procs.mounts_under(str(path))):
            continue  # reported above; never delete through a mount
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                path.unlink()
        (rep.left.append(f"{tag}: could not remove {p}") if os.path.lexists(path)
         else rep.removed.append(f"{tag}: {p}"))
    # 5. verify, then forget
    left = [e for e in entries if procs.is_same(e["pid"], e.get("start"), e.get("exe"))]
    left_helpers = [p for p in [*owned, *tree, *ssh] if procs.alive(p)]
    if left or left_helpers or any(f"{tag}:" in x for x in rep.left):
        rep.left += [f"{tag}: pid {e['pid']} ({e.get('name')}) survived" for e in left]
        rep.left += [f"{tag}: helper pid {p} survived" for p in left_helpers]
        return
    rec.close()
    rep.forgotten.append(tag)


def cleanup(dry_run: bool = False, orphans_only: bool = False, lab: str | None = None,
            cri_sockets: tuple[str, ...] = (), grace_s: float = 10.0) -> CleanupReport:
    """Clean up after every lab (or one ``lab``); ``orphans_only``: only labs whose owner
    process is gone (not a run in progress); ``cri_sockets``: also sweep NRI probe pods
    off these runtimes (e.g. a node's own containerd)."""
    rep = CleanupReport()
    recs, bad = records(lab)
    rep.notes += [f"unreadable record {b}" for b in bad]
    for rec in reversed(recs):  # newest first
        if orphans_only and rec.owner_alive:
            rep.notes.append(f"{rec.id}: skipped (its run, pid "
                             f"{(rec.data.get('owner') or {}).get('pid')}, is still going)")
            continue
        clean_record(rec, rep, dry_run=dry_run, grace_s=grace_s)
    for sock in cri_sockets:
        from kgc_lab.cri_sweep import sweep_probe_pods

        if not os.path.exists(sock):
            rep.notes.append(f"no CRI socket at {sock}")
            continue
        swept, errors = sweep_probe_pods(sock, dry_run=dry_run)
        rep.swept += swept
        rep.left += errors
    return rep
