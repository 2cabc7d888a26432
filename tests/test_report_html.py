"""`kgc report` builds an Allure 3 HTML report that a real headless browser renders."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "Debian's chromium is not installed: scripts/bootstrap.sh installs it"
    return exe


def test_html_report_renders_the_failed_checks_in_chromium(tmp_path: Path) -> None:
    rdir = tmp_path / "reports"
    subprocess.run(
        [sys.executable, "-m", "pytest", "conformance/iommu", "--report-dir", str(rdir), "-q"],
        cwd=REPO,
        capture_output=True,
        timeout=300,
        check=False,
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kgc.cli",
            "report",
            "--results",
            str(rdir / "allure-results"),
            "--out",
            str(rdir / "html"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    index = rdir / "html" / "index.html"
    assert index.exists()
    # the page renders asynchronously: dump the DOM until the rendered test tree shows up
    # (bounded: three attempts with a growing virtual-time budget)
    title = re.compile(r">iommu\.enabled — The kernel has enabled the IOMMU[^<]*<")
    dom = ""
    for budget in (20000, 40000, 80000):
        dom = subprocess.run(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                f"--virtual-time-budget={budget}",
                "--dump-dom",
                index.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        ).stdout
        if title.search(dom):
            break
    # the rendered test tree holds an element whose text is the failed check's title
    assert title.search(dom), dom[-2000:]
    assert re.search(r">Failed<", dom) or "Failed" in dom


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
