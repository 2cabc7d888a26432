"""What mutation testing of the DRA evaluators found untested (issue 21; benchmarks/mutation.py
modules ``gpu.dra``, ``gpu.dra_pod``, ``gpu.dra_causes``).

Each test states a behaviour a user relies on -- a verdict's status, the object its reason
names, the remedy it gives, the evidence it keeps -- on clusters built in memory (no I/O).
The API shapes are resource.k8s.io/v1's (k8s.io/api ``resource/v1/types.go``: a
DeviceAttribute holds exactly one of int, bool, string, version; ``spec.pool`` has a name and
a generation) and NVIDIA's DRA driver's (kubernetes-sigs/dra-driver-nvidia-gpu
``cmd/gpu-kubelet-plugin/deviceinfo.go``: ``gpu-<minor>`` devices, ``productName``,
``uuid``, the standard ``resource.kubernetes.io/pciBusID``, capacity ``memory``). Verdicts on
these clusters are simulated.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpu.synth import H200_UUID, h200_guest
from kgc.core.model import Status
from kgc.core.profile import GpuRequestPlatform
from kgc.layers.gpu import CHECKS
from kgc.layers.gpu.checks import PodSubject
from kgc.layers.gpu.classify import classify
from kgc.layers.gpu.dra import evidence_from_api, slice_from_api
from kgc.layers.gpu.dra_pod import claim_from_api
from kgc.layers.gpu.evidence import (
    ClaimEvidence,
    ClusterGpuEvidence,
    ContainerState,
    GpuPodEvidence,
    PodCondition,
    PodEvent,
    node_from_api,
)
from kgc.layers.gpu.profile import GpuProfile

DRIVER = "gpu.nvidia.com"
PCI = "resource.kubernetes.io/pciBusID"
DISCOVERY_V1 = {"groups": [{"name": "resource.k8s.io",
                            "versions": [{"version": "v1"}, {"version": "v1beta1"}]}]}
DISCOVERY_BETA = {"groups": [{"name": "resource.k8s.io", "versions": [{"version": "v1beta1"}]}]}


def klass(name: str = DRIVER, ext: str | None = "nvidia.com/gpu",
          selectors: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if ext is not None:
        spec["extendedResourceName"] = ext
    if selectors is not None:
        spec["selectors"] = selectors
    return {"metadata": {"name": name}, "spec": spec}


def gpu(i: int, bus: str | None = None, **attrs: Any) -> dict[str, Any]:
    a: dict[str, Any] = {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{i:08d}"},
                         "productName": {"string": "NVIDIA H200"},
                         "resource.kubernetes.io/pciBusID": {"string": bus or f"0000:{i:02x}:00.0"}}
    a.update(attrs)
    return {"name": f"gpu-{i}", "attributes": a, "capacity": {"memory": {"value": "143771Mi"}}}


def rslice(node: str, *devices: dict[str, Any], pool: str | None = None, generation: int = 1,
           name: str | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name or f"{node}-{pool or node}-{generation}"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": pool or node, "generation": generation},
                     "devices": list(devices)}}


def node(name: str, labels: dict[str, str] | None = None,
         allocatable: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true",
                                                  **(labels or {})}},
            "status": {"capacity": dict(allocatable or {}), "allocatable": dict(allocatable or {}),
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def cluster(slices: list[dict[str, Any]] | None, nodes: list[dict[str, Any]] | None = None, *,
            classes: list[dict[str, Any]] | None = None, discovery: Any = DISCOVERY_V1,
            errors: dict[str, str] | None = None, selector_keys: tuple[str, ...] = (),
            node_errors: dict[str, str] | None = None) -> ClusterGpuEvidence:
    d = evidence_from_api(discovery,
                          None if classes is None and slices is None else
                          {"items": classes if classes is not None else [klass()]},
                          None if slices is None else {"items": slices},
                          driver=DRIVER, errors=errors)
    return ClusterGpuEvidence(
        runtime_classes=(),
        nodes=None if nodes is None else tuple(node_from_api(n, selector_keys) for n in nodes),
        dra=d, errors=node_errors or {})


def prof(mode: str = "dra-extended", **kw: Any) -> GpuProfile:
    req = {k: kw.pop(k) for k in ("device_class", "driver", "devices_per_node") if k in kw}
    return GpuProfile(request=GpuRequestPlatform(mode=mode, **req), **kw)  # type: ignore[arg-type]


def judge(check_id: str, ev: ClusterGpuEvidence, p: GpuProfile | None = None) -> Any:
    return CHECKS.get(check_id).evaluate(ev, p or prof())


TWO_NODES = [node("gpu-a"), node("gpu-b")]
H200 = h200_guest()  # the real H200 capture (fixtures/guest), read once


# =========================================================================== gpu.dra
# ------------------------------------------------------------------ reading the slices
def test_an_int_attribute_is_a_well_formed_device_and_reads_as_its_number() -> None:
    """v1 attributes may be ints (NVIDIA's driver publishes e.g. ``minor``): such a slice is
    not malformed, and the value is kept as its decimal text."""
    s = slice_from_api(rslice("gpu-a", gpu(0, minor={"int": 3})))
    assert s.problems == ()
    assert s.devices[0].attributes["minor"] == "3"
    o = judge("gpu.dra-slices", cluster([rslice("gpu-a", gpu(0, minor={"int": 3}))],
                                        [node("gpu-a")]))
    assert o.status is Status.PASS, o.reason


def test_a_bool_attribute_reads_true_and_a_non_int_int_is_malformed() -> None:
    s = slice_from_api(rslice("gpu-a", gpu(0, vfio={"bool": True}, bad={"int": "3"})))
    assert s.devices[0].attributes["vfio"] == "true"
    assert "bad" not in s.devices[0].attributes
    assert any("'bad' has no single int/bool/string/version value" in p for p in s.problems)


def test_two_pools_on_one_node_both_count_and_only_older_generations_are_dropped() -> None:
    """The scheduler keeps the newest generation *per pool*: a second pool on the same node
    (another ResourceSlice pool of the driver) is current too, its GPUs count."""
    slices = [rslice("gpu-a", gpu(0), pool="pool-x", generation=3),
              rslice("gpu-a", gpu(1), pool="pool-y", generation=1),
              rslice("gpu-a", gpu(2), pool="pool-y", generation=0)]  # replaced
    ev = cluster(slices, [node("gpu-a")])
    assert ev.dra is not None and {s.pool for s in ev.dra.slices or ()} == {"pool-x", "pool-y"}
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.PASS and o.evidence["gpus"] == {"gpu-a": 2}
    assert judge("gpu.dra-slices", ev, prof(devices_per_node=2)).status is Status.PASS


def test_a_device_class_whose_selectors_are_a_map_reads_without_crashing() -> None:
    """Reading is total: a DeviceClass with ``spec.selectors`` of the wrong type keeps no
    selector, it does not raise."""
    ev = cluster([rslice("gpu-a", gpu(0))], [node("gpu-a")],
                 classes=[klass(selectors={"cel": {"expression": "true"}})])
    o = judge("gpu.dra-device-class", ev, prof("claim"))
    assert o.status is Status.PASS and "(0 CEL selector(s))" in o.reason


def test_a_device_class_keeps_its_cel_selectors() -> None:
    expr = "device.attributes['gpu.nvidia.com'].type == 'gpu'"
    ev = cluster([rslice("gpu-a", gpu(0))], [node("gpu-a")],
                 classes=[klass(selectors=[{"cel": {"expression": expr}}])])
    o = judge("gpu.dra-device-class", ev, prof("claim"))
    assert o.status is Status.PASS and "(1 CEL selector(s))" in o.reason
    assert o.evidence["device_class"]["selectors"] == [expr]


# ------------------------------------------------------------------ gpu.dra-api and skips
def test_dra_api_failure_says_how_to_get_v1() -> None:
    o = judge("gpu.dra-api", cluster(None, TWO_NODES, discovery=DISCOVERY_BETA))
    assert o.status is Status.FAIL
    assert o.remediation.startswith("DRA is GA in resource.k8s.io/v1 since Kubernetes 1.34")
    assert "--runtime-config=resource.k8s.io/v1=true" in o.remediation


def test_when_v1_is_not_served_the_list_checks_skip_naming_it_with_the_versions_seen() -> None:
    ev = cluster(None, TWO_NODES, discovery=DISCOVERY_BETA)
    for c in ("gpu.dra-device-class", "gpu.dra-slices", "gpu.dra-both-ways"):
        o = judge(c, ev)
        assert o.status is Status.SKIP
        assert o.reason == "resource.k8s.io/v1 is not served (see gpu.dra-api)", c
        assert o.evidence["api_versions"] == ["v1beta1"], c
    o = judge("gpu.nodes-advertise", ev)
    assert o.status is Status.FAIL and o.expected == "resource.k8s.io/v1"
    assert o.found == "v1beta1"


def test_a_failed_discovery_tells_which_permission_reads_apis() -> None:
    o = judge("gpu.dra-api", cluster(None, TWO_NODES, discovery=None,
                                     errors={"discovery": "401 Unauthorized"}))
    assert o.status is Status.ERROR and "401 Unauthorized" in o.reason
    assert o.remediation.startswith("Check that the run's credentials may read /apis")
    assert "system:discovery" in o.remediation


# ------------------------------------------------------------------ unreadable lists
def test_unlisted_device_classes_name_the_permission_to_grant() -> None:
    ev = cluster(None, TWO_NODES, errors={"device_classes": "403 Forbidden"})
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.ERROR and "403 Forbidden" in o.reason
    assert o.remediation.startswith("Grant the run's ServiceAccount get/list on "
                                    "deviceclasses.resource.k8s.io")


def test_unlisted_nodes_or_slices_are_errors_that_name_the_reason_or_say_none_was_kept() -> None:
    """An unreadable list is an error whose reason carries what the API said, and, when no
    reason was recorded (a hand-made bundle), says so in words, never Python's None."""
    ok = [rslice("gpu-a", gpu(0))]
    for c in ("gpu.dra-slices", "gpu.dra-both-ways", "gpu.nodes-advertise"):
        o = judge(c, cluster(ok, None, node_errors={"nodes": "403 nodes is forbidden"}))
        assert o.status is Status.ERROR and "403 nodes is forbidden" in o.reason, c
        o = judge(c, cluster(ok, None))
        assert o.status is Status.ERROR and o.reason.endswith(": no reason"), (c, o.reason)
    for c in ("gpu.dra-slices", "gpu.dra-both-ways", "gpu.nodes-advertise"):
        ev = cluster(ok, TWO_NODES)
        assert ev.dra is not None
        ev = dataclasses.replace(ev, dra=dataclasses.replace(ev.dra, slices=None))
        o = judge(c, ev)
        assert o.status is Status.ERROR
        assert o.reason == "ResourceSlices could not be listed: no reason", (c, o.reason)


# ------------------------------------------------------------------ gpu.dra-device-class
def test_a_missing_device_class_expects_it_by_name() -> None:
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES),
              prof(device_class="gpu.example.com"))
    assert o.status is Status.FAIL
    assert o.expected == "DeviceClass gpu.example.com" and o.found == DRIVER


def test_a_class_mapping_another_resource_is_found_by_that_name() -> None:
    ev = cluster([], TWO_NODES, classes=[klass(ext="example.com/other")])
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.FAIL and "'example.com/other'" in o.reason
    assert o.expected == f"extendedResourceName {GpuProfile().resources[0]}"
    assert o.found == "example.com/other"


# ------------------------------------------------------------------ gpu.dra-slices
def test_exactly_the_expected_gpus_per_node_pass_and_the_reason_lists_each_node() -> None:
    ev = cluster([rslice("gpu-a", gpu(0)), rslice("gpu-b", gpu(1))], TWO_NODES)
    o = judge("gpu.dra-slices", ev, prof(devices_per_node=1))
    assert o.status is Status.PASS, o.reason
    assert o.reason.endswith("memory: gpu-a=1, gpu-b=1")


def test_more_gpus_than_expected_warn_naming_the_profile_key() -> None:
    ev = cluster([rslice("gpu-a", gpu(0), gpu(1))], [node("gpu-a")])
    o = judge("gpu.dra-slices", ev, prof(devices_per_node=1))
    assert o.status is Status.WARN
    assert o.remediation == "Set platform.gpu.request.devices_per_node to what the nodes hold."


def test_missing_and_short_nodes_are_both_named_in_found() -> None:
    ev = cluster([rslice("gpu-b", gpu(1))], TWO_NODES)
    o = judge("gpu.dra-slices", ev, prof(devices_per_node=2))
    assert o.status is Status.FAIL
    assert o.found == (f"no ResourceSlice device of {DRIVER} on gpu-a; "
                       "too few GPUs on gpu-b (1 of 2)")
    assert o.expected == "2 GPU(s) per GPU node"


def test_a_device_without_memory_names_both_capacity_names() -> None:
    dev = gpu(0)
    dev["capacity"] = {}
    o = judge("gpu.dra-slices", cluster([rslice("gpu-a", dev)], [node("gpu-a")]))
    assert o.status is Status.ERROR
    assert "lacks the memory (capacity memory or addressableMemory)" in o.reason


def test_the_node_selector_selects_nodes_listed_after_an_unselected_one() -> None:
    """``cluster.gpu.node_selector`` narrows the GPU nodes; a node outside it, listed first,
    must not hide the selected ones behind it."""
    nodes = [node("gpu-a", {"pool": "other"}), node("gpu-b", {"pool": "kgc"})]
    ev = cluster([rslice("gpu-a", gpu(0)), rslice("gpu-b", gpu(1))], nodes,
                 selector_keys=("pool",))
    p = prof(node_selector={"pool": "kgc"})
    o = judge("gpu.dra-slices", ev, p)
    assert o.status is Status.PASS and o.evidence["gpus"] == {"gpu-b": 1}
    ev = cluster([rslice("gpu-a", gpu(0))], nodes, selector_keys=("pool",))
    o = judge("gpu.dra-slices", ev, p)
    assert o.status is Status.FAIL and "gpu-b" in o.reason and "gpu-a" not in o.reason



# ------------------------------------------------------------------ second sample (seed fresh)
def test_a_list_cut_by_a_continue_token_without_a_count_is_never_judged_whole() -> None:
    """The API's list is paged (``metadata.continue``); without ``remainingItemCount`` the
    total is unknown: an error on a partial view, never a pass."""
    ev = cluster([rslice("gpu-a", gpu(0))], [node("gpu-a")])
    assert judge("gpu.dra-slices", ev).status is Status.PASS
    d = evidence_from_api(DISCOVERY_V1, {"items": [klass()]},
                          {"metadata": {"continue": "tok"}, "items": [rslice("gpu-a", gpu(0))]},
                          driver=DRIVER)
    o = judge("gpu.dra-slices", dataclasses.replace(ev, dra=d))
    assert o.status is Status.ERROR
    assert o.reason.startswith(f"the API lists more ResourceSlices of {DRIVER}")


def test_device_classes_beyond_what_kgc_keeps_are_an_error_not_a_missing_class() -> None:
    classes = {"metadata": {"remainingItemCount": 300}, "items": [klass("other.example.com")]}
    d = evidence_from_api(DISCOVERY_V1, classes, {"items": []}, driver=DRIVER)
    ev = dataclasses.replace(cluster([], TWO_NODES), dra=d)
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.ERROR
    assert o.reason == (f"the API lists 301 DeviceClasses, kgc keeps 1, and {DRIVER} is not "
                        "among them")


def test_the_driver_the_slices_were_listed_for_is_kept_and_named_by_the_classifier() -> None:
    ev = cluster([], TWO_NODES)
    assert ev.dra is not None and ev.dra.driver == DRIVER
    c = classify(pending(("FailedScheduling", UNALLOCATABLE), mode="claim"), ev)
    assert f"(no node publishes a {DRIVER} device (see gpu.dra-slices))" in c.summary


def test_both_ways_judges_the_resource_the_device_class_maps() -> None:
    """The DeviceClass maps example.com/gpu (not one of platform.gpu.resources): a node
    advertising that resource while publishing DRA GPUs serves it both ways."""
    n = node("gpu-a", allocatable={"example.com/gpu": "1"})
    ev = cluster([rslice("gpu-a", gpu(0))], [n], classes=[klass(ext="example.com/gpu")])
    o = judge("gpu.dra-both-ways", ev, prof("claim"))
    assert o.status is Status.FAIL
    assert "gpu-a (allocatable example.com/gpu=1 and 1 DRA GPU(s) of gpu.nvidia.com)" in o.reason
    assert o.evidence["nodes"] == [
        "gpu-a (allocatable example.com/gpu=1 and 1 DRA GPU(s) of gpu.nvidia.com)"]
    assert "both allocators may hand out the same GPU" in o.reason
    o = judge("gpu.dra-both-ways", cluster([rslice("gpu-a", gpu(0))], [node("gpu-a")]))
    assert o.status is Status.PASS
    assert o.reason == ("no node advertises nvidia.com/gpu in allocatable while publishing "
                        f"{DRIVER} devices")
    o = judge("gpu.dra-both-ways", cluster([rslice("gpu-a", gpu(0))], [node("gpu-a")],
                                           classes=[klass(ext=None)]))
    assert o.reason.startswith("no node advertises nvidia.com/pgpu or nvidia.com/gpu in")


def test_two_classes_mapping_the_requested_resource_warn_naming_both() -> None:
    ev = cluster([], TWO_NODES, classes=[klass(), klass("vfio.gpu.nvidia.com")])
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.WARN
    assert o.reason == ("DeviceClasses gpu.nvidia.com, vfio.gpu.nvidia.com all map "
                        "nvidia.com/gpu: which one serves a request is the scheduler's choice, "
                        "not the profile's")


def test_a_missing_class_in_an_empty_cluster_finds_none() -> None:
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES, classes=[]))
    assert o.status is Status.FAIL and o.found == "none"
    assert "the cluster has: none" in o.reason


def test_a_node_that_only_publishes_slices_is_a_gpu_node() -> None:
    """No GPU label, no nvidia.com capacity: publishing the driver's devices makes it one."""
    bare = {"metadata": {"name": "gpu-z", "labels": {}}, "status": {}}
    ev = cluster([rslice("gpu-z", gpu(0))], [bare])
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.PASS and o.evidence["gpus"] == {"gpu-z": 1}
    assert judge("gpu.nodes-advertise", ev).status is Status.PASS


def test_a_node_without_gpus_is_told_to_run_the_kubelet_plugin_of_the_driver() -> None:
    o = judge("gpu.dra-slices", cluster([rslice("gpu-a", gpu(0))], TWO_NODES))
    assert o.status is Status.FAIL
    assert o.remediation == ("Check the DRA driver's kubelet plugin on the named node(s): it must "
                             "run there and publish one device per GPU in the node's "
                             f"ResourceSlice pool (driver {DRIVER}).")


def test_nodes_advertise_under_dra_reads_and_remedies() -> None:
    ev = cluster([rslice("gpu-a", gpu(0)), rslice("gpu-b", gpu(1))], TWO_NODES)
    o = judge("gpu.nodes-advertise", ev)
    assert o.status is Status.PASS
    assert o.reason == ("2 GPU node(s) offer GPUs by DRA (dra-extended; allocatable 0 is "
                        f"expected): gpu-a 1 DRA GPU(s) of {DRIVER}, gpu-b 1 DRA GPU(s) of "
                        f"{DRIVER}")
    assert o.evidence["nodes"] == {"gpu-a": f"1 DRA GPU(s) of {DRIVER}",
                                   "gpu-b": f"1 DRA GPU(s) of {DRIVER}"}
    o = judge("gpu.nodes-advertise", cluster([rslice("gpu-a", gpu(0))], TWO_NODES))
    assert o.status is Status.FAIL
    assert o.remediation == (f"Deploy the DRA driver {DRIVER} so that its kubelet plugin "
                             "publishes the GPUs of every GPU node in ResourceSlices (see "
                             "gpu.dra-slices).")
    d = ev.dra
    assert d is not None
    o = judge("gpu.nodes-advertise", dataclasses.replace(ev, dra=dataclasses.replace(
        d, slices=None)))
    assert o.remediation == ("Grant the run's ServiceAccount list on "
                             "resourceslices.resource.k8s.io.")


def test_dra_api_names_what_is_served_in_found_and_evidence() -> None:
    o = judge("gpu.dra-api", cluster(None, TWO_NODES, discovery=DISCOVERY_BETA))
    assert o.status is Status.FAIL
    assert o.expected == "resource.k8s.io/v1" and o.found == "v1beta1"
    assert o.evidence["api_versions"] == ["v1beta1"]
    assert "(or enable the v1 API with --runtime-config=resource.k8s.io/v1=true), or set " \
           "platform.gpu.request.mode: device-plugin if GPUs are not allocated by DRA." \
           in o.remediation
    o = judge("gpu.dra-api", cluster(None, TWO_NODES))
    assert o.status is Status.PASS and o.evidence["api_versions"] == ["v1", "v1beta1"]


def test_a_bundle_without_dra_evidence_says_to_record_it_again() -> None:
    ev = dataclasses.replace(cluster([], TWO_NODES), dra=None)
    o = judge("gpu.dra-api", ev)
    assert o.status is Status.ERROR
    assert o.reason == ("no DRA evidence was recorded (a bundle from before kgc read "
                        "resource.k8s.io): nothing to judge")
    assert o.remediation == "Record the bundle again with this kgc (`kgc snapshot --kubeconfig`)."


def test_device_names_listed_twice_are_each_named() -> None:
    s = slice_from_api(rslice("gpu-a", gpu(0), gpu(0), gpu(1), gpu(1)))
    assert "device name(s) listed twice: gpu-0, gpu-1" in s.problems


def test_attributes_qualified_by_the_driver_s_domain_read_like_bare_ones() -> None:
    """resource/v1: an attribute name without a domain is the driver's own; the qualified
    form ``gpu.nvidia.com/productName`` is the same attribute."""
    dev = {"name": "gpu-0", "attributes": {
        f"{DRIVER}/productName": {"string": "NVIDIA H200"},
        "pciBusID": {"string": "0000:9d:00.0"}},
        "capacity": {f"{DRIVER}/memory": {"value": "143771Mi"}}}
    ev = cluster([rslice("gpu-a", dev)], [node("gpu-a")])
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.PASS, o.reason
    assert ev.dra is not None
    from kgc.layers.gpu.dra import node_gpus
    assert list(node_gpus(ev.dra, "gpu-a", DRIVER)) == ["0000:9d:00.0"]


def test_a_slice_read_without_a_generation_still_counts_until_a_generation_replaces_it() -> None:
    no_gen = rslice("gpu-a", gpu(0))
    del no_gen["spec"]["pool"]["generation"]
    ev = cluster([no_gen], [node("gpu-a")])
    assert judge("gpu.dra-slices", ev).evidence["gpus"] == {"gpu-a": 1}
    newer = rslice("gpu-a", gpu(1), gpu(2), generation=0, name="gpu-a-new")
    assert judge("gpu.dra-slices", cluster([no_gen, newer], [node("gpu-a")])).evidence[
        "gpus"] == {"gpu-a": 2}



# ------------------------------------------------------------------ third sample (seed check)
def test_a_device_lacking_several_fields_names_each() -> None:
    dev = {"name": "gpu-0", "attributes": {PCI: {"string": "0000:9d:00.0"}}}
    o = judge("gpu.dra-slices", cluster([rslice("gpu-a", dev, name="s-a")], [node("gpu-a")]))
    assert o.status is Status.ERROR
    assert ("ResourceSlice s-a device gpu-0 lacks the product (productName), the memory "
            "(capacity memory or addressableMemory)") in o.reason
    assert o.remediation.endswith("must publish every GPU with a name, its PCI bus id, product "
                                  "and memory.")


def test_a_failed_discovery_without_a_recorded_reason_says_so() -> None:
    o = judge("gpu.dra-api", cluster(None, TWO_NODES, discovery=None))
    assert o.status is Status.ERROR and o.reason == "API discovery failed: no reason"


def test_unlisted_slices_name_the_api_s_answer_in_every_check() -> None:
    ev = cluster([], TWO_NODES)
    assert ev.dra is not None
    ev = dataclasses.replace(ev, dra=dataclasses.replace(
        ev.dra, slices=None, errors={"slices": "403 Forbidden: resourceslices"}))
    for c in ("gpu.dra-slices", "gpu.dra-both-ways", "gpu.nodes-advertise"):
        o = judge(c, ev)
        assert o.status is Status.ERROR and o.reason == (
            "ResourceSlices could not be listed: 403 Forbidden: resourceslices"), c


def test_a_class_mapping_the_requested_resource_passes_saying_so() -> None:
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES))
    assert o.status is Status.PASS
    assert o.reason == f"DeviceClass {DRIVER} exists and maps the extended resource nvidia.com/gpu"


def test_a_missing_class_lists_the_classes_there_are_in_evidence_and_remedy() -> None:
    ev = cluster([], TWO_NODES, classes=[klass(), klass("vfio.gpu.nvidia.com", ext=None)])
    o = judge("gpu.dra-device-class", ev, prof(device_class="gpu.example.com"))
    assert o.status is Status.FAIL
    assert o.evidence["device_classes"] == [DRIVER, "vfio.gpu.nvidia.com"]
    assert o.remediation.endswith("platform.gpu.request.device_class to one of: "
                                  f"{DRIVER}, vfio.gpu.nvidia.com")
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES, classes=[]))
    assert o.remediation.endswith("platform.gpu.request.device_class to one of: (none)")


def test_the_profile_s_class_unmapped_names_the_class_that_maps_the_resource() -> None:
    """The profile's class maps nothing, another maps nvidia.com/gpu: the failure says which
    (the fix may be to point the profile at it)."""
    ev = cluster([], TWO_NODES, classes=[klass(ext=None), klass("vfio.gpu.nvidia.com")])
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.FAIL
    assert o.reason == (f"DeviceClass {DRIVER} has no spec.extendedResourceName, none of the "
                        "resources a dra-extended pod may request (platform.gpu.resources: "
                        "nvidia.com/pgpu, nvidia.com/gpu); vfio.gpu.nvidia.com maps "
                        "nvidia.com/gpu instead")


# =========================================================================== gpu.dra_pod
def claim_obj(name: str | None = "kgc-gpu-0-gpu-x1", *, device: str = "gpu-0",
              node_name: str = "gpu-a", reserved: tuple[str, ...] = ("kgc-gpu-0",),
              results: Any = None) -> dict[str, Any]:
    """A ResourceClaim as the API serves it (resource/v1 ``status.allocation``)."""
    meta = {"name": name} if name else {}
    res = [{"request": "gpu", "driver": DRIVER, "pool": node_name, "device": device}] \
        if results is None else results
    return {"metadata": meta, "status": {
        "allocation": {"devices": {"results": res},
                       "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                           {"key": "metadata.name", "operator": "In",
                            "values": [node_name]}]}]}},
        "reservedFor": [{"resource": "pods", "name": r} for r in reserved]}}


def dra_pod(*claims: Any, guest: Any = None, mode: str = "claim", slices: Any = None,
            **kw: Any) -> Any:
    from gpu.synth import pod

    sl = [rslice("gpu-a", gpu(0, uuid={"string": H200_UUID}), gpu(1))] if slices is None \
        else slices
    cs = tuple(c if isinstance(c, ClaimEvidence) else claim_from_api(c, sl)
               for c in (claims or (claim_obj(),)))
    return pod(H200 if guest is None else guest, request_mode=mode, claims=cs, **kw)


def judge_pod(check: str, p: Any, mode: str = "claim") -> Any:
    from gpu.synth import h200_profile, run

    gp = h200_profile()
    gp = gp.model_copy(update={"request": gp.request.model_copy(update={"mode": mode})})
    return CHECKS.get(check).judge(PodSubject(p, run(p)), gp, "cluster")


# ------------------------------------------------------------------ reading the claim
def test_a_claim_that_is_not_an_object_or_has_a_bad_status_is_an_error_naming_it() -> None:
    v = judge_pod("gpu.dra-allocation", dra_pod(["not", "a", "claim"]))
    assert v.status is Status.ERROR
    assert v.reason.endswith("ResourceClaim (unnamed claim): the ResourceClaim is not an object")
    v = judge_pod("gpu.dra-allocation", dra_pod({"metadata": {"name": "c1"}, "status": "x"}))
    assert v.status is Status.ERROR and v.reason.endswith("ResourceClaim c1: status is not an "
                                                          "object")


def test_an_allocation_without_results_is_an_allocated_claim_in_error() -> None:
    obj = claim_obj("c1")
    del obj["status"]["allocation"]["devices"]["results"]
    c = claim_from_api(obj)
    assert c.allocated is True and c.name == "c1"
    v = judge_pod("gpu.dra-allocation", dra_pod(obj))
    assert v.status is Status.ERROR
    assert v.reason.endswith("ResourceClaim c1: status.allocation.devices.results is missing")


def test_an_unallocated_claim_is_recorded_as_not_allocated_and_replays() -> None:
    obj = claim_obj("c1")
    del obj["status"]["allocation"]
    c = claim_from_api(obj)
    assert c.allocated is False and c.error is None
    p = dra_pod(c)
    assert GpuPodEvidence.from_dict(p.to_dict()) == p
    v = judge_pod("gpu.dra-allocation", p)
    assert v.status is Status.FAIL and "ResourceClaim c1 is not allocated" in v.reason


def test_a_result_that_is_not_an_object_is_an_error_not_a_crash() -> None:
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1", results=["gpu-0"])))
    assert v.status is Status.ERROR
    assert "ResourceClaim c1: an allocation result lacks request, driver, pool, device" \
        in v.reason


def test_version_attributes_of_the_allocated_device_are_recorded() -> None:
    sl = [rslice("gpu-a", gpu(0, driverVersion={"version": "580.95.5"}))]
    c = claim_from_api(claim_obj(), sl)
    assert c.device_attributes["gpu-0"]["driverVersion"] == "580.95.5"


# ------------------------------------------------------------------ gpu.dra-allocation
def test_an_allocation_lists_no_devices_is_an_error_saying_so() -> None:
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1", results=[])))
    assert v.status is Status.ERROR
    assert "ResourceClaim c1 is allocated but lists no devices (status.allocation.devices." \
           "results is empty)" in v.reason


def test_a_claim_reserved_for_nobody_fails_saying_so_with_the_claims_evidence() -> None:
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1", reserved=())))
    assert v.status is Status.FAIL
    assert "c1: reservedFor names nobody, not kgc-gpu-0" in v.reason
    (row,) = v.evidence["claims"]
    assert row["claim"] == "c1" and row["node"] == "gpu-a" and row["reserved_for"] == []
    assert "gpu.dra-slices" in v.remediation and "gpu.dra-both-ways" in v.remediation
    assert "the node's ResourceSlices (gpu.dra-slices)" in v.remediation


def test_dra_extended_naming_an_unrecorded_claim_fails_naming_it() -> None:
    p = dra_pod(claim_obj("c1"), mode="dra-extended", extended_claim="c-extended",
                extended_mappings=())
    v = judge_pod("gpu.dra-allocation", p, mode="dra-extended")
    assert v.status is Status.FAIL
    assert "extendedResourceClaimStatus names claim c-extended, which was not recorded" \
        in v.reason


def test_a_passing_allocation_keeps_the_claims_in_its_evidence() -> None:
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1")))
    assert v.status is Status.PASS
    assert [r["claim"] for r in v.evidence["claims"]] == ["c1"]


# ------------------------------------------------------------------ gpu.dra-device-match
def test_a_uuid_mismatch_lists_every_guest_uuid_and_keeps_the_evidence() -> None:
    from gpu.synth import with_smi_gpus

    g = with_smi_gpus(H200, 2)
    assert g.smi is not None
    uuids = sorted(x.uuid for x in g.smi.gpus)
    v = judge_pod("gpu.dra-device-match", dra_pod(claim_obj(device="gpu-1"), guest=g))
    assert v.status is Status.FAIL
    assert f"(guest UUIDs: {uuids[0]}, {uuids[1]})" in v.reason
    assert v.evidence["guest"]["uuids"] == uuids
    assert v.evidence["guest"]["bus_ids"] == sorted(x.bus_id for x in g.smi.gpus)
    assert v.evidence["allocated"][0]["device"] == "gpu-1"
    assert "the DRA driver's CDI spec" in v.remediation


def test_a_match_keeps_what_was_allocated_and_what_the_guest_shows() -> None:
    v = judge_pod("gpu.dra-device-match", dra_pod())
    assert v.status is Status.PASS, v.reason
    (row,) = v.evidence["allocated"]
    assert row["device"] == "gpu-0" and row["uuid"] == H200_UUID
    assert row["pciBusID"] == "0000:00:00.0"
    assert v.evidence["guest"]["uuids"] == [H200_UUID]


def test_an_unnamed_claim_is_labelled_alike_in_both_checks() -> None:
    """Both DRA pod checks name a claim without metadata.name the same way in their
    evidence (the API always names one; a hand-made bundle may not)."""
    p = dra_pod(claim_obj(None))
    a = judge_pod("gpu.dra-allocation", p)
    m = judge_pod("gpu.dra-device-match", p)
    assert a.evidence["claims"][0]["claim"] == m.evidence["allocated"][0]["claim"] \
        == "(unnamed claim)"


def test_without_uuid_or_product_the_skip_names_both_attributes() -> None:
    dev = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}
    v = judge_pod("gpu.dra-device-match", dra_pod(slices=[rslice("gpu-a", dev)]))
    assert v.status is Status.SKIP
    assert "the ResourceSlice attributes of gpu-0 (uuid, productName) were not recorded" \
        in v.reason


def test_product_only_matches_warn_naming_every_device_and_why_bus_ids_cannot_decide() -> None:
    from gpu.synth import with_smi_gpus

    g = with_smi_gpus(H200, 2)
    sl = [rslice("gpu-a", *({"name": f"gpu-{i}", "attributes": {
        "productName": {"string": "NVIDIA H200"}}} for i in range(2)))]
    p = dra_pod(claim_obj("c1", device="gpu-0"), claim_obj("c2", device="gpu-1"), guest=g,
                slices=sl)
    v = judge_pod("gpu.dra-device-match", p)
    assert v.status is Status.WARN
    assert ": gpu-0, gpu-1: the slice publishes no uuid" in v.reason
    assert v.reason.endswith("(the guest's PCI bus id is the VM's root port, not the host's "
                             "pciBusID, so it cannot decide)")


def test_a_runc_sandbox_remedy_names_the_kata_runtime_class_key() -> None:
    import dataclasses as dc

    from gpu.synth import cpu_guest

    runc = dc.replace(cpu_guest(), hypervisor_flag=False)
    v = judge_pod("gpu.dra-device-match", dra_pod(guest=runc))
    assert v.status is Status.FAIL
    assert v.remediation.startswith("Run the GPU pod under the Kata RuntimeClass (platform.kata."
                                    "runtime_class) on nodes whose DRA driver prepares VFIO "
                                    "devices")
    assert "vfio.gpu.nvidia.com class, PassthroughSupport" in v.remediation


# =========================================================================== gpu.dra_causes
# the scheduler's own words (kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go:
# "Insufficient <resource>"; dynamicresources: "cannot allocate all claims")
INSUFFICIENT = ("0/2 nodes are available: 2 Insufficient nvidia.com/pgpu. preemption: 0/2 "
                "nodes are available: 2 No preemption victims found for incoming pod.")
UNALLOCATABLE = ("0/3 nodes are available: 1 cannot allocate all claims, 2 node(s) didn't "
                 "match Pod's node affinity/selector.")
TAINTED = "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: true}."


def pending(*events: tuple[str, str], mode: str = "device-plugin", conditions: Any = (),
            **kw: Any) -> Any:
    from gpu.synth import pod

    return pod(None, node=None, phase="Pending", request_mode=mode, containers=(),
               conditions=conditions,
               events=tuple(PodEvent("Warning", r, m, 1, "default-scheduler") for r, m in events),
               **kw)


def gpu_cluster(*nodes: Any, slices: tuple[str, ...] | None = None,
                driver: str | None = DRIVER) -> ClusterGpuEvidence:
    from gpu.synth import cluster
    from kgc.layers.gpu.dra import DraEvidence, DraSlice

    base = cluster(*nodes)
    if slices is None:
        return base
    return dataclasses.replace(base, dra=DraEvidence(
        api_versions=("v1",), driver=driver,
        slices=tuple(DraSlice(name=f"{n}-s", driver=DRIVER, pool=n, generation=1, node=n,
                              device_count=1) for n in slices)))


def test_no_device_plugin_quotes_the_schedulers_words_and_says_how_to_list_allocatable() -> None:
    from gpu.synth import node as synth_node

    c = classify(pending(("FailedScheduling", INSUFFICIENT)), gpu_cluster(synth_node(gpus=0)))
    assert c.id == "no-device-plugin"
    assert '("Insufficient nvidia.com/pgpu.")' in c.summary
    assert c.remediation.endswith(
        "kubectl get nodes -o jsonpath='{.items[*].status.allocatable}').")
    assert c.matched == INSUFFICIENT


def test_insufficient_gpus_quote_the_event_and_point_at_unhealthy_devices() -> None:
    from gpu.synth import node as synth_node

    c = classify(pending(("FailedScheduling", INSUFFICIENT)), gpu_cluster(synth_node()))
    assert c.id == "insufficient-resource" and "(advertised by gpu-a)" in c.summary
    assert c.matched == INSUFFICIENT
    assert c.remediation.endswith("(allocatable below capacity means unhealthy devices).")


def test_an_unschedulable_pod_names_the_pod_and_the_scheduler_message() -> None:
    """A FailedScheduling event without a PodScheduled condition (an old kubelet's record, or
    a pod read between the two writes) is enough; the event's words are the reason."""
    c = classify(pending(("FailedScheduling", TAINTED)))
    assert c.id == "unschedulable"
    assert c.summary == f"kgc-run1/kgc-gpu-0 could not be scheduled: {TAINTED}"
    assert "tolerations" in c.remediation
    # with both, the event's message is the one quoted
    cond = (PodCondition("PodScheduled", "False", "Unschedulable", "0/1 nodes: other"),)
    c = classify(pending(("FailedScheduling", TAINTED), conditions=cond))
    assert c.summary.endswith(TAINTED)


def test_never_scheduled_names_the_budget_when_the_wait_was_not_timed() -> None:
    c = classify(pending(waited_s=None, budget_s=300.0))
    assert c.id == "never-scheduled" and "within 300 s" in c.summary


def test_an_unallocatable_claim_says_how_to_check_the_slices_and_quotes_the_scheduler() -> None:
    c = classify(pending(("FailedScheduling", UNALLOCATABLE), mode="claim"),
                 gpu_cluster(slices=()))
    assert c.id == "dra-unallocatable" and c.matched == UNALLOCATABLE
    assert c.remediation.startswith("Make the node's DRA driver publish its GPUs (kubectl get "
                                    "resourceslices --field-selector spec.nodeName=<node>")
    assert "the DeviceClass' selectors (and platform.gpu.request.selector)" in c.remediation


def test_an_unallocatable_claim_without_slice_evidence_says_it_was_not_recorded() -> None:
    c = classify(pending(("FailedScheduling", UNALLOCATABLE), mode="claim"), gpu_cluster())
    assert c.id == "dra-unallocatable"
    assert "(what the nodes publish was not recorded)" in c.summary


def test_slices_read_without_a_driver_name_speak_of_the_profiles_driver() -> None:
    c = classify(pending(("FailedScheduling", UNALLOCATABLE), mode="claim"),
                 gpu_cluster(slices=("gpu-a",), driver=None))
    assert "(nodes publishing the profile's driver devices: gpu-a)" in c.summary


def test_the_waiter_keeps_waiting_while_a_node_has_the_gpu_in_capacity() -> None:
    """Allocatable 0 with capacity 1 is a GPU the device plugin marked unhealthy: it may come
    back, so "Insufficient" is not yet the pod's fate (only "nobody has it at all" is)."""
    from gpu.synth import node as synth_node
    from kgc.layers.gpu.plan import settled

    p = pending(("FailedScheduling", INSUFFICIENT))
    assert settled(p, gpu_cluster(synth_node(allocatable=0))) is None
    assert settled(p, gpu_cluster(synth_node(gpus=0))) == "no node advertises nvidia.com/pgpu"


def test_a_claim_listing_more_results_than_kept_is_an_allocated_claim_in_error() -> None:
    c = claim_from_api(claim_obj("c1", results=[{"request": "gpu"}] * 65))
    assert c.allocated is True
    assert c.error == "status.allocation.devices.results has 65 entries (more than 64)"


def test_the_allocated_device_s_own_attributes_are_read_not_its_neighbour_s() -> None:
    """The slice lists gpu-0 first; the claim allocated gpu-1, whose UUID the guest shows."""
    sl = [rslice("gpu-a", gpu(0), gpu(1, uuid={"string": H200_UUID}))]
    c = claim_from_api(claim_obj(device="gpu-1"), sl)
    assert c.device_attributes["gpu-1"]["uuid"] == H200_UUID
    v = judge_pod("gpu.dra-device-match", dra_pod(c))
    assert v.status is Status.PASS, v.reason


def test_every_mismatched_device_is_named_and_a_guest_without_uuids_says_none() -> None:
    from gpu.synth import with_uuid

    p = dra_pod(claim_obj("c1", device="gpu-0"), claim_obj("c2", device="gpu-1"),
                guest=with_uuid(H200, ""),
                slices=[rslice("gpu-a", gpu(0), gpu(1))])
    v = judge_pod("gpu.dra-device-match", p)
    assert v.status is Status.FAIL
    assert v.reason == ("kgc-run1/kgc-gpu-0: gpu-0 (GPU-00000000) is not in the guest (guest "
                        "UUIDs: none); gpu-1 (GPU-00000001) is not in the guest (guest UUIDs: "
                        "none)")


def test_a_product_only_match_tells_to_publish_the_uuid() -> None:
    sl = [rslice("gpu-a", {"name": "gpu-0", "attributes": {
        "productName": {"string": "NVIDIA H200"}}})]
    v = judge_pod("gpu.dra-device-match", dra_pod(slices=sl))
    assert v.status is Status.WARN
    assert v.remediation.startswith("Publish the GPU's uuid attribute in the ResourceSlice")


def test_a_guest_without_nvidia_smi_skips_keeping_the_pod_s_evidence() -> None:
    import dataclasses as dc

    v = judge_pod("gpu.dra-device-match", dra_pod(guest=dc.replace(H200, smi=None)))
    assert v.status is Status.SKIP and "no nvidia-smi report to compare" in v.reason
    assert v.evidence["mode"] == "claim" and v.evidence["pod"] == "kgc-run1/kgc-gpu-0"


def test_dra_extended_without_the_pods_claim_status_says_the_resource_was_not_served() -> None:
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1"), mode="dra-extended"),
                  mode="dra-extended")
    assert v.status is Status.FAIL
    assert v.reason == ("kgc-run1/kgc-gpu-0: status.extendedResourceClaimStatus is not set: "
                        "the extended resource nvidia.com/pgpu was not served by DRA")


def test_a_product_mismatch_without_uuid_fails_naming_both_products() -> None:
    sl = [rslice("gpu-a", {"name": "gpu-0", "attributes": {
        "productName": {"string": "NVIDIA H100 80GB HBM3"}}})]
    v = judge_pod("gpu.dra-device-match", dra_pod(slices=sl))
    assert v.status is Status.FAIL
    assert H200.smi is not None
    (guest_product,) = {x.product_name for x in H200.smi.gpus}
    assert v.reason == (f"kgc-run1/kgc-gpu-0: gpu-0 is a NVIDIA H100 80GB HBM3; the guest has "
                        f"{guest_product}")


def test_the_product_only_warning_says_which_driver_publishes_the_uuid() -> None:
    sl = [rslice("gpu-a", {"name": "gpu-0", "attributes": {
        "productName": {"string": "NVIDIA H200"}}})]
    v = judge_pod("gpu.dra-device-match", dra_pod(slices=sl))
    assert v.status is Status.WARN
    assert v.remediation.endswith("(NVIDIA's DRA driver does for gpu devices).")


def test_device_match_without_an_allocated_device_says_where_to_look() -> None:
    from gpu.synth import pod

    v = judge_pod("gpu.dra-device-match", pod(H200, request_mode="claim"))
    assert v.status is Status.ERROR
    assert v.reason == ("kgc-run1/kgc-gpu-0: no allocated DRA device was recorded (see "
                        "gpu.dra-allocation)")


def test_kata_s_cold_plug_gap_is_named_with_the_pod_s_evidence() -> None:
    from gpu.synth import cpu_guest

    v = judge_pod("gpu.dra-device-match", dra_pod(guest=cpu_guest()))
    assert v.status is Status.FAIL
    assert v.reason.endswith("Kata's DRA cold-plug gap (kata-containers#13322)")
    assert v.evidence["mode"] == "claim" and v.evidence["pod"] == "kgc-run1/kgc-gpu-0"


# ------------------------------------------------------------------ gpu.dra_pod, seed fresh
def test_a_claim_without_a_node_selector_names_no_node() -> None:
    obj = claim_obj("c1")
    del obj["status"]["allocation"]["nodeSelector"]
    assert claim_from_api(obj).node is None
    other = claim_obj("c1")
    other["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"] = [
        {"key": "metadata.uid", "operator": "In", "values": ["0f1e"]}]
    assert claim_from_api(other).node is None


def test_every_allocation_problem_is_named_in_one_reason() -> None:
    obj = claim_obj("c1", node_name="gpu-b", reserved=())
    v = judge_pod("gpu.dra-allocation", dra_pod(obj))
    assert v.status is Status.FAIL
    assert v.reason == ("kgc-run1/kgc-gpu-0: c1: allocated on node gpu-b, the pod runs on gpu-a; "
                        "c1: reservedFor names nobody, not kgc-gpu-0")


def test_a_product_mismatch_names_every_product_the_guest_has() -> None:
    from gpu.synth import with_smi_gpus

    g = with_smi_gpus(H200, 2)
    assert g.smi is not None
    g = dataclasses.replace(g, smi=dataclasses.replace(g.smi, gpus=(
        g.smi.gpus[0], dataclasses.replace(g.smi.gpus[1], product_name="NVIDIA H100"))))
    sl = [rslice("gpu-a", {"name": "gpu-0", "attributes": {
        "productName": {"string": "NVIDIA B200"}}})]
    v = judge_pod("gpu.dra-device-match", dra_pod(guest=g, slices=sl))
    assert v.status is Status.FAIL
    assert v.reason.endswith("gpu-0 is a NVIDIA B200; the guest has NVIDIA H100, NVIDIA H200")


def test_the_unrecorded_attributes_skip_keeps_what_was_allocated() -> None:
    dev = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}
    v = judge_pod("gpu.dra-device-match", dra_pod(slices=[rslice("gpu-a", dev)]))
    assert v.status is Status.SKIP
    assert v.evidence["allocated"] == [{"claim": "kgc-gpu-0-gpu-x1", "device": "gpu-0",
                                        "uuid": None, "product": None, "pciBusID": None}]


def test_two_matching_devices_pass_naming_both() -> None:
    from gpu.synth import with_smi_gpus

    g = with_smi_gpus(H200, 2)
    assert g.smi is not None
    u0, u1 = (x.uuid for x in g.smi.gpus)
    sl = [rslice("gpu-a", gpu(0, uuid={"string": u0}), gpu(1, uuid={"string": u1}))]
    p = dra_pod(claim_obj("c1", device="gpu-0"), claim_obj("c2", device="gpu-1"), guest=g,
                slices=sl)
    v = judge_pod("gpu.dra-device-match", p)
    assert v.status is Status.PASS
    assert v.reason == ("kgc-run1/kgc-gpu-0: the guest's GPU UUID(s) are the allocated "
                        "device(s) gpu-0, gpu-1")


def test_a_runc_sandbox_names_every_allocated_device() -> None:
    from gpu.synth import cpu_guest

    runc = dataclasses.replace(cpu_guest(), hypervisor_flag=False)
    p = dra_pod(claim_obj("c1", device="gpu-0"), claim_obj("c2", device="gpu-1"), guest=runc)
    v = judge_pod("gpu.dra-device-match", p)
    assert v.status is Status.FAIL
    assert v.reason.startswith("kgc-run1/kgc-gpu-0: DRA allocated gpu-a/gpu-0, gpu-a/gpu-1 but "
                               "the pod's sandbox is not a VM")
    assert v.remediation.endswith("(e.g. dra-driver-nvidia-gpu's vfio.gpu.nvidia.com class, "
                                  "PassthroughSupport).")


def test_the_cold_plug_remedy_of_a_pod_without_a_node_speaks_of_the_node() -> None:
    from gpu.synth import cpu_guest

    v = judge_pod("gpu.dra-device-match", dra_pod(guest=cpu_guest(), node=None))
    assert v.status is Status.FAIL
    assert v.remediation.startswith("Kata on the node does not yet cold-plug devices")


# ------------------------------------------------------------------ gpu.dra_causes, seed fresh
def test_a_kata_cause_quotes_the_event_it_was_recognised_from() -> None:
    from gpu.synth import pod

    msg = ("failed to create containerd task: device /dev/vfio/devices/vfio0 is a known CDI "
           "device type but failed to match any sibling by path or BDF")
    p = pod(None, phase="Pending", request_mode="claim", containers=(),
            events=(PodEvent("Warning", "Failed", msg, 1, "kubelet"),))
    c = classify(p)
    assert c.id == "kata-dra-coldplug" and c.matched == msg


def test_the_unallocatable_remedy_ends_with_the_claims_to_check() -> None:
    c = classify(pending(("FailedScheduling", UNALLOCATABLE), mode="claim"),
                 gpu_cluster(slices=()))
    assert c.remediation.endswith("slices publish, and that no other claim holds the devices "
                                  "(kubectl get resourceclaims -A).")


def test_the_unschedulable_remedy_names_every_constraint() -> None:
    c = classify(pending(("FailedScheduling", TAINTED)))
    assert c.remediation == (
        "Fix the constraint the scheduler names: GPU-node taints need tolerations in the GPU pod "
        "(kgc adds none unless the profile asks), the RuntimeClass' scheduling.nodeSelector must "
        "match the GPU nodes, and cluster.gpu.node_selector must select nodes that exist.")


def test_never_scheduled_remedy_and_a_wait_of_unknown_length() -> None:
    c = classify(pending(waited_s=None, budget_s=None))
    assert c.summary == ("kgc-run1/kgc-gpu-0 was not scheduled and no FailedScheduling event "
                         "explains it")
    assert c.remediation == (
        "Check that kube-scheduler runs and is healthy (kubectl -n kube-system get pods; its "
        "log), that no scheduling gate holds the pod, or raise cluster.gpu.schedule_timeout_s.")


def test_another_nvidia_resource_in_short_supply_is_still_a_gpu_cause() -> None:
    """The scheduler names nvidia.com/gpu while the pod asked nvidia.com/pgpu (e.g. an init
    container or a LimitRange): still the GPU supply, not a generic constraint."""
    from gpu.synth import node as synth_node

    msg = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    c = classify(pending(("FailedScheduling", msg)), gpu_cluster(synth_node()))
    assert c.id == "no-device-plugin"
    assert c.summary.endswith('no node advertises nvidia.com/gpu ("Insufficient nvidia.com/gpu."'
                              "): no device plugin exposes the GPUs")


def test_a_resource_name_ending_in_x_is_read_whole() -> None:
    from gpu.synth import node as synth_node

    n = synth_node(resource="example.com/GPUX")
    msg = "0/1 nodes are available: 1 Insufficient example.com/GPUX."
    c = classify(pending(("FailedScheduling", msg), resource="example.com/GPUX"), gpu_cluster(n))
    assert c.id == "insufficient-resource" and "no node has 1 free example.com/GPUX" in c.summary
    assert "lower cluster.gpu.count or cluster.gpu.pods_per_node, or check" in c.remediation


def test_the_last_failed_scheduling_event_is_quoted_not_a_later_unrelated_one() -> None:
    from gpu.synth import pod

    p = pod(None, node=None, phase="Pending", containers=(), conditions=(), events=(
        PodEvent("Warning", "FailedScheduling", TAINTED, 1, "default-scheduler"),
        PodEvent("Normal", "NotTriggerScaleUp", "pod didn't trigger scale-up", 1,
                 "cluster-autoscaler")))
    c = classify(p)
    assert c.id == "unschedulable" and c.summary.endswith(TAINTED)


def test_only_slices_with_devices_of_the_driver_publish() -> None:
    from kgc.layers.gpu.dra import DraEvidence, DraSlice

    base = gpu_cluster()
    slices = (DraSlice(name="a", driver="other.example.com", pool="gpu-a", generation=1,
                       node="gpu-a", device_count=1),
              DraSlice(name="b", driver=DRIVER, pool="gpu-b", generation=1, node="gpu-b",
                       device_count=0))
    ev = dataclasses.replace(base, dra=DraEvidence(api_versions=("v1",), driver=DRIVER,
                                                   slices=slices))
    c = classify(pending(("FailedScheduling", UNALLOCATABLE), mode="claim"), ev)
    assert f"(no node publishes a {DRIVER} device (see gpu.dra-slices))" in c.summary


def test_a_class_without_extended_resource_name_is_found_as_none() -> None:
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES, classes=[klass(ext=None)]))
    assert o.status is Status.FAIL and o.found == "none"


# ------------------------------------------------------------------ gpu.dra_pod, seed check
def test_int_attributes_of_the_allocated_device_are_recorded() -> None:
    sl = [rslice("gpu-a", gpu(0, minor={"int": 0}, index={"int": 3}))]
    attrs = claim_from_api(claim_obj(), sl).device_attributes["gpu-0"]
    assert attrs["minor"] == "0" and attrs["index"] == "3"


def test_the_device_is_looked_up_in_its_own_pool() -> None:
    """Device names are unique per pool only: every node's slice has a gpu-0. The claim's
    pool decides whose attributes are the allocated device's."""
    sl = [rslice("gpu-b", gpu(0, uuid={"string": "GPU-of-node-b"})),
          rslice("gpu-a", gpu(0, uuid={"string": H200_UUID}))]
    c = claim_from_api(claim_obj(node_name="gpu-a"), sl)
    assert c.device_attributes["gpu-0"]["uuid"] == H200_UUID
    assert judge_pod("gpu.dra-device-match", dra_pod(c)).status is Status.PASS


def test_a_result_lacking_fields_keeps_the_claims_in_evidence() -> None:
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1", results=[{"request": "gpu"}])))
    assert v.status is Status.ERROR and "lacks driver, pool, device" in v.reason
    assert [r["claim"] for r in v.evidence["claims"]] == ["c1"]


def test_no_pod_and_no_nvidia_smi_skips_say_where_to_look() -> None:
    from gpu.synth import run

    gp_run = run()
    from gpu.synth import h200_profile
    gp = h200_profile()
    gp = gp.model_copy(update={"request": gp.request.model_copy(update={"mode": "claim"})})
    v = CHECKS.get("gpu.dra-allocation").judge(PodSubject(None, gp_run), gp, "cluster")
    assert v.status is Status.SKIP and v.reason == "no GPU pod was created (see gpu.pod-runs)"
    v = judge_pod("gpu.dra-device-match", dra_pod(guest=dataclasses.replace(H200, smi=None)))
    assert v.reason.endswith("the guest has no nvidia-smi report to compare (see "
                             "gpu.smi-count)")


# ------------------------------------------------------------------ gpu.dra_causes, seed check
def test_a_kata_cause_names_the_node_it_failed_on() -> None:
    from gpu.synth import pod

    msg = ("failed to create containerd task: device /dev/vfio/devices/vfio0 is a known CDI "
           "device type but failed to match any sibling by path or BDF")
    p = pod(None, phase="Pending", request_mode="claim", containers=(),
            events=(PodEvent("Warning", "Failed", msg, 1, "kubelet"),))
    c = classify(p)
    assert c.summary.startswith("the Kata shim on gpu-a did not cold-plug")


def test_the_unallocatable_and_no_device_plugin_remedies_in_full() -> None:
    from gpu.synth import node as synth_node

    c = classify(pending(("FailedScheduling", UNALLOCATABLE), mode="claim"),
                 gpu_cluster(slices=()))
    assert c.remediation == (
        "Make the node's DRA driver publish its GPUs (kubectl get resourceslices "
        "--field-selector spec.nodeName=<node>; its kubelet-plugin pod's log), check that the "
        "DeviceClass' selectors (and platform.gpu.request.selector) match what the slices "
        "publish, and that no other claim holds the devices (kubectl get resourceclaims -A).")
    c = classify(pending(("FailedScheduling", INSUFFICIENT)), gpu_cluster(synth_node(gpus=0)))
    assert c.remediation == (
        "Deploy the device plugin for passthrough GPUs so that GPU nodes advertise "
        "nvidia.com/pgpu (NVIDIA GPU Operator with sandboxWorkloads.enabled=true runs the "
        "sandbox device plugin; or set platform.gpu.resources to the name the nodes do "
        "advertise: kubectl get nodes -o jsonpath='{.items[*].status.allocatable}').")


def test_an_unschedulable_cause_quotes_the_scheduler() -> None:
    assert classify(pending(("FailedScheduling", TAINTED))).matched == TAINTED


def test_the_waiter_reads_a_resource_name_ending_in_x_whole() -> None:
    from gpu.synth import node as synth_node
    from kgc.layers.gpu.plan import settled

    msg = "0/1 nodes are available: 1 Insufficient example.com/GPUX."
    p = pending(("FailedScheduling", msg), resource="example.com/GPUX")
    assert settled(p, gpu_cluster(synth_node(resource="example.com/GPUX"))) is None
    assert settled(p, gpu_cluster(synth_node(gpus=0))) == "no node advertises example.com/GPUX"


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"])
def test_an_image_that_cannot_be_pulled_settles_the_wait(reason: str) -> None:
    from gpu.synth import pod
    from kgc.layers.gpu.plan import settled

    p = pod(None, phase="Pending", containers=(ContainerState("collector", "waiting", reason),))
    assert settled(p) == f"image pull: {reason}"


# ------------------------------------------------------------------ fourth sample (seed final)
def test_a_replayed_slice_counting_more_devices_than_it_holds_is_an_error() -> None:
    """A bundle whose slice says it listed 3 devices but holds 2 (cut, or edited) is a
    partial view: an error naming the slice, never a pass."""
    ev = cluster([rslice("gpu-a", gpu(0), gpu(1), name="s-a")], [node("gpu-a")])
    assert ev.dra is not None and ev.dra.slices is not None
    cut = dataclasses.replace(ev.dra.slices[0], device_count=3)
    ev = dataclasses.replace(ev, dra=dataclasses.replace(ev.dra, slices=(cut,)))
    o = judge("gpu.dra-slices", ev)
    assert o.status is Status.ERROR and "ResourceSlice s-a lists 3 devices" in o.reason


def test_discovery_with_versions_of_the_wrong_type_reads_none() -> None:
    from kgc.layers.gpu.dra import api_versions_from_discovery

    for vs in (5, "v1", {"version": "v1"}, None):
        assert api_versions_from_discovery(
            {"groups": [{"name": "resource.k8s.io", "versions": vs}]}) == ()


def test_both_ways_names_every_node_and_tells_to_run_one_allocator() -> None:
    nodes = [node("gpu-a", allocatable={"nvidia.com/gpu": "1"}),
             node("gpu-b", allocatable={"nvidia.com/gpu": "2"})]
    o = judge("gpu.dra-both-ways", cluster([rslice("gpu-a", gpu(0)), rslice("gpu-b", gpu(1))],
                                           nodes))
    assert o.status is Status.FAIL
    assert o.reason.startswith(
        "2 node(s) advertise GPUs both ways: gpu-a (allocatable nvidia.com/gpu=1 and 1 DRA "
        f"GPU(s) of {DRIVER}); gpu-b (allocatable nvidia.com/gpu=2 and 1 DRA GPU(s) of {DRIVER}).")
    assert o.remediation == (
        "Run one allocator per node: remove the device plugin (or its resource) from nodes where "
        f"{DRIVER} publishes the GPUs, or stop the DRA driver there and set "
        "platform.gpu.request.mode: device-plugin.")


def test_device_class_remedies_in_full() -> None:
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES, classes=[klass(ext="x.io/y")]))
    assert o.status is Status.FAIL
    assert o.remediation == (
        f"Set spec.extendedResourceName: nvidia.com/pgpu on DeviceClass {DRIVER} (NVIDIA's chart "
        "sets nvidia.com/gpu on gpu.nvidia.com), or point platform.gpu.request.device_class / "
        "platform.gpu.resources at the pair the cluster uses. Without it the request is never "
        "served by DRA.")
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES), prof(device_class="a.example.com"))
    assert o.remediation == (
        f"Install the DRA driver of {DRIVER} (NVIDIA's chart creates DeviceClass gpu.nvidia.com, "
        "and vfio.gpu.nvidia.com with PassthroughSupport), or set "
        f"platform.gpu.request.device_class to one of: {DRIVER}")


def test_unlisted_classes_or_slices_without_a_reason_say_so_and_how_to_grant() -> None:
    ev = cluster([], TWO_NODES)
    assert ev.dra is not None
    o = judge("gpu.dra-device-class", dataclasses.replace(
        ev, dra=dataclasses.replace(ev.dra, device_classes=None)))
    assert o.reason == "DeviceClasses could not be listed: no reason"
    o = judge("gpu.dra-slices", dataclasses.replace(
        ev, dra=dataclasses.replace(ev.dra, slices=None)))
    assert o.remediation == ("Grant the run's ServiceAccount get/list on "
                             "resourceslices.resource.k8s.io (kgc rbac certify).")


def test_more_gpus_on_several_nodes_are_each_named() -> None:
    ev = cluster([rslice("gpu-a", gpu(0), gpu(1)), rslice("gpu-b", gpu(2), gpu(3))], TWO_NODES)
    o = judge("gpu.dra-slices", ev, prof(devices_per_node=1))
    assert o.status is Status.WARN
    assert o.reason == ("more GPUs than the profile expects: gpu-a (2, the profile expects 1), "
                        "gpu-b (2, the profile expects 1)")


def test_no_selected_gpu_node_names_the_selector() -> None:
    ev = cluster([], [node("gpu-a", {"pool": "other"})], selector_keys=("pool",))
    o = judge("gpu.dra-slices", ev, prof(node_selector={"pool": "kgc"}))
    assert o.status is Status.FAIL
    assert o.reason.startswith("no GPU node matching {'pool': 'kgc'}: none is labelled")


def test_nodes_advertise_when_v1_is_not_served_and_when_a_node_publishes_nothing() -> None:
    o = judge("gpu.nodes-advertise", cluster(None, TWO_NODES, discovery=DISCOVERY_BETA))
    assert o.reason == ("resource.k8s.io/v1 is not served, so no node offers GPUs by DRA (see "
                        "gpu.dra-api)")
    o = judge("gpu.nodes-advertise", cluster([rslice("gpu-a", gpu(0))], TWO_NODES))
    assert o.status is Status.FAIL and o.found == "gpu-b"


def test_a_driverless_slice_records_the_problem() -> None:
    s = rslice("gpu-a", gpu(0))
    del s["spec"]["driver"]
    assert "no spec.driver" in slice_from_api(s).problems



# ------------------------------------------------------------------ fifth sample (seed post)
def test_a_list_with_zero_remaining_items_is_whole() -> None:
    d = evidence_from_api(DISCOVERY_V1, {"items": [klass()]},
                          {"metadata": {"remainingItemCount": 0},
                           "items": [rslice("gpu-a", gpu(0))]}, driver=DRIVER)
    ev = dataclasses.replace(cluster([], [node("gpu-a")]), dra=d)
    assert judge("gpu.dra-slices", ev).status is Status.PASS
    good = {"items": [rslice("gpu-a", gpu(0))], "metadata": {"remainingItemCount": 3}}
    d = evidence_from_api(DISCOVERY_V1, {"items": [klass()]}, good, driver=DRIVER)
    o = judge("gpu.dra-slices", dataclasses.replace(ev, dra=d))
    assert o.status is Status.ERROR and o.reason.endswith("judges none on a partial view")


def test_dra_api_lists_every_version_served() -> None:
    disc = {"groups": [{"name": "resource.k8s.io", "versions": [{"version": "v1alpha3"},
                                                                {"version": "v1beta1"}]}]}
    o = judge("gpu.dra-api", cluster(None, TWO_NODES, discovery=disc))
    assert o.reason == ("resource.k8s.io/v1 is not served (the API server serves "
                        "resource.k8s.io/v1alpha3, resource.k8s.io/v1beta1)")


def test_both_ways_names_every_advertised_resource_of_a_node() -> None:
    n = node("gpu-a", allocatable={"nvidia.com/pgpu": "1", "nvidia.com/gpu": "1"})
    ev = cluster([rslice("gpu-a", gpu(0))], [n], classes=[klass(ext=None)])
    o = judge("gpu.dra-both-ways", ev, prof("claim"))
    assert "gpu-a (allocatable nvidia.com/pgpu=1, nvidia.com/gpu=1 and 1 DRA GPU(s)" in o.reason


def test_device_class_warn_remedy_truncated_list_evidence_and_a_plain_unmapped_reason() -> None:
    o = judge("gpu.dra-device-class",
              cluster([], TWO_NODES, classes=[klass(), klass("vfio.gpu.nvidia.com")]))
    assert o.remediation == f"Leave spec.extendedResourceName: nvidia.com/gpu on {DRIVER} only."
    classes = {"metadata": {"remainingItemCount": 300}, "items": [klass("other.example.com")]}
    d = evidence_from_api(DISCOVERY_V1, classes, {"items": []}, driver=DRIVER)
    o = judge("gpu.dra-device-class", dataclasses.replace(cluster([], TWO_NODES), dra=d))
    assert o.evidence["class_count"] == 301
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES, classes=[klass(ext=None)]))
    assert o.reason.endswith("(platform.gpu.resources: nvidia.com/pgpu, nvidia.com/gpu)")


def test_too_few_gpus_alone_names_only_them_and_keeps_the_counts() -> None:
    ev = cluster([rslice("gpu-a", gpu(0)), rslice("gpu-b", gpu(1), gpu(2))], TWO_NODES)
    o = judge("gpu.dra-slices", ev, prof(devices_per_node=2))
    assert o.status is Status.FAIL and o.reason == "too few GPUs on gpu-a (1 of 2)"
    assert o.evidence["gpus"] == {"gpu-a": 1, "gpu-b": 2}


def test_nodes_advertise_without_any_gpu_node_and_with_a_silent_one() -> None:
    bare = {"metadata": {"name": "cpu-1", "labels": {}}, "status": {}}
    o = judge("gpu.nodes-advertise", cluster([], [bare]))
    assert o.status is Status.FAIL and o.found == "none"
    assert o.reason == (f"no GPU node publishes {DRIVER} devices or carries a GPU label "
                        "(nvidia.com/gpu.present=true, feature.node.kubernetes.io/"
                        "pci-10de.present=true); 1 node(s) in the cluster")
    o = judge("gpu.nodes-advertise", cluster([rslice("gpu-a", gpu(0))], TWO_NODES))
    assert o.evidence["nodes"] == {"gpu-a": f"1 DRA GPU(s) of {DRIVER}",
                                   "gpu-b": f"0 DRA GPU(s) of {DRIVER}"}


def test_a_nameless_slice_records_the_problem() -> None:
    s = rslice("gpu-a", gpu(0))
    s["metadata"] = {}
    assert "a ResourceSlice without metadata.name" in slice_from_api(s).problems


# ------------------------------------------------------------------ gpu.dra_pod, seed final
def test_a_claim_with_a_number_for_a_name_reads_without_crashing() -> None:
    c = claim_from_api({"metadata": {"name": 5}, "status": {}})
    assert c.name is None and c.allocated is False


def test_exactly_max_results_is_read_and_one_more_is_an_error() -> None:
    from kgc.layers.gpu.dra_pod import MAX_RESULTS

    res = [{"request": "gpu", "driver": DRIVER, "pool": "gpu-a", "device": f"gpu-{i}"}
           for i in range(MAX_RESULTS + 1)]
    assert claim_from_api(claim_obj(results=res[:MAX_RESULTS])).error is None
    assert claim_from_api(claim_obj(results=res)).error is not None


def test_allocation_reasons_join_every_device_and_consumer() -> None:
    res = [{"request": "gpu", "driver": DRIVER, "pool": "gpu-a", "device": f"gpu-{i}"}
           for i in range(2)]
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1", results=res)))
    assert v.status is Status.PASS and v.evidence["mode"] == "claim"
    assert v.reason == (f"kgc-run1/kgc-gpu-0: allocated {DRIVER}/gpu-a/gpu-0, "
                        f"{DRIVER}/gpu-a/gpu-1 on gpu-a, reserved for the pod")
    v = judge_pod("gpu.dra-allocation", dra_pod(claim_obj("c1", reserved=("p1", "p2"))))
    assert "c1: reservedFor names p1, p2, not kgc-gpu-0" in v.reason


def test_a_guest_without_product_names_says_no_named_gpu() -> None:
    assert H200.smi is not None
    g = dataclasses.replace(H200, smi=dataclasses.replace(H200.smi, gpus=tuple(
        dataclasses.replace(x, product_name=None) for x in H200.smi.gpus)))
    sl = [rslice("gpu-a", {"name": "gpu-0", "attributes": {
        "productName": {"string": "NVIDIA H200"}}})]
    v = judge_pod("gpu.dra-device-match", dra_pod(guest=g, slices=sl))
    assert v.status is Status.FAIL and v.reason.endswith("the guest has no named GPU")


def test_device_match_errors_keep_the_pod_s_evidence_and_name_every_device() -> None:
    from gpu.synth import cpu_guest, pod

    v = judge_pod("gpu.dra-device-match", pod(H200, request_mode="claim"))
    assert v.status is Status.ERROR and v.evidence["mode"] == "claim"
    p = dra_pod(claim_obj("c1", device="gpu-0"), claim_obj("c2", device="gpu-1"),
                guest=cpu_guest())
    v = judge_pod("gpu.dra-device-match", p)
    assert v.reason.startswith("kgc-run1/kgc-gpu-0: DRA allocated gpu-a/gpu-0, gpu-a/gpu-1 but "
                               "the Kata guest has no NVIDIA GPU PCI function")


def test_slices_of_another_driver_listed_first_do_not_hide_the_device() -> None:
    other = rslice("gpu-a", gpu(0, uuid={"string": "GPU-other"}))
    other["spec"]["driver"] = "other.example.com"
    c = claim_from_api(claim_obj(), [other, rslice("gpu-a", gpu(0, uuid={"string": H200_UUID}))])
    assert c.device_attributes["gpu-0"]["uuid"] == H200_UUID


def test_a_finished_pod_settles_the_wait() -> None:
    from gpu.synth import pod
    from kgc.layers.gpu.plan import settled

    assert settled(pod(None, phase="Failed", containers=())) == "the pod failed"
    assert settled(pod(H200)) == "the pod succeeded"
    assert settled(pod(H200, phase="Running")) is None


# ------------------------------------------------------------------ gpu.dra_pod, seed post
def test_every_claim_is_judged_after_an_unallocated_one() -> None:
    first = claim_obj("c1")
    del first["status"]["allocation"]
    v = judge_pod("gpu.dra-allocation", dra_pod(first, claim_obj("c2", reserved=("other",))))
    assert v.status is Status.FAIL
    assert v.reason == ("kgc-run1/kgc-gpu-0: ResourceClaim c1 is not allocated; c2: reservedFor "
                        "names other, not kgc-gpu-0")
    assert v.remediation.startswith(f"The GPU must come from the profile's DeviceClass {DRIVER} "
                                    f"(driver {DRIVER})")


def test_allocation_errors_keep_the_pod_s_evidence_and_the_claim_s_consumers() -> None:
    obj = claim_obj("c1")
    del obj["status"]["allocation"]["devices"]["results"]
    assert claim_from_api(obj).reserved_for == ("kgc-gpu-0",)
    for bad in (claim_obj("c1", results=[]), claim_obj("c1", results=[{"request": "gpu"}])):
        v = judge_pod("gpu.dra-allocation", dra_pod(bad))
        assert v.status is Status.ERROR and v.evidence["mode"] == "claim"
        assert v.evidence["pod"] == "kgc-run1/kgc-gpu-0"


def test_a_runc_sandbox_failure_says_nothing_was_passed_and_keeps_the_evidence() -> None:
    from gpu.synth import cpu_guest

    runc = dataclasses.replace(cpu_guest(), hypervisor_flag=False)
    v = judge_pod("gpu.dra-device-match", dra_pod(guest=runc))
    assert v.reason.endswith("shows no NVIDIA GPU PCI function (see gpu.in-vm): nothing was "
                             "passed through")
    assert v.evidence["mode"] == "claim"


# ------------------------------------------------------------------ sixth sample (seed last)
def test_twins_with_a_driver_qualified_bus_id_are_one_gpu() -> None:
    """The bus id may be published as ``<driver>/pciBusID``: a GPU and its VFIO twin still
    count once."""
    twin = [{"name": n, "attributes": {f"{DRIVER}/pciBusID": {"string": "0000:9d:00.0"},
                                       "productName": {"string": "NVIDIA H200"}},
             "capacity": {"memory": {"value": "1Gi"}}} for n in ("gpu-0", "gpu-vfio-0")]
    o = judge("gpu.dra-slices", cluster([rslice("gpu-a", *twin)], [node("gpu-a")]))
    assert o.status is Status.PASS and o.evidence["gpus"] == {"gpu-a": 1}


def test_slice_reading_keeps_capacities_and_names_devices_and_counts_problems() -> None:
    s = slice_from_api(rslice("gpu-a", gpu(0)))
    assert s.devices[0].capacity == {"memory": "143771Mi"}
    bad = rslice("gpu-a", {"name": "gpu-0", "attributes": "x"})
    assert "device gpu-0: attributes is not a map" in slice_from_api(bad).problems
    many = rslice("gpu-a", *({"attributes": "x"} for _ in range(25)))
    probs = slice_from_api(many).problems
    assert probs[-1] == "... 30 more problem(s)"


def test_unmapped_class_hint_names_only_classes_that_map_a_profile_resource() -> None:
    ev = cluster([], TWO_NODES, classes=[klass(ext=None), klass("other.example.com", ext=None)])
    o = judge("gpu.dra-device-class", ev)
    assert o.status is Status.FAIL and "instead" not in o.reason


def test_found_and_expected_texts_join_every_name() -> None:
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES, classes=[
        klass(), klass("vfio.gpu.nvidia.com")]), prof(device_class="a.example.com"))
    assert o.found == f"{DRIVER}, vfio.gpu.nvidia.com"
    n = node("gpu-a", allocatable={"nvidia.com/pgpu": "1"})
    o = judge("gpu.dra-both-ways", cluster([rslice("gpu-a", gpu(0))], [n],
                                           classes=[klass(ext=None)]), prof("claim"))
    assert o.expected == "allocatable nvidia.com/pgpu / nvidia.com/gpu 0 where DRA publishes GPUs"
    o = judge("gpu.nodes-advertise", cluster([], TWO_NODES))
    assert o.found == "gpu-a, gpu-b"


def test_dra_slices_no_gpu_node_and_more_gpus_evidence() -> None:
    bare = {"metadata": {"name": "cpu-1", "labels": {}}, "status": {}}
    o = judge("gpu.dra-slices", cluster([], [bare]))
    assert o.status is Status.FAIL and o.found == "none"
    assert o.remediation == f"Deploy the DRA driver {DRIVER} (its kubelet plugin) on the GPU nodes."
    o = judge("gpu.dra-slices", cluster([rslice("gpu-a", gpu(0), gpu(1))], [node("gpu-a")]),
              prof(devices_per_node=1))
    assert o.status is Status.WARN and o.evidence["gpus"] == {"gpu-a": 2}


# ------------------------------------------------------------------ seventh sample (seed end)
def test_a_bad_capacity_entry_is_named_and_does_not_hide_the_next_one() -> None:
    dev = gpu(0)
    dev["capacity"] = {"bad": {}, "memory": {"value": "1Gi"}}
    s = slice_from_api(rslice("gpu-a", dev))
    assert s.devices[0].capacity == {"memory": "1Gi"}
    assert "device gpu-0: capacity 'bad' has no value" in s.problems
    dev["capacity"] = ["memory"]
    assert "device gpu-0: capacity is not a map" in slice_from_api(rslice("gpu-a", dev)).problems


def test_no_version_served_is_found_as_none() -> None:
    o = judge("gpu.dra-api", cluster(None, TWO_NODES, discovery={"groups": []}))
    assert o.status is Status.FAIL and o.found == "none"


def test_the_unmapped_class_failure_keeps_the_class_and_no_gpu_node_tells_to_deploy() -> None:
    o = judge("gpu.dra-device-class", cluster([], TWO_NODES, classes=[klass(ext=None)]))
    assert o.evidence["device_class"]["name"] == DRIVER
    bare = {"metadata": {"name": "cpu-1", "labels": {}}, "status": {}}
    o = judge("gpu.nodes-advertise", cluster([], [bare]))
    assert o.remediation == (f"Deploy the DRA driver {DRIVER} so that its kubelet plugin "
                             "publishes the GPUs of every GPU node in ResourceSlices (see "
                             "gpu.dra-slices).")
