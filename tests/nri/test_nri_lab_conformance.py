"""End to end: the thin conformance suites (`pytest conformance/runtime conformance/nri`)
certify a real containerd 2.x lab node wired for Kata + NRI, through the kgc pytest plugin —
live, and replayed offline from a `kgc snapshot --nri-probe` bundle."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kgc_lab.containerd import SCENARIOS, lab_node, write_profile
from kgc_lab.containerd_instance import LabUnavailable

pytestmark = [pytest.mark.lab, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def good_lab_node(tmp_path: Path) -> Iterator[Path]:
    """A running containerd 2.x wired for Kata + NRI; yields the profile that describes it."""
    try:
        cm = lab_node(SCENARIOS["kata-handler-ok"])
        _inst, profile = cm.__enter__()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc} (bootstrap installs it; it needs root)")
    try:
        yield write_profile(profile, tmp_path / "lab.yaml")
    finally:
        cm.__exit__(None, None, None)


def run(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def suites(
    prof: Path, rep: Path, *extra: str
) -> tuple[dict[str, str], subprocess.CompletedProcess]:
    res = run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "host",
        "conformance/runtime",
        "conformance/nri",
        "--profile",
        str(prof),
        "--report-dir",
        str(rep),
        *extra,
    )
    doc = json.loads((rep / "verdict.json").read_text())
    return {r["check"]: r["status"] for r in doc["results"]}, res


def test_conformance_suites_pass_on_a_good_lab_node(tmp_path: Path):
    with good_lab_node(tmp_path) as prof:
        statuses, res = suites(prof, tmp_path / "rep", "--nri-probe")
    assert len(statuses) == 14, statuses
    assert all(s == "pass" for s in statuses.values()), (statuses, res.stdout[-3000:])
    assert res.returncode == 0, res.stdout[-3000:]


def test_snapshot_with_nri_replays_to_the_live_verdicts(tmp_path: Path):
    """`kgc snapshot --nri-probe` records the live probe's observations beside the host
    evidence; `--snapshot` judges the bundle offline to the same verdicts, containerd gone."""
    bundle = tmp_path / "node.json"
    with good_lab_node(tmp_path) as prof:
        snap = run("kgc.cli", "snapshot", "--profile", str(prof), "--nri-probe", "-o", str(bundle))
        assert snap.returncode == 0, snap.stderr
    doc = json.loads(bundle.read_text())
    assert doc["layers"]["nri"]["mode"] != "unavailable", doc["layers"]["nri"]
    statuses, res = suites(prof, tmp_path / "rep", "--snapshot", str(bundle))
    assert len(statuses) == 14, statuses
    assert all(s == "pass" for s in statuses.values()), (statuses, res.stdout[-3000:])
