"""Real-node benchmark (benchmarks/realnode.md): the ``kube`` node-image variant build cold
and warm, ``kgc lab cluster up --with-node`` phase by phase (boot -> SSH -> kubelet
registered -> node Ready), pod create -> Running for runc pods on the TCG node.

    .venv/bin/python benchmarks/realnode_bench.py [--pods 3] [--cold]

``--cold`` also builds the variant from the cached base tree under a throw-away name (the
real cached variant is left alone) and removes it afterwards. Prints JSON. Times are
client-side monotonic clocks; the kubelet's own phases come from the pod's condition
timestamps (second resolution).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from kgc import kube
from kgc_lab import cluster as labc
from kgc_lab.cluster import realnode
from kgc_lab.node.kube_image import BUSYBOX_IMAGE, kube_variant
from kgc_lab.node.lab import build_variant, cache_root


def variant_builds(cold: bool) -> dict[str, float]:
    out: dict[str, float] = {}
    v = kube_variant()
    if cold:
        tmp = dataclasses.replace(v, name="kube-bench")
        target = cache_root() / "variants" / f"kube-bench-{tmp.key()}"
        shutil.rmtree(target, ignore_errors=True)
        t0 = time.monotonic()
        build_variant(tmp)
        out["variant_cold_s"] = round(time.monotonic() - t0, 1)
        shutil.rmtree(target, ignore_errors=True)
    t0 = time.monotonic()
    build_variant(v)
    out["variant_warm_s"] = round(time.monotonic() - t0, 2)
    return out


def _phases(pod: Any) -> dict[str, float]:
    conds = {c.type: c.last_transition_time for c in pod.status.conditions or []}
    started = pod.status.container_statuses[0].state.running.started_at
    t0 = conds.get("PodScheduled")
    out = {}
    for name, t in (("sandbox_ready_s", conds.get("PodReadyToStartContainers")),
                    ("container_started_s", started), ("ready_s", conds.get("Ready"))):
        if t0 is not None and t is not None:
            out[name] = (t - t0).total_seconds()
    return out


def pods(lab: labc.Lab, n: int) -> list[dict[str, Any]]:
    k = kube.connect(lab.paths.kubeconfig)
    rows = []
    with kube.Run.for_profile(k, lab.cluster) as run:
        for i in range(n):
            name = f"bench-{i}"
            t0 = time.monotonic()
            run.create(kube.builders.pod(
                name, [kube.builders.container("bb", BUSYBOX_IMAGE,
                                               command=["/bin/sh", "-c", "exec sleep 3600"])],
                labels=run.labels, runtime_class="runc", termination_grace_period_s=1,
                **realnode.placement()))
            pod = kube.wait_for_pod(k, run.namespace, name, kube.pod_ready(), 900)
            rows.append({"pod": name, "create_to_ready_s": round(time.monotonic() - t0, 1),
                         **_phases(pod)})
    k.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pods", type=int, default=3)
    ap.add_argument("--cold", action="store_true")
    args = ap.parse_args()
    out: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    out.update(variant_builds(args.cold))
    with tempfile.TemporaryDirectory(prefix="kgc-realnode-bench-") as td:
        lab = labc.Lab(Path(td) / "run", keda=False, with_node=True, die_with_parent=True)
        t0 = time.monotonic()
        try:
            state = lab.up()
            out["up_with_node_s"] = round(time.monotonic() - t0, 1)
            out["api_ready_s"] = state.get("api_ready_s")
            out["join"] = state["nodes"][0]["timings"]
            out["pods"] = pods(lab, args.pods)
        finally:
            t1 = time.monotonic()
            rep = labc.down(lab.paths.root)
            out["down_s"] = round(time.monotonic() - t1, 1)
            out["down_left"] = rep["left"] + rep["listening"]
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
