"""The in-guest collector is a plain POSIX sh script, run here for real.

- in ``sh`` (dash) and ``busybox sh`` on this machine (a Firecracker microVM without a GPU):
  the CPU-only shape;
- against a tree rebuilt from the REAL H200 capture (``KGC_ROOT``), with stand-ins for
  nvidia-smi/python3 that print what the real ones printed there, and with a PATH that holds
  nothing but those stand-ins: the output parses to the very evidence of the recorded
  capture, so the script needs no awk, cat, ls or coreutils;
- the old capture format (``fixtures/guest/*.raw.txt``) still parses.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpu.synth import GUEST_FIX, h200_guest, snapshot
from kgc.core.hostfs import HostSnapshot
from kgc.evidence.guest import GuestEvidence, parse_guest, parse_guest_output
from kgc.guest import COLLECTOR, build_script, main, script

# busybox is a lab tool (the guests' shell): its runs are in the lab tier, never skipped away
# from `make check` (which hides it) and so from CI
SHELLS = [["sh"], ["busybox", "sh"]]

SHELL_PARAMS = [pytest.param(["sh"], id="sh"),
                pytest.param(["busybox", "sh"], id="busybox sh", marks=pytest.mark.lab)]


def run_script(shell: list[str], env: dict[str, str] | None = None,
               text: str | None = None) -> tuple[str, float]:
    import time

    text = text or script()[0]
    t0 = time.monotonic()
    proc = subprocess.run([*shell, "-c", text], capture_output=True, text=True, timeout=120,
                          env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, time.monotonic() - t0


def comparable(g: GuestEvidence) -> dict:
    """The evidence minus what legitimately differs between two runs of the same guest
    (which collector version, this machine's dmesg, the problems list's wording; the CC
    records, which kgc-guest/3 captures predate: tests/gpu/test_cc.py judges them)."""
    d = g.to_dict()
    for k in ("collector", "dmesg", "problems"):
        d.pop(k)
    d.pop("cc", None)
    return d


@pytest.mark.parametrize("shell", SHELL_PARAMS)
def test_script_runs_here_and_gives_the_cpu_only_shape(shell: list[str]) -> None:
    out, wall = run_script(shell)
    g = parse_guest_output(out)
    assert g.complete and g.collector == COLLECTOR
    assert g.kernel == os.uname().release
    assert g.vcpus == os.cpu_count()
    assert g.pci_listed and g.pci, "this microVM has virtio PCI functions"
    assert g.nvidia_gpus == () and g.smi is None
    assert g.smi_rc == 127 and "not found" in (g.smi_error or "")
    assert g.iommu_groups == ()  # a guest has no IOMMU groups of its own
    assert g.cuda_check is not None and (g.cuda_check.get("python3") is False
                                         or g.cuda_check.get("torch") is None)
    assert wall < 30


@pytest.mark.lab
def test_dash_and_busybox_print_the_same_records() -> None:
    assert shutil.which("busybox"), "busybox (a lab tool) is not installed: make bootstrap"
    text, _ = script()
    a, _ = run_script(SHELLS[0], text=text)
    b, _ = run_script(SHELLS[1], text=text)
    # dmesg can grow between the two runs; everything else is the same machine state
    assert comparable(parse_guest_output(a)) == comparable(parse_guest_output(b))


# --------------------------------------------------------------------------- the H200 tree
def _write_lines_stub(path: Path, data: Path) -> None:
    """A stand-in command that prints a recorded file with sh builtins only."""
    path.write_text(
        "#!/bin/sh\n"
        f"while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done < '{data}'\n"
    )
    path.chmod(0o755)


def h200_tree(tmp: Path, snap: HostSnapshot) -> tuple[Path, Path]:
    """(root, bin): /sys, /proc, /dev rebuilt from the capture; bin holds nvidia-smi and
    python3 stand-ins that print what the real ones printed on the H200 machine."""
    root, bin_, data = tmp / "root", tmp / "bin", tmp / "data"
    for d in (root, bin_, data):
        d.mkdir()
    for path, content in snap.files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    for path, entries in snap.dirs.items():
        (root / path.lstrip("/")).mkdir(parents=True, exist_ok=True)
        for e in entries:
            (root / path.lstrip("/") / e).mkdir(exist_ok=True)
    for path, target in snap.links.items():
        link = root / path.lstrip("/")
        (link.parent / target).resolve().mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    (root / "dev").mkdir(exist_ok=True)
    for name in snap.commands["dev_nvidia"].output.split():
        (root / "dev" / name).write_text("")
    for name in ("nvidia_smi_xml", "nvidia_smi_csv", "nvidia_smi", "cuda_check"):
        (data / name).write_text(snap.commands[name].output)
    smi = bin_ / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f"case \"$*\" in *-x*) f='{data}/nvidia_smi_xml';; *query*) f='{data}/nvidia_smi_csv';;"
        f" *) f='{data}/nvidia_smi';; esac\n"
        "while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done < \"$f\"\n"
    )
    smi.chmod(0o755)
    _write_lines_stub(bin_ / "python3", data / "cuda_check")
    return root, bin_


@pytest.mark.parametrize("shell", SHELL_PARAMS)
def test_script_on_the_real_h200_tree_reproduces_the_capture(tmp_path: Path,
                                                             shell: list[str]) -> None:
    snap = snapshot("h200-firecracker.bundle.json")
    root, bin_ = h200_tree(tmp_path, snap)
    recorded = parse_guest(snap)
    sh = shutil.which(shell[0])
    assert sh
    # PATH holds only the two stand-ins: no awk, cat, ls, nproc, uname, timeout
    out, _ = run_script([sh, *shell[1:]], env={"KGC_ROOT": str(root), "PATH": str(bin_)})
    got = parse_guest_output(out)
    assert got.complete and got.collector == COLLECTOR
    a, b = comparable(got), comparable(recorded)
    if shell[0] == "busybox":
        # busybox sh runs its own applets (nproc: this machine's 2 CPUs) whatever PATH says
        a.pop("vcpus"), b.pop("vcpus")
    else:
        assert got.dmesg is None  # no dmesg on that PATH: "not collected", not "empty"
    assert a == b, shell
    # with the machine's own tools on PATH as well, the result is the same
    # (nproc would say 2 here: the stand-in tree's cpuinfo says 16; drop vcpus)
    out2, _ = run_script([sh, *shell[1:]], env={"KGC_ROOT": str(root),
                                                 "PATH": f"{bin_}:/usr/bin:/bin"})
    a, b = comparable(parse_guest_output(out2)), comparable(recorded)
    a.pop("vcpus"), b.pop("vcpus")
    assert a == b


def test_a_file_without_a_final_newline_and_an_unreadable_file(tmp_path: Path) -> None:
    root = tmp_path / "r"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "proc/sys/kernel/osrelease").write_text("6.1.0-kata")  # no newline
    (root / "proc/meminfo").write_text("MemTotal:       2015232 kB\nMemFree: 1 kB\n")
    (root / "proc/cmdline").write_text("a" * 300000 + "\n")  # over the per-file cap
    out, _ = run_script([shutil.which("sh") or "/bin/sh"],
                        env={"KGC_ROOT": str(root), "PATH": str(tmp_path)})
    g = parse_guest_output(out)
    assert g.kernel == "6.1.0-kata" and g.memtotal_kib == 2015232
    assert g.cmdline is not None and len(g.cmdline) < 300000
    assert not g.pci_listed and g.iommu_groups is None and g.vcpus is None


def test_old_capture_format_still_parses() -> None:
    raw = (GUEST_FIX / "h200-firecracker.raw.txt").read_text()
    assert parse_guest_output(raw) == h200_guest()
    # a pod log may carry lines before the collector's own output
    assert parse_guest_output("starting...\nsome noise\n" + raw) == h200_guest()


def test_truncated_output_is_incomplete_and_says_so() -> None:
    raw = (GUEST_FIX / "h200-firecracker.raw.txt").read_text()
    g = parse_guest_output(raw[: len(raw) // 2])
    assert not g.complete
    assert any("END record" in p for p in g.problems)


def test_script_cli_prints_a_posix_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--script"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("#!/bin/sh\n") and "@@KGC-" in text
    for tool in ("awk", "cat ", "ls ", "sed "):
        assert tool not in text.replace("# ", ""), f"the script must not need {tool.strip()}"
    # python3 is only called after `command -v python3`
    assert "command -v python3" in text
    r = subprocess.run([sys.executable, "-m", "kgc.guest", "--script"], capture_output=True,
                       text=True, check=True)
    assert r.stdout.startswith("#!/bin/sh\n")


def test_boundary_is_random_and_validated() -> None:
    a, b = script(), script()
    assert a[1] != b[1]
    with pytest.raises(ValueError):
        build_script("not-a-boundary")
    assert build_script("@@KGC-00@@").count("@@KGC-00@@") == 1


def test_out_mode_writes_a_bundle_that_reparses(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path), "--label", "self-test"]) == 0
    doc = json.loads((tmp_path / "guest-bundle.json").read_text())
    snap = HostSnapshot.from_dict(doc["host"])
    assert GuestEvidence.from_dict(doc["guest"]) == parse_guest(snap)
    raw = (tmp_path / "guest-raw.txt").read_text()
    assert dataclasses.replace(parse_guest_output(raw), problems=()) == \
        dataclasses.replace(parse_guest(snap), problems=())


def test_kgc_guest_script_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    from kgc.cli import main as kgc_main

    assert kgc_main(["guest", "--script"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("#!/bin/sh\n") and COLLECTOR in text


def test_one_collector_serves_the_sizing_layer_too() -> None:
    """kgc.layers.sizing reads guests with its own smaller query; the GPU pod's collector
    carries everything that query reads, so one pod output feeds both layers."""
    sizing = pytest.importorskip("kgc.layers.sizing.evidence")
    from kgc.core.hostfs import build_script as host_script
    from kgc.core.hostfs import new_boundary, parse_output

    text, b = script()
    mine = subprocess.run(["sh", "-c", text], capture_output=True, text=True,
                          check=True).stdout
    b2 = new_boundary()
    theirs = subprocess.run(["sh", "-c", host_script(sizing.SIZING_GUEST_QUERY, b2)],
                            capture_output=True, text=True, check=True).stdout
    assert sizing.GuestSize.from_snapshot(parse_output(mine, b)) == \
        sizing.GuestSize.from_snapshot(parse_output(theirs, b2))
