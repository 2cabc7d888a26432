"""What the live run will create and when it may stop waiting — decided purely."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from typing import Any

from kubernetes.client import ApiClient

from gpu.synth import cases, cluster, h200_profile, node, pod
from kgc.evidence.guest import parse_guest_output
from kgc.layers.gpu.classify import classify
from kgc.layers.gpu.evidence import (
    ContainerState,
    PodEvent,
    node_from_api,
    pod_from_api,
)
from kgc.layers.gpu.plan import (
    SCRIPT_KEY,
    PodPlan,
    collector_configmap,
    gpu_pod_manifest,
    plan,
    settled,
)

LABELS = {"kgc.io/run": "r1"}


def test_plan_samples_nodes_and_fits_pods_to_their_gpus() -> None:
    cl = cluster(node("b", 1), node("a", 2), node("c", 4))
    pods, notes = plan(cl, h200_profile(pods_per_node=2, max_nodes=2))
    assert [(p.node, p.name) for p in pods] == [("a", "kgc-gpu-a-0"), ("a", "kgc-gpu-a-1"),
                                                ("b", "kgc-gpu-b-0")]
    assert any("b: room for 1 pod" in n for n in notes)
    assert any("1 more GPU node(s) not sampled" in n and "c" in n for n in notes)
    assert {p.resource for p in pods} == {"nvidia.com/pgpu"}


def test_plan_exact_fit_has_no_note() -> None:
    pods, notes = plan(cluster(node("a", 2)), h200_profile(pods_per_node=2))
    assert len(pods) == 2 and notes == []
    pods, notes = plan(cluster(node("a", 2)), h200_profile(count=2, pods_per_node=1))
    assert len(pods) == 1 and notes == []


def test_plan_a_node_too_small_still_gets_one_pod_to_show_why() -> None:
    pods, notes = plan(cluster(node("a", 1)), h200_profile(count=2))
    assert [p.count for p in pods] == [2]
    assert any("fewer than cluster.gpu.count=2" in n for n in notes)


def test_plan_probes_gpu_nodes_that_advertise_nothing() -> None:
    pods, notes = plan(cluster(node("z", 0), node("y", 0)), h200_profile(max_nodes=1))
    assert [(p.name, p.node, p.probe) for p in pods] == [("kgc-gpu-y-probe", "y", True)]
    assert "no node advertises nvidia.com/pgpu" in notes[0]
    plain = dataclasses.replace(node("cpu", 0, product=None), labels={})
    pods, notes = plan(cluster(plain), h200_profile())
    assert [(p.node, p.probe) for p in pods] == [(None, True)]
    pods, notes = plan(dataclasses.replace(cluster(), nodes=None, errors={"nodes": "403"}),
                       h200_profile())
    assert pods == [] and "403" in notes[0]


def _as_model(manifest: dict[str, Any], kind: str) -> dict[str, Any]:
    """Through the official client's models and back: keys the API does not know vanish."""
    api = ApiClient()
    obj = api.deserialize(json.dumps(manifest), kind, "application/json")
    return api.sanitize_for_serialization(obj)  # type: ignore[no-any-return]


def test_pod_manifest_is_a_valid_pod_with_the_profile_settings() -> None:
    gp = h200_profile(memory="16Gi", node_selector={"pool": "gpu"})
    m = gpu_pod_manifest(PodPlan("kgc-gpu-a-0", "a", "nvidia.com/pgpu", 1), gp,
                         namespace="kgc-r1", configmap="kgc-collector", labels=LABELS)
    assert _as_model(m, "V1Pod") == m
    spec = m["spec"]
    assert spec["runtimeClassName"] == "kata-qemu-nvidia-gpu"
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    c = spec["containers"][0]
    assert c["resources"]["limits"] == {"nvidia.com/pgpu": "1", "cpu": "1", "memory": "16Gi"}
    assert c["command"] == ["sh", f"/kgc/{SCRIPT_KEY}"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["a"]
    assert spec["nodeSelector"] == {"pool": "gpu"}
    assert m["metadata"]["labels"] == {"kgc.io/run": "r1", "kgc.io/layer": "gpu",
                                       "kgc.io/collector": "gpu"}
    assert spec["activeDeadlineSeconds"] >= gp.start_timeout_s
    unpinned = gpu_pod_manifest(PodPlan("p", None, "nvidia.com/pgpu", 1), h200_profile(),
                                namespace="n", configmap="c", labels=LABELS)
    assert "affinity" not in unpinned["spec"] and "nodeSelector" not in unpinned["spec"]


def test_configmap_carries_a_script_that_runs() -> None:
    cm = collector_configmap("kgc-collector", "kgc-r1", LABELS)
    assert _as_model(cm, "V1ConfigMap") == cm
    sh = shutil.which("sh")
    assert sh
    out = subprocess.run([sh, "-c", cm["data"][SCRIPT_KEY]], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert parse_guest_output(out).complete


def test_settled_says_when_waiting_is_pointless() -> None:
    c = cases()
    assert settled(c["h200-good"].pods[0]) == "the pod succeeded"
    assert settled(c["runtimeclass-missing"].pods[0]) == "the API refused the pod"
    ndp = c["no-device-plugin"]
    assert settled(ndp.pods[0], ndp.cluster) == "no node advertises nvidia.com/pgpu"
    # the same event while some node does advertise: others may free up, keep waiting
    assert settled(ndp.pods[0], cluster(node("gpu-a", 1))) is None
    assert settled(ndp.pods[0]) is None
    assert settled(c["image-pull"].pods[0]) == "image pull: ImagePullBackOff"
    waiting = pod(None, phase="Pending", containers=(
        ContainerState("collector", "waiting", "ErrImagePull", restart_count=0),))
    assert settled(waiting) is None
    again = pod(None, phase="Pending", containers=(
        ContainerState("collector", "waiting", "ErrImagePull", restart_count=1),))
    assert settled(again) == "image pull: ErrImagePull"
    sb = pod(None, phase="Pending", events=(PodEvent("Warning", "FailedCreatePodSandBox", "x",
                                                     3),))
    assert settled(sb) == "the sandbox failed 3 times"
    sb2 = pod(None, phase="Pending", events=(PodEvent("Warning", "FailedCreatePodSandBox", "x",
                                                      2),))
    assert settled(sb2) is None
    assert settled(pod(None, phase="Running", containers=(
        ContainerState("collector", "running"),))) is None


def test_api_objects_to_a_classified_failure() -> None:
    """A pod and its events as the API serves them -> evidence -> the named cause."""
    node_obj = {"metadata": {"name": "gpu-b", "labels": {"nvidia.com/gpu.product":
                                                         "NVIDIA-H200"}},
                "status": {"nodeInfo": {"kernelVersion": "6.8.0-57-generic"},
                           "capacity": {"nvidia.com/pgpu": "1"},
                           "allocatable": {"nvidia.com/pgpu": "1"}}}
    pod_obj = {
        "metadata": {"name": "kgc-gpu-gpu-b-0", "namespace": "kgc-r1"},
        "spec": {"nodeName": "gpu-b", "runtimeClassName": "kata-qemu-nvidia-gpu",
                 "containers": [{"name": "collector", "image": "nvcr.io/nvidia/cuda:0.0"}]},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"},
                           {"type": "Ready", "status": "False", "reason": "ContainersNotReady"}],
            "containerStatuses": [{"name": "collector", "restartCount": 0, "state": {
                "waiting": {"reason": "ImagePullBackOff",
                            "message": 'Back-off pulling image "nvcr.io/nvidia/cuda:0.0"'}}}],
        },
    }
    events = [
        {"type": "Normal", "reason": "Scheduled", "source": {"component": "default-scheduler"},
         "message": "Successfully assigned kgc-r1/kgc-gpu-gpu-b-0 to gpu-b"},
        {"type": "Warning", "reason": "Failed", "count": 2, "source": {"component": "kubelet"},
         "message": 'Failed to pull image "nvcr.io/nvidia/cuda:0.0": rpc error: code = '
                    "NotFound desc = failed to pull and unpack image: not found"},
    ]
    n = node_from_api(node_obj)
    p = pod_from_api(pod_obj, events=events, node=n, target_node="gpu-b",
                     resource="nvidia.com/pgpu", count=1, timed_out=True, waited_s=300.0)
    assert p.node_kernel == "6.8.0-57-generic" and p.scheduled
    c = classify(p)
    assert c.id == "image-pull" and "does not exist" in c.summary
    assert settled(p) == "image pull: ImagePullBackOff"
