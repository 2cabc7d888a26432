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


# --------------------------------------------------------------------------- DRA and CC
class _Custom:
    """The custom-objects API a chooser reads claims and slices through (in memory)."""

    def __init__(self, claims: dict[str, Any], slices: list[Any]) -> None:
        self.claims, self.slices = claims, slices

    def get_namespaced_custom_object(self, group: str, version: str, ns: str, plural: str,
                                     name: str) -> Any:
        assert (group, version, plural) == ("resource.k8s.io", "v1", "resourceclaims")
        return self.claims[f"{ns}/{name}"]

    def list_cluster_custom_object(self, group: str, version: str, plural: str,
                                   **kw: Any) -> Any:
        assert plural == "resourceslices"
        return {"items": self.slices}


class _Admin:
    def __init__(self, custom: _Custom) -> None:
        self.custom = custom


def _claim(device: str, pool: str = "kgc-gpu-0") -> dict[str, Any]:
    return {"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": "gpu.nvidia.com", "pool": pool, "device": device}]}}}}


def test_a_dra_pod_sees_the_uuid_of_the_device_it_was_allocated(
        nodes: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    from kgc_lab.cluster import sim_dra
    gpu = sim_dra.recorded_gpu()
    assert gpu.uuid == UUID and "H200" in gpu.product and gpu.memory_mib > 140000
    slices = [sim_dra.slice_manifest("kgc-gpu-0", 0, 4, gpu),
              sim_dra.slice_manifest("kgc-gpu-1", 1, 4, gpu)]
    claims = {"kgc-r1/c2": _claim("gpu-2"), "kgc-r1/x": _claim("gpu-1", "kgc-gpu-1")}
    monkeypatch.setattr(sim_gpu, "lab_client", lambda: _Admin(_Custom(claims, slices)))
    p = pod("u1")
    p["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "c2"}]}
    out = sim_gpu.GpuChooser()(p)
    assert out is not None
    want = sim_dra.device_uuid(gpu, 0, 2)
    assert want != UUID and parse_guest_output(out.text).smi.gpus[0].uuid == want
    assert f"{UUID} -> {want}" in out.note and "DRA-allocated" in out.note
    # the claim the scheduler made for an extended-resource request counts the same way
    q = pod("u2", node="kgc-gpu-1")
    q["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "x"}}
    out = sim_gpu.GpuChooser()(q)
    assert out is not None and sim_dra.device_uuid(gpu, 1, 1) in out.text
    # no claim: the device-plugin path (recorded UUID for the first pod) is unchanged
    assert sim_gpu.GpuChooser()(pod("u3")).text == H200  # type: ignore[union-attr]
    # the stand-in's UUIDs are distinct over nodes and devices
    uuids = [sim_dra.device_uuid(gpu, n, i) for n in range(3) for i in range(8)]
    assert len(set(uuids)) == len(uuids)


def test_the_stand_in_slices_read_as_the_product_reads_a_driver_s_slice() -> None:
    from kgc.layers.gpu.dra import PCI_BDF, slice_from_api
    from kgc_lab.cluster import sim_dra
    doc = sim_dra.slice_manifest("kgc-gpu-1", 1, 4, sim_dra.recorded_gpu())
    s = slice_from_api(doc)
    assert not s.problems and s.node == "kgc-gpu-1" and s.pool == "kgc-gpu-1"
    assert s.device_count == 4 and [d.name for d in s.devices] == [f"gpu-{i}" for i in range(4)]
    for d in s.devices:
        assert PCI_BDF.match(d.pci_bus_id("gpu.nvidia.com") or "")
        assert d.memory("gpu.nvidia.com") == "143771Mi"
        assert d.attribute("productName", "gpu.nvidia.com") == "NVIDIA H200"
    assert len({d.pci_bus_id("gpu.nvidia.com") for d in s.devices}) == 4
    cls = sim_dra.device_class_manifest(extended_resource_name="nvidia.com/gpu")
    assert cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "extendedResourceName" not in sim_dra.device_class_manifest()["spec"]


@pytest.mark.parametrize("capture,records", [("h200-cc-snp", "cc-good"),
                                             ("h200-cc-off", "cc-off")])
def test_the_cc_captures_are_the_h200_capture_with_the_transcribed_records(
        capture: str, records: str) -> None:
    """What the simulator serves for a CC node parses to exactly the CC evidence of the
    transcribed records tests/gpu/cc_synth.py builds the CC fixtures from (and judged
    there by tests/gpu/test_cc.py), everything else being the real H200 capture."""
    import sys
    tests = Path(__file__).resolve().parents[3] / "tests"
    sys.path.insert(0, str(tests))
    try:
        from gpu import cc_synth
        want = cc_synth.guest(records)
    finally:
        sys.path.remove(str(tests))
    text, source, what = sim_gpu.capture_text(capture)
    got = parse_guest_output(text)
    assert got.cc == want.cc and got.collector == "kgc-guest/4" and got.complete
    assert got.smi == parse_guest_output(H200).smi
    assert "transcribed" in source and "TRANSCRIBED" in what
    with pytest.raises(ValueError, match="names no recorded capture"):
        sim_gpu.capture_text("h200-cc-nonesuch")


def test_kata_s_dra_cold_plug_gap_is_played_only_for_dra_pods_of_the_gap_classes() -> None:
    import yaml

    from kgc_lab.cluster.manifests import KATA_DRA_COLDPLUG, kwok_stages
    stages = {s["metadata"]["name"]: s for s in kwok_stages(LabClusterProfile())}

    def classes(name: str) -> list[str]:
        return next(e["values"] for e in stages[name]["spec"]["selector"]["matchExpressions"]
                    if e["key"] == ".spec.runtimeClassName")

    assert classes("kgc-pod-sandbox-kata") == ["kata", "kata-qemu-nvidia-gpu"]
    assert classes("kgc-pod-sandbox-kata-dra") == classes("kgc-pod-sandbox-kata-dra-extended") \
        == ["kata"]
    keys = {e["key"]: e["operator"] for e in
            stages["kgc-pod-sandbox-kata"]["spec"]["selector"]["matchExpressions"]}
    assert keys[".spec.resourceClaims"] == keys[".status.extendedResourceClaimStatus"] == \
        "DoesNotExist"
    for name in ("kgc-pod-kata-dra-coldplug-gap", "kgc-pod-kata-dra-coldplug-gap-extended"):
        spec = stages[name]["spec"]
        assert classes(name) == ["kata-qemu-nvidia-gpu"]
        assert spec["next"]["event"]["type"] == "Warning"
        assert "RunContainerError" in spec["next"]["statusTemplate"]
    # the text is the one of the fixture the product's classifier is tested on
    fix = Path(__file__).resolve().parents[3] / "fixtures/gpu/dra-pod/kata-events.yaml"
    case = next(c for c in yaml.safe_load(fix.read_text())["cases"]
                if c["id"] == "dra-coldplug")
    assert stages["kgc-pod-kata-dra-coldplug-gap"]["spec"]["next"]["event"]["message"] == \
        case["events"][0][2] == f"Error: {KATA_DRA_COLDPLUG}"
    # a lab without the gap plays every Kata class as before
    plain = {s["metadata"]["name"] for s in kwok_stages(LabClusterProfile(
        lab=ClusterLabProfile(kata_without_dra_coldplug=())))}
    assert "kgc-pod-sandbox-kata" in plain and not any("coldplug" in n for n in plain)
    # a lab whose only Kata class has the gap plays no DRA sandbox at all
    only_gap = {s["metadata"]["name"] for s in kwok_stages(LabClusterProfile(
        lab=ClusterLabProfile(kata_runtime_classes=("kata-qemu-nvidia-gpu",))))}
    assert "kgc-pod-sandbox-kata" in only_gap and "kgc-pod-sandbox-kata-dra" not in only_gap
    assert "kgc-pod-kata-dra-coldplug-gap" in only_gap
