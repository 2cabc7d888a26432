"""GPU layer benchmark on the cluster lab: API calls and wall per GPU pod, pods of one run in
parallel up to the profile's bound, and the suite's own overhead beyond the pods' start time.

    .venv/bin/python benchmarks/gpu_bench.py [--kubeconfig F] [--pods 1,2,4,8]
                                             [--parallel 1,4,8] [--repeat 2]

Without ``--kubeconfig`` a lab (no KEDA) is brought up in a temporary run directory and
taken down at the end; the runs use the kgc-certify ServiceAccount, as a certification
does. Each measurement is one live gather of the gpu layer (preflight, namespace, collector
ConfigMap, the pods, logs, teardown) through the engine, as ``pytest -m gpu`` does.

Counted: every HTTP request the kubernetes client sends (a watch stream counts once per
connection), by verb and resource. Timed (time.monotonic): the whole gather, its phases
(preflight, run setup, the pods, teardown) and each pod from its create to the end of
waiting (``waited_s``). Overhead = gather wall - the pods' own span, where the span is the
longest pod when all pods are in flight at once, else the sum of the longest pod of each
wave of ``max_parallel`` pods. Prints JSON.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes.client import rest

from kgc import kube
from kgc.core.engine import Context
from kgc.core.profile import load_profile, profiles_dir
from kgc.core.registry import load_layers
from kgc.core.target import ClusterTarget
from kgc.layers.gpu import live
from kgc_lab.cluster import lab as labmod
from kgc_lab.cluster import scenarios_gpu

CALLS: collections.Counter[str] = collections.Counter()
PHASES: dict[str, float] = {}


def _kind(method: str, url: str) -> str:
    """"GET pods/log", "POST pods", "GET events (watch)"... from a request URL."""
    path = url.split("?", 1)[0].split("://", 1)[-1]
    parts = [p for p in path.split("/")[1:] if p]  # without the host
    if parts[:1] == ["api"]:
        parts = parts[2:]
    elif parts[:1] == ["apis"]:
        parts = parts[3:]
    if len(parts) >= 3 and parts[0] == "namespaces":
        parts = parts[2:]  # a namespaced resource
    res = parts[0] if parts else "?"
    if len(parts) >= 3:
        res += "/" + parts[2]  # a subresource (pods/<name>/log)
    return f"{method} {res}{' (watch)' if 'watch=true' in url else ''}"


def _count() -> None:
    orig = rest.RESTClientObject.request

    def request(self: Any, method: str, url: str, *a: Any, **kw: Any) -> Any:
        CALLS[_kind(method, url)] += 1
        return orig(self, method, url, *a, **kw)

    rest.RESTClientObject.request = request  # type: ignore[method-assign]


@contextlib.contextmanager
def timed(name: str) -> Iterator[None]:
    t0 = time.monotonic()
    try:
        yield
    finally:
        PHASES[name] = PHASES.get(name, 0.0) + time.monotonic() - t0


def _phases() -> None:
    """Time the gather's phases by wrapping the functions it calls."""
    pre, runp = live.preflight, kube.run_pods
    setup, teardown = kube.Run.setup, kube.Run.teardown

    def preflight(*a: Any, **kw: Any) -> Any:
        with timed("preflight"):
            return pre(*a, **kw)

    def run_pods(*a: Any, **kw: Any) -> Any:
        with timed("pods"):
            return runp(*a, **kw)

    def run_setup(self: Any) -> Any:
        with timed("run setup (namespace, default SA)"):
            return setup(self)

    def run_teardown(self: Any) -> Any:
        with timed("teardown"):
            return teardown(self)

    live.preflight = preflight  # type: ignore[assignment]
    kube.run_pods = run_pods  # type: ignore[assignment]
    kube.Run.setup = run_setup  # type: ignore[method-assign]
    kube.Run.teardown = run_teardown  # type: ignore[method-assign]


def one_run(kubeconfig: Path, pods: int, parallel: int, nodes: int) -> dict[str, Any]:
    base = load_profile(profiles_dir() / "lab.yaml")
    per_node = max(1, pods // nodes)
    gp = base.cluster.gpu.model_copy(update={"pods_per_node": per_node,
                                             "max_nodes": max(1, pods // per_node),
                                             "max_parallel": parallel})
    prof = base.model_copy(update={"cluster": base.cluster.model_copy(update={"gpu": gp})})
    CALLS.clear()
    PHASES.clear()
    ctx = Context(target=ClusterTarget(str(kubeconfig)), profile=prof, layers=load_layers())
    t0 = time.monotonic()
    ev = ctx.evidence("gpu")
    wall = time.monotonic() - t0
    statuses = {v.check: str(v.status) for v in ctx.judge_all(["gpu"])}
    waited = [p.waited_s or 0.0 for p in ev.pods]
    waves = [waited[i:i + parallel] for i in range(0, len(waited), parallel)]
    span = sum(max(w) for w in waves) if waves else 0.0
    n = len(ev.pods)
    total_calls = sum(CALLS.values())
    return {
        "pods": n, "max_parallel": parallel, "wall_s": round(wall, 2),
        "pod_waited_s": {"min": round(min(waited), 2), "median": round(statistics.median(
            waited), 2), "max": round(max(waited), 2)} if waited else None,
        "pods_span_s": round(span, 2),
        "overhead_s": round(wall - span, 2),
        "wall_per_pod_s": round(wall / n, 2) if n else None,
        "api_calls": total_calls,
        "api_calls_per_pod": round(total_calls / n, 2) if n else None,
        "calls": dict(sorted(CALLS.items())),
        "phases_s": {k: round(v, 2) for k, v in PHASES.items()},
        "verdicts": collections.Counter(statuses.values()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--kubeconfig", type=Path, default=None,
                    help="a running lab's kgc-certify kubeconfig (default: start a lab)")
    ap.add_argument("--pods", default="1,2,4,8")
    ap.add_argument("--parallel", default="1,4,8")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    _count()
    _phases()
    out: dict[str, Any] = {"runs": []}
    with contextlib.ExitStack() as stack:
        if a.kubeconfig is None:
            run_dir = Path(tempfile.mkdtemp(prefix="kgc-gpu-bench-"))
            lab = labmod.Lab(run_dir, keda=False)
            st = lab.up()
            stack.callback(labmod.down, run_dir)
            out["lab_up_s"] = st.get("up_s")
            h = scenarios_gpu.handle(kube.connect(st["kubeconfig"]), run_dir, st["server"])
            kc = h.sa_kubeconfig
        else:
            kc = a.kubeconfig
        nodes = labmod.lab_cluster_profile().lab.gpu_nodes
        for pods in [int(x) for x in a.pods.split(",")]:
            for par in [int(x) for x in a.parallel.split(",")]:
                if par > pods and par != max(int(x) for x in a.parallel.split(",")):
                    continue  # more parallelism than pods measures nothing new
                for _ in range(a.repeat):
                    r = one_run(kc, pods, par, nodes)
                    out["runs"].append(r)
                    print(json.dumps({k: r[k] for k in ("pods", "max_parallel", "wall_s",
                                                        "pods_span_s", "overhead_s",
                                                        "api_calls", "api_calls_per_pod")}),
                          flush=True)
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
