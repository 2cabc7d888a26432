"""The main job (`kgc lab certify`) merges its stages into one verdict.json and one HTML
report. Here with the containerd stage (real containerd 2.x); the node and cluster stages
are exercised by their own lab tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = [pytest.mark.lab]


def test_lab_certify_containerd_stage_writes_one_merged_report(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kgc.cli",
            "lab",
            "certify",
            "--stage",
            "containerd",
            "--report-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    doc = json.loads((tmp_path / "verdict.json").read_text())
    assert doc["overall"] == "pass"
    assert {r["stage"] for r in doc["results"]} == {"containerd"}
    assert {r["layer"] for r in doc["results"]} == {"runtime", "nri"}
    assert len(list((tmp_path / "allure-results").glob("*-result.json"))) == len(doc["results"])
    assert (tmp_path / "html" / "index.html").stat().st_size > 100_000
