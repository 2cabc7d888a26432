"""The gpu layer's DRA preflight (``kgc.layers.gpu.dra``) on fixtures/gpu/dra/.

The fixtures are transcribed, not captured (their README and ``source`` keys say from
where: kubernetes-sigs/dra-driver-nvidia-gpu ``cmd/gpu-kubelet-plugin/deviceinfo.go`` and
its chart's ``templates/deviceclass-gpu.yaml``; k8s.io/api ``resource/v1/types.go``): every
verdict here is simulated. The rule ``gpu.dra-both-ways`` rests on the scheduler's
``shouldDelegateResourceToDRA`` (kubernetes ``pkg/scheduler/framework/plugins/noderesources/
fit.go``): an extended resource goes to DRA only where the node's allocatable for it is 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from kgc.core.model import Status
from kgc.core.profile import GpuRequestPlatform
from kgc.layers.gpu import CHECKS, SCOPE
from kgc.layers.gpu.dra import (
    DRA_CHECKS,
    MAX_DEVICES,
    MAX_SLICES,
    DraEvidence,
    evidence_from_api,
    node_gpus,
    requested_name,
    slice_from_api,
)
from kgc.layers.gpu.evidence import ClusterGpuEvidence, GpuRunEvidence, node_from_api
from kgc.layers.gpu.profile import GpuProfile

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "dra"


def fx(name: str) -> Any:
    return json.loads((FIX / name).read_text())


def prof(mode: str = "dra-extended", **kw: Any) -> GpuProfile:
    return GpuProfile(request=GpuRequestPlatform(mode=mode, **kw))  # type: ignore[arg-type]


def cluster(discovery: Any = "discovery-v1.json", classes: Any = "deviceclasses.json",
            slices: Any = "slices-good.json", nodes: str = "nodes-dra.json",
            errors: dict[str, str] | None = None, dra: bool = True) -> ClusterGpuEvidence:
    def load(x: Any) -> Any:
        return fx(x) if isinstance(x, str) else x

    d = evidence_from_api(load(discovery), load(classes), load(slices), driver="gpu.nvidia.com",
                          errors=errors) if dra else None
    return ClusterGpuEvidence(runtime_classes=(), nodes=tuple(
        node_from_api(n) for n in fx(nodes)["items"]), dra=d)


def judge(check_id: str, ev: ClusterGpuEvidence, p: GpuProfile | None = None) -> Any:
    return CHECKS.get(check_id).evaluate(ev, p or prof())


# ------------------------------------------------------------------------ catalogue
def test_the_four_ids_are_cluster_scoped_preflight_checks() -> None:
    for c in DRA_CHECKS:
        assert SCOPE[c] == "cluster" and CHECKS.get(c).title


@pytest.mark.parametrize("check_id", DRA_CHECKS)
def test_every_dra_check_skips_naming_the_device_plugin_mode(check_id: str) -> None:
    o = judge(check_id, cluster(), prof("device-plugin"))
    assert o.status is Status.SKIP and "platform.gpu.request.mode: device-plugin" in o.reason


@pytest.mark.parametrize("check_id", DRA_CHECKS)
def test_missing_dra_evidence_never_passes(check_id: str) -> None:
    o = judge(check_id, cluster(dra=False))
    assert o.status is Status.ERROR and "no DRA evidence" in o.reason


# ------------------------------------------------------------------------ the good cluster
def test_the_good_dra_cluster_passes_every_dra_check_and_nodes_advertise() -> None:
    ev = cluster()
    for c in (*DRA_CHECKS, "gpu.nodes-advertise"):
        o = judge(c, ev)
        assert o.status is Status.PASS, (c, o.reason)
    assert "2 GPU node(s) offer GPUs by DRA" in judge("gpu.nodes-advertise", ev).reason
    assert judge("gpu.dra-slices", ev).evidence["gpus"] == {"gpu-a": 1, "gpu-b": 2}
    # the device-plugin rule demands no plugin pod under DRA
    o = judge("gpu.device-plugin", ev)
    assert o.status is Status.SKIP and "allocated by DRA" in o.reason


def test_under_device_plugin_mode_the_same_nodes_fail_nodes_advertise() -> None:
    """Allocatable 0 is a failure only for the device-plugin rule: the DRA form accepts it."""
    ev = cluster()
    assert judge("gpu.nodes-advertise", ev, prof("device-plugin")).status is Status.FAIL
    assert judge("gpu.nodes-advertise", ev, prof("claim")).status is Status.PASS


def test_a_passthrough_twin_counts_as_the_same_gpu() -> None:
    ev = cluster(slices="slices-passthrough.json")
    assert ev.dra is not None
    assert list(node_gpus(ev.dra, "gpu-a", "gpu.nvidia.com")) == ["0000:9d:00.0"]
    o = judge("gpu.dra-slices", ev, prof(devices_per_node=1))
    # gpu-b publishes nothing in this file
    assert o.status is Status.FAIL and "gpu-b" in o.reason and "gpu-a" not in o.reason


def test_devices_per_node_fewer_fail_more_warn() -> None:
    o = judge("gpu.dra-slices", cluster(), prof(devices_per_node=2))
    assert o.status is Status.FAIL and "gpu-a (1 of 2)" in o.reason
    o = judge("gpu.dra-slices", cluster(), prof(devices_per_node=1))
    assert o.status is Status.WARN and "gpu-b (2, the profile expects 1)" in o.reason


# ------------------------------------------------------------------------ gpu.dra-api
def test_dra_api_fails_when_only_beta_is_served_and_the_rest_skip() -> None:
    ev = cluster(discovery="discovery-beta-only.json", classes=None, slices=None)
    o = judge("gpu.dra-api", ev)
    assert o.status is Status.FAIL and "resource.k8s.io/v1beta1" in o.reason
    for c in ("gpu.dra-device-class", "gpu.dra-slices", "gpu.dra-both-ways"):
        assert judge(c, ev).status is Status.SKIP
    assert judge("gpu.nodes-advertise", ev).status is Status.FAIL
    o = judge("gpu.dra-api", cluster(discovery="discovery-none.json", classes=None, slices=None))
    assert o.status is Status.FAIL and "no version of resource.k8s.io" in o.reason


def test_a_failed_discovery_is_an_error_naming_the_reason() -> None:
    ev = cluster(discovery=None, classes=None, slices=None,
                 errors={"discovery": "503 Service Unavailable"})
    for c in (*DRA_CHECKS, "gpu.nodes-advertise"):
        o = judge(c, ev)
        assert o.status is Status.ERROR and "503" in o.reason, c


# ------------------------------------------------------------------------ device class
def test_device_class_missing_fails_naming_what_exists() -> None:
    o = judge("gpu.dra-device-class", cluster(), prof(device_class="gpu.example.com"))
    assert o.status is Status.FAIL and "gpu.nvidia.com, vfio.gpu.nvidia.com" in o.reason


def test_dra_extended_needs_the_class_to_map_the_requested_name() -> None:
    ev = cluster(classes="deviceclasses-no-extended.json")
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.FAIL and "nvidia.com/gpu" in o.reason
    assert judge("gpu.dra-device-class", ev, prof("claim")).status is Status.PASS
    # the requested name is the one of platform.gpu.resources the class maps
    assert requested_name(prof(), cluster().dra) == "nvidia.com/gpu"
    p = GpuProfile(resources=("nvidia.com/pgpu",), request=GpuRequestPlatform(mode="dra-extended"))
    o = judge("gpu.dra-device-class", cluster(), p)
    assert o.status is Status.FAIL and "platform.gpu.resources: nvidia.com/pgpu" in o.reason


def test_device_classes_unlisted_is_an_error() -> None:
    ev = cluster(classes=None, errors={"device_classes": "403 Forbidden: no"})
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.ERROR and "403" in o.reason


# ------------------------------------------------------------------------ slices
def test_no_slices_fails_naming_every_gpu_node() -> None:
    ev = cluster(slices="slices-none.json")
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.FAIL and "gpu-a, gpu-b" in o.reason and "cpu-1" not in o.reason
    o = judge("gpu.nodes-advertise", ev)
    assert o.status is Status.FAIL and "gpu-a, gpu-b" in o.reason


def test_malformed_slices_are_errors_naming_each_slice() -> None:
    o = judge("gpu.dra-slices", cluster(slices="slices-malformed.json"))
    assert o.status is Status.ERROR
    text = " ".join(o.evidence["problems"])
    for want in ("gpu-a-missing-attributes device gpu-0 lacks the product",
                 "the memory", "'9d:00.0' is not an extended BDF",
                 "device gpu-2 lacks the PCI bus id", "gpu-b-nameless: spec.devices[0]: a "
                 "device without a name", "spec.devices[1]: not an object",
                 "has no single int/bool/string/version value", "capacity 'memory' has no value",
                 "gpu-c-devices-not-a-list: spec.devices is not a list"):
        assert want in text, want


def test_a_slice_of_a_million_devices_is_an_error_naming_it() -> None:
    doc = fx("slice-huge.json")
    s = dict(doc["slice"])
    s["spec"] = dict(s["spec"], devices=[doc["device"]] * doc["repeat"])
    one = slice_from_api(s)
    assert one.device_count == 10**6 and len(one.devices) == MAX_DEVICES
    ev = cluster(slices={"items": [s]})
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.ERROR and "gpu-a-huge lists 1000000 devices" in o.reason


def test_more_slices_than_kept_is_an_error_not_a_partial_pass() -> None:
    good = fx("slices-good.json")
    ev = cluster(slices=dict(good, metadata={"continue": "abc", "remainingItemCount": 9000}))
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.ERROR and "9002" in o.reason and str(MAX_SLICES) in o.reason


def test_older_pool_generations_are_ignored() -> None:
    good = fx("slices-good.json")
    old = json.loads(json.dumps(good["items"][0]))
    old["metadata"]["name"] = "gpu-a-old"
    old["spec"]["pool"]["generation"] = 0
    old["spec"]["devices"] = [{"name": "gpu-9"}]  # malformed, but of an old generation
    ev = cluster(slices=dict(good, items=[*good["items"], old]))
    assert judge("gpu.dra-slices", ev).status is Status.PASS


# ------------------------------------------------------------------------ both ways
def test_a_node_advertising_both_ways_is_named() -> None:
    ev = cluster(nodes="nodes-both-ways.json")
    o = judge("gpu.dra-both-ways", ev)
    assert o.status is Status.FAIL and "gpu-a (allocatable nvidia.com/gpu=1" in o.reason
    assert "gpu-b" not in o.reason and "shouldDelegateResourceToDRA" in o.reason
    assert judge("gpu.dra-both-ways", ev, prof("claim")).status is Status.FAIL


# ------------------------------------------------------------------------ record / replay
def test_dra_evidence_round_trips_and_old_bundles_load_unchanged() -> None:
    ev = cluster(slices="slices-passthrough.json")
    run = GpuRunEvidence(ev)
    again = GpuRunEvidence.from_dict(json.loads(json.dumps(run.to_dict())))
    assert again == run
    old = GpuRunEvidence(cluster(dra=False))
    d = old.to_dict()
    assert "dra" not in d["cluster"]  # a bundle without DRA is written as before
    assert GpuRunEvidence.from_dict(d).cluster.dra is None


def test_replayed_dra_evidence_of_the_wrong_shape_is_refused() -> None:
    from kgc.core.model import EvidenceError

    d = GpuRunEvidence(cluster()).to_dict()
    d["cluster"]["dra"]["slices"][0]["device_count"] = "many"
    with pytest.raises(EvidenceError, match=r"cluster\.dra\.slices\[0\]\.device_count"):
        GpuRunEvidence.from_dict(d)


# ------------------------------------------------------------------------ fuzz
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=12),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=25)
_attr = st.one_of(_json, st.fixed_dictionaries({"string": st.text(max_size=20)}),
                  st.fixed_dictionaries({"int": st.integers()}))
_device = st.one_of(_json, st.fixed_dictionaries(
    {}, optional={"name": st.one_of(st.text(max_size=10), _json),
                  "attributes": st.one_of(_json, st.dictionaries(
                      st.sampled_from(["productName", "uuid", "resource.kubernetes.io/pciBusID",
                                       "type"]), _attr)),
                  "capacity": st.one_of(_json, st.dictionaries(
                      st.sampled_from(["memory", "addressableMemory"]),
                      st.one_of(_json, st.fixed_dictionaries({"value": st.text(max_size=8)}))))}))
_slice = st.one_of(_json, st.fixed_dictionaries({}, optional={
    "metadata": st.one_of(_json, st.fixed_dictionaries({"name": st.text(max_size=8)})),
    "spec": st.one_of(_json, st.fixed_dictionaries({}, optional={
        "driver": st.one_of(st.just("gpu.nvidia.com"), _json),
        "nodeName": st.one_of(st.just("gpu-a"), _json),
        "pool": st.one_of(_json, st.fixed_dictionaries({"name": st.just("gpu-a"),
                                                        "generation": st.just(1)})),
        "devices": st.one_of(_json, st.lists(_device, max_size=4))}))}))


def _well_formed(s: Any) -> bool:
    """What a slice must be for gpu.dra-slices to pass on it alone (the oracle)."""
    try:
        sp = s["spec"]
        if not s["metadata"]["name"] or sp["driver"] != "gpu.nvidia.com":
            return False
        for d in sp["devices"]:
            a, c = d["attributes"], d["capacity"]
            if not (isinstance(d["name"], str) and d["name"]):
                return False
            if set(a) != {k for k in a if isinstance(a[k], dict) and len(a[k]) == 1}:
                return False
            if not a["productName"]["string"]:
                return False
            if not re.match(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$",
                            a["resource.kubernetes.io/pciBusID"]["string"]):
                return False
            if not any(isinstance(c.get(k), dict) and c[k].get("value") for k in c):
                return False
        return bool(sp["devices"])
    except (KeyError, TypeError, AttributeError):
        return False


@hsettings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_slice, max_size=3))
def test_arbitrary_slices_never_crash_and_never_pass_when_malformed(items: list[Any]) -> None:
    ev = ClusterGpuEvidence(
        runtime_classes=(),
        nodes=(node_from_api(fx("nodes-dra.json")["items"][0]),),  # gpu-a only
        dra=evidence_from_api(fx("discovery-v1.json"), fx("deviceclasses.json"),
                              {"items": items}, driver="gpu.nvidia.com"))
    assert isinstance(ev.dra, DraEvidence)
    # the record round-trips whatever was read
    assert GpuRunEvidence.from_dict(GpuRunEvidence(ev).to_dict()).cluster == ev
    for c in (*DRA_CHECKS, "gpu.nodes-advertise"):
        o = judge(c, ev)
        assert o.status in Status
    o = judge("gpu.dra-slices", ev)
    if o.status is Status.PASS:
        mine = [s for s in items if isinstance(s, dict) and isinstance(s.get("spec"), dict)
                and s["spec"].get("driver") == "gpu.nvidia.com"]
        assert mine and all(_well_formed(s) for s in mine if s["spec"].get("nodeName")
                            == "gpu-a"), mine


# ------------------------------------------------------------------------ the collector
class _Kube:
    """Just enough of kgc.kube.Kube for gpu.collect.dra_preflight: answers by method name."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers, self.calls, self.api = answers, [], None

    def call(self, verb: str, resource: str, fn: Any, *a: Any, **kw: Any) -> Any:
        return fn(*a, **kw)

    def client(self) -> Any:
        outer = self

        class Api:
            def __init__(self, _api: Any) -> None:
                pass

            def __getattr__(self, name: str) -> Any:
                def fn(*a: Any, **kw: Any) -> Any:
                    outer.calls.append((name, {k: v for k, v in kw.items()
                                               if not k.startswith("_")}))
                    ans = outer.answers[name]
                    if isinstance(ans, BaseException):
                        raise ans
                    return type("R", (), {"data": json.dumps(ans).encode()})()
                return fn

        return type("client", (), {"ApisApi": Api, "ResourceV1Api": Api})


def _collect(monkeypatch: pytest.MonkeyPatch, answers: dict[str, Any],
             p: GpuProfile | None = None) -> tuple[DraEvidence, list[Any]]:
    from kgc.layers.gpu import collect

    k = _Kube(answers)
    monkeypatch.setattr(collect, "client", k.client())
    return collect.dra_preflight(k, p or prof()), k.calls  # type: ignore[arg-type]


def test_the_collector_reads_discovery_classes_and_the_drivers_slices_in_three_calls(
        monkeypatch: pytest.MonkeyPatch) -> None:
    d, calls = _collect(monkeypatch, {"get_api_versions": fx("discovery-v1.json"),
                                      "list_device_class": fx("deviceclasses.json"),
                                      "list_resource_slice": fx("slices-good.json")})
    assert [c[0] for c in calls] == ["get_api_versions", "list_device_class",
                                     "list_resource_slice"]
    assert calls[2][1] == {"field_selector": "spec.driver=gpu.nvidia.com", "limit": MAX_SLICES}
    assert d.served and d.slice_count == 2 and d.errors == {}
    assert d == cluster().dra


def test_the_collector_does_not_list_what_is_not_served(monkeypatch: pytest.MonkeyPatch) -> None:
    d, calls = _collect(monkeypatch, {"get_api_versions": fx("discovery-beta-only.json")})
    assert [c[0] for c in calls] == ["get_api_versions"]
    assert d.api_versions == ("v1beta1",) and d.slices is None and d.device_classes is None


def test_the_collector_records_refusals_and_404s_as_evidence(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kubernetes.client.rest import ApiException

    from kgc.kube import KubeError

    d, _ = _collect(monkeypatch, {
        "get_api_versions": fx("discovery-v1.json"),
        "list_device_class": ApiException(status=404, reason="Not Found"),
        "list_resource_slice": KubeError("the API server refused list "
                                         "resourceslices.resource.k8s.io (403 Forbidden)")})
    assert d.device_classes is None and d.errors["device_classes"].startswith("404")
    assert d.slices is None and "403" in d.errors["slices"]
    ev = ClusterGpuEvidence(runtime_classes=(), nodes=(), dra=d)
    assert judge("gpu.dra-device-class", ev).status is Status.ERROR
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.ERROR and "403" in o.reason
    d, _ = _collect(monkeypatch, {"get_api_versions": ApiException(status=404, reason="NF")})
    assert d.api_versions is None and d.errors["discovery"].startswith("404")


def test_a_device_plugin_selector_under_dra_judges_the_pods_on_the_dra_gpu_nodes() -> None:
    """With a selector (say, the DRA driver's kubelet plugin pods) gpu.device-plugin judges
    them on the nodes that publish GPUs, not on nodes advertising an extended resource."""
    import dataclasses

    from kgc.layers.gpu.evidence import PluginPod

    p = GpuProfile(device_plugin_selector="app=kubelet-plugin",
                   request=GpuRequestPlatform(mode="dra-extended"))
    pods = (PluginPod("kp-a", "dra", "gpu-a", "Running", True),
            PluginPod("kp-b", "dra", "gpu-b", "Running", True))
    ev = dataclasses.replace(cluster(), plugin_pods=pods)
    assert judge("gpu.device-plugin", ev, p).status is Status.PASS
    ev = dataclasses.replace(cluster(), plugin_pods=pods[:1])
    o = judge("gpu.device-plugin", ev, p)
    assert o.status is Status.FAIL and "gpu-b" in o.reason and "cpu-1" not in o.reason
    # the story is DRA's: the kubelet plugin, and a way out when the selector names a device
    # plugin (DRA nodes run none) - never the sandbox device plugin's GPU Operator label
    assert o.reason.startswith("DRA kubelet plugin") and "dra-extended" in o.reason
    assert "to null" in o.remediation and "vm-passthrough" not in o.remediation


def test_the_pod_plan_under_dra_pins_pods_to_the_nodes_that_publish_gpus() -> None:
    """Under DRA the plan counts a node's GPUs from its ResourceSlices (allocatable is 0 by
    design): the device-plugin rule would plan only probe pods on a healthy DRA cluster."""
    from kgc.layers.gpu.plan import plan

    ev = cluster()
    pods, _notes = plan(ev, prof())
    assert {(p.node, p.resource, p.probe) for p in pods} == {
        ("gpu-a", "nvidia.com/gpu", False), ("gpu-b", "nvidia.com/gpu", False)}
    # the same cluster judged by the device-plugin rule: nothing is advertised, only probes
    dp, _ = plan(ev, prof("device-plugin"))
    assert dp and all(p.probe for p in dp)
    # a GPU node that publishes nothing gets a probe pod, named in the notes
    bare, notes = plan(cluster(slices="slices-none.json"), prof())
    assert bare and all(p.probe for p in bare)
    assert any("gpu.nvidia.com devices (DRA)" in n for n in notes), notes
