"""Docs cannot drift from code: the README's catalogue is `kgc checks`, verbatim."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def test_readme_catalogue_is_generated_from_the_registry() -> None:
    out = subprocess.run([sys.executable, "-m", "kgc.cli", "checks"], capture_output=True,
                         text=True, check=True).stdout
    readme = (REPO / "README.md").read_text()
    m = re.search(r"<!-- checks:start -->\n(.*)<!-- checks:end -->", readme, re.S)
    assert m, "README lost its catalogue markers"
    assert m.group(1) == out, "README catalogue is stale: run `kgc checks --write-readme`"


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    first = (REPO / "README.md").read_text().splitlines()[:5]
    assert any("make certify" in line for line in first)
    assert any("make test" in line for line in first)
    assert "exec make test" in (REPO / ".ci" / "run").read_text()


def test_every_check_has_a_suite_test() -> None:
    out = subprocess.run([sys.executable, "-m", "kgc.cli", "checks", "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    import json

    suites = "\n".join(p.read_text() for p in (REPO / "conformance").rglob("test_*.py"))
    missing = [c["id"] for c in json.loads(out) if f'"{c["id"]}"' not in suites]
    assert not missing, f"checks without a conformance test: {missing}"
