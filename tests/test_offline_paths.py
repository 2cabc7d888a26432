"""Every recorded bundle in fixtures/ gives the same verdicts through each offline path:
`kgc evaluate B`, `pytest --snapshot B` and `kgc certify --snapshot B` (README promise)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

NODE_BUNDLES = sorted((REPO / "fixtures" / "bundles").glob("*.json"))
NRI_BUNDLES = sorted((REPO / "fixtures" / "nri").glob("*.bundle.json"))
CASES = [(b, "lab") for b in NODE_BUNDLES] + [
    (b, str(b.with_name(b.name.replace(".bundle.json", ".profile.yaml")))) for b in NRI_BUNDLES
]


def _key(results: list[dict]) -> set[tuple[str, str, str, str, str]]:
    return {(r["target"], r["check"], r["status"], r["reason"], r["origin"]) for r in results}


def _evaluate(bundle: Path, profile: str) -> list[dict]:
    r = subprocess.run([sys.executable, "-m", "kgc.cli", "evaluate", str(bundle), "--profile",
                        profile, "--json"], capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)["results"]


def _pytest(args: list[str], out: Path) -> list[dict]:
    r = subprocess.run(args + ["--report-dir", str(out)], capture_output=True, text=True,
                       timeout=300, check=False, cwd=out.parent)
    assert r.returncode in (0, 1), r.stdout[-3000:] + r.stderr[-2000:]
    return json.loads((out / "verdict.json").read_text())["results"]


def test_fixture_bundles_exist() -> None:
    assert len(NODE_BUNDLES) >= 7 and len(NRI_BUNDLES) >= 4


@pytest.mark.parametrize("bundle,profile", CASES, ids=[c[0].name for c in CASES])
def test_three_offline_paths_agree(bundle: Path, profile: str, tmp_path: Path) -> None:
    ev = _evaluate(bundle, profile)
    py = _pytest([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                  "--snapshot", str(bundle), "--profile", profile], tmp_path / "py")
    cert = _pytest([sys.executable, "-m", "kgc.cli", "certify", "-q", "--snapshot", str(bundle),
                    "--profile", profile], tmp_path / "cert")
    assert _key(ev) == _key(py) == _key(cert)
    # every node layer is judged (or says why not), nothing cluster-scoped sneaks in
    layers = {r["layer"] for r in ev}
    assert {"iommu", "vfio", "persistence", "reboot", "runtime", "nri"} <= layers
    assert all(r["origin"] == "bundle" for r in ev)
