"""``kgc lab run --scenario sizing-good`` as a user runs it: it brings up its own cluster lab,
judges the sizing layer with the lab profile, writes verdict.json with the documented
verdicts (all pass, every verdict simulated) and takes the lab down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kgc_lab import cluster as labc

pytestmark = [pytest.mark.lab, pytest.mark.slow, pytest.mark.cluster]


def test_kgc_lab_run_sizing_good(tmp_path: Path) -> None:
    missing = labc.binaries().missing(keda=False)
    if missing:
        pytest.fail("cluster lab binaries not built: " + ", ".join(map(str, missing))
                    + " — run scripts/bootstrap.d/30-cluster.sh")
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "kgc.cli", "lab", "run", "--scenario",
                          "sizing-good", "--report-dir", str(tmp_path)], cwd=tmp_path,
                         text=True, capture_output=True, timeout=900,
                         env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"},
                         check=False)
    wall = time.monotonic() - t0
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-3000:]
    doc = json.loads((tmp_path / "verdict.json").read_text())
    run = doc["run"]
    assert run["kind"] == "lab-scenario" and run["lab"] == "cluster"
    assert run["scenario"] == "sizing-good" and run["matches_documented"] is True
    assert {r["check"]: r["status"] for r in doc["results"]} == run["expected"]
    assert set(run["expected"].values()) == {"pass"}
    # marked from the evidence where the verdict rests on the kwok shape pods or nodes (the
    # profile's Kata entries and the pods' specs are no stand-in's)
    assert all(r["simulated"] for r in doc["results"]
               if r["check"] not in ("sizing.kata-config", "sizing.starved-pods"))
    assert doc["overall"] == "pass"
    print(f"kgc lab run --scenario sizing-good: {wall:.1f} s; shape pods (s): "
          f"{run['shape_pod_wall_s']}")
