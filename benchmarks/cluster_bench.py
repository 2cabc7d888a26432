"""Cluster lab benchmark: warm `up` to API-ready / fully up, and KEDA 0 -> N replicas end
to end (metric raised -> Deployment readyReplicas == N), per runtime class.

    .venv/bin/python benchmarks/cluster_bench.py [--replicas 10] [--runs 1]

Brings a lab up in a temporary run directory, measures, takes it down. Prints JSON.
Timing is client-side (time.monotonic) around API calls; readiness is read from the
Deployment status with observedGeneration >= generation (KEDA e2e helper semantics).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config, watch
from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from kgc_lab import cluster as labc


def _wait(pred: Any, timeout: float) -> None:
    Retrying(stop=stop_after_delay(timeout), wait=wait_fixed(0.25),
             retry=retry_if_result(lambda ok: not ok))(pred)


def keda_zero_to_n(api: Any, run_dir: Path, cluster: Any, n: int) -> dict[str, float]:
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    custom = client.CustomObjectsApi(api)
    ns = f"kgc-bench-{int(time.time())}"
    core.create_namespace({"metadata": {"name": ns}})
    _wait(lambda: any(s.metadata.name == "default"
                      for s in core.list_namespaced_service_account(ns).items), 60)
    labc.set_metric(0, run_dir)
    url = labc.status(run_dir)["metric_url"]
    names = {cluster.lab.runtime_class: "bench-kata",
             cluster.lab.baseline_runtime_class: "bench-runc"}
    for rc, name in names.items():
        labels = {"app": name}
        apps.create_namespaced_deployment(ns, {
            "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"runtimeClassName": rc, "containers": [{
                    "name": "app", "image": "registry.invalid/kgc/app:lab",
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}})
        custom.create_namespaced_custom_object("keda.sh", "v1alpha1", ns, "scaledobjects", {
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": name},
            "spec": {"scaleTargetRef": {"name": name}, "pollingInterval": 1,
                     "minReplicaCount": 0, "maxReplicaCount": n,
                     "triggers": [{"type": "metrics-api", "metricType": "AverageValue",
                                   "metadata": {"url": url, "valueLocation": "value",
                                                "targetValue": "1",
                                                "activationTargetValue": "0.5"}}]}})

    def so_ready(name: str) -> bool:
        so = custom.get_namespaced_custom_object("keda.sh", "v1alpha1", ns, "scaledobjects", name)
        return any(c["type"] == "Ready" and c["status"] == "True"
                   for c in so.get("status", {}).get("conditions", []))

    for name in names.values():
        _wait(lambda name=name: so_ready(name), 90)
    rv = apps.list_namespaced_deployment(ns).metadata.resource_version
    by_name = {v: k for k, v in names.items()}
    done: dict[str, float] = {}
    w = watch.Watch()
    t0 = time.monotonic()
    labc.set_metric(n, run_dir)
    for ev in w.stream(apps.list_namespaced_deployment, ns, resource_version=rv,
                       timeout_seconds=300):
        d = ev["object"]
        rc = by_name.get(d.metadata.name)
        if (rc and rc not in done and (d.status.ready_replicas or 0) == n
                and (d.status.observed_generation or 0) >= d.metadata.generation):
            done[rc] = round(time.monotonic() - t0, 2)
        if len(done) == len(names):
            w.stop()
    core.delete_namespace(ns)
    return done


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicas", type=int, default=10)
    args = ap.parse_args()
    out: dict[str, Any] = {"replicas": args.replicas}
    with tempfile.TemporaryDirectory(prefix="kgc-bench-") as tmp:
        run = Path(tmp) / "run"
        t0 = time.monotonic()
        lab = labc.Lab(run)
        state = lab.up()
        out["up_total_s"] = round(time.monotonic() - t0, 2)
        out["up_api_ready_s"] = state.get("api_ready_s")
        try:
            api = config.new_client_from_config(config_file=state["kubeconfig"])
            out["keda_zero_to_n_s"] = keda_zero_to_n(api, run, lab.cluster, args.replicas)
        finally:
            labc.down(run)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
