"""The README's main job, its node stage: `kgc lab certify --stage node` as a user runs it
(a subprocess in the checkout): the node lab's `good` image booted, the host suites and the
live reboot test run against it over SSH by pytest, one merged verdict.json and the HTML.

This file sorts first in lab/tests/node, so on an empty node cache (a fresh machine, a cold
CI run) it is what builds the node lab's base tree and the `good` variant from nothing
(issue 17: `make certify` had failed there when the base-tree build left /proc mounted and
the variant copy crossed it); on a warm cache it reuses them. Either way it says which."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from kgc_lab import procs
from kgc_lab.node.lab import base_root, cache_root

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_make_certify_node_stage_certifies_the_good_node(tmp_path: Path) -> None:
    node_cache = cache_root()
    built_before = (base_root() / ".kgc-base-done").exists()
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "kgc.cli", "lab", "certify", "--stage", "node",
         "--report-dir", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=3600, check=False)
    took = time.monotonic() - t0
    print(f"\nkgc lab certify --stage node: exit {proc.returncode} in {took:.0f} s "
          f"({'warm node cache' if built_before else 'empty node cache: base tree built'})")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    doc = json.loads((tmp_path / "verdict.json").read_text())
    assert doc["overall"] == "pass", doc["overall_reason"]
    assert {r["stage"] for r in doc["results"]} == {"node"}
    layers = {r["layer"] for r in doc["results"]}
    assert {"iommu", "vfio", "persistence", "reboot"} <= layers, layers
    st = {r["check"]: r for r in doc["results"]}
    assert st["reboot.returned"]["status"] == "pass", st["reboot.returned"]["reason"]
    assert st["reboot.binding-persists"]["status"] == "pass"
    assert not any(r["status"] in ("fail", "error") for r in doc["results"])
    assert (tmp_path / "html" / "index.html").stat().st_size > 100_000
    # the base tree and its variants are left with nothing mounted in them
    left = procs.mounts_under(str(node_cache.resolve()))
    assert not left, left
