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
    # the headline: NOT CERTIFIED, and why, in the report, on the console and in kgc gate
    html = (tmp_path / "html" / "index.html").read_text()
    assert "NOT CERTIFIED" in html and "the built-in lab proves the suite" in html
    assert "not gated: " not in html and "run has no `layers`" not in html
    lines = proc.stdout.rstrip().splitlines()
    assert lines[-1].startswith("overall: PASS"), lines[-3:]
    assert lines[-2].startswith("gate: NOT CERTIFIED — the built-in lab proves the suite"), \
        lines[-3:]
    gate = subprocess.run([sys.executable, "-m", "kgc.cli", "gate", str(tmp_path / "verdict.json")],
                          capture_output=True, text=True, check=False)
    assert gate.returncode == 2 and "merged from 1 runs (containerd)" in gate.stderr, gate.stderr


def test_the_merged_headline_is_never_certified_and_names_each_stage() -> None:
    """The main job's report headline (stages_headline): its stages are judged under lab
    profiles of their own and partly on stand-ins, so NOT CERTIFIED whatever passed; a
    stage with a failing check is named FAIL."""
    from kgc_lab.certify import stages_headline

    doc = {"run": {"profile": "node: lab, cluster: lab", "stages": {"node": {}, "cluster": {}}},
           "results": [{"stage": "node", "status": "pass", "simulated": False},
                       {"stage": "cluster", "status": "pass", "simulated": True},
                       {"stage": "cluster", "status": "error", "simulated": True}]}
    head = stages_headline(doc)
    assert head["word"] == "NOT CERTIFIED"
    assert "2 result(s) rest on simulated evidence" in head["reason"]
    assert "(node PASS, cluster FAIL)" in head["reason"]
    assert head["profile"] == "node: lab, cluster: lab" and head["blocking"] == []
