"""The gpu LAYER as the engine sees it: a catalogue whose entries judge a whole run
(preflight once, per-pod checks aggregated over the pods), recorded into cluster bundles
and replayed to identical verdicts; the live gather's failure paths become verdicts that
name them (never a crash, never a pass); the real H200 bundle passes offline, the CPU-only
one fails."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from gpu.synth import GPU_FIX, cases, h200_profile, node
from kgc.core.bundle import load_bundle
from kgc.core.engine import Context
from kgc.core.layer import Scope
from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers
from kgc.kube import KubeError
from kgc.layers import gpu as gpu_layer
from kgc.layers.gpu import LAYER, SCOPE, GpuRunEvidence, judge_run
from kgc.layers.gpu import collect as gather_mod
from kgc.layers.gpu.checks import CHECKS
from kgc.layers.gpu.dra import DRA_CHECKS
from kgc.layers.gpu.plan import PodPlan

REPO = Path(__file__).resolve().parents[2]
PROFILE = GPU_FIX / "h200.profile.yaml"
CC_IDS = ("gpu.cc-attestation", "gpu.cc-mode", "gpu.cc-ready", "gpu.cc-tee")


def statuses(run: GpuRunEvidence, profile: Any = None) -> dict[str, str]:
    p = profile or h200_profile()
    return {c.id: str(c.evaluate(run, p).status) for c in LAYER.checks}


def test_the_layer_is_cluster_scoped_with_the_whole_catalogue() -> None:
    assert LAYER.scope is Scope.CLUSTER and LAYER.markers == ("cluster",)
    assert [c.id for c in LAYER.checks] == [c.id for c in CHECKS] and len(LAYER.checks) == 27
    assert load_layers()["gpu"] is LAYER
    for c in LAYER.checks:
        orig = CHECKS.get(c.id)
        assert (c.title, c.severity, c.remediation) == (orig.title, orig.severity,
                                                        orig.remediation)


def test_the_real_h200_run_passes_every_check_but_unique() -> None:
    got = statuses(cases()["h200-good"])
    assert got.pop("gpu.unique") == "skip"
    assert {got.pop(c) for c in DRA_CHECKS} == {"skip"}  # a device-plugin profile
    assert {got.pop(c) for c in CC_IDS} == {"skip"}  # CC not asked
    for dra in ("gpu.dra-allocation", "gpu.dra-device-match"):  # request.mode device-plugin
        assert got.pop(dra) == "skip"
    assert set(got.values()) == {"pass"}, got


def test_two_pods_with_distinct_gpus_pass_everything() -> None:
    got = statuses(cases()["two-pods-distinct"])
    assert {got.pop(c) for c in DRA_CHECKS} == {"skip"}  # a device-plugin profile
    assert {got.pop(c) for c in CC_IDS} == {"skip"}  # CC not asked
    assert {got.pop("gpu.dra-allocation"), got.pop("gpu.dra-device-match")} == {"skip"}
    assert set(got.values()) == {"pass"}


def test_per_pod_checks_aggregate_and_name_the_deciding_pods() -> None:
    run = cases()["duplicate-uuid"]
    out = judge_run(LAYER.checks.get("gpu.unique"), run, h200_profile())
    assert out.status is Status.FAIL
    assert out.reason.startswith("2 of 2 pods fail: gpu-a/kgc-gpu-0: ")
    assert "gpu-a/kgc-gpu-1:" in out.reason
    pods = out.evidence["pods"]
    assert set(pods) == {"gpu-a/kgc-gpu-0", "gpu-a/kgc-gpu-1"}
    assert pods["gpu-a/kgc-gpu-0"]["evidence"]["node"] == "gpu-a"
    assert pods["gpu-a/kgc-gpu-0"]["evidence"]["pod"] == "kgc-run1/kgc-gpu-0"


def test_preflight_checks_judge_the_cluster_once() -> None:
    run = cases()["runtimeclass-missing"]
    out = judge_run(LAYER.checks.get("gpu.runtimeclass"), run, h200_profile())
    assert out.status is Status.FAIL and "'kata-qemu-nvidia-gpu' does not exist" in out.reason
    assert "pods" not in out.evidence
    assert all(SCOPE[c] == "cluster" for c in ("gpu.runtimeclass", "gpu.nodes-advertise"))


def test_a_run_without_pods_keeps_each_checks_own_reason() -> None:
    run = GpuRunEvidence(cases()["h200-good"].cluster, (), ("nodes could not be listed: x",))
    out = judge_run(LAYER.checks.get("gpu.pod-runs"), run, h200_profile())
    # no GPU pod at all: the layer has no subject, an error (issue 21), with the run's reason
    assert out.status is Status.ERROR and "nodes could not be listed: x" in out.reason
    out = judge_run(LAYER.checks.get("gpu.in-vm"), run, h200_profile())
    assert out.status is Status.SKIP and "nodes could not be listed: x" in out.reason


def test_a_wrong_evidence_type_is_an_error_verdict_not_a_crash() -> None:
    v = LAYER.checks.get("gpu.pod-runs").judge({"not": "a run"}, h200_profile(), "c")
    assert v.status is Status.ERROR and "GpuRunEvidence" in v.reason


@pytest.mark.parametrize("name", sorted(cases()))
def test_every_recorded_run_replays_through_the_engine_to_identical_verdicts(
        name: str, tmp_path: Path) -> None:
    from kgc.core.bundle import write_bundle

    run = cases()[name]
    b = write_bundle(tmp_path / "b.json", scope=Scope.CLUSTER, target="c",
                     parts={"gpu": LAYER.record(run)})  # type: ignore[misc]
    prof = load_profile(PROFILE)
    ctx = Context(target=load_bundle(b, load_layers()), profile=prof)
    replayed = {v.check: (str(v.status), v.reason) for v in ctx.judge_all(["gpu"])}
    direct = {c.id: (str(s.status), s.reason) for c in LAYER.checks
              for s in [c.evaluate(run, prof)]}
    assert replayed == direct
    assert {v.origin for v in ctx.judge_all(["gpu"])} == {"bundle"}


@pytest.mark.parametrize("bundle,rc,fails", [
    ("h200.bundle.json", 0, set()),
    ("cpu-only.bundle.json", 1, {"gpu.pci-function", "gpu.smi-count"}),
])
def test_offline_the_real_h200_bundle_passes_and_the_cpu_only_one_fails(
        bundle: str, rc: int, fails: set[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "kgc.cli", "evaluate", str(GPU_FIX / bundle),
                           "--profile", str(PROFILE), "--json"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == rc, proc.stderr
    doc = json.loads(proc.stdout)
    got = {r["check"]: r["status"] for r in doc["results"] if r["layer"] == "gpu"}
    assert len(got) == 27
    assert {c for c, s in got.items() if s in ("fail", "error")} == fails
    if not fails:
        assert {s for c, s in got.items() if c != "gpu.unique" and c not in CC_IDS
                and not c.startswith("gpu.dra-")} == {"pass"}
    for r in doc["results"]:
        assert r["origin"] == "bundle" and not r["simulated"]


def test_the_bundles_say_they_are_partly_synthetic() -> None:
    for name in ("h200.bundle.json", "cpu-only.bundle.json"):
        doc = json.loads((GPU_FIX / name).read_text())
        assert "synthetic" in doc["meta"]["synthetic"] and "real" in doc["meta"]["synthetic"]
    assert "partly synthetic" in (GPU_FIX / "README.md").read_text()


# --------------------------------------------------------------------------- gather paths
class FakeKube:
    """Just enough of kgc.kube.Kube for preflight: each list answers from a table."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        outer = self

        class Api:
            def __getattr__(self, name: str) -> Any:
                def fn(*a: Any, **kw: Any) -> Any:
                    ans = outer.answers[name]
                    if isinstance(ans, BaseException):
                        raise ans
                    return type("R", (), {"data": json.dumps({"items": ans}).encode()})()
                return fn

        self.node = self.core = Api()

    def call(self, verb: str, resource: str, fn: Any, *a: Any, **kw: Any) -> Any:
        return fn(*a, **kw)


def node_obj(name: str, gpus: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
            "status": {"capacity": {"nvidia.com/pgpu": str(gpus)},
                       "allocatable": {"nvidia.com/pgpu": str(gpus)},
                       "nodeInfo": {"kernelVersion": "6.8.0-57-generic"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def test_preflight_records_a_refused_list_as_an_error_not_an_exception() -> None:
    k = FakeKube({
        "list_runtime_class": KubeError("the API server refused list runtimeclasses (403)"),
        "list_node": [node_obj("b", 1), node_obj("a", 2)],
        "list_namespaced_pod": ApiException(status=500, reason="Internal Server Error"),
    })
    ev = gather_mod.preflight(k, h200_profile())  # type: ignore[arg-type]
    assert ev.runtime_classes is None and "refused list runtimeclasses" in \
        ev.errors["runtime_classes"]
    assert [n.name for n in ev.nodes or ()] == ["a", "b"]
    assert ev.nodes and ev.nodes[0].kernel_version == "6.8.0-57-generic"
    assert ev.plugin_pods is None and ev.errors["plugin_pods"].startswith("500")
    out = judge_run(LAYER.checks.get("gpu.runtimeclass"), GpuRunEvidence(ev), h200_profile())
    assert out.status is Status.ERROR and "403" in out.reason


def test_preflight_without_a_plugin_selector_does_not_list_pods() -> None:
    k = FakeKube({"list_runtime_class": [], "list_node": []})
    ev = gather_mod.preflight(k, h200_profile(device_plugin_selector=None))  # type: ignore[arg-type]
    assert ev.plugin_pods is None and ev.errors == {}


def test_a_run_that_cannot_create_its_namespace_errors_every_planned_pod(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Any) -> Any:
        raise KubeError('the API server refused create namespaces (403 Forbidden): '
                        'namespaces is forbidden')

    monkeypatch.setattr(gather_mod.kube.Run, "__enter__", refuse)
    cl = cases()["h200-good"].cluster
    plans = [PodPlan("kgc-gpu-a-0", "gpu-a", "nvidia.com/pgpu", 1),
             PodPlan("kgc-gpu-a-1", "gpu-a", "nvidia.com/pgpu", 1)]
    prof = load_profile(PROFILE)
    pods = gather_mod.run_plan(object(), prof.cluster, h200_profile(), cl, plans)  # type: ignore[arg-type]
    assert [p.name for p in pods] == ["kgc-gpu-a-0", "kgc-gpu-a-1"]
    run = GpuRunEvidence(cl, tuple(pods))
    out = judge_run(LAYER.checks.get("gpu.pod-runs"), run, h200_profile())
    assert out.status is Status.ERROR
    assert "refused create namespaces" in out.reason and "2 of 2 pods error" in out.reason
    for c in ("gpu.in-vm", "gpu.smi-count"):
        assert judge_run(LAYER.checks.get(c), run, h200_profile()).status is Status.SKIP


def test_an_unreachable_api_server_is_a_target_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from kgc.core.target import TargetError

    class Down:
        def server_version(self) -> str:
            raise KubeError("cannot reach the API server https://127.0.0.1:1", "check it is up")

        def close(self) -> None:
            pass

    class Target:
        def connect(self) -> Any:
            return Down()

    ctx = type("Ctx", (), {"target": Target(), "profile": load_profile(PROFILE)})()
    with pytest.raises(TargetError, match="cannot reach") as err:
        gpu_layer.gather(ctx)
    assert err.value.remediation == "check it is up"


def test_pod_evidence_from_an_outcome_reads_the_log_and_names_the_budget() -> None:
    from kgc.kube import PodOutcome

    raw = (REPO / "fixtures/guest/h200-firecracker.raw.txt").read_text()
    cl = cases()["h200-good"].cluster
    p = PodPlan("kgc-gpu-a-0", "gpu-a", "nvidia.com/pgpu", 1)
    pod = {"metadata": {"name": p.name, "namespace": "kgc-x"},
           "spec": {"nodeName": "gpu-a", "runtimeClassName": "kata-qemu-nvidia-gpu",
                    "containers": [{"name": "collector", "image": "img"}]},
           "status": {"phase": "Succeeded"}}
    ev = gather_mod.pod_evidence(p, {}, PodOutcome(p.name, pod=pod, log=raw, waited_s=4.2,
                                                   settled="the pod succeeded"),
                                 cl, h200_profile())
    assert ev.guest is not None and ev.guest.gpu_uuids and ev.node_kernel == \
        node().kernel_version
    assert ev.budget_s == gather_mod.finish_budget_s(h200_profile()) and ev.waited_s == 4.2
    never = gather_mod.pod_evidence(p, {"metadata": {"name": p.name}}, PodOutcome(
        p.name, timed_out=True, waited_s=60, settled="not scheduled within 60 s"), cl,
        h200_profile())
    assert never.budget_s == h200_profile().schedule_timeout_s and never.timed_out
