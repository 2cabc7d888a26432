"""Host-layer benchmarks: round trips per node, wall time, evaluator throughput.

    .venv/bin/python benchmarks/bench_host.py [--bundles 1000] [--json out.json]

Measures, in one run on one machine (compare the ratios; absolute seconds depend on load):
  * round trips for a full host collection, 4 vs 64 emulated PCI devices (directory trees
    read through the real local collector), and the wall-time ratio between them;
  * wall time of `pytest -m "host and not destructive"` on this machine (median of N runs);
  * evaluator throughput: N recorded node bundles judged offline by every host layer.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from kgc.core.bundle import load_bundle, write_bundle  # noqa: E402
from kgc.core.engine import Context  # noqa: E402
from kgc.core.layer import Scope  # noqa: E402
from kgc.core.profile import load_profile  # noqa: E402
from kgc.core.registry import load_layers  # noqa: E402
from kgc.core.target import NodeTarget  # noqa: E402
from systree import intel_good  # noqa: E402


def tree_with(n: int, root: Path) -> Path:
    t = intel_good(root)
    for i in range(n - 2):  # intel_good already has 2 NVIDIA functions
        t.pci(
            f"0000:{0x50 + i // 8:02x}:{i % 8:02x}.0",
            "10de",
            "2331",
            "030200",
            "vfio-pci",
            str(100 + i),
        )
    return t.root


def collect_wall(root: Path, repeats: int = 5) -> tuple[int, float]:
    layers = load_layers()
    prof = load_profile()
    walls, trips = [], 0
    for _ in range(repeats):
        t = NodeTarget("local://", root=str(root))
        ctx = Context(t, prof, layers)
        t0 = time.perf_counter()
        ctx.judge_all([n for n, lay in layers.items() if lay.query is not None])
        walls.append(time.perf_counter() - t0)
        trips = t.round_trips
    return trips, statistics.median(walls)


def pytest_wall(repeats: int) -> float:
    walls = []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-m",
                    "host and not destructive",
                    "-q",
                    "--report-dir",
                    d,
                ],
                cwd=REPO,
                capture_output=True,
                check=False,
            )
            walls.append(time.perf_counter() - t0)
    return statistics.median(walls)


def throughput(n: int, work: Path) -> tuple[int, float]:
    layers = load_layers()
    prof = load_profile()
    t = NodeTarget("local://", root=str(tree_with(8, work / "base")))
    snap = Context(t, prof, layers).host()
    paths = []
    for i in range(n):
        paths.append(write_bundle(work / f"b{i}.json", scope=Scope.NODE, target=f"node{i}",
                                 host=snap))
    host_layers = [nm for nm, lay in layers.items() if lay.parse is not None]
    t0 = time.perf_counter()
    verdicts = 0
    for p in paths:
        ctx = Context(load_bundle(p, layers), prof, layers)
        verdicts += len(ctx.judge_all(host_layers))
    return verdicts, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundles", type=int, default=1000)
    ap.add_argument("--pytest-runs", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as d:
        w = Path(d)
        rt4, wall4 = collect_wall(tree_with(4, w / "n4"))
        rt64, wall64 = collect_wall(tree_with(64, w / "n64"))
        out.update(
            round_trips_4=rt4,
            round_trips_64=rt64,
            collect_judge_wall_4_s=round(wall4, 4),
            collect_judge_wall_64_s=round(wall64, 4),
            wall_ratio_64_over_4=round(wall64 / wall4, 3),
        )
        verdicts, secs = throughput(a.bundles, w)
        out.update(
            bundles=a.bundles,
            verdicts=verdicts,
            evaluate_s=round(secs, 3),
            bundles_per_s=round(a.bundles / secs, 1),
        )
    out["pytest_m_host_wall_s"] = round(pytest_wall(a.pytest_runs), 3)
    print(json.dumps(out, indent=2))
    if a.json:
        a.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
