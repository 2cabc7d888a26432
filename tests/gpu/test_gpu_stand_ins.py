"""Which gpu verdicts rest on a stand-in, judged from the record itself whoever runs the suite
(issue 18.6): a plain profile (``cluster.simulated`` false, as a user's is) judging a run whose
GPU pod ran on a kwok node marks every verdict that rests on that pod or that node, leaves the
RuntimeClass checks (API objects only) unmarked, and the gate never certifies the layer on it.

Inputs: ``fixtures/gpu/h200-good.run.json`` (the real H200 guest capture), its node replaced
by kwok's own node template (kwok ``kustomize/kwokctl/resource/node.yaml``: annotation
``kwok.x-k8s.io/node: fake``) and the pod's events by what kwok's default pod stage reports
(kwok ``kustomize/stage/pod/general/pod-create.yaml``: ``Normal Created "Created container"``,
reported as ``kwok_controller``, kwok ``pkg/kwok/controllers/controller.go``).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from kgc.core.engine import Context
from kgc.core.layer import Scope
from kgc.core.profile import load_profile
from kgc.gate.gate import evaluate, layer_catalogue, parse_verdict
from kgc.layers.gpu import LAYER, GpuRunEvidence, event_from_api, node_from_api

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "gpu" / "h200-good.run.json"
PROFILE = ROOT / "fixtures" / "gpu" / "h200.profile.yaml"

KWOK_CREATED = {"type": "Normal", "reason": "Created", "message": "Created container",
                "source": {"component": "kwok_controller"}}
KUBELET_STARTED = {"type": "Normal", "reason": "Started", "message": "Started container gpu",
                   "source": {"component": "kubelet", "host": "gpu-a"}}


def _raw_node(recorded: Any, kwok: bool) -> dict[str, Any]:
    """The recorded node as the API serves it; kwok's (its annotation) or a real kubelet's."""
    md: dict[str, Any] = {"name": recorded.name, "labels": dict(recorded.labels)}
    if kwok:
        md["annotations"] = {"kwok.x-k8s.io/node": "fake"}
    return {"metadata": md, "status": {
        "nodeInfo": {"kernelVersion": recorded.kernel_version,
                     "kubeletVersion": "v1.33.1"},
        "capacity": dict(recorded.capacity), "allocatable": dict(recorded.allocatable),
        "conditions": [{"type": "Ready", "status": "True"}]}}


def run(kwok_node: bool, events: tuple[dict[str, Any], ...] = ()) -> GpuRunEvidence:
    ev = GpuRunEvidence.from_dict(json.loads(RUN.read_text()))
    nodes = tuple(node_from_api(_raw_node(n, kwok_node)) for n in ev.cluster.nodes or ())
    pods = tuple(dataclasses.replace(p, events=p.events + tuple(event_from_api(e)
                                                                 for e in events))
                 for p in ev.pods)
    return dataclasses.replace(ev, cluster=dataclasses.replace(ev.cluster, nodes=nodes),
                               pods=pods)


def judge(ev: GpuRunEvidence) -> dict[str, Any]:
    """Every gpu verdict as `pytest -m gpu` gives it, under the profile a user judges with
    (cluster.simulated is false there)."""
    prof = load_profile(PROFILE)
    assert not prof.cluster.simulated
    target = SimpleNamespace(name="cluster", scope=Scope.CLUSTER, origin="live")
    ctx = Context(target, prof, {"gpu": dataclasses.replace(LAYER, gather=lambda c: ev)})  # type: ignore[arg-type]
    return {v.check: v for v in ctx.judge_all(["gpu"])}


POD_CHECKS = {"gpu.pod-runs", "gpu.in-vm", "gpu.pci-function", "gpu.smi-count",
              "gpu.product", "gpu.memory", "gpu.driver", "gpu.cuda", "gpu.unique"}


def test_a_real_kubelets_run_is_not_marked() -> None:
    got = judge(run(kwok_node=False, events=(KUBELET_STARTED,)))
    assert {v.status for v in got.values()} <= {"pass", "skip"}
    assert not [c for c, v in got.items() if v.simulated]


def test_a_pod_on_a_kwok_node_marks_every_verdict_resting_on_it() -> None:
    got = judge(run(kwok_node=True))
    assert got["gpu.in-vm"].status == "pass"  # what the served capture shows ...
    marked = {c for c, v in got.items() if v.simulated}
    # ... rests on a pod no kubelet ran, on a node no kubelet runs
    assert POD_CHECKS <= set(got) and POD_CHECKS | {"gpu.nodes-advertise",
                                                    "gpu.device-plugin"} <= marked
    assert marked.isdisjoint({"gpu.runtimeclass", "gpu.runtimeclass-overhead"})
    why = got["gpu.in-vm"].simulated_why
    assert why == ("evidence from stand-ins: pod kgc-run1/kgc-gpu-0 on gpu-a: kwok node "
                   "(kwok.x-k8s.io/node=fake)"), why
    assert got["gpu.in-vm"].to_dict()["simulated"] is True
    assert got["gpu.nodes-advertise"].simulated_why.endswith(
        "node gpu-a: kwok node (kwok.x-k8s.io/node=fake)")


def test_a_pod_whose_events_a_stand_in_reported_is_marked_on_any_node() -> None:
    got = judge(run(kwok_node=False, events=(KWOK_CREATED,)))
    for c in POD_CHECKS:
        assert got[c].simulated, c
        assert ("its 'Created' event was reported by kwok_controller, not by a kubelet"
                in got[c].simulated_why), c
    pod = got["gpu.in-vm"].evidence["pods"]["gpu-a/kgc-gpu-0"]["evidence"]
    assert pod["stand_in"].startswith("its 'Created' event")  # named in the pod's evidence
    assert not got["gpu.nodes-advertise"].simulated  # the node itself is a real kubelet's


def test_the_gate_never_certifies_the_layer_on_stand_ins() -> None:
    """The gate: results resting on a stand-in are not accepted, and a blocking check whose
    only result is not accepted is not judged -- the two real RuntimeClass passes do not
    make the layer "ok"."""
    from kgc.core import report
    from kgc.core.policy import Policy

    prof = load_profile(PROFILE)
    results = [v.to_dict() for v in judge(run(kwok_node=True)).values()]
    for r in results:
        r["target"] = "cluster"
    ident = report.run_identity(report.profile_digest(prof), {"cluster": "cluster"}, ["gpu"],
                                results)
    status, why = report.overall_and_reason(results)
    doc = {"schema": report.SCHEMA, "run": {
        "started_at": "2026-12-01T00:00:00Z", "finished_at": "2026-12-01T00:00:01Z",
        "duration_s": 1.0, "kgc_version": "0.1.0", "profile": prof.name,
        "profile_source": "", "targets": ["cluster"], "layers": ["gpu"],
        "layers_judged": ["gpu"], "scope": "", "command": [], "environment": {}, **ident},
        "overall": status, "overall_reason": why, "incomplete": False,
        "counts": report.counts(results), "results": results}
    scopes, checks = layer_catalogue()
    res = evaluate(parse_verdict(json.dumps(doc).encode(), "v.json"),
                   Policy(require_layers=("gpu",)), prof.name, {"gpu": scopes["gpu"]},
                   {"gpu": checks["gpu"]}, digest=report.profile_digest(prof))
    assert not res.green and "gpu" not in res.judged  # the console never says "gpu ok"
    missing = {f.check for f in res.blocking if f.status == "missing"}
    assert {"gpu.pod-runs", "gpu.in-vm", "gpu.pci-function", "gpu.smi-count"} <= missing
    texts = [f.text for f in res.blocking if f.check == "gpu.in-vm"]
    assert texts and "no accepted verdict (its result is simulated (evidence from " \
        "stand-ins: pod kgc-run1/kgc-gpu-0" in texts[0], texts
