"""The KEDA lab scenarios give their documented verdicts (``kgc lab run --scenario NAME``):
each brings its own cluster lab up, runs the live layer, takes the lab down."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kgc_lab import cluster as labc
from kgc_lab.cluster.scenarios_keda import SCENARIOS, run_scenario
from kgc_lab.scenarios import scenarios

pytestmark = [pytest.mark.lab, pytest.mark.cluster, pytest.mark.slow]


def test_the_keda_scenarios_are_registered_with_the_lab() -> None:
    known = scenarios()
    for name in ("keda-good", "slow-boot", "keda-missing", "keda-unschedulable"):
        assert known[name].lab == "cluster", name


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_gives_its_documented_verdicts(name: str, tmp_path: Path) -> None:
    if labc.binaries().missing(keda=True):
        pytest.fail("cluster lab binaries not built — run scripts/bootstrap.d/30-cluster.sh")
    res = run_scenario(SCENARIOS[name], tmp_path / "reports", run_dir=tmp_path / "lab")
    assert res.mismatches == {}, json.dumps(res.mismatches, indent=1)
    doc = json.loads(res.verdict_json.read_text())
    assert doc["run"]["scenario"] == name and doc["run"]["matches_documented"]
    assert doc["run"]["layers"] == ["keda"]
    assert all(r["simulated"] for r in doc["results"])
    assert labc.status(tmp_path / "lab")["up"] is False  # the scenario's lab is down
    if name == "keda-missing":
        assert res.artefacts == []  # nothing was measured
        return
    names = {p.name for p in res.artefacts}
    assert {"keda-timestamps.csv", "keda-timeline.svg", "keda-phases.txt"} <= names
    if name == "keda-good":
        t = res.timing
        assert t is not None and t["within"] and t["configured_difference_s"] == 2.7, t
    if name == "keda-unschedulable":
        svg = (tmp_path / "reports" / "keda-timeline.svg").read_text()
        assert 'class="stall" data-phase="scheduling"' in svg  # stalled bars are drawn


def test_kgc_lab_run_exits_zero_when_the_scenario_matches(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kgc.cli", "lab", "run", "--scenario",
                          "keda-missing", "--report-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert json.loads((tmp_path / "verdict.json").read_text())["run"]["matches_documented"]
