"""A plain run against the cluster lab, as a user runs it (issue 18.6): `pytest -m gpu` /
`pytest -m sizing --kubeconfig` with a profile that does NOT declare the cluster simulated
(the lab profile with ``cluster.simulated: false``, its policy requiring that one layer) and
no lab harness around it. Every result resting on the lab's stand-ins (kwok nodes; pods whose
lifecycle kwok's stages played and whose log the lab served) is marked ``simulated`` from the
evidence itself, and `kgc gate` never certifies the layer on them (never "gpu ok").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cluster.kubehelp import LabInfo
from kgc.core.profile import profiles_dir
from kgc.layers.gpu.evidence import API_ONLY_CHECKS

pytestmark = [pytest.mark.lab, pytest.mark.cluster]

# the checks whose verdicts may rest on real objects only (RuntimeClasses of the real control
# plane; the profile's own Kata entries and the pods' specs): every other pass is a stand-in's
REAL_ONLY = {"gpu": set(API_ONLY_CHECKS),
             "sizing": {"sizing.kata-config", "sizing.starved-pods"}}


def _env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("KUBECONFIG", None)
    return e


def _plain_profile(tmp_path: Path, layer: str) -> Path:
    doc = yaml.safe_load((profiles_dir() / "lab.yaml").read_text())
    doc["cluster"]["simulated"] = False  # what a user's profile says: nothing is declared
    doc.setdefault("policy", {})["require_layers"] = [layer]
    path = tmp_path / f"plain-{layer}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("layer", ["gpu", "sizing"])
def test_a_plain_run_marks_every_stand_in_result_and_never_gates_green(
        lab_cluster: LabInfo, tmp_path: Path, layer: str) -> None:
    prof = _plain_profile(tmp_path, layer)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", layer,
         "--kubeconfig", str(lab_cluster.kubeconfig), "--profile", str(prof)],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600, check=False)
    verdict = tmp_path / "reports" / "verdict.json"
    assert verdict.exists(), run.stdout[-3000:] + run.stderr[-2000:]
    results = [r for r in json.loads(verdict.read_text())["results"] if r["layer"] == layer]
    assert results, run.stdout[-3000:]
    by = {r["check"]: r for r in results}
    # the lab's cluster as it comes up: the pods' outcomes pass on the served captures ...
    key = "gpu.in-vm" if layer == "gpu" else "sizing.vm-matches-limits"
    assert by[key]["status"] == "pass", by[key]["reason"]
    # ... and every pass that does not rest on real objects alone says it is a stand-in's
    unmarked = [c for c, r in by.items() if r["status"] == "pass" and not r["simulated"]
                and c not in REAL_ONLY[layer]]
    assert not unmarked, unmarked
    for c, r in by.items():
        assert r["simulated"] == ("[simulated:" in r["reason"]), c  # field and reason agree
        if r["simulated"]:
            assert r["simulated_why"].startswith("evidence from stand-ins: "), (c, r)
            assert "kwok" in r["simulated_why"], (c, r["simulated_why"])
    if layer == "gpu":
        for c in ("gpu.pci-function", "gpu.smi-count"):
            assert by[c]["status"] == "pass" and by[c]["simulated"], c
    gate = subprocess.run(
        [sys.executable, "-m", "kgc.cli", "gate", str(verdict), "--profile", str(prof)],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120, check=False)
    out = gate.stdout + gate.stderr
    assert gate.returncode == 1, out
    assert "NOT CERTIFIED" in out and f"{layer} NOT JUDGED" in out and f"{layer} ok" not in out
    assert "no accepted verdict (its result is simulated" in out, out  # the screen clips
