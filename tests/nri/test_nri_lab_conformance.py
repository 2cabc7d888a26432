"""End to end: the thin conformance suites (`pytest conformance/runtime conformance/nri`)
certify a real containerd 2.x lab node wired for Kata + NRI, through the kgc pytest plugin."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kgc.lab.containerd import SCENARIOS, lab_node, write_profile
from kgc.lab.containerd_instance import LabUnavailable

pytestmark = [pytest.mark.lab, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]


def test_conformance_suites_pass_on_a_good_lab_node(tmp_path: Path):
    try:
        cm = lab_node(SCENARIOS["kata-handler-ok"])
        inst, profile = cm.__enter__()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc} (bootstrap installs it; it needs root)")
    try:
        prof = write_profile(profile, tmp_path / "lab.yaml")
        res = subprocess.run(
            [
                sys.executable,
                "-m",
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
                str(tmp_path / "rep"),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        cm.__exit__(None, None, None)
    doc = json.loads((tmp_path / "rep" / "verdict.json").read_text())
    statuses = {r["check"]: r["status"] for r in doc["results"]}
    assert len(statuses) == 14, statuses
    assert all(s == "pass" for s in statuses.values()), (statuses, res.stdout[-3000:])
    assert res.returncode == 0, res.stdout[-3000:]


def test_snapshot_with_nri_replays_to_the_live_verdicts(tmp_path: Path):
    """`kgc snapshot --with-nri` records the live probe's observations beside the host
    evidence; `--snapshot` judges the bundle offline to the same verdicts, containerd gone."""
    try:
        cm = lab_node(SCENARIOS["kata-handler-ok"])
        inst, profile = cm.__enter__()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc} (bootstrap installs it; it needs root)")
    prof = write_profile(profile, tmp_path / "lab.yaml")
    bundle = tmp_path / "node.json"
    try:
        snap = subprocess.run(
            [
                sys.executable,
                "-m",
                "kgc.cli",
                "snapshot",
                "--profile",
                str(prof),
                "--with-nri",
                "-o",
                str(bundle),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert snap.returncode == 0, snap.stderr
    finally:
        cm.__exit__(None, None, None)
    doc = json.loads(bundle.read_text())
    assert doc["nri"]["mode"] != "unavailable", doc["nri"]
    res = subprocess.run(
        [
            sys.executable,
            "-m",
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
            "--snapshot",
            str(bundle),
            "--report-dir",
            str(tmp_path / "rep"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    statuses = {
        r["check"]: r["status"]
        for r in json.loads((tmp_path / "rep" / "verdict.json").read_text())["results"]
    }
    assert len(statuses) == 14, statuses
    assert all(s == "pass" for s in statuses.values()), (statuses, res.stdout[-3000:])
