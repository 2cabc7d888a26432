"""`kgc report` builds an Allure 3 HTML report that a real headless browser renders."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is not installed: scripts/bootstrap.sh installs it"
    return exe


def _dom(index: Path, wanted: re.Pattern[str]) -> str:
    """The rendered DOM; the page renders asynchronously, so dump it until ``wanted`` shows
    (bounded: three attempts with a growing virtual-time budget)."""
    dom = ""
    for budget in (20000, 40000, 80000):
        dom = subprocess.run(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", f"--virtual-time-budget={budget}",
             "--dump-dom", index.as_uri()],
            capture_output=True, text=True, timeout=180, check=False,
        ).stdout
        if wanted.search(dom):
            break
    return dom


def _widget(index: Path, name: str) -> object:
    """A data file the single-file Allure report embeds (base64 JSON)."""
    page = index.read_text()
    m = re.search(rf'"widgets/{re.escape(name)}","([A-Za-z0-9+/=]+)"', page)
    assert m, f"{name} not embedded"
    return json.loads(base64.b64decode(m.group(1)))


@pytest.mark.lab  # Allure 3 (node_modules) and Chromium: the lab tier
def test_html_report_renders_the_verdict_first_and_the_failed_checks(tmp_path: Path) -> None:
    """The first screen says NOT CERTIFIED for which profile and layers, lists the blocking
    failures with reason and pasteable remediation; the Allure tree below holds every check;
    kgc's own categories replace Allure's defaults; a skip is not shown as an error."""
    rdir = tmp_path / "reports"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "iommu or runtime or reboot",
         "--report-dir", str(rdir), "-q"],
        cwd=tmp_path, capture_output=True, timeout=300, check=False,
    )
    out = subprocess.run(
        [sys.executable, "-m", "kgc.cli", "report", "--results", str(rdir / "allure-results"),
         "--out", str(rdir / "html")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert out.returncode == 0, out.stderr
    index = rdir / "html" / "index.html"
    title = re.compile(r">iommu\.enabled — The kernel has enabled the IOMMU[^<]*<")
    dom = _dom(index, title)
    # the rendered test tree holds an element whose text is the failed check's title
    assert title.search(dom), dom[-2000:]
    # the first screen: the verdict, before any tree
    head = dom.index('id="kgc-headline"')
    assert head < dom.index("iommu.enabled — The kernel")
    assert re.search(r'id="kgc-headline"[^>]*>NOT CERTIFIED<', dom)
    verdict = json.loads((rdir / "verdict.json").read_text())
    scope = re.search(r'id="kgc-scope">(.*?)</p>', dom, re.S)
    assert scope and "generic-nvidia-passthrough" in scope.group(1)
    assert html.escape(verdict["run"]["scope"], quote=True) in scope.group(1)
    blocking = dom[dom.index('id="kgc-blocking"'):]
    for r in verdict["results"]:
        if r["status"] == "fail" and r["severity"] == "blocker":
            assert html.escape(r["check"]) in blocking
    # remediation keeps its line breaks: a TOML snippet stays pasteable
    handler = next(r for r in verdict["results"] if r["check"] == "runtime.kata-handler")
    assert "\n" in handler["remediation"]
    assert handler["remediation"] in html.unescape(blocking)
    # kgc's categories are what Allure shows
    cats = _widget(index, "categories.json")
    names = {n["name"] for n in cats["nodes"].values() if n.get("type") == "category"}
    assert "Node defect: not conformant (fail/warn)" in names
    assert not any("Product errors" in n for n in names), names
    # the report's Quality Gates tab shows the verdict policy's gate (Allure evaluated it)
    gate = _widget(index, "quality-gate.json")
    rules = {r["rule"]: r for r in gate["default"]}
    assert rules["kgc-blocking/kgcMaxResults"]["success"] is False
    assert rules["kgc-blocking/kgcMaxResults"]["actual"] >= 1
    # a skip is a decision, not an error box
    for f in (rdir / "allure-results").glob("*-result.json"):
        doc = json.loads(f.read_text())
        if doc["status"] == "skipped":
            assert not doc.get("statusDetails"), doc["name"]
    # the first screen, kept as a CI artifact
    shots = REPO / "reports" / "ci-artifacts"
    shots.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                    "--no-first-run", "--disable-background-networking",
                    "--virtual-time-budget=20000", "--window-size=1400,1000",
                    f"--screenshot={shots / 'first-screen.png'}", index.as_uri()],
                   capture_output=True, timeout=180, check=False)
    assert (shots / "first-screen.png").stat().st_size > 10000


def test_report_without_results_says_what_to_do(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kgc.cli",
            "report",
            "--results",
            str(tmp_path / "none"),
            "--out",
            str(tmp_path / "html"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "no allure results" in out.stderr and "run the suite first" in out.stderr


@pytest.mark.lab  # Allure 3 (node_modules): the lab tier
def test_history_across_two_runs_gives_a_trend(tmp_path: Path) -> None:
    """A nightly job keeps one history file: the second night's report draws the trend."""
    hist = tmp_path / "history" / "kgc-history.jsonl"
    for _ in range(2):
        subprocess.run([sys.executable, "-m", "pytest", "-m", "iommu", "-q"], cwd=tmp_path,
                       capture_output=True, timeout=300, check=False)
        out = subprocess.run([sys.executable, "-m", "kgc.cli", "report", "--history", str(hist)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=300,
                             check=False)
        assert out.returncode == 0, out.stderr
    assert len(hist.read_text().splitlines()) == 2
    charts = _widget(tmp_path / "reports" / "html" / "index.html", "charts.json")
    dyn = [c for c in charts["general"].values() if c["type"] == "statusDynamics"]
    assert dyn and len(dyn[0]["data"]) == 2, dyn
    assert dyn[0]["data"][0]["name"].startswith("NOT CERTIFIED")
