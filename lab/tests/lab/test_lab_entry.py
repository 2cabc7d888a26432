"""The one lab entry (`kgc_lab.cli:main`) and the scenario registry: every lab's scenarios
behind `kgc lab run --scenario`, new labs plug in by entry point, and a scenario writes the
same verdict.json (kgc-verdict/1) a conformance run writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kgc.core import report
from kgc_lab import cli, scenarios
from kgc_lab.scenarios import LabScenario, ScenarioOutcome, register_scenarios
from lab.conftest import lab_env


def test_run_knows_every_lab_scenario() -> None:
    from kgc_lab.cluster.scenarios_gpu import BY_NAME as GPU
    from kgc_lab.cluster.scenarios_keda import SCENARIOS as KEDA
    from kgc_lab.cluster.scenarios_sizing import SCENARIOS as SIZING
    from kgc_lab.containerd import SCENARIOS as CONTAINERD
    from kgc_lab.node.scenarios import SCENARIO_SPECS as NODE

    known = scenarios.scenarios()
    assert set(known) == set(NODE) | set(CONTAINERD) | set(GPU) | set(SIZING) | set(KEDA)
    assert {known[n].lab for n in KEDA} == {"cluster"}
    assert {known[n].lab for n in NODE} == {"node"}
    assert {known[n].lab for n in CONTAINERD} == {"containerd"}
    assert {known[n].lab for n in (*GPU, *SIZING)} == {"cluster"}


def test_every_lab_command_is_under_the_one_entry(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for cmd in ("node", "containerd", "cluster", "run", "certify", "cleanup"):
        assert f"    {cmd} " in out or f"    {cmd}\n" in out, (cmd, out)


def test_a_scenario_name_means_one_thing() -> None:
    def never(_d: Path, _k: bool) -> ScenarioOutcome:
        raise AssertionError

    with pytest.raises(ValueError, match="clashes"):
        register_scenarios(LabScenario("nri-on", "gpu", "another nri-on", never))


def test_other_packages_add_scenarios_by_entry_point(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    def run(report_dir: Path, keep: bool) -> ScenarioOutcome:
        path = scenarios.write_scenario_verdict(
            report_dir / "verdict.json", "gpu", "gpu-demo", "a plugged-in scenario",
            [{"check": "gpu.demo", "layer": "gpu", "title": "t", "severity": "normal",
              "target": "lab", "status": "pass", "reason": "r", "remediation": "",
              "expected": None, "found": None, "evidence": {}}],
            {"gpu.demo": "pass"}, {})
        return ScenarioOutcome("gpu-demo", "gpu", path)

    class EP:
        def load(self) -> Any:
            return lambda: [LabScenario("gpu-demo", "gpu", "a plugged-in scenario", run)]

    monkeypatch.setattr(scenarios, "_loaded", False)
    monkeypatch.setattr(scenarios, "entry_points", lambda group: [EP()]
                        if group == scenarios.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(scenarios, "_REGISTRY", dict(scenarios._REGISTRY))
    assert scenarios.scenarios()["gpu-demo"].lab == "gpu"
    assert cli.main(["run", "--scenario", "gpu-demo", "--report-dir", str(tmp_path)]) == 0
    # the verdict table it judged, not JSON (issue 19.7); --json keeps the JSON outcome
    shown = capsys.readouterr().out
    assert "PASS  gpu.demo" in shown and "documented verdicts: match" in shown, shown
    assert cli.main(["run", "--scenario", "gpu-demo", "--report-dir", str(tmp_path),
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["matches_documented"] is True
    doc = json.loads((tmp_path / "verdict.json").read_text())
    assert doc["schema"] == report.SCHEMA and doc["overall"] == "pass"
    assert doc["run"]["kind"] == "lab-scenario" and doc["run"]["lab"] == "gpu"


@pytest.mark.lab
@pytest.mark.slow
def test_a_containerd_scenario_writes_the_conformance_verdict_json(
    private_cache: Path, tmp_path: Path
) -> None:
    reports = tmp_path / "reports"
    out = subprocess.run(
        [sys.executable, "-m", "kgc_lab.cli", "run", "--scenario", "containerd2-default",
         "--report-dir", str(reports)], capture_output=True, text=True,
        env=lab_env(private_cache), timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads((reports / "verdict.json").read_text())
    ref = report.write_verdict_json(tmp_path / "ref.json", [], {})
    assert doc["schema"] == report.SCHEMA
    assert set(doc) == set(json.loads(ref.read_text()))  # the conformance run's shape
    run = doc["run"]
    assert (run["kind"], run["lab"], run["scenario"]) == ("lab-scenario", "containerd",
                                                         "containerd2-default")
    assert run["matches_documented"] is True and run["mismatches"] == {}
    assert run["layers"] == ["runtime", "nri"] and run["scope"].startswith("for runtime, nri")
    got = {r["check"]: r["status"] for r in doc["results"]}
    assert all(got[c] == s for c, s in run["expected"].items()), (got, run["expected"])
    assert run["containerd"].startswith("containerd 2.")
    assert sorted(p.name for p in reports.iterdir()) == ["verdict.json"]  # no lab-NAME.json


def test_cluster_status_of_a_lab_that_is_down_is_exit_1_not_internal_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lab that is just down is the documented "not up" (1, one line saying how to start
    it), not 3: 3 is a defect of kgc's (the README's exit-code table); and asking writes
    nothing."""
    run_dir = tmp_path / "run"
    assert cli.main(["cluster", "status", "--run-dir", str(run_dir)]) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "not up" in err[0] and "kgc lab cluster up" in err[0], err
    assert not run_dir.exists()
