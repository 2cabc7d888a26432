"""NRI probe benchmarks on the containerd lab (real containerd 1.7 and 2.x).

1. Handshake: connect -> Synchronize answered, N fresh probe connections in a row.
2. Event delivery: CRI call -> NRI event received by the probe, for RunPodSandbox and
   CreateContainer, over M probe-pod cycles with one connected probe.

Usage (root, after scripts/bootstrap.d/20-containerd.sh):
    .venv/bin/python benchmarks/nri_bench.py [--handshakes 200] [--pods 20] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import uuid

from kgc.cri.client import CriClient, ProbePod
from kgc.nri.probe import PROBE_LABEL, NriProbe
from kgc_lab.containerd import NRI_ON
from kgc_lab.containerd_instance import ContainerdInstance, base_config, cache_dir, new_tmp
from kgc_lab.images import PAUSE_IMAGE, PROBE_IMAGE, build_archive


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, round(p / 100 * (len(xs) - 1))))
    return xs[k]


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "n": len(xs),
        "min": min(xs),
        "p50": statistics.median(xs),
        "p95": pct(xs, 95),
        "max": max(xs),
        "mean": statistics.fmean(xs),
    }


def bench(flavour: str, handshakes: int, pods: int) -> dict[str, object]:
    tmp = new_tmp(f"kgc-bench-{flavour}-")
    inst = ContainerdInstance(
        flavour, base_config(flavour, tmp, PAUSE_IMAGE, tail=NRI_ON.format(tmp=tmp)), tmp
    )
    try:
        inst.start()
        inst.import_images(build_archive(cache_dir() / "images" / "kgc-lab-images.tar"))
        sock = str(tmp / "nri.sock")
        hs_ms: list[float] = []
        version = ""
        for _ in range(handshakes):
            with NriProbe(sock) as p:
                hs = p.connect(timeout_s=5)
                hs_ms.append(hs.handshake_ms or float("nan"))
                version = hs.runtime_version
        run_ms: list[float] = []
        create_ms: list[float] = []
        token = uuid.uuid4().hex
        with NriProbe(sock, adjust_token=token) as p, CriClient(inst.address) as c:
            p.connect(timeout_s=5)
            for _ in range(pods):
                pod = ProbePod(
                    c, PAUSE_IMAGE, PROBE_IMAGE, tmp / "logs", labels={PROBE_LABEL: token}
                )
                try:
                    pod.run_sandbox()
                    ev = p.wait_for(
                        lambda e, n=pod.name: e.pod_name == n and e.event == "RUN_POD_SANDBOX", 10
                    )
                    if ev is not None:
                        run_ms.append((ev.at - pod.timings["run_pod_sandbox_call"]) * 1e3)
                    pod.create_container()
                    ev = p.wait_for(
                        lambda e, n=pod.name: e.pod_name == n and e.event == "CREATE_CONTAINER", 10
                    )
                    if ev is not None:
                        create_ms.append((ev.at - pod.timings["create_container_call"]) * 1e3)
                finally:
                    pod.remove()
        return {
            "containerd": version,
            "handshake_ms": summary(hs_ms),
            "run_pod_sandbox_to_event_ms": summary(run_ms),
            "create_container_to_event_ms": summary(create_ms),
        }
    finally:
        inst.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshakes", type=int, default=200)
    ap.add_argument("--pods", type=int, default=20)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    out = {
        "host": os.uname().nodename,
        "cpus": os.cpu_count(),
        "results": {fl: bench(fl, a.handshakes, a.pods) for fl in ("1.7", "2")},
    }
    for r in out["results"].values():
        print(f"containerd {r['containerd']}:")
        for k in ("handshake_ms", "run_pod_sandbox_to_event_ms", "create_container_to_event_ms"):
            s = r[k]
            print(
                f"  {k:30} n={s['n']:4} p50={s['p50']:7.2f} p95={s['p95']:7.2f} max={s['max']:7.2f}"
            )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
