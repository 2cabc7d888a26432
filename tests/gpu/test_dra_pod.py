"""The DRA GPU pod (issue 20 step 3): manifests per request mode, the claim evidence's
record round trip, and Kata's DRA cold-plug gap named by the classifier.

Kata texts: kata-containers PR #13323 (fixes #13322), fixtures/gpu/dra-pod/kata-events.yaml.
Field names of the template: k8s.io/api resource/v1 types.go (DeviceRequest.exactly,
ExactDeviceRequest deviceClassName/allocationMode/count/selectors[].cel.expression).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.client.rest import ApiException

from gpu.synth import H200_UUID, REPO, cpu_guest, h200_guest, h200_profile, pod, run, with_uuid
from kgc.core.model import Status, Verdict
from kgc.layers.gpu.checks import CHECKS, PodSubject
from kgc.layers.gpu.classify import classify
from kgc.layers.gpu.dra_pod import claim_from_api, pod_claim_refs
from kgc.layers.gpu.evidence import (
    ClaimEvidence,
    ClaimResult,
    ContainerState,
    GpuPodEvidence,
    PodCondition,
    PodEvent,
)
from kgc.layers.gpu.plan import PodPlan, claim_template_manifest, dra_pod_manifest, gpu_pod_manifest

FIXTURE = REPO / "fixtures" / "gpu" / "dra-pod" / "kata-events.yaml"
CASES = list(yaml.safe_load(Path(FIXTURE).read_text())["cases"])
LABELS = {"kgc.io/run": "r1"}
P = PodPlan("kgc-gpu-gpu-a-0", "gpu-a", "nvidia.com/gpu", 1)


def _gp(mode: str, selector: str | None = None) -> Any:
    gp = h200_profile()
    req = gp.request.model_copy(update={"mode": mode, "selector": selector})
    return gp.model_copy(update={"request": req})


@pytest.mark.parametrize("mode", ["device-plugin", "dra-extended"])
def test_extended_modes_keep_todays_manifest(mode: str) -> None:
    gp = _gp(mode)
    kw: dict[str, Any] = dict(namespace="ns", configmap="cm", labels=LABELS)
    assert dra_pod_manifest(P, gp, **kw) == gpu_pod_manifest(P, gp, **kw)


def test_claim_mode_references_a_v1_template() -> None:
    gp = _gp("claim", 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H200")')
    t = claim_template_manifest(P, gp, namespace="ns", labels=LABELS)
    assert t["apiVersion"] == "resource.k8s.io/v1" and t["kind"] == "ResourceClaimTemplate"
    assert t["metadata"]["labels"]["kgc.io/run"] == "r1"
    (req,) = t["spec"]["spec"]["devices"]["requests"]
    assert set(req) == {"name", "exactly"}
    ex = req["exactly"]
    assert ex["deviceClassName"] == "gpu.nvidia.com" and ex["count"] == 1
    assert ex["allocationMode"] == "ExactCount"
    assert ex["selectors"] == [{"cel": {"expression": gp.request.selector}}]
    m = dra_pod_manifest(P, gp, namespace="ns", configmap="cm", labels=LABELS)
    c = m["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in c["limits"] and "nvidia.com/gpu" not in c["requests"]
    assert c["claims"] == [{"name": "gpu", "request": req["name"]}]
    assert m["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": t["metadata"]["name"]}]


def test_claim_without_selector_has_no_selectors() -> None:
    t = claim_template_manifest(P, _gp("claim"), namespace="ns", labels=LABELS)
    assert "selectors" not in t["spec"]["spec"]["devices"]["requests"][0]["exactly"]


def test_claim_evidence_round_trips_and_old_bundles_load() -> None:
    c = ClaimEvidence(name="kgc-gpu-gpu-a-0-gpu-x1", allocated=True, node="gpu-a",
                      results=(ClaimResult("gpu", "gpu.nvidia.com", "gpu-a", "gpu-0"),),
                      reserved_for=("kgc-gpu-gpu-a-0",),
                      device_attributes={"gpu-0": {"uuid": "GPU-1", "pciBusID": "0000:41:00.0"}})
    p = pod(None, request_mode="claim", claims=(c,))
    assert GpuPodEvidence.from_dict(p.to_dict()) == p
    old = pod(None).to_dict()
    assert "request_mode" not in old and "claims" not in old
    assert GpuPodEvidence.from_dict(old).request_mode == "device-plugin"


def _kata_pod(case: dict[str, Any]) -> GpuPodEvidence:
    events = (PodEvent("Normal", "Scheduled", "Successfully assigned kgc-run1/kgc-gpu-0 to "
                       "gpu-a", 1, "default-scheduler"),
              *(PodEvent(e[0], e[1], e[2], 1, "kubelet") for e in case["events"]))
    return pod(None, phase="Pending", timed_out=True, waited_s=1200.0,
               conditions=(PodCondition("PodScheduled", "True"),), events=events,
               containers=(ContainerState("collector", "waiting", "ContainerCreating"),),
               request_mode=case["request_mode"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kata_dra_gap_is_named_never_a_timeout(case: dict[str, Any]) -> None:
    assert "github.com/" in case["source"] or "kata-containers#" in case["source"]
    cause = classify(_kata_pod(case))
    assert cause.id == case["expect"]["cause"], cause
    text = cause.summary + " " + cause.remediation
    for w in case["expect"]["words"]:
        assert w in text, (w, text)


# =========================================================================== checks
CLAIM = json.loads((REPO / "fixtures/gpu/dra-pod/claim-allocated.json").read_text())["claim"]
SLICES = json.loads((REPO / "fixtures/gpu/dra-pod/slice.json").read_text())["slices"]


def _judge(check: str, p: GpuPodEvidence | None, mode: str = "claim") -> Verdict:
    r = run(p) if p is not None else run()
    return CHECKS.get(check).judge(PodSubject(p, r), _gp(mode), "cluster")


def _dra_pod(claim: Any = None, guest: Any = "h200", mode: str = "claim",
             **kw: Any) -> GpuPodEvidence:
    c = claim_from_api(CLAIM if claim is None else claim, SLICES)
    return pod(h200_guest() if guest == "h200" else guest, request_mode=mode, claims=(c,), **kw)


def test_the_transcribed_claim_parses_with_its_slice_attributes() -> None:
    c = claim_from_api(CLAIM, SLICES)
    assert c.allocated and c.error is None and c.node == "gpu-a"
    assert c.results == (ClaimResult("gpu", "gpu.nvidia.com", "gpu-a", "gpu-0"),)
    assert c.reserved_for == ("kgc-gpu-0",)
    assert c.device_attributes["gpu-0"]["uuid"] == H200_UUID


@pytest.mark.parametrize("check", ["gpu.dra-allocation", "gpu.dra-device-match"])
def test_both_checks_skip_naming_the_mode_under_device_plugin(check: str) -> None:
    v = _judge(check, _dra_pod(), mode="device-plugin")
    assert v.status is Status.SKIP and "device-plugin" in v.reason


def test_allocation_passes_on_the_transcribed_claim_and_names_the_device() -> None:
    v = _judge("gpu.dra-allocation", _dra_pod())
    assert v.status is Status.PASS and "gpu.nvidia.com/gpu-a/gpu-0" in v.reason, v.reason


def test_allocation_without_claim_evidence_is_an_error() -> None:
    v = _judge("gpu.dra-allocation", pod(h200_guest(), request_mode="claim"))
    assert v.status is Status.ERROR and "no ResourceClaim" in v.reason


def _claim(**status: Any) -> dict[str, Any]:
    c = copy.deepcopy(CLAIM)
    c["status"].update(status)
    return c


def test_allocation_failures_name_the_claim() -> None:
    unalloc = copy.deepcopy(CLAIM)
    del unalloc["status"]["allocation"]
    v = _judge("gpu.dra-allocation", _dra_pod(unalloc))
    assert v.status is Status.FAIL and "kgc-gpu-0-gpu-7xk2p is not allocated" in v.reason
    other = _claim(reservedFor=[{"resource": "pods", "name": "someone-else"}])
    v = _judge("gpu.dra-allocation", _dra_pod(other))
    assert v.status is Status.FAIL and "someone-else" in v.reason
    wrong = copy.deepcopy(CLAIM)
    wrong["status"]["allocation"]["devices"]["results"][0]["driver"] = "vfio.gpu.nvidia.com"
    v = _judge("gpu.dra-allocation", _dra_pod(wrong))
    assert v.status is Status.FAIL and "vfio.gpu.nvidia.com" in v.reason
    elsewhere = copy.deepcopy(CLAIM)
    elsewhere["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"] = ["gpu-b"]
    v = _judge("gpu.dra-allocation", _dra_pod(elsewhere))
    assert v.status is Status.FAIL and "gpu-b" in v.reason


@pytest.mark.parametrize("results", [None, [], [{}] * 65, [{"driver": "gpu.nvidia.com"}],
                                     "junk"])
def test_malformed_claims_are_errors_naming_the_claim(results: Any) -> None:
    bad = copy.deepcopy(CLAIM)
    bad["status"]["allocation"]["devices"]["results"] = results
    v = _judge("gpu.dra-allocation", _dra_pod(bad))
    assert v.status is Status.ERROR and "kgc-gpu-0-gpu-7xk2p" in v.reason, v.reason


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda ch: st.lists(ch, max_size=4) | st.dictionaries(
                        st.sampled_from(["status", "allocation", "devices", "results",
                                         "metadata", "name", "reservedFor", "driver"]), ch,
                        max_size=4), max_leaves=20))
@settings(max_examples=150, deadline=None)
def test_any_claim_object_parses_without_crashing_and_never_passes_blind(obj: Any) -> None:
    claim_from_api(CLAIM, obj)  # a malformed slice list is no crash either
    claim_from_api(CLAIM, [obj, {"spec": obj}])
    c = claim_from_api(obj, SLICES)
    v = _judge("gpu.dra-allocation", pod(h200_guest(), request_mode="claim", claims=(c,)))
    assert v.status in (Status.ERROR, Status.FAIL, Status.PASS)
    if v.status is Status.PASS:
        assert c.results and all(r.device and r.pool for r in c.results)


def test_dra_extended_needs_the_pods_extended_resource_claim_status() -> None:
    name = CLAIM["metadata"]["name"]
    v = _judge("gpu.dra-allocation", _dra_pod(mode="dra-extended"), mode="dra-extended")
    assert v.status is Status.FAIL and "extendedResourceClaimStatus is not set" in v.reason
    mapped = ({"containerName": "collector", "resourceName": "nvidia.com/pgpu",
               "requestName": "container-0-request-0"},)
    p = _dra_pod(mode="dra-extended", extended_claim=name, extended_mappings=mapped)
    assert _judge("gpu.dra-allocation", p, mode="dra-extended").status is Status.PASS
    p = _dra_pod(mode="dra-extended", extended_claim=name, extended_mappings=())
    assert _judge("gpu.dra-allocation", p, mode="dra-extended").status is Status.FAIL


def test_device_match_compares_the_uuid_not_the_guest_bus_id() -> None:
    v = _judge("gpu.dra-device-match", _dra_pod())
    # the guest's bus id (00000000:00:06.0, the VM's) differs from the slice's 0000:41:00.0
    assert v.status is Status.PASS, v.reason
    v = _judge("gpu.dra-device-match", _dra_pod(guest=with_uuid(h200_guest(), "GPU-other")))
    assert v.status is Status.FAIL and H200_UUID in v.reason


def test_device_match_without_a_slice_uuid_only_warns_on_the_product() -> None:
    sl = copy.deepcopy(SLICES)
    del sl[0]["spec"]["devices"][0]["attributes"]["uuid"]
    c = claim_from_api(CLAIM, sl)
    v = _judge("gpu.dra-device-match", pod(h200_guest(), request_mode="claim", claims=(c,)))
    assert v.status is Status.WARN and "bus id" in v.reason
    c = claim_from_api(CLAIM, [])
    v = _judge("gpu.dra-device-match", pod(h200_guest(), request_mode="claim", claims=(c,)))
    assert v.status is Status.SKIP and "were not recorded" in v.reason


def test_no_gpu_in_a_kata_guest_under_dra_names_the_cold_plug_gap() -> None:
    v = _judge("gpu.dra-device-match", _dra_pod(guest=cpu_guest()))
    assert v.status is Status.FAIL and "13322" in v.reason
    assert "nvidia.com/pgpu" in v.remediation and "13323" in v.remediation


def test_device_match_without_allocation_evidence_is_an_error() -> None:
    v = _judge("gpu.dra-device-match", pod(h200_guest(), request_mode="claim"))
    assert v.status is Status.ERROR


# =========================================================================== collection
POD_STATUS = {  # core/v1 PodStatus fields (types.go: resourceClaimStatuses,
    # extendedResourceClaimStatus = PodExtendedResourceClaimStatus); transcribed, simulated
    "spec": {"nodeName": "gpu-a"},
    "status": {"resourceClaimStatuses": [{"name": "gpu",
                                          "resourceClaimName": "kgc-gpu-0-gpu-7xk2p"}],
               "extendedResourceClaimStatus": {
                   "resourceClaimName": "kgc-gpu-0-extended-resources-x9q",
                   "requestMappings": [{"containerName": "collector",
                                        "resourceName": "nvidia.com/gpu",
                                        "requestName": "container-0-request-0"}]}},
}


def test_pod_claim_refs_reads_both_claim_kinds() -> None:
    names, ext, maps = pod_claim_refs(POD_STATUS)
    assert names == ["kgc-gpu-0-gpu-7xk2p", "kgc-gpu-0-extended-resources-x9q"]
    assert ext == "kgc-gpu-0-extended-resources-x9q"
    assert maps == ({"containerName": "collector", "resourceName": "nvidia.com/gpu",
                     "requestName": "container-0-request-0"},)
    assert pod_claim_refs(None) == ([], None, ())
    assert pod_claim_refs({"status": {"resourceClaimStatuses": 3,
                                      "extendedResourceClaimStatus": []}}) == ([], None, ())


class _Resp:
    def __init__(self, doc: Any) -> None:
        self.data = json.dumps(doc).encode()


class _Kube:
    api = None

    def __init__(self, claims: dict[str, Any]) -> None:
        self.claims = claims

    def call(self, verb: str, resource: str, fn: Any, *args: Any, **kw: Any) -> Any:
        if "resourceslices" in resource:
            assert kw["field_selector"] == "spec.nodeName=gpu-a"
            return _Resp({"items": SLICES})
        name = args[0]
        if name not in self.claims:
            raise ApiException(status=404, reason="Not Found")
        return _Resp(self.claims[name])


def test_dra_evidence_reads_the_claims_and_names_one_that_is_gone() -> None:
    from kgc.layers.gpu.collect import dra_evidence
    k = _Kube({"kgc-gpu-0-gpu-7xk2p": CLAIM})
    d = dra_evidence(k, "kgc-run1", POD_STATUS, _gp("dra-extended"))  # type: ignore[arg-type]
    assert d["request_mode"] == "dra-extended"
    ok, gone = d["claims"]
    assert ok.device_attributes["gpu-0"]["uuid"] == H200_UUID
    assert gone.name == "kgc-gpu-0-extended-resources-x9q" and "404" in (gone.error or "")
    p = dataclasses.replace(pod(h200_guest()), **d)
    v = _judge("gpu.dra-allocation", p, mode="dra-extended")
    assert v.status is Status.ERROR and "kgc-gpu-0-extended-resources-x9q" in v.reason


def test_pci_function_under_dra_points_at_the_cold_plug_gap() -> None:
    v = _judge("gpu.pci-function", _dra_pod(guest=cpu_guest()))
    assert v.status is Status.FAIL and "13322" in v.remediation, v.remediation
    v = _judge("gpu.pci-function", pod(cpu_guest()), mode="device-plugin")
    assert "13322" not in v.remediation


# =========================================================================== the waiter
# the real 1.37 scheduler's FailedScheduling message for a claim no published device serves
# (the cluster lab, scenario dra-no-slices, 2026-12-03)
UNALLOCATABLE = ("0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't "
                 "match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 "
                 "Preemption is not helpful for scheduling.")


def _cluster_with_slices(nodes: list[str]) -> Any:
    from gpu.synth import cluster
    from kgc.layers.gpu.dra import DraEvidence, DraSlice
    slices = tuple(DraSlice(name=f"{n}-s", driver="gpu.nvidia.com", pool=n, generation=1,
                            node=n, device_count=4) for n in nodes)
    return dataclasses.replace(cluster(), dra=DraEvidence(
        api_versions=("v1",), slices=slices, driver="gpu.nvidia.com"))


def _unscheduled(mode: str = "claim") -> GpuPodEvidence:
    return pod(None, node=None, phase="Pending", request_mode=mode, containers=(),
               conditions=(PodCondition("PodScheduled", "False", "Unschedulable",
                                        UNALLOCATABLE),),
               events=(PodEvent("Warning", "FailedScheduling", UNALLOCATABLE, 1,
                                "default-scheduler"),))


@pytest.mark.parametrize("nodes,settles", [([], True), (["gpu-a"], False)])
def test_a_claim_no_published_device_serves_settles_only_when_no_node_publishes(
        nodes: list[str], settles: bool) -> None:
    from kgc.layers.gpu.plan import settled
    cl = _cluster_with_slices(nodes)
    why = settled(_unscheduled(), cl)
    assert (why is not None) is settles, why
    if settles:
        assert why == "no node publishes a gpu.nvidia.com device"
    # the device-plugin path never reads the DRA reason
    assert settled(_unscheduled("device-plugin"), cl) is None
    # nothing recorded of the slices: keep waiting (the scheduler may yet find a device)
    assert settled(_unscheduled(), None) is None


def test_an_unallocatable_claim_is_named_with_what_the_nodes_publish() -> None:
    c = classify(_unscheduled(), _cluster_with_slices([]))
    assert c.id == "dra-unallocatable" and c.status is Status.FAIL
    assert "no node publishes a gpu.nvidia.com device" in c.summary
    assert "cannot allocate all claims" in c.summary and "resourceslices" in c.remediation
    c = classify(_unscheduled(), _cluster_with_slices(["gpu-a", "gpu-b"]))
    assert c.id == "dra-unallocatable" and "gpu-a, gpu-b" in c.summary
    # under device-plugin the same text is the generic unschedulable cause
    assert classify(_unscheduled("device-plugin"), _cluster_with_slices([])).id == \
        "unschedulable"


@pytest.mark.parametrize("case", [c for c in CASES if c["id"] == "dra-coldplug"],
                         ids=["dra-coldplug"])
def test_kata_s_cold_plug_failure_settles_the_wait_at_once(case: dict[str, Any]) -> None:
    from kgc.layers.gpu.plan import settled
    p = dataclasses.replace(_kata_pod(case), timed_out=False, waited_s=4.0)
    assert settled(p) == "Kata did not cold-plug the DRA device (kata-containers#13322)"
    quiet = dataclasses.replace(p, events=p.events[:1])
    assert settled(quiet) is None


def test_a_runc_sandbox_without_a_gpu_is_not_blamed_on_kata_s_cold_plug_gap() -> None:
    """Seen on the lab's real node (a runc pod with a real kubelet-prepared claim): no VM, no
    10de function - the runtime is the cause, not Kata's DRA cold plug."""
    vm = cpu_guest()
    assert vm.is_vm and not vm.nvidia_gpus
    kata = _judge("gpu.dra-device-match", _dra_pod(guest=vm))
    assert kata.status is Status.FAIL and "13322" in kata.reason
    runc = dataclasses.replace(vm, hypervisor_flag=False)
    v = _judge("gpu.dra-device-match", _dra_pod(guest=runc))
    assert v.status is Status.FAIL and "13322" not in v.reason and "not a VM" in v.reason
    assert "runtime_class" in v.remediation
    # the real node is itself a VM: its runc container shows the hypervisor flag but runs the
    # node's own kernel (what gpu.in-vm goes by)
    p = _dra_pod(guest=vm)
    on_node = dataclasses.replace(p, guest=dataclasses.replace(vm, kernel=p.node_kernel))
    v = _judge("gpu.dra-device-match", on_node)
    assert v.status is Status.FAIL and "node's own kernel" in v.reason and "13322" not in v.reason


def test_bool_attributes_read_alike_in_slices_and_claims() -> None:
    from kgc.layers.gpu.dra import device_from_api
    from kgc.layers.gpu.dra_pod import _attr_value
    d = device_from_api({"name": "gpu-0", "attributes": {"standIn": {"bool": True}}}, "x", [])
    assert d.attributes["standIn"] == _attr_value({"bool": True}) == "true"
    assert _attr_value({"bool": False}) == "false"


def test_the_node_selector_s_labels_are_kept_as_evidence() -> None:
    """cluster.gpu.node_selector on a label kgc would otherwise drop (kgc.io/real-node on the
    lab's real node) must still select the node."""
    from kgc.layers.gpu.evidence import node_from_api
    obj = {"metadata": {"name": "n", "labels": {"kgc.io/real-node": "true", "noise": "x",
                                                "nvidia.com/gpu.product": "H200"}}}
    assert node_from_api(obj).labels == {"nvidia.com/gpu.product": "H200"}
    assert node_from_api(obj, {"kgc.io/real-node": "true"}).labels == {
        "nvidia.com/gpu.product": "H200", "kgc.io/real-node": "true"}


def test_under_dra_the_publishing_nodes_decide_what_a_node_verdict_rests_on() -> None:
    """A real node publishing slices beside GPU-labelled kwok nodes: the DRA node verdicts
    rest on the real node only (not marked simulated for the kwok ones)."""
    from kgc.layers.gpu.evidence import GpuRunEvidence, NodeInfo
    real = NodeInfo(name="real", kernel_version="6.1", labels={}, capacity={},
                    allocatable={}, ready=True, stand_in=False)
    kwok = NodeInfo(name="kwok", kernel_version="6.1", labels={"nvidia.com/gpu.present": "1"},
                    capacity={"nvidia.com/gpu": "4"}, allocatable={"nvidia.com/gpu": "4"},
                    ready=True, stand_in=True, stand_in_why="kwok node")
    cl = dataclasses.replace(_cluster_with_slices(["real"]), nodes=(real, kwok))
    assert GpuRunEvidence(cl).stand_ins_for("gpu.dra-slices") == []
    none = dataclasses.replace(_cluster_with_slices([]), nodes=(real, kwok))
    assert GpuRunEvidence(none).stand_ins_for("gpu.dra-slices") == ["node kwok: kwok node"]
