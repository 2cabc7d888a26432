"""The release policy drives Allure 3's own quality gate: `allure quality-gate` (the pinned
Allure in node_modules) passes and fails exactly where `kgc gate` does, on the same run.

The runs are real conformance runs of the pytest plugin over recorded lab bundles (verdict
.json and allure-results side by side); the allurerc holds only
``quality_gate_config(policy)``. (`allure generate` does not evaluate quality gates:
allure-framework discussion #3441.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from kgc.core.policy import Policy
from kgc.core.profile import load_profile
from kgc.core.report import to_js
from kgc.gate.allure import allurerc_text, glob_regex, quality_gate_config

ALLURE = REPO / "node_modules" / ".bin" / "allure"
BASE = {k: v for k, v in yaml.safe_load((REPO / "profiles" / "lab.yaml").read_text()).items()}

POLICIES = {
    "default": {},
    "node-files": {"require_layers": ["iommu", "vfio", "persistence", "reboot"],
                   "waive": {"runtime.*": "no containerd on the lab node image"}},
    "blockers-only": {"require_layers": ["persistence"], "block_severities": ["blocker"],
                      "waive": {"runtime.*": "no containerd on the lab node image"}},
    "no-replays": {"require_layers": ["persistence"], "accept_replayed": False,
                   "waive": {"runtime.*": "no containerd on the lab node image"}},
    # the lab binds at boot: the DRA-only rules skip by design (docs/release-gating.md)
    "strict-skips": {"require_layers": ["iommu", "vfio", "persistence", "reboot"],
                     "skip": "per-check", "warn": "per-check",
                     "skip_allowed": ["vfio.rebindable", "reboot.rebindable"],
                     "waive": {"runtime.*": "no containerd on the lab node image"}},
    "warn-blocks": {"require_layers": ["persistence"], "warn": "per-check",
                    "waive": {"runtime.*": "no containerd", "vfio.*": "judged elsewhere"}},
}


def _profile(tmp: Path, name: str, policy: dict) -> Path:
    doc = dict(BASE, name="lab-gate")
    if policy:
        doc["policy"] = policy
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("qg")
    prof = _profile(tmp, "run", {})
    out = {}
    for bundle in ("good", "runtime-bind-only", "over-capture"):
        rdir = tmp / bundle
        subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        "--snapshot", str(REPO / "fixtures" / "bundles" / f"{bundle}.json"),
                        "--profile", str(prof), "--report-dir", str(rdir)],
                       cwd=tmp, capture_output=True, timeout=300, check=False)
        assert (rdir / "verdict.json").is_file() and any(
            (rdir / "allure-results").glob("*-result.json")), bundle
        out[bundle] = rdir
    return out


def _kgc_gate(verdict: Path, profile: Path) -> int:
    return subprocess.run([sys.executable, "-m", "kgc.cli", "gate", str(verdict), "--profile",
                           str(profile)], capture_output=True, timeout=120,
                          check=False).returncode


def _allure_gate(results: Path, cfg: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(ALLURE), "quality-gate", str(results), "--config", str(cfg)],
                          capture_output=True, text=True, timeout=180, check=False,
                          cwd=cfg.parent)


@pytest.mark.slow
@pytest.mark.lab  # Allure 3 (node_modules): the lab tier
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_allure_quality_gate_agrees_with_kgc_gate(runs: dict[str, Path], tmp_path: Path,
                                                   policy: str) -> None:
    assert ALLURE.exists(), "Allure 3 is not installed here: npm ci (package-lock.json)"
    prof = _profile(tmp_path, policy, POLICIES[policy])
    cfg = tmp_path / "allurerc.mjs"
    cfg.write_text(allurerc_text(load_profile(prof).policy))
    seen = set()
    for bundle, rdir in runs.items():
        mine = _kgc_gate(rdir / "verdict.json", prof)
        theirs = _allure_gate(rdir / "allure-results", cfg)
        assert mine in (0, 1)
        assert theirs.returncode == mine, (bundle, mine, theirs.stdout, theirs.stderr)
        if mine:
            assert "Quality Gate failed" in theirs.stderr
        seen.add(mine)
    if policy in ("node-files", "strict-skips"):
        assert seen == {0, 1}  # the good bundle gates green, the bad ones red, both ways


def test_quality_gate_config_shape() -> None:
    pol = Policy(require_layers=("persistence",), block_checks=("runtime.nri-*",),
                 waive={"vfio.[!d]*": "x"}, warn="per-check")
    cfg = quality_gate_config(pol, {"persistence": "node", "gpu": "cluster"})
    ids = [r["id"] for r in cfg["rules"]]
    assert ids == ["kgc-blocking", "kgc-required-layers"]
    assert cfg["rules"][0]["kgcMaxResults"] == 0
    assert cfg["rules"][1]["kgcLayersJudged"] == {
        "layers": ["persistence"], "scopes": {"persistence": "node", "gpu": "cluster"},
        "warn": "per-check"}
    js = to_js(cfg)
    assert '"^runtime\\\\.nri-.*$"' in js and '"^vfio\\\\.[^d].*$"' in js
    assert "rule: \"kgcMaxResults\"" in js and "import" not in js
    assert glob_regex("a.b?[0-9]*") == "^a\\.b.[0-9].*$"


@pytest.mark.slow
@pytest.mark.lab  # Allure 3 (node_modules): the lab tier
def test_quality_gate_in_the_reports_own_allurerc(runs: dict[str, Path], tmp_path: Path) -> None:
    """The quality gate inside the allurerc kgc's report writes (categories, the awesome
    plugin): `allure generate` still builds the page, `allure quality-gate` decides as
    `kgc gate` does."""
    import json

    from kgc.core import report
    from kgc.core.report import config_module

    assert ALLURE.exists(), "Allure 3 is not installed here: npm ci (package-lock.json)"
    prof = _profile(tmp_path, "node-files", POLICIES["node-files"])
    text = report.allure_config("kgc", tmp_path / "html")
    cfg = json.loads(text.removeprefix("export default ").rstrip().removesuffix(";"))
    cfg["qualityGate"] = quality_gate_config(load_profile(prof).policy)
    rc_file = tmp_path / "allurerc.mjs"
    rc_file.write_text(config_module(cfg))
    for bundle, rdir in runs.items():
        theirs = _allure_gate(rdir / "allure-results", rc_file)
        assert theirs.returncode == _kgc_gate(rdir / "verdict.json", prof), (bundle, theirs)
    gen = subprocess.run([str(ALLURE), "generate", str(runs["good"] / "allure-results"),
                          "--config", str(rc_file), "-o", str(tmp_path / "html")],
                         capture_output=True, text=True, timeout=300, check=False,
                         cwd=tmp_path)
    assert gen.returncode == 0, gen.stderr
    assert (tmp_path / "html" / "index.html").is_file()
