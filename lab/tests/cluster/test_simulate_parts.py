"""The lab's collector simulator without a lab: the GPU chooser serves recorded captures
byte for byte (only a second pod on one node gets a derived GPU UUID, and its note says so),
the kwok stages it relies on select what they should."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kgc.evidence.guest import parse_guest_output
from kgc_lab import cluster as labc
from kgc_lab.cluster import sim_gpu, simulate
from kgc_lab.cluster.shape import ClusterLabProfile, LabClusterProfile
from kgc_lab.cluster.simulate import SimOutput, register_chooser

GUEST = Path(__file__).resolve().parents[3] / "fixtures" / "guest"
H200 = (GUEST / "h200-firecracker.raw.txt").read_text()
UUID = "GPU-296e81e0-41dc-e3a5-5798-0bddebd2f1d0"


def pod(uid: str, node: str | None = "kgc-gpu-0", ns: str = "kgc-r1") -> dict[str, Any]:
    return {"metadata": {"name": f"p-{uid}", "namespace": ns, "uid": uid,
                         "labels": {"kgc.io/collector": "gpu"}},
            "spec": {"nodeName": node, "containers": [{"name": "collector"}]}}


@pytest.fixture
def nodes(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, Any]]:
    known: dict[str, dict[str, Any]] = {}
    monkeypatch.setattr(sim_gpu, "lab_node", lambda name: known.get(name))
    return known


def test_first_pod_on_a_node_gets_the_recorded_capture_byte_for_byte(nodes: Any) -> None:
    out = sim_gpu.GpuChooser()(pod("u1"))
    assert isinstance(out, SimOutput) and out.exit_code == 0
    assert out.text == H200
    assert "fixtures/guest/h200-firecracker.raw.txt" in out.note and "never ran" in out.note
    assert "varied" not in out.note


def test_a_second_pod_on_the_node_sees_a_distinct_uuid_and_the_note_says_so(nodes: Any) -> None:
    ch = sim_gpu.GpuChooser()
    first, second, again = ch(pod("u1")), ch(pod("u2")), ch(pod("u1"))
    other_node, other_run = ch(pod("u3", node="kgc-gpu-1")), ch(pod("u4", ns="kgc-r2"))
    assert first is not None and second is not None and again is not None
    assert again.text == first.text  # the same pod asked twice: the same answer
    assert other_node is not None and other_node.text == H200
    assert other_run is not None and other_run.text == H200
    new = sim_gpu.derived_uuid(UUID, 1)
    assert new != UUID and re.fullmatch(r"GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", new)
    assert UUID not in second.text and second.text.count(new) == H200.count(UUID) >= 2
    # nothing else changed: putting the recorded UUID back gives the capture
    assert second.text.replace(new, UUID) == H200
    assert f"{UUID} -> {new}" in second.note and "GPU pod #2 on kgc-gpu-0" in second.note
    g1, g2 = parse_guest_output(first.text), parse_guest_output(second.text)
    assert g1.gpu_uuids == (UUID,) and g2.gpu_uuids == (new,)


def test_the_node_annotation_picks_the_cpu_only_capture(nodes: Any) -> None:
    nodes["kgc-gpu-0"] = {"metadata": {"annotations": {sim_gpu.SIM_GUEST:
                                                       "cpu-only-firecracker"}}}
    out = sim_gpu.GpuChooser()(pod("u1"))
    assert out is not None
    assert out.text == (GUEST / "cpu-only-firecracker.raw.txt").read_text()
    g = parse_guest_output(out.text)
    assert g.smi_rc == 127 and not g.nvidia_pci and g.complete


def test_an_unknown_capture_name_is_refused_not_invented(nodes: Any) -> None:
    nodes["kgc-gpu-0"] = {"metadata": {"annotations": {sim_gpu.SIM_GUEST: "a100-made-up"}}}
    with pytest.raises(ValueError, match="names no recorded capture"):
        sim_gpu.GpuChooser()(pod("u1"))


def test_an_unscheduled_pod_gets_no_answer(nodes: Any) -> None:
    assert sim_gpu.GpuChooser()(pod("u1", node=None)) is None


def test_the_gpu_chooser_is_registered_and_kinds_are_checked() -> None:
    assert "gpu" in simulate.load_choosers()
    with pytest.raises(ValueError):
        register_chooser("a/b", lambda p: None)


def test_kwok_stages_fail_pulls_under_the_unpullable_registry_only() -> None:
    stages = {s["metadata"]["name"]: s["spec"] for s in labc.kwok_stages(LabClusterProfile())}
    key = f'.spec.containers.[].image | startswith("{labc.UNPULLABLE_REGISTRY}/")'
    for name in ("kgc-pod-sandbox-kata", "kgc-pod-sandbox-other"):
        assert {"key": key, "operator": "NotIn", "values": ["true"]} in \
            stages[name]["selector"]["matchExpressions"]
    pull = stages["kgc-pod-image-pull-failed"]
    assert {"key": key, "operator": "In", "values": ["true"]} in pull["selector"][
        "matchExpressions"]
    assert pull["next"]["event"]["reason"] == "Failed"
    assert "ErrImagePull" in pull["next"]["statusTemplate"]
    assert "ImagePullBackOff" in stages["kgc-pod-image-pull-backoff"]["next"]["statusTemplate"]
    done = stages["kgc-collector-succeeded"]
    assert "phase: Succeeded" in done["next"]["statusTemplate"]
    assert "phase: Failed" in stages["kgc-collector-failed"]["next"]["statusTemplate"]


def test_lab_nodes_report_a_host_kernel_and_gpu_labels() -> None:
    cl = LabClusterProfile(lab=ClusterLabProfile(node_kernel="6.1.0-28-amd64"))
    for n in labc.node_manifests(cl):
        assert n["status"]["nodeInfo"]["kernelVersion"] == "6.1.0-28-amd64"
        gpu = n["metadata"]["labels"]["kgc.io/gpu"] == "true"
        assert (n["metadata"]["labels"].get("nvidia.com/gpu.product") == "NVIDIA-H200") == gpu
    g = parse_guest_output(H200)
    assert g.kernel and g.kernel != ClusterLabProfile().node_kernel


def test_no_device_plugin_shape_advertises_no_gpu_and_runs_no_plugin() -> None:
    cl = LabClusterProfile(lab=ClusterLabProfile(gpu_resources=(), device_plugin=False))
    assert labc.device_plugin_manifests(cl) == []
    for n in labc.node_manifests(cl):
        assert not [r for r in n["status"]["capacity"] if r.startswith("nvidia.com/")]
    assert labc.device_plugin_manifests(LabClusterProfile())[1]["kind"] == "DaemonSet"
