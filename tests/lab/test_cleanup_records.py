"""Cleanup from records, with ordinary processes standing in for lab components (runs
everywhere, no lab needed): a run that is SIGKILLed leaves its processes, helpers, sockets
and directories; `kgc lab cleanup` stops and removes exactly those — never a process whose
pid merely matches a record — and forgets the record."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

from kgc.kube import wait_for
from kgc_lab import procs
from kgc_lab.cleanup import cleanup
from kgc_lab.ledger import LabRecord, records
from lab.conftest import lab_env

# A "lab run": records itself, starts a component in its own session (which forks a
# helper that names the lab dir and listens on a unix socket there), then hangs.
RUN = textwrap.dedent("""
    import json, os, subprocess, sys, time
    from pathlib import Path
    from kgc_lab.ledger import LabRecord
    lab_dir = Path(sys.argv[1])
    lab_dir.mkdir()
    rec = LabRecord.create("selftest", name="fake")
    rec.add_owned(lab_dir, ["python3*"])
    rec.add_path(lab_dir)
    helper = ("import socket, sys, time; s = socket.socket(socket.AF_UNIX); "
              "s.bind(sys.argv[1] + '/helper.sock'); s.listen(); time.sleep(600)")
    comp = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', sys.argv[1], "
         "sys.argv[2]], start_new_session=True); time.sleep(600)", helper, str(lab_dir)],
        start_new_session=True)
    rec.add_process("component", comp.pid, exe=sys.executable, group=True)
    print(json.dumps({"record": str(rec.path), "component": comp.pid}), flush=True)
    time.sleep(600)
""")


def test_a_killed_run_is_cleaned_up_from_its_record(private_cache: Path, tmp_path: Path) -> None:
    lab_dir = tmp_path / "labdir"
    run = subprocess.Popen([sys.executable, "-c", RUN, str(lab_dir)], stdout=subprocess.PIPE,
                           text=True, env=lab_env(private_cache))
    assert run.stdout is not None
    info = json.loads(run.stdout.readline())
    sock = lab_dir / "helper.sock"
    wait_for("the helper's socket", sock.exists, 20, 0.05)
    helper = [p for p in procs.referencing(str(lab_dir), ["python3*"])
              if p not in (run.pid, info["component"])]
    assert len(helper) == 1
    starts = {p: procs.proc_start(p) for p in (info["component"], helper[0])}
    run.send_signal(signal.SIGKILL)
    run.wait(10)
    assert all(procs.is_same(p, s) for p, s in starts.items())  # the run left them behind

    dry = cleanup(dry_run=True)
    assert any("would stop component" in s for s in dry.stopped)
    assert all(procs.is_same(p, s) for p, s in starts.items())  # a dry run changes nothing

    rep = cleanup(grace_s=3)
    assert rep.clean, rep.lines()
    assert not any(procs.is_same(p, s) for p, s in starts.items())
    assert not sock.exists() and not lab_dir.exists()
    assert any("component" in s for s in rep.stopped), rep.lines()
    assert any("helper" in s for s in rep.stopped), rep.lines()
    assert records() == ([], [])
    assert not Path(info["record"]).exists()


def test_a_reused_pid_is_never_signalled(private_cache: Path) -> None:
    """A record naming a live pid with another start time (pid reuse) leaves it alone."""
    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        rec = LabRecord.create("selftest", name="stale")
        rec.add_process("etcd", bystander.pid, exe="sleep", group=True)
        rec.data["processes"][0]["start"] += 1  # as if the pid belonged to an older process
        rec.save()
        rep = cleanup(grace_s=1)
        assert procs.is_same(bystander.pid, procs.proc_start(bystander.pid), "sleep")
        assert bystander.poll() is None
        assert rep.clean and rec.id in rep.forgotten  # nothing of it is left: forgotten
    finally:
        bystander.kill()
        bystander.wait()


def test_a_shell_that_names_a_lab_path_is_not_a_helper(private_cache: Path,
                                                      tmp_path: Path) -> None:
    """Owned helpers are matched by executable AND path: `tail -f <lab log>` survives."""
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "log").write_text("x\n")
    tail = subprocess.Popen(["tail", "-f", str(tmp_path / "lab" / "log")])
    try:
        rec = LabRecord.create("selftest", name="owned")
        rec.add_owned(tmp_path / "lab", ["containerd-shim*"])
        cleanup(grace_s=1)
        assert tail.poll() is None
    finally:
        tail.kill()
        tail.wait()


def test_unreadable_records_are_reported_not_fatal(private_cache: Path) -> None:
    d = private_cache / "lab-runs"
    d.mkdir(parents=True, exist_ok=True)
    (d / "broken.json").write_text("{not json")
    (d / "other.json").write_text(json.dumps({"schema": "something else"}))
    rep = cleanup()
    assert rep.clean
    assert sum("unreadable record" in n for n in rep.notes) == 2


def test_cleanup_cli_reports_json(private_cache: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kgc_lab.cli", "cleanup", "--json"],
                         capture_output=True, text=True, env=lab_env(private_cache), timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["clean"] is True


def test_unix_listeners_and_socket_removal(tmp_path: Path) -> None:
    path = str(tmp_path / "s.sock")
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen()
    try:
        assert procs.unix_listeners([os.getpid()]) == [path]
    finally:
        s.close()
    assert procs.remove_socket(path) and not os.path.exists(path)
    (tmp_path / "f").write_text("")
    assert not procs.remove_socket(str(tmp_path / "f"))  # only sockets are removed


def test_mount_points_are_read_unescaped_and_deepest_first() -> None:
    assert procs._unescape(r"/tmp/a\040b\011c\134d") == "/tmp/a b\tc\\d"
    assert procs._unescape("/x\\04") == "/x\\04"  # a truncated escape stays as it is
    got = procs.mounts_under("/proc")
    assert got and got[-1] == "/proc" and all(m.startswith("/proc") for m in got)
    assert procs.mounts_under("") == [] and procs.mounts_under("/no/such/prefix") == []
