"""The live driver's pure parts and its local I/O, without a cluster: manifests (round-trip
through the official client's models: a misspelt field would be dropped), the trigger
endpoint (a real HTTP server), the watch state machine fed with recorded-shape events,
stall classification, the profile's endpoint and HPA sync period, and the error paths of
``gather``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import types
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.core.layer import Scope
from kgc.core.profile import load_profile
from kgc.kube.watch import Stamp as KubeStamp
from kgc.layers.keda import collect, endpoint_server, preflight, trigger, workloads
from kgc.layers.keda.evidence import PodRecord, ScaleMark, Stamp
from kgc.layers.keda.profile import KedaEndpoint, KedaProfile
from kgc.layers.keda.stalls import ready_stalls, stuck_phase
from kgc.layers.keda.trigger import (
    HttpTrigger,
    TriggerError,
    endpoint_manifests,
    endpoint_url,
    set_value,
)
from kgc.layers.keda.watches import ScaleWatcher
from kgc.layers.keda.workloads import scaled_object_manifest, workload_manifest

API = client.ApiClient()


def roundtrip(manifest: dict[str, Any], model: Any) -> dict[str, Any]:
    return API.sanitize_for_serialization(model.from_dict(manifest))


# --------------------------------------------------------------------------- manifests


def test_the_two_workloads_differ_only_in_name_role_and_runtime_class() -> None:
    kp = KedaProfile(runtime_class="kata", baseline_runtime_class="runc")  # platform: kata
    kata, base = workload_manifest("kata", kp), workload_manifest("baseline", kp)
    assert roundtrip(kata, client.V1Deployment) == kata
    assert kata["spec"]["replicas"] == 0 and base["spec"]["replicas"] == 0
    assert kata["spec"]["template"]["spec"]["runtimeClassName"] == "kata"
    assert base["spec"]["template"]["spec"]["runtimeClassName"] == "runc"

    def strip(d: dict[str, Any]) -> str:
        text = json.dumps(d, sort_keys=True)
        for a, b in (("kgc-keda-kata", "X"), ("kgc-keda-baseline", "X"), ('"kata"', '"R"'),
                     ('"baseline"', '"R"'), ('"runc"', '"R"')):
            text = text.replace(a, b)
        return text

    assert strip(kata) == strip(base)
    c = kata["spec"]["template"]["spec"]["containers"][0]
    assert c["image"] == kp.image and "nvidia.com/gpu" not in json.dumps(c)  # GPUs off


def test_gpu_requests_follow_the_profile_and_no_runtime_class_for_a_default_baseline() -> None:
    # the resource is the platform's (platform.gpu.resources[0], the section's view)
    kp = KedaProfile.model_validate({"baseline_runtime_class": None, "gpu": {"per_pod": 2},
                                     "gpu_resource": "nvidia.com/pgpu"})
    kata = workload_manifest("kata", kp)
    res = kata["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res["requests"]["nvidia.com/pgpu"] == "2" and res["limits"] == {
        "nvidia.com/pgpu": "2"}
    base = workload_manifest("baseline", kp)
    assert "runtimeClassName" not in base["spec"]["template"]["spec"]


def test_scaled_object_is_scale_to_zero_with_a_metrics_api_value_equal_to_replicas() -> None:
    kp = KedaProfile(replicas=4, polling_interval_s=7, cooldown_period_s=11)
    so = scaled_object_manifest("kata", kp, "http://x/metric")
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"name": "kgc-keda-kata"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (0, 4)
    assert (spec["pollingInterval"], spec["cooldownPeriod"]) == (7, 11)
    trig = spec["triggers"][0]
    assert trig["type"] == "metrics-api" and trig["metricType"] == "AverageValue"
    assert trig["metadata"] == {"url": "http://x/metric", "valueLocation": "value",
                                "targetValue": "1", "activationTargetValue": "0.5"}
    assert so["metadata"]["labels"][workloads.ROLE_LABEL] == "kata"


def test_the_deployed_endpoint_is_a_configmap_script_a_deployment_and_a_service() -> None:
    kp = KedaProfile.model_validate({"endpoint": {"image": "mirror.local/python:3.13",
                                                  "port": 9090,
                                                  "node_selector": {"pool": "system"}}})
    cm, dep, svc = endpoint_manifests(kp)
    assert roundtrip(dep, client.V1Deployment) == dep
    assert roundtrip(svc, client.V1Service) == svc
    assert cm["data"]["endpoint_server.py"] == Path(endpoint_server.__file__).read_text()
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"] == "mirror.local/python:3.13" and pod["nodeSelector"] == {"pool": "system"}
    assert c["command"] == ["python3", "/kgc/endpoint_server.py"] and c["args"] == ["--port",
                                                                                    "9090"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": 9090}
    assert svc["spec"]["selector"] == {"app": trigger.ENDPOINT}
    assert svc["spec"]["ports"][0]["port"] == 9090
    assert endpoint_url(kp, "kgc-abc") == \
        "http://kgc-keda-endpoint.kgc-abc.svc.cluster.local:9090/metric"


@pytest.mark.parametrize("raw,msg", [
    ({"mode": "url"}, "needs endpoint.url"),
    ({"mode": "deploy", "url": "http://x"}, "only read with mode url"),
    ({"mode": "lab"}, "'deploy' or 'url'"),  # the profile names the URL (mode url)
    ({"image": ""}, "python3"),
    ({"mode": "elsewhere"}, "deploy"),
])
def test_endpoint_settings_are_checked(raw: dict[str, Any], msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        KedaEndpoint.model_validate(raw)


# --------------------------------------------------------------------------- the endpoint


@pytest.fixture
def endpoint() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), endpoint_server.handler(endpoint_server.State()))
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _req(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, Any]:
    r = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(r, timeout=5) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data.startswith(b"{") else data
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_endpoint_serves_and_sets_the_value(endpoint: str) -> None:
    assert _req(endpoint + "/healthz") == (200, b"ok")
    code, doc = _req(endpoint + "/metric")
    assert code == 200 and doc["value"] == 0 and doc["sets"] == 0
    code, doc = _req(endpoint + "/metric", "PUT", b'{"value": 3}')
    assert code == 200 and doc["value"] == 3 and doc["sets"] == 1
    assert _req(endpoint + "/metric")[1]["value"] == 3
    for body in (b"nope", b'{"value": "3"}', b'{"value": NaN}', b'[]', b'{"value": true}'):
        code, doc = _req(endpoint + "/metric", "PUT", body)
        assert code == 400 and "error" in doc, body
    assert _req(endpoint + "/other")[0] == 404
    assert _req(endpoint + "/metric")[1]["value"] == 3  # bad requests changed nothing


def test_endpoint_script_runs_as_the_pod_runs_it(tmp_path: Path) -> None:
    """``python3 endpoint_server.py --port N`` with nothing but the standard library."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "endpoint_server.py"
    script.write_text(trigger.endpoint_script())
    p = subprocess.Popen([sys.executable, "-I", str(script), "--port", str(port),
                          "--bind", "127.0.0.1"], stdout=subprocess.PIPE, text=True)
    try:
        assert "listening" in (p.stdout.readline() if p.stdout else "")
        stamp = set_value(HttpTrigger(f"http://127.0.0.1:{port}/metric"), 5, 10)
        assert abs(stamp.wall - time.time()) < 5
        assert _req(f"http://127.0.0.1:{port}/metric")[1]["value"] == 5
    finally:
        p.terminate()
        p.wait(10)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_value_parser_is_total(body: bytes) -> None:
    try:
        v = endpoint_server.parse_value(body)
    except ValueError:
        return
    assert isinstance(v, float)


def test_set_value_waits_bounded_and_says_what_the_endpoint_answered(endpoint: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(TriggerError, match="PUT http://127.0.0.1:9/metric"):
        set_value(HttpTrigger("http://127.0.0.1:9/metric", timeout_s=1), 3, 1.5)
    assert time.monotonic() - t0 < 10

    class Liar(HttpTrigger):
        def put(self, value: float) -> Any:
            return {"value": value + 1}

    with pytest.raises(TriggerError, match="answered .* instead of value 3"):
        set_value(Liar(endpoint + "/metric"), 3, 1.0)


# --------------------------------------------------------------------------- the watch


def _fake_kube() -> Any:
    f = types.SimpleNamespace
    return f(core=f(list_namespaced_pod=None), apps=f(list_namespaced_deployment=None),
             autoscaling=f(list_namespaced_horizontal_pod_autoscaler=None),
             custom=f(list_namespaced_custom_object=None))


def _ks(t: float) -> KubeStamp:
    return KubeStamp(t, 1_780_000_000.0 + t)


def _pod(name: str, role: str = "kata", *, node: str | None = None,
         conds: dict[str, str] | None = None, running: bool = False) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {workloads.ROLE_LABEL: role},
                     "creationTimestamp": "2026-05-28T20:43:21Z"},
        "spec": {"nodeName": node, "containers": [{"name": "app"}]},
        "status": {"conditions": [{"type": t, "status": s} for t, s in (conds or {}).items()],
                   "containerStatuses": [{"name": "app", "state": {"running": {}}}]
                   if running else []},
    }


def _dep(name: str, replicas: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"replicas": replicas}}


def test_watch_state_follows_one_scale_up_and_scale_down() -> None:
    w = ScaleWatcher(_fake_kube(), "ns", ["kata"])
    dep = "kgc-keda-kata"
    w._dep("LISTED", _dep(dep, 0), _ks(0.0))
    w._pod("LISTED", _pod("old"), _ks(0.0))  # a pod from before the trigger: never counted
    w._pod("DELETED", _pod("old"), _ks(0.5))
    so = {"metadata": {"name": dep},
          "status": {"conditions": [{"type": "Active", "status": "True"}]}}
    w._so("MODIFIED", so, _ks(1.0))
    w._so("MODIFIED", so, _ks(1.5))  # still active: the first stamp stays
    w._dep("MODIFIED", _dep(dep, 1), _ks(1.1))
    w._dep("MODIFIED", _dep(dep, 1), _ks(1.2))  # no change: no mark
    w._hpa("MODIFIED", {"spec": {"scaleTargetRef": {"name": dep}},
                        "status": {"desiredReplicas": 3}}, _ks(3.0))
    w._dep("MODIFIED", _dep(dep, 3), _ks(3.1))
    w._pod("ADDED", _pod("a"), _ks(1.3))
    w._pod("MODIFIED", _pod("a", node="n1"), _ks(1.4))
    w._pod("MODIFIED", _pod("a", node="n1", conds={"PodReadyToStartContainers": "True"}),
           _ks(4.4))
    w._pod("MODIFIED", _pod("a", node="n1", conds={"PodReadyToStartContainers": "True",
                                                   "Ready": "True"}, running=True), _ks(4.6))
    st_ = w.states["kata"]
    assert st_.active == Stamp(1.0, 1_780_000_001.0)
    assert [(m.source, m.replicas, m.at.mono) for m in st_.marks] == [
        ("deployment", 1, 1.1), ("hpa", 3, 3.0), ("deployment", 3, 3.1)]
    (rec,) = st_.new_pods()
    assert rec.name == "a" and {k: v.mono for k, v in rec.observed.items()} == {
        "created": 1.3, "scheduled": 1.4, "sandbox_ready": 4.4, "started": 4.6, "ready": 4.6}
    assert st_.ready_count() == 1 and st_.activated()
    # lowered: done only once no pod is left AND the Deployment is at 0
    w.lower(Stamp(10.0, 1_780_000_010.0))
    assert st_.scaled_down is None
    w._dep("MODIFIED", _dep(dep, 0), _ks(14.0))
    assert st_.scaled_down is None  # pod a is still there
    w._pod("DELETED", _pod("a", node="n1"), _ks(15.0))
    assert st_.scaled_down == Stamp(15.0, 1_780_000_015.0)


def test_listed_active_state_is_not_an_activation_and_other_objects_are_ignored() -> None:
    w = ScaleWatcher(_fake_kube(), "ns", ["kata", "baseline"])
    so = {"metadata": {"name": "kgc-keda-kata"},
          "status": {"conditions": [{"type": "Active", "status": "True"}]}}
    w._so("LISTED", so, _ks(0.0))
    w._so("MODIFIED", so, _ks(2.0))
    assert w.states["kata"].active is None
    w._pod("ADDED", _pod("x", role="someone-else"), _ks(1.0))
    w._dep("ADDED", _dep("unrelated", 5), _ks(1.0))
    w._hpa("ADDED", {"spec": {"scaleTargetRef": {"name": "unrelated"}}}, _ks(1.0))
    assert all(not s.pods and not s.marks for s in w.states.values())
    w._pod("ADDED", _pod("b", role="baseline"), _ks(1.0))
    assert [p.name for p in w.states["baseline"].new_pods()] == ["b"]


# --------------------------------------------------------------------------- stalls


def _rec(name: str, *milestones: str, detail: str = "") -> PodRecord:
    return PodRecord(name, {m: Stamp(float(i), float(i)) for i, m in enumerate(milestones)},
                     detail=detail)


@pytest.mark.parametrize("milestones,phase", [
    (("created",), "scheduling"),
    (("created", "scheduled"), "sandbox"),
    (("created", "scheduled", "sandbox_ready"), "start"),
    (("created", "scheduled", "sandbox_ready", "started"), "ready"),
    ((), "scheduling"),
])
def test_a_pod_that_is_not_ready_is_stuck_in_the_phase_after_its_last_milestone(
        milestones: tuple[str, ...], phase: str) -> None:
    assert stuck_phase(_rec("p", *milestones)) == phase


AT = Stamp(100.0, 100.0)


def test_pods_never_created_are_a_decision_stall_when_replicas_stayed_short() -> None:
    pods = [_rec("a", "created", "scheduled", "sandbox_ready", "started", "ready"),
            _rec("b", "created", detail="Pending; PodScheduled=False Unschedulable: 0/3")]
    marks = [ScaleMark("deployment", 1, AT), ScaleMark("deployment", 2, AT),
             ScaleMark("hpa", 2, AT)]
    got = ready_stalls(pods, marks, 4, timeout_s=60, waited_s=60, at=AT,
                       hints={"b": "Pod b FailedScheduling: 0/3",
                              "decision": "HorizontalPodAutoscaler h FailedGetExternalMetric: x"})
    assert [(s.phase, s.pod) for s in got] == [("scheduling", "b"), ("decision", None)]
    assert got[0].detail == "Pending; PodScheduled=False Unschedulable: 0/3"  # no echo
    assert "desired replicas reached 2 of 4 (HPA desiredReplicas at most 2)" in got[1].detail
    assert got[1].detail.endswith("FailedGetExternalMetric: x")


def test_pods_never_created_although_scaled_are_a_creation_stall() -> None:
    got = ready_stalls([], [ScaleMark("deployment", 3, AT)], 3, timeout_s=5, waited_s=5, at=AT,
                       hints={"creation": "ReplicaSet rs FailedCreate: quota"})
    assert [(s.phase, s.pod) for s in got] == [("creation", None)]
    assert "scaled to 3 but only 0 of 3 pods were created; ReplicaSet rs FailedCreate" in \
        got[0].detail


def test_a_complete_scale_up_has_no_stall() -> None:
    ready = [_rec(n, "created", "scheduled", "sandbox_ready", "started", "ready") for n in "ab"]
    assert ready_stalls(ready, [], 2, timeout_s=1, waited_s=1, at=AT) == []


# ------------------------------------------------------ what the profile says, not a lab


class _NoControllerManagerPod:
    """A managed control plane: kube-system shows no kube-controller-manager pod."""

    def __init__(self) -> None:
        self.core = types.SimpleNamespace(list_namespaced_pod=None)

    def call(self, verb: str, resource: str, fn: Any, *a: Any, **kw: Any) -> Any:
        assert (verb, resource, a) == ("list", "pods", ("kube-system",))
        return types.SimpleNamespace(items=[])


def test_the_trigger_endpoint_and_hpa_period_come_from_the_profile_never_a_lab_state(
        endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster whose pods never run (or a shared endpoint): the profile names the
    endpoint's URL and the HPA sync period the API does not show. A lab state file next
    to the kubeconfig (and the variable the lab once exported) is never read: its URL
    answers nothing, its pid is this process."""
    (tmp_path / "kubeconfig").write_text("{}")
    (tmp_path / "state.json").write_text(json.dumps({
        "phase": "up", "metric_url": "http://127.0.0.1:9/metric",
        "processes": [{"name": "kube-controller-manager", "pid": os.getpid(),
                       "exe": sys.executable}]}))
    monkeypatch.setenv("KGC_CLUSTER_RUN_DIR", str(tmp_path))
    kp = KedaProfile.model_validate({"endpoint": {"mode": "url", "url": endpoint + "/metric"},
                                     "hpa_sync_period_s": 7})
    k = _NoControllerManagerPod()
    su = trigger.setup(cast(kube.Kube, k), cast(kube.Run, None), kp, [])
    assert su.url == endpoint + "/metric"
    set_value(su.trigger, 3, 5)
    assert _req(endpoint + "/metric")[1]["value"] == 3  # the profile's endpoint took it
    assert preflight.hpa_sync_period(cast(kube.Kube, k), kp) == (
        7.0, "profile cluster.keda.hpa_sync_period_s: not visible in the API")
    # not in the profile either: unknown (the checks assume 15 s and say so), never a guess
    assert preflight.hpa_sync_period(cast(kube.Kube, k), KedaProfile()) == (None, "")


@pytest.mark.parametrize("v", [0, -1])
def test_the_profiles_hpa_sync_period_is_positive(v: float) -> None:
    with pytest.raises(ValueError, match="greater than 0"):
        KedaProfile.model_validate({"hpa_sync_period_s": v})


def test_the_layer_names_no_lab_state_file_and_no_lab_process() -> None:
    """The keda layer reads the cluster through the API and the profile only: no lab run
    directory, no ``state.json``, no process table of a lab's control plane."""
    src = Path(collect.__file__).parent
    banned = re.compile(r"state\.json|/proc\b|KGC_CLUSTER_RUN_DIR|cmdline|metric_url|"
                        r"run_dir|\bpid\b|[\"']lab[\"']")
    hits = [f"{f.name}:{n}: {line.strip()}" for f in sorted(src.glob("*.py"))
            for n, line in enumerate(f.read_text().splitlines(), 1) if banned.search(line)]
    assert not hits, hits


# --------------------------------------------------------------------------- gather


class _Target:
    scope = Scope.CLUSTER
    origin = "live"

    def __init__(self, k: Any) -> None:
        self.k = k
        self.kubeconfig = None
        self.name = "fake"

    def connect(self) -> Any:
        return self.k


class _Refusing:
    """A Kube whose every call is refused the way the API server refuses."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc
        self.server = "https://fake:6443"
        self.custom = types.SimpleNamespace(get_api_resources=None)
        self.closed = False

    def call(self, *a: Any, **kw: Any) -> Any:
        raise self.exc

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("exc,words", [
    (kube.KubeError("https://fake refused get /apis/keda.sh/v1alpha1 (403 Forbidden)",
                    "grant the user 'get'"), ["403 Forbidden", "grant the user"]),
    (ApiException(status=500, reason="Internal Server Error"), ["500 Internal Server Error"]),
])
def test_the_clusters_refusals_are_an_error_record_not_a_crash(exc: Exception,
                                                              words: list[str]) -> None:
    k = _Refusing(exc)
    ctx = types.SimpleNamespace(target=_Target(k), profile=load_profile("lab"))
    ev = collect.gather(ctx)
    assert ev.status == "error" and all(w in ev.message for w in words), ev.message
    assert k.closed


def test_a_trigger_kgc_cannot_drive_is_refused_by_the_profile() -> None:
    with pytest.raises(ValueError, match="metrics-api"):
        KedaProfile.model_validate({"trigger": "external-push"})


def test_the_workload_trigger_counts_the_runs_marker_pods() -> None:
    kp = KedaProfile.model_validate({"trigger": "kubernetes-workload",
                                     "endpoint": {"node_selector": {"pool": "system"}}})
    so = scaled_object_manifest("kata", kp, "")
    (trig,) = so["spec"]["triggers"]
    assert trig == {"type": "kubernetes-workload", "metricType": "AverageValue",
                    "metadata": {"podSelector": "kgc.io/keda-marker=true", "value": "1",
                                 "activationValue": "0.5"}}
    m = trigger.marker_manifest(2, kp)
    assert roundtrip(m, client.V1Pod) == m
    assert m["metadata"]["name"] == "kgc-keda-marker-2"
    assert m["metadata"]["labels"] == {"kgc.io/keda-marker": "true"}  # never a measured pod
    assert "runtimeClassName" not in m["spec"] and m["spec"]["nodeSelector"] == {
        "pool": "system"}
    assert m["spec"]["terminationGracePeriodSeconds"] == 0
