"""The batched collector: one script, one round trip, exact contents, total parser."""

from __future__ import annotations

import os
import string
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import HostQuery, HostSnapshot, build_script, new_boundary, parse_output
from kgc.core.target import NodeTarget
from kgc.evidence.pci import PCI_QUERY, parse_pci
from systree import SysTree

Q = HostQuery(
    files=("/data/*.txt",),
    links=("/data/*.lnk",),
    dirs=("/data", "/data/sub"),
    stats=("/data/*.txt",),
    commands=(("echo", "printf 'a\\nb'"), ("fails", "echo oops; exit 3")),
)

text_chars = st.characters(
    codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="\r"
) | st.sampled_from("\n\t")
names = st.text(string.ascii_letters + string.digits + "_-.", min_size=1, max_size=12).filter(
    lambda n: not n.startswith(".")  # `*` does not match dotfiles, as in any shell
)


def collect(root: Path, q: HostQuery = Q) -> tuple[HostSnapshot, NodeTarget]:
    t = NodeTarget("local://", root=str(root))
    return t.collect(q), t


def test_files_links_dirs_stats_and_commands_come_back_exactly(tmp_path: Path) -> None:
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    (d / "a.txt").write_text("one\ntwo\n")
    (d / "b.txt").write_text("no newline")
    (d / "empty.txt").write_text("")
    (d / "blank.txt").write_text("\n\n")
    os.symlink("../elsewhere/vfio-pci", d / "drv.lnk")
    os.symlink("missing-target", d / "dangling.txt")  # unreadable: the read fails
    snap, t = collect(tmp_path)
    assert snap.complete
    assert snap.files["/data/a.txt"] == "one\ntwo\n"
    assert snap.files["/data/b.txt"] == "no newline\n"  # lines come back newline-terminated
    assert snap.files["/data/empty.txt"] == ""
    assert snap.files["/data/blank.txt"] == "\n\n"
    assert "/data/dangling.txt" in snap.errors and "/data/dangling.txt" not in snap.files
    assert snap.links["/data/drv.lnk"] == "../elsewhere/vfio-pci"
    assert snap.link_name("/data/drv.lnk") == "vfio-pci"
    assert set(snap.dirs["/data"]) >= {"a.txt", "sub", "drv.lnk"}
    assert snap.dirs["/data/sub"] == ()
    assert snap.stats["/data/a.txt"].kind == "regular file"
    assert snap.stats["/data/a.txt"].size == 8
    assert snap.commands["echo"].output == "a\nb" and snap.commands["echo"].rc == 0
    assert snap.commands["fails"].rc == 3 and snap.commands["fails"].output == "oops\n"
    assert t.round_trips == 1


def test_collection_writes_nothing(tmp_path: Path) -> None:
    tree = SysTree(tmp_path / "n")
    tree.pci("0000:01:00.0", "10de", "2331", "030200", "vfio-pci", "3")
    before = {(p, p.lstat().st_mtime_ns) for p in tree.root.rglob("*")}
    collect(tree.root, PCI_QUERY)
    after = {(p, p.lstat().st_mtime_ns) for p in tree.root.rglob("*")}
    assert before == after


def test_round_trips_do_not_grow_with_device_count(tmp_path: Path) -> None:
    for n in (4, 64):
        tree = SysTree(tmp_path / f"n{n}")
        for i in range(n):
            tree.pci(f"0000:{i + 1:02x}:00.0", "10de", "2331", "030200", "vfio-pci", str(i + 10))
        snap, t = collect(tree.root, PCI_QUERY)
        inv = parse_pci(snap)
        assert t.round_trips == 1
        assert len(inv.devices) == n
        assert all(d.driver == "vfio-pci" for d in inv.devices.values())
        assert len(inv.groups) == n


def test_snapshot_json_round_trip(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("1\n")
    snap, _ = collect(tmp_path)
    assert HostSnapshot.from_dict(snap.to_dict()) == snap


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(contents=st.dictionaries(names, st.text(text_chars, max_size=300), max_size=6))
def test_any_text_survives_collection(tmp_path_factory, contents: dict[str, str]) -> None:
    root = tmp_path_factory.mktemp("h")
    d = root / "data"
    d.mkdir()
    for name, text in contents.items():
        (d / f"{name}.txt").write_bytes(text.encode())
    snap, _ = collect(root)
    assert snap.complete
    got = {k.removeprefix("/data/").removesuffix(".txt"): v for k, v in snap.files.items()}
    # exact, up to the one normalisation: a non-empty file's last line ends with a newline
    assert got == {k: v if v == "" or v.endswith("\n") else v + "\n" for k, v in contents.items()}


@given(st.text(max_size=2000), st.booleans())
def test_parser_is_total(garbage: str, with_records: bool) -> None:
    b = "@@KGC-0123456789abcdef@@"
    if with_records:
        garbage = (
            garbage.replace("X", f"\n{b} F /x\n")
            .replace("Y", f"\n{b} R 0\n")
            .replace("Z", f"\n{b} C c\n")
            .replace("W", f"\n{b} S /s\n")
            .replace("L", f"\n{b} L /l\n")
        )
    snap = parse_output(garbage, b)
    assert isinstance(snap, HostSnapshot)
    HostSnapshot.from_dict(snap.to_dict())


def test_truncated_output_is_incomplete() -> None:
    b = new_boundary()
    out = f"{b} V 1\n{b} F /proc/cmdline\nro quiet"
    snap = parse_output(out, b)
    assert not snap.complete
    assert "/proc/cmdline" in snap.errors


def test_script_size_is_independent_of_the_node() -> None:
    s = build_script(PCI_QUERY, new_boundary())
    assert s.count("\n") < 40
    assert "rm " not in s


def test_process_count_does_not_grow_with_devices(tmp_path: Path) -> None:
    """Reading 64 devices starts no more processes than reading 4: files are read by one awk,
    link targets by one ls, directories listed with shell builtins."""
    import shutil
    import subprocess

    strace = shutil.which("strace")
    assert strace, "strace is not installed: scripts/bootstrap.sh installs it"
    counts = {}
    for n in (4, 64):
        tree = SysTree(tmp_path / f"n{n}")
        for i in range(n):
            tree.pci(f"0000:{i + 1:02x}:00.0", "10de", "2331", "030200", "vfio-pci", str(i + 10))
        script = build_script(PCI_QUERY, new_boundary())
        log = tmp_path / f"trace{n}"
        subprocess.run([strace, "-f", "-e", "trace=execve", "-o", str(log), "sh", "-c", script],
                       env={"KGC_ROOT": str(tree.root), "PATH": "/usr/bin:/bin"},
                       capture_output=True, check=True)
        counts[n] = sum(1 for line in log.read_text().splitlines() if "execve(" in line)
    assert counts[64] == counts[4] <= 4, counts
