"""KEDA latency layer benchmark on the cluster lab: the suite's own overhead per measured
pod, and how the measured phases compare with the delays the lab is configured with.

    .venv/bin/python benchmarks/keda_bench.py [--runs 3] [--record fixtures/keda]

Brings one cluster lab up (temporary run directory), runs the keda layer's live driver
``--runs`` times with the lab profile exactly as ``pytest -m keda`` does, takes the lab down,
and prints JSON. Per run:

* overhead: wall time of the run, CPU seconds of this process during it (every thread: the
  watch followers decode and stamp events), the number of HTTP requests kgc made (watch
  streams count once), peak RSS growth; each divided by the number of pods measured;
* accuracy: per class, the measured sandbox phase (scheduled -> PodReadyToStartContainers)
  and start phase (-> containers running) against ``kata_sandbox_delay_ms`` /
  ``runc_sandbox_delay_ms`` / ``container_start_delay_ms`` of the lab profile: p50, max,
  mean error; the Kata - runc sandbox difference against the configured difference;
* watch precision: receipt time - API timestamp (clock offset applied).

``--record DIR`` also writes ``DIR/lab-good.json`` (the first run) and
``DIR/lab-unschedulable.json`` (one run whose pods ask for 8 GPUs) as kgc bundles holding
only the keda part -- the fixtures the report tests replay.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from kgc.core.bundle import write_bundle
from kgc.core.engine import Context
from kgc.core.profile import Profile, load_profile
from kgc.core.target import ClusterTarget
from kgc.layers.keda.checks import analyse
from kgc.layers.keda.phases import receipt_lags
from kgc_lab import cluster as labc
from kgc_lab.cluster.shape import shape_of

REQUESTS = {"n": 0}


def _count_requests() -> None:
    from kubernetes.client import rest

    orig = rest.RESTClientObject.request

    def counted(self: Any, *a: Any, **kw: Any) -> Any:
        REQUESTS["n"] += 1
        return orig(self, *a, **kw)

    rest.RESTClientObject.request = counted  # type: ignore[method-assign]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def one_run(kubeconfig: str, prof: Profile) -> tuple[dict[str, Any], Context]:
    ctx = Context(ClusterTarget(kubeconfig), prof)
    rss0, req0 = _rss_mib(), REQUESTS["n"]
    w0, c0 = time.monotonic(), time.process_time()
    ev = ctx.evidence("keda")
    wall, cpu = time.monotonic() - w0, time.process_time() - c0
    verdicts = {v.check: str(v.status) for v in ctx.judge_all(["keda"])}
    pods = sum(len(r.pods) for run in ev.runs() for r in run.repetitions)
    lab = shape_of(prof.cluster)
    a = analyse(ev, prof)
    acc: dict[str, Any] = {}
    for role, cfg in (("kata", lab.kata_sandbox_delay_ms), ("baseline", lab.runc_sandbox_delay_ms)):
        rows = a.rows.get(role, ())
        sb = [s for r in rows if (s := r.seconds("sandbox")) is not None]
        stt = [s for r in rows if (s := r.seconds("start")) is not None]
        acc[role] = {
            "configured_sandbox_s": cfg / 1000.0,
            "sandbox_p50_s": round(statistics.median(sb), 4) if sb else None,
            "sandbox_max_s": round(max(sb), 4) if sb else None,
            "sandbox_mean_error_s": round(statistics.fmean(sb) - cfg / 1000.0, 4) if sb else None,
            "configured_start_s": lab.container_start_delay_ms / 1000.0,
            "start_p50_s": round(statistics.median(stt), 4) if stt else None,
            "start_mean_error_s": round(statistics.fmean(stt) - lab.container_start_delay_ms
                                        / 1000.0, 4) if stt else None,
        }
    diff_cfg = (lab.kata_sandbox_delay_ms - lab.runc_sandbox_delay_ms) / 1000.0
    k, b = acc["kata"]["sandbox_p50_s"], acc["baseline"]["sandbox_p50_s"]
    lags = sorted(x.lag_s for x in receipt_lags(ev))
    out = {
        "verdicts": verdicts,
        "pods_measured": pods,
        "repetitions": len(ev.kata.repetitions) if ev.kata else 0,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_pod": round(1000 * cpu / pods, 1) if pods else None,
        "wall_s_per_pod": round(wall / pods, 2) if pods else None,
        "http_requests": REQUESTS["n"] - req0,
        "http_requests_per_pod": round((REQUESTS["n"] - req0) / pods, 2) if pods else None,
        "peak_rss_growth_mib": round(_rss_mib() - rss0, 1),
        "accuracy": acc,
        "sandbox_difference": {
            "configured_s": diff_cfg,
            "measured_p50_s": round(k - b, 4) if k is not None and b is not None else None,
            "relative_error": round(abs((k - b) - diff_cfg) / diff_cfg, 4)
            if k is not None and b is not None else None},
        "watch_lag_s": {"min": round(lags[0], 3), "p50": round(lags[len(lags) // 2], 3),
                        "max": round(lags[-1], 3), "n": len(lags),
                        "clock_uncertainty_s": round(ev.clock.uncertainty_s, 3)
                        if ev.clock else None} if lags else None,
    }
    return out, ctx


def record(ctx: Context, path: Path) -> None:
    write_bundle(path, scope=ctx.target.scope, target=ctx.target.name, host=None,
                 parts=ctx.record(["keda"]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--record", type=Path, default=None)
    args = ap.parse_args()
    if labc.binaries().missing(keda=True):
        print("cluster lab binaries missing: run scripts/bootstrap.d/30-cluster.sh",
              file=sys.stderr)
        return 2
    _count_requests()
    results: dict[str, Any] = {"profile": "lab", "runs": []}
    with tempfile.TemporaryDirectory(prefix="kgc-keda-bench-") as tmp:
        lab = labc.Lab(Path(tmp) / "lab", die_with_parent=True)
        state = lab.up()
        prof = load_profile(state["profile"])  # profiles/lab.yaml + the lab's endpoint
        try:
            for i in range(args.runs):
                r, ctx = one_run(state["kubeconfig"], prof)
                print(json.dumps({"run": i + 1, **r}), file=sys.stderr, flush=True)
                results["runs"].append(r)
                if args.record and i == 0:
                    args.record.mkdir(parents=True, exist_ok=True)
                    record(ctx, args.record / "lab-good.json")
            if args.record:
                raw = yaml.safe_load(Path(state["profile"]).read_text())
                raw["cluster"]["keda"].update(
                    repetitions=1, gpu={"per_pod": 8, "resource": "nvidia.com/gpu"},
                    timeouts={**raw["cluster"]["keda"]["timeouts"], "activation_s": 15,
                              "ready_s": 20})
                bad = Profile.model_validate(raw)
                _, ctx = one_run(state["kubeconfig"], bad)
                record(ctx, args.record / "lab-unschedulable.json")
        finally:
            labc.down(lab.paths.root)
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
