"""The fleet image's entry point, ``kgc node-run``, run as the DaemonSet runs it: against a
node's root mounted read-only — here the node lab's real Debian root (the cached
debootstrap tree), with the lab's good vfio files and the containerd lab's real containerd
2.x binary and a config laid over it (overlayfs, mounted read-only in a private mount
namespace). No running kernel is under it, so the run is an offline tree: the layers files
decide are judged (runtime through the tree's own containerd, under chroot), the checks
that need a running kernel skip saying so; the Sonobuoy mode leaves its JUnit and the
``done`` file naming it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from kgc.fleet import protocol

pytestmark = [pytest.mark.lab]

CONTAINERD_TOML = """version = 3
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.kata]
  runtime_type = "io.containerd.kata.v2"
"""


def _base_root() -> Path:
    from kgc_lab.node.lab import base_root

    root = base_root()
    if not (root / ".kgc-base-done").exists():
        pytest.fail(f"the node lab's base tree is not built ({root}): make bootstrap")
    return root


def _containerd() -> Path:
    from kgc_lab.common import lab_cache

    b = lab_cache("containerd") / "sid" / "root" / "usr" / "bin" / "containerd"
    if not b.is_file():
        pytest.fail(f"the containerd lab's binary is not unpacked ({b}): make bootstrap")
    return b


@pytest.fixture(scope="module")
def upper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from kgc_lab.node.scenarios import GOOD_FILES

    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.fail("needs root and unshare (a private mount namespace for the overlay)")
    up = tmp_path_factory.mktemp("upper")
    for path, text in {**GOOD_FILES, "/etc/containerd/config.toml": CONTAINERD_TOML}.items():
        (up / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (up / path.lstrip("/")).write_text(text)
    (up / "usr/bin").mkdir(parents=True)
    shutil.copy2(_containerd(), up / "usr/bin/containerd")
    return up


def node_run(upper: Path, tmp: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    host, work, rep = tmp / "host", tmp / "work", tmp / "report"
    for d in (host, work):
        d.mkdir()
    kgc = [sys.executable, "-m", "kgc.cli", "node-run", "--host-root", str(host),
           "--report-dir", str(rep), "--profile", "lab", *args]
    script = (f"mount -t overlay overlay -o lowerdir={_base_root()},upperdir={upper},"
              f"workdir={work} {host} && mount -o remount,ro,bind {host} && "
              + " ".join(f"'{a}'" for a in kgc))
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "KGC_NODE_NAME": "gpu-node-1"})
    return p, rep


@pytest.fixture(scope="module")
def sonobuoy_run(upper: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("noderun")
    res = tmp / "sonobuoy"
    p, rep = node_run(upper, tmp, "--mode", "sonobuoy", "--results-dir", str(res), "--no-idle",
                      "--", "-q")
    return {"proc": p, "log": protocol.parse_node_log(p.stdout), "res": res, "rep": rep}


def test_the_entry_point_judges_a_read_only_node_root(sonobuoy_run: dict[str, Any]) -> None:
    p, run = sonobuoy_run["proc"], sonobuoy_run["log"]
    assert run.done and run.verdict is not None, p.stdout[-3000:] + p.stderr[-2000:]
    assert (run.node, run.mode) == ("gpu-node-1", "offline")
    assert run.mounts and run.writable_host_mounts(next(iter(run.mounts))) == []
    assert run.exit_code == (0 if run.verdict["overall"] == "pass" else 1)
    v = {r["check"]: r for r in run.verdict["results"]}
    assert {r["target"] for r in v.values()} == {"gpu-node-1"}
    assert {r["layer"] for r in v.values()} == {"persistence", "runtime"}
    assert run.verdict["run"]["layers"] == ["persistence", "runtime"]
    # judged from the tree's files and its own containerd 2.x, under chroot
    assert v["runtime.containerd-version"]["status"] == "pass", v["runtime.containerd-version"]
    assert "2." in v["runtime.containerd-version"]["reason"]
    assert v["runtime.kata-handler"]["status"] == "pass", v["runtime.kata-handler"]
    assert v["runtime.nri-enabled"]["status"] == "pass", v["runtime.nri-enabled"]
    assert v["runtime.kata-shim"]["status"] == "fail"  # the tree has no Kata shim: true
    # no running kernel in a tree: said, not guessed
    assert v["persistence.cmdline"]["status"] == "skip"
    assert "no running kernel" in v["persistence.cmdline"]["reason"]
    assert run.verdict["overall"] == "fail"


def test_the_sonobuoy_mode_leaves_junit_and_the_done_file(sonobuoy_run: dict[str, Any]) -> None:
    res = sonobuoy_run["res"]
    done = (res / "done").read_text()
    assert done == str(res / "kgc-gpu-node-1.xml")  # the path, no newline
    suite = ET.parse(done).getroot()
    cases = suite.findall(".//testcase")
    assert len(cases) == len(sonobuoy_run["log"].verdict["results"])
    assert suite.findall(".//failure")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["--host-root", str(tmp_path / "none")],
                 ["--host-root", "/", "--node", "Not_A_Node"],
                 ["--host-root", "/", "--node", "n1", "--profile", "no-such-profile"]):
        p = subprocess.run([sys.executable, "-m", "kgc.cli", "node-run", "--mode", "job",
                            "--report-dir", str(tmp_path / "rep"), *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert protocol.parse_node_log(p.stdout).errors  # the collector sees why
        assert not (tmp_path / "rep").exists()


def test_a_run_without_verdict_leaves_an_error_junit(tmp_path: Path) -> None:
    from kgc.fleet import noderun

    out = noderun.sonobuoy_done(tmp_path, "n1", noderun.junit_error("n1", "pytest crashed"))
    root = ET.parse(out).getroot()
    assert root.find(".//error").get("message") == "pytest crashed"
    assert json.dumps((tmp_path / "done").read_text()) == json.dumps(str(out))
