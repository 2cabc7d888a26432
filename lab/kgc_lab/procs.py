"""Process facts from /proc, and stopping a process only when it is still the one a lab
started.

A process is identified by pid *and* start time (``/proc/PID/stat`` field 22, clock ticks
since boot): a pid reused by an unrelated process has another start time, so a lab record
can never make us signal a stranger.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import signal
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed


@dataclass(frozen=True)
class ProcStat:
    pid: int
    state: str
    ppid: int
    pgrp: int
    start: int  # clock ticks after boot
    cpu_ticks: int = 0  # user + system time so far, in clock ticks


def proc_stat(pid: int) -> ProcStat | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    try:
        f = text.rsplit(")", 1)[1].split()
        # after the command: state(0) ppid(1) pgrp(2) ... utime(11) stime(12) ...
        # starttime is field 22 -> f[19]
        return ProcStat(pid, f[0], int(f[1]), int(f[2]), int(f[19]), int(f[11]) + int(f[12]))
    except (IndexError, ValueError):
        return None


def proc_start(pid: int) -> int | None:
    st = proc_stat(pid)
    return st.start if st else None


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def exe_name(pid: int) -> str:
    with contextlib.suppress(OSError):
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).removesuffix(" (deleted)")
    return ""


def alive(pid: int) -> bool:
    """Running (a zombie is not)."""
    st = proc_stat(pid)
    return st is not None and st.state != "Z"


def is_same(pid: int, start: int | None, exe: str | None = None) -> bool:
    """``pid`` is alive, started at ``start`` (when known) and runs ``exe`` (when given:
    its argv[0] or /proc/PID/exe has that path or basename)."""
    st = proc_stat(pid)
    if st is None or st.state == "Z":
        return False
    if start is not None and st.start != start:
        return False
    if exe:
        argv = cmdline(pid)
        names = {os.path.basename(exe), exe}
        first = argv[0] if argv else ""
        # a daemon may rewrite its argv ("ssh: /tmp/... [mux]"): /proc/PID/exe decides then
        if first not in names and os.path.basename(first) not in names \
                and exe_name(pid) not in names:
            return False
    return True


def pid_alive(pid: int, exe: str | None = None) -> bool:
    """Alive and (if given) its argv[0] is ``exe``."""
    return is_same(pid, None, exe)


def all_pids() -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit()]


def children_map() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pid in all_pids():
        st = proc_stat(pid)
        if st is not None and st.state != "Z":
            out.setdefault(st.ppid, []).append(pid)
    return out


def descendants(pids: Iterable[int]) -> list[int]:
    """Every live descendant of ``pids`` (not the pids themselves), parents first."""
    kids = children_map()
    out: list[int] = []
    todo = list(pids)
    seen = set(todo)
    while todo:
        p = todo.pop(0)
        for c in kids.get(p, []):
            if c not in seen:
                seen.add(c)
                out.append(c)
                todo.append(c)
    return out


def group_members(pgids: set[int]) -> list[int]:
    """Live processes whose process group is one of ``pgids``."""
    out = []
    for pid in all_pids():
        st = proc_stat(pid)
        if st is not None and st.state != "Z" and st.pgrp in pgids:
            out.append(pid)
    return out


def referencing(prefix: str, exes: Iterable[str]) -> list[int]:
    """Live processes running one of ``exes`` (basenames, ``*`` globs allowed) whose command
    line names a path under ``prefix`` — e.g. a containerd shim started with ``-address
    <lab dir>/containerd.sock``. Both must hold: a shell that merely ``tail``s a lab log
    is nobody's helper."""
    pref = prefix.rstrip("/")
    pats = list(exes)
    if not pref or not pats:
        return []
    me = os.getpid()
    out = []
    for pid in all_pids():
        if pid == me or not alive(pid):
            continue
        args = cmdline(pid)
        if not args:
            continue
        names = {os.path.basename(args[0]), exe_name(pid)} - {""}
        if not any(fnmatch.fnmatchcase(n, p) for n in names for p in pats):
            continue
        if any(a == pref or pref + "/" in a for a in args):
            out.append(pid)
    return out


def socket_inodes(pid: int) -> set[int]:
    out: set[int] = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:["):
                    out.add(int(link[8:-1]))
    return out


def listening_ports() -> dict[int, set[int]]:
    """Listening TCP ports on this host (from /proc/net/tcp{,6}) -> socket inodes."""
    out: dict[int, set[int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == "0A":
                port = int(cols[1].rsplit(":", 1)[1], 16)
                out.setdefault(port, set()).add(int(cols[9]))
    return out


def port_owned_by(port: int, pids: Iterable[int]) -> bool:
    """Whether listening ``port`` is held by one of ``pids`` (a port a lab chose may since
    have been taken by an unrelated process)."""
    inodes = listening_ports().get(port, set())
    return any(socket_inodes(p) & inodes for p in pids) if inodes else False


def clients_of_port(port: int) -> list[int]:
    """Processes holding an established TCP connection to 127.0.0.1:``port`` (e.g. SSH
    clients and ControlMaster processes of a lab VM)."""
    inodes: set[int] = set()
    want = f"0100007F:{port:04X}"
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return []
    for line in lines:
        cols = line.split()
        if len(cols) > 9 and cols[2] == want and cols[3] == "01":
            inodes.add(int(cols[9]))
    if not inodes:
        return []
    return [p for p in all_pids() if socket_inodes(p) & inodes]


def unix_listeners(pids: Iterable[int]) -> list[str]:
    """Filesystem paths of the unix sockets ``pids`` listen on (abstract ones excluded)."""
    inodes: set[int] = set()
    for p in pids:
        inodes |= socket_inodes(p)
    if not inodes:
        return []
    out = []
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return []
    for line in lines:
        cols = line.split()
        # Num RefCount Protocol Flags Type St Inode Path; Flags 00010000 = listening
        if len(cols) >= 8 and int(cols[6]) in inodes and cols[7].startswith("/") \
                and int(cols[3], 16) & 0x10000:
            out.append(cols[7])
    return sorted(set(out))


def remove_socket(path: str) -> bool:
    """Remove ``path`` if it is (still) a unix socket; True if removed."""
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
            return True
    except OSError:
        pass
    return False


def reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def wait_gone(pid: int, start: int | None, timeout_s: float) -> bool:
    """Wait (bounded) until ``pid`` (started at ``start``) has exited; reap it if it is
    our child. True when gone."""

    def still() -> bool:
        reap(pid)
        return is_same(pid, start)

    try:
        Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(0.05),
                 retry=retry_if_result(bool))(still)
    except RetryError:
        return False
    return True


def stop(pid: int, start: int | None, group: bool = False, grace_s: float = 10.0,
         sig: int = signal.SIGTERM) -> bool:
    """``sig`` (default SIGTERM) to ``pid`` — or its process group — then SIGKILL after
    ``grace_s``; only while it is still the process that started at ``start``. True when
    it is gone."""
    for s in (sig, signal.SIGKILL):
        if not is_same(pid, start):
            return True
        st = proc_stat(pid)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if group and st is not None and st.pgrp == pid:
                os.killpg(pid, s)
            else:
                os.kill(pid, s)
        if wait_gone(pid, start, grace_s if s != signal.SIGKILL else 5.0):
            return True
    return not is_same(pid, start)


def mounts_under(prefix: str) -> list[str]:
    """Mount points at or under ``prefix`` in this mount namespace, deepest first."""
    try:
        text = Path("/proc/self/mountinfo").read_text()
    except OSError:
        return []
    return mounts_in(text, prefix)


def mounts_in(mountinfo: str, prefix: str) -> list[str]:
    """Mount points at or under ``prefix`` in mountinfo text, deepest first. Pure (no I/O):
    the node lab's build checks its trees with it, and a test feeds it a made-up table."""
    pref = prefix.rstrip("/")
    if not pref:
        return []
    out = []
    for line in mountinfo.splitlines():
        cols = line.split()
        if len(cols) < 5:
            continue
        mp = _unescape(cols[4])
        if mp == pref or mp.startswith(pref + "/"):
            out.append(mp)
    return sorted(set(out), key=lambda m: (-m.count("/"), m))


def _unescape(s: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    out, i = [], 0
    while i < len(s):
        code = s[i + 1:i + 4]
        if s[i] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(s[i])
            i += 1
    return "".join(out)
