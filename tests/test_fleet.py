"""Fleet mode: three nodes certified in one pytest run with xdist, one merged report.

The nodes are real lab VMs' recorded evidence (fixtures/bundles/, captured by the node lab
over SSH): a healthy node, one whose ID rule captured the host's NIC, and one whose GPU
group has a peer on a host driver. The live path differs only in transport (--hosts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

NODES = ("good", "over-capture", "group-not-viable")


def test_three_node_fleet_gives_one_report_with_per_node_verdicts(tmp_path: Path) -> None:
    bundles = ",".join(str(REPO / "fixtures" / "bundles" / f"{n}.json") for n in NODES)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "host and not destructive",
            "conformance/iommu",
            "conformance/vfio",
            "conformance/persistence",
            "--profile",
            "lab",
            "--snapshot",
            bundles,
            "-n",
            "3",
            "--dist",
            "loadgroup",
            "--report-dir",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    doc = json.loads((tmp_path / "verdict.json").read_text())
    by_target: dict[str, dict[str, str]] = {}
    for r in doc["results"]:
        by_target.setdefault(r["target"], {})[r["check"]] = r["status"]
    assert len(by_target) == 3
    [good] = [t for t in by_target if "good" in t]
    [over] = [t for t in by_target if "over-capture" in t]
    [peer] = [t for t in set(by_target) - {good, over}]
    # the lab binds at boot: its DRA-only rule skips by design, naming the boot rule
    assert by_target[good]["vfio.rebindable"] == "skip"
    assert {s for c, s in by_target[good].items() if c != "vfio.rebindable"} == {"pass"}
    assert by_target[over]["vfio.host-kept"] == "fail"
    assert by_target[over]["persistence.over-capture"] == "warn"
    assert by_target[peer]["vfio.group-viable"] == "fail"
    # the same checks ran on every node, and JUnit/allure carry all of them
    assert len({frozenset(v) for v in by_target.values()}) == 1
    allure = list((tmp_path / "allure-results").glob("*-result.json"))
    assert len(allure) == len(doc["results"])
