"""The report's tree is layer -> check wherever the venv, the kubeconfig and the working
directory are (issue 19.4): pytest takes the common ancestor of the paths on its command line
as its rootdir, and allure-pytest's ``titlePath`` (the awesome report's default tree) follows
it — a ``--kubeconfig`` under the repository (or a venv) put ``conformance > iommu >
test_iommu.py`` (or ``venv > lib > python3.11 > site-packages > kgc > …``) above every check.
The plugin writes each result's titlePath as its card layer, the report groups by the
``suite`` label (the card layer), and `kgc certify` passes the suites as ``--rootdir``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from kgc.core import report
from kgc.plugin import suites_dir

KUBECONFIG = REPO / "tests" / "data" / "kubeconfig-unreachable.yaml"


def _paths(rdir: Path) -> set[tuple[str, ...]]:
    return {tuple(json.loads(f.read_text()).get("titlePath") or ())
            for f in (rdir / "allure-results").glob("*-result.json")}


def test_title_path_is_the_layer_whatever_the_rootdir(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        "-m", "iommu", "--kubeconfig", str(KUBECONFIG)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]
    assert _paths(tmp_path / "reports") == {("1. Host IOMMU",)}


def test_kgc_certify_roots_pytest_at_the_suites(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "kgc.cli", "certify", "-q", "-m", "iommu",
                        "--kubeconfig", str(KUBECONFIG)],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode in (0, 1), r.stdout[-2000:] + r.stderr[-2000:]
    assert f"rootdir: {suites_dir()}" in r.stdout or "rootdir" not in r.stdout
    doc = json.loads((tmp_path / "reports" / "verdict.json").read_text())
    assert doc["results"] and all(x["test"].startswith("iommu/") for x in doc["results"]), \
        [x["test"] for x in doc["results"]][:3]
    assert _paths(tmp_path / "reports") == {("1. Host IOMMU",)}


def test_the_report_groups_by_layer() -> None:
    cfg = report.allure_config("x", Path("/tmp/out"))
    assert '"groupBy": [\n' in cfg and '"suite"' in cfg
