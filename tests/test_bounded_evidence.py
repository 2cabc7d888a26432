"""Bounded, complete evidence from the host collector (issue 21, build item 5).

The collector never truncates silently: a file over the per-file limit (or past the node's
byte budget) comes back as ``truncated`` with its size, a FIFO or device as ``unread``, a
name with a newline as ``unread`` under its escaped name; reading any of them raises
FileNotRead (the engine's ``error``). Reading is linear and bounded: a sparse file of
hundreds of MiB without a newline is never opened (it used to stall awk's getline for
minutes), and the whole collection has a time bound. Every test here that could hang
before the fix runs the collector in a subprocess with a timeout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgc.core import hostfs
from kgc.core.hostfs import (
    MAX_FILE_BYTES,
    FileNotRead,
    HostQuery,
    HostSnapshot,
    build_script,
    new_boundary,
    parse_output,
)
from kgc.core.target import NodeTarget, TargetError

Q = HostQuery(files=("/etc/modprobe.d/*.conf", "/etc/other"), dirs=("/etc/modprobe.d",))


def _collect(root: Path, q: HostQuery = Q, limit_s: float = 60) -> tuple[HostSnapshot, float]:
    """The real script under sh, bounded: a stall is a failed test, never a hung CI."""
    b = new_boundary()
    t0 = time.monotonic()
    try:
        res = subprocess.run(["sh", "-c", build_script(q, b)], capture_output=True,
                             env={"KGC_ROOT": str(root), "PATH": "/usr/bin:/bin"},
                             timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the collector gave no answer in {limit_s} s")
    took = time.monotonic() - t0
    snap = parse_output(res.stdout.decode("utf-8", "surrogateescape"), b)
    assert snap.complete, res.stderr[-2000:]
    return snap, took


def _etc(tmp_path: Path) -> Path:
    d = tmp_path / "etc" / "modprobe.d"
    d.mkdir(parents=True)
    (d / "good.conf").write_text("options vfio-pci ids=10de:2335\n")
    return d


def test_a_file_over_the_limit_is_truncated_evidence_with_its_size(tmp_path: Path) -> None:
    d = _etc(tmp_path)
    big = "# comment\n" * (MAX_FILE_BYTES // 10 + 100) + "options vfio-pci ids=8086:10d3\n"
    (d / "big.conf").write_text(big)
    snap, _ = _collect(tmp_path)
    p = "/etc/modprobe.d/big.conf"
    assert snap.truncated == {p: len(big)}
    assert p not in snap.files and p in snap.glob("/etc/modprobe.d/*.conf")
    with pytest.raises(FileNotRead, match=f"{p}: {len(big)} bytes"):
        snap.read(p)
    with pytest.raises(FileNotRead):
        snap.text(p)
    assert snap.read("/etc/modprobe.d/good.conf") == "options vfio-pci ids=10de:2335\n"
    # a bundle keeps the mark
    again = HostSnapshot.from_dict(snap.to_dict())
    assert again == snap and again.truncated == {p: len(big)}


def test_exactly_at_the_limit_is_read_whole(tmp_path: Path) -> None:
    d = _etc(tmp_path)
    text = "a" * (MAX_FILE_BYTES - 1) + "\n"
    (d / "edge.conf").write_text(text)
    snap, _ = _collect(tmp_path)
    assert snap.files["/etc/modprobe.d/edge.conf"] == text and not snap.truncated


def test_a_file_longer_than_its_stat_size_is_cut_at_the_limit(tmp_path: Path) -> None:
    """stat's size is not the bound: a /proc file says 0 (a node's /proc/interrupts can hold
    more than the limit) and a file may grow after stat. Reading stops at the limit and the
    file is truncated evidence, never read whole or past the limit. Here a /proc file of a
    child process (its cmdline: stat size 0, 300 KiB without a newline) stands behind a
    link in the tree."""
    _etc(tmp_path)
    args = ["x" * 100_000, "y" * 100_000, "z" * 100_000]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *args])
    try:
        proc = Path(f"/proc/{child.pid}/cmdline")
        deadline = time.monotonic() + 30
        while len(proc.read_bytes()) <= MAX_FILE_BYTES:  # empty until the child has exec'd
            assert time.monotonic() < deadline and child.poll() is None, "no child cmdline"
            time.sleep(0.05)
        assert proc.stat().st_size == 0
        (tmp_path / "etc" / "other").symlink_to(proc)
        snap, _ = _collect(tmp_path, limit_s=30)
    finally:
        child.kill()
        child.wait()
    p = "/etc/other"
    assert p not in snap.files and snap.truncated[p] > MAX_FILE_BYTES, snap.truncated
    with pytest.raises(FileNotRead, match=f"{p}: "):
        snap.read(p)
    assert snap.read("/etc/modprobe.d/good.conf") == "options vfio-pci ids=10de:2335\n"


def test_a_sparse_256_mib_file_without_a_newline_is_not_read(tmp_path: Path) -> None:
    """The stall: awk's getline read the whole newline-free file as one line, in
    super-linear time (16 MiB 1.7 s, 64 MiB 85 s; 256 MiB: no answer in 300 s)."""
    d = _etc(tmp_path)
    with open(d / "huge.conf", "wb") as fh:
        fh.truncate(256 * 1024 * 1024)
    snap, took = _collect(tmp_path, limit_s=30)
    assert snap.truncated == {"/etc/modprobe.d/huge.conf": 256 * 1024 * 1024}
    assert took < 10, took
    assert "huge.conf" in snap.dirs["/etc/modprobe.d"]


def test_a_fifo_is_listed_unread_and_does_not_hang(tmp_path: Path) -> None:
    d = _etc(tmp_path)
    os.mkfifo(d / "pipe.conf")
    snap, _ = _collect(tmp_path, limit_s=30)
    p = "/etc/modprobe.d/pipe.conf"
    assert "FIFO" in snap.unread[p] and p not in snap.files
    with pytest.raises(FileNotRead, match="FIFO"):
        snap.read(p)


def test_a_newline_in_a_name_is_listed_under_its_escaped_name(tmp_path: Path) -> None:
    d = _etc(tmp_path)
    (d / "evil\n.conf").write_text("options vfio-pci ids=8086:10d3\n")
    (d / "x\nB R 0\ny.conf").write_text("forged\n")
    snap, _ = _collect(tmp_path)
    esc = "/etc/modprobe.d/evil\\n.conf"
    assert esc in snap.unread and "newline" in snap.unread[esc]
    assert esc in snap.glob("/etc/modprobe.d/*.conf")
    assert "/etc/modprobe.d/x\\nB R 0\\ny.conf" in snap.unread
    # nothing else came out of the names: no forged file, no half-name
    assert set(snap.files) == {"/etc/modprobe.d/good.conf"}
    assert set(snap.dirs["/etc/modprobe.d"]) == {"good.conf", "evil\\n.conf", "x\\nB R 0\\ny.conf"}
    with pytest.raises(FileNotRead, match="newline"):
        snap.read(esc)


def test_the_node_byte_budget_bounds_what_is_read(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostfs, "MAX_NODE_BYTES", 2500)
    d = tmp_path / "etc" / "modprobe.d"
    d.mkdir(parents=True)
    for i in range(5):
        (d / f"{i}.conf").write_text(f"# {i}\n" + "x" * 995 + "\n")  # 1000 bytes each
    snap, _ = _collect(tmp_path)
    assert sorted(snap.files) == [f"/etc/modprobe.d/{i}.conf" for i in range(2)]
    assert sorted(snap.truncated) == [f"/etc/modprobe.d/{i}.conf" for i in range(2, 5)]
    assert all(n == 1000 for n in snap.truncated.values())


def test_the_collection_has_a_time_bound(tmp_path: Path) -> None:
    t = NodeTarget("local://", root=str(tmp_path), collect_timeout_s=1)
    t0 = time.monotonic()
    with pytest.raises(TargetError, match="time bound of 1 s"):
        t.collect(HostQuery(commands=(("slow", "sleep 30"),)))
    assert time.monotonic() - t0 < 15


def test_v2_output_without_file_end_marker_still_parses() -> None:
    b = new_boundary()
    out = f"{b} V 2\n{b} F /x\na\n{b} R 0\n{b} END\n"
    snap = parse_output(out, b)
    assert snap.complete and snap.files == {"/x": "a\n"}


def test_v3_output_cut_inside_the_files_is_incomplete() -> None:
    b = new_boundary()
    out = f"{b} V 3\n{b} F /x\na\n{b} R 0\n{b} END\n"
    assert not parse_output(out, b).complete


# -- the in-guest collector: the same grammar, shell builtins only ------------------------------
def _guest(root: Path, limit_s: float = 60) -> str:
    from kgc.guest import script

    text, _b = script()
    try:
        res = subprocess.run(["sh", "-c", text], capture_output=True, text=True,
                             env={"KGC_ROOT": str(root), "PATH": "/usr/bin:/bin"},
                             timeout=limit_s, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the guest collector gave no answer in {limit_s} s")
    return res.stdout


def test_guest_file_over_the_limit_is_an_unusable_output_naming_it(tmp_path: Path) -> None:
    from kgc.evidence.guest import parse_guest_output
    from kgc.guest import MAX_FILE_BYTES as GUEST_MAX

    (tmp_path / "proc").mkdir()
    block = "processor\t: {i}\nmodel name\t: Synthetic CPU\n\n"
    text = "".join(block.format(i=i) for i in range(GUEST_MAX // len(block) + 10))
    (tmp_path / "proc" / "cpuinfo").write_text(text)
    (tmp_path / "proc" / "cmdline").write_text("console=hvc0\n")
    out = _guest(tmp_path)
    g = parse_guest_output(out)
    assert not g.complete
    assert any(p.startswith("/proc/cpuinfo: ") and "limit" in p for p in g.problems), g.problems


def test_guest_fifo_is_not_opened(tmp_path: Path) -> None:
    from kgc.core.hostfs import parse_output
    from kgc.evidence.guest import find_boundary

    (tmp_path / "etc").mkdir()
    os.mkfifo(tmp_path / "etc" / "os-release")
    out = _guest(tmp_path, limit_s=60)
    b = find_boundary(out)
    assert b is not None
    snap = parse_output(out, b)
    assert snap.complete and "/etc/os-release" in snap.unread
