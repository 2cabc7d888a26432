"""Process supervision for the labs: start a component (own session, log file, recorded in
the lab's ``LabRecord`` before anything else happens), wait for it to become ready while
failing fast if it (or a component it needs) exits, stop recorded processes newest first.
"""

from __future__ import annotations

import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client.rest import ApiException

from kgc.kube.client import KubeError
from kgc.kube.wait import WaitTimeout, wait_for
from kgc_lab import procs
from kgc_lab.common import LabError
from kgc_lab.ledger import LabRecord

# What a readiness probe may raise while a component is still starting.
NOT_READY_ERRORS: tuple[type[BaseException], ...] = (
    OSError, ssl.SSLError, urllib.error.URLError, ValueError, ApiException,
    urllib3.exceptions.HTTPError, KubeError,
)


@dataclass
class Proc:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    log: Path = Path("/dev/null")
    popen: subprocess.Popen[bytes] | None = None


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM me when the parent dies (Linux prctl)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Supervisor:
    """Starts components for one lab instance and records each in ``record``."""

    def __init__(self, record: LabRecord, cwd: Path | None = None,
                 die_with_parent: bool = False,
                 on_start: Callable[[Proc, int], None] | None = None,
                 say: Callable[[str], None] | None = None) -> None:
        self.record = record
        self.cwd = cwd
        # Test fixtures set this: the kernel then stops the lab's processes when the test
        # process dies without running its teardown. A CLI does not: its processes must
        # outlive the command that started them (`kgc lab cluster up`).
        self.die_with_parent = die_with_parent
        self.on_start = on_start
        self.say = say or (lambda _m: None)

    def start(self, proc: Proc, env_base: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        import os

        proc.log.parent.mkdir(parents=True, exist_ok=True)
        with open(proc.log, "ab") as log:
            p = subprocess.Popen(  # noqa: S603 - argv built from the lab's own paths
                proc.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**(env_base if env_base is not None else os.environ), **proc.env},
                start_new_session=True,
                cwd=self.cwd,
                preexec_fn=_die_with_parent if self.die_with_parent else None,  # noqa: PLW1509
            )
        proc.popen = p
        self.record.add_process(proc.name, p.pid, exe=proc.argv[0], group=True,
                                log=str(proc.log))
        if self.on_start is not None:
            self.on_start(proc, p.pid)
        self.say(f"started {proc.name} (pid {p.pid})")
        return p

    def wait(self, what: str, probe: Callable[[], Any], needs: Iterable[Proc],
             timeout_s: float, interval_s: float = 0.25) -> Any:
        """Wait until ``probe()`` is truthy; LabError at once when one of ``needs`` exits,
        LabError naming ``what`` and the logs on timeout."""
        needed = list(needs)

        def attempt() -> Any:
            for pr in needed:
                if pr.popen is not None and pr.popen.poll() is not None:
                    raise LabError(
                        f"{pr.name} exited with code {pr.popen.returncode} while waiting for "
                        f"{what}; log {pr.log}:\n{log_tail(pr.log)}"
                    )
            return probe()

        try:
            return wait_for(what, attempt, timeout_s, interval_s, retry_on=NOT_READY_ERRORS)
        except WaitTimeout as exc:
            logs = "; ".join(f"{p.name}: {p.log}" for p in needed)
            raise LabError(f"{exc}; logs: {logs or '(none)'}") from None


def http_ok(url: str, expect: bytes, ca: Path | None = None,
            cert: tuple[Path, Path] | None = None, verify: bool = True) -> bool:
    """GET ``url`` answers 200 with ``expect`` in the body."""
    ctx: ssl.SSLContext | None = None
    if url.startswith("https"):
        if ca is not None:
            ctx = ssl.create_default_context(cafile=str(ca))
        elif not verify:
            ctx = ssl._create_unverified_context()  # noqa: S323 - loopback health endpoint
        else:
            ctx = ssl.create_default_context()
        if cert:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    with urllib.request.urlopen(url, context=ctx, timeout=3) as r:  # noqa: S310 - loopback
        return bool(r.status == 200 and expect in r.read())


def stop_processes(entries: list[dict[str, Any]], grace_s: float = 10.0
                   ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stop recorded processes one at a time, newest first (an apiserver shuts down cleanly
    only while etcd is still there), then anything left in their process groups. Returns
    (stopped, left)."""
    stopped: list[dict[str, Any]] = []
    left: list[dict[str, Any]] = []
    # process groups only of leaders that are still the processes the lab started: a dead
    # leader's pid may since lead an unrelated group
    groups = {int(p["pid"]) for p in entries if p.get("group")
              and procs.is_same(int(p["pid"]), p.get("start"), p.get("exe"))}
    for p in reversed(entries):
        pid, start = int(p["pid"]), p.get("start")
        if not procs.is_same(pid, start, p.get("exe")):
            procs.reap(pid)
            continue
        gone = procs.stop(pid, start, group=bool(p.get("group")), grace_s=grace_s)
        (stopped if gone else left).append({"name": p.get("name", "?"), "pid": pid})
    # Anything a component spawned stays in its process group (each was started in a new
    # session): kill and report stragglers there too.
    for pid in procs.group_members(groups):
        start = procs.proc_start(pid)
        if not procs.stop(pid, start, sig=signal.SIGKILL):
            left.append({"name": "group member", "pid": pid})
    return stopped, left
