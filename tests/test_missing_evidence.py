"""Missing evidence is never a pass (issue 21, item 3), in the cluster layers.

- blank text (``""``, whitespace) is missing, whichever path built the record: the live API
  builders, a guest's output, or a replayed bundle;
- a layer with no subject (no GPU pod, no sizing shape) is an ``error`` naming what is
  missing, so the layer and the run cannot pass on their preflight alone;
- a profile that removes every subject of a required layer is refused by ``kgc profile
  check`` (one line, exit 2) unless ``policy.require_layers`` leaves the layer out;
- evidence that is present but unusable (a guest that reported no vCPU count) is an
  ``error``, never a ``skip``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from gpu.synth import cases, cluster, h200_guest, h200_profile, node, pod, run, with_uuid
from kgc.core.model import Status, Verdict
from kgc.core.report import overall_and_reason
from kgc.evidence.present import present, without_blanks
from kgc.layers.gpu import LAYER as GPU
from kgc.layers.gpu.checks import CHECKS as GPU_CHECKS
from kgc.layers.gpu.checks import PodSubject
from kgc.layers.gpu.evidence import GpuPodEvidence, GpuRunEvidence, node_from_api, pod_from_api
from kgc.layers.keda.evidence import KedaEvidence
from kgc.layers.sizing import LAYER as SIZING
from kgc.layers.sizing.checks import CHECKS as SIZING_CHECKS
from kgc.layers.sizing.evidence import (
    SOURCE_PROFILE,
    GuestSize,
    KataConfigSource,
    ShapeObservation,
    SizingEvidence,
)
from kgc.layers.sizing.model import KATA_PRESETS, PodShape
from kgc.layers.sizing.profile import shape_pod

REPO = Path(__file__).resolve().parents[1]
BLANKS = ["", " ", "\t\n"]


def in_vm(p: GpuPodEvidence) -> Verdict:
    r = run(p)
    return GPU_CHECKS.get("gpu.in-vm").judge(PodSubject(r.pods[0], r), h200_profile(), "c")


def replayed(p: GpuPodEvidence) -> GpuPodEvidence:
    return GpuPodEvidence.from_dict(json.loads(json.dumps(p.to_dict())))


# -------------------------------------------------------------------------- (a) blank text
def test_present_is_the_one_rule() -> None:
    assert [present(x) for x in ("", " ", "\n\t", None, 3, "6.8.0")] == \
        [None, None, None, None, None, "6.8.0"]


@pytest.mark.parametrize("blank", BLANKS)
def test_in_vm_with_a_blank_node_kernel_is_an_error_on_every_path(blank: str) -> None:
    guest = h200_guest()
    # built directly (what the lab and the synth fixtures do)
    direct = pod(guest, node_kernel=blank)
    # live: the node object the API served had a blank kernelVersion
    n = node_from_api({"metadata": {"name": "gpu-a"},
                       "status": {"nodeInfo": {"kernelVersion": blank}}})
    assert n.kernel_version is None
    live = pod_from_api({"metadata": {"name": "kgc-gpu-0", "namespace": "kgc-run1"},
                         "spec": {"nodeName": "gpu-a", "runtimeClassName": "x"},
                         "status": {"phase": "Succeeded"}},
                        node=n, resource="nvidia.com/pgpu", count=1, guest=guest)
    # replayed: a bundle recording node_kernel ""
    doc = pod(guest).to_dict() | {"node_kernel": blank}
    bundle = GpuPodEvidence.from_dict(doc)
    for p in (direct, live, bundle, replayed(direct)):
        assert p.node_kernel is None
        v = in_vm(p)
        assert v.status is Status.ERROR, (v.status, v.reason)
        assert "kernelVersion" in v.reason and "was not recorded" in v.reason


@pytest.mark.parametrize("blank", BLANKS)
def test_in_vm_with_a_blank_guest_kernel_is_an_error(blank: str) -> None:
    g = dataclasses.replace(h200_guest(), kernel=blank)
    for p in (pod(g), GpuPodEvidence.from_dict(pod(h200_guest()).to_dict()
                                               | {"guest": g.to_dict()})):
        assert p.guest is not None and p.guest.kernel is None
        v = in_vm(p)
        assert v.status is Status.ERROR and "no kernel release" in v.reason


def test_in_vm_compares_kernels_without_their_surrounding_blanks() -> None:
    g = h200_guest()
    assert g.kernel
    v = in_vm(pod(g, node_kernel=f" {g.kernel}\n"))
    assert v.status is Status.FAIL and "is the node's own kernel" in v.reason


def test_blank_gpu_uuids_are_no_uuid_not_a_distinct_gpu() -> None:
    a = pod(with_uuid(h200_guest(), " "), name="kgc-gpu-0")
    b = pod(with_uuid(h200_guest(), "GPU-other"), name="kgc-gpu-1")
    r = run(a, b)
    v = GPU_CHECKS.get("gpu.unique").judge(PodSubject(r.pods[0], r), h200_profile(), "c")
    assert v.status is Status.ERROR and "no GPU UUID" in v.reason


def test_a_blank_product_label_is_no_label() -> None:
    n = dataclasses.replace(node(), labels={"nvidia.com/gpu.product": " "})
    r = run(pod(h200_guest(), n))
    v = GPU_CHECKS.get("gpu.node-labels").judge(PodSubject(r.pods[0], r), h200_profile(), "c")
    assert v.status is Status.SKIP and "has no nvidia.com/gpu.product label" in v.reason


def test_without_blanks_reaches_nested_records_and_keeps_the_rest() -> None:
    g = h200_guest()
    assert without_blanks(g) is g  # nothing blank: the same object
    g2 = without_blanks(with_uuid(dataclasses.replace(g, kernel=" "), ""))
    assert g2.kernel is None and g2.smi is not None
    assert [x.uuid for x in g2.smi.gpus] == [None]
    assert g2.smi.gpus[0].product_name == g.smi.gpus[0].product_name  # type: ignore[union-attr]


def test_sizing_pod_blank_runtime_class_and_node_are_missing() -> None:
    m = shape_pod("one-container", runtime_class=" ")
    m["spec"]["nodeName"] = "\t"
    p = PodShape.from_manifest(m)
    assert p.runtime_class is None and p.node is None


def test_keda_blank_optional_texts_are_missing() -> None:
    doc = json.loads((REPO / "fixtures" / "keda" / "lab-good.json").read_text())
    rec = doc.get("layers", {}).get("keda", doc)
    rec["kata"]["runtime_class"] = " "
    rec["kata"]["repetitions"][0]["pods"][0]["node"] = ""
    rec["preflight"]["keda_version"] = "\n"
    ev = KedaEvidence.from_dict(rec)
    assert ev.kata is not None and ev.kata.runtime_class is None
    assert ev.kata.repetitions[0].pods[0].node is None
    assert ev.preflight.keda_version is None


def test_keda_kata_class_without_a_runtime_class_is_not_judged() -> None:
    from kgc.layers.keda.checks import CHECKS as KEDA

    doc = json.loads((REPO / "fixtures" / "keda" / "lab-good.json").read_text())
    rec = doc.get("layers", {}).get("keda", doc)
    good = KedaEvidence.from_dict(rec)
    rec["kata"]["runtime_class"] = ""
    ev = KedaEvidence.from_dict(rec)
    for c in KEDA:
        if c.id == "keda.preflight":
            continue
        before = c.judge(good, None, "cluster")
        v = c.judge(ev, None, "cluster")
        assert v.status is not Status.PASS, (c.id, v.reason)
        if before.status is Status.PASS:
            assert v.status is Status.ERROR and "RuntimeClass" in v.reason, (c.id, v.reason)


# -------------------------------------------------------------------------- (b) no GPU pod
def whole(layer: Any, ev: Any, profile: Any) -> list[Verdict]:
    return [c.judge(ev, profile, "cluster") for c in layer.checks]


def test_a_gpu_run_without_any_pod_is_an_error_and_never_certifies() -> None:
    ok = cases()["h200-good"]
    empty = GpuRunEvidence(ok.cluster, ())  # preflight passes, no GPU pod was run
    vs = {v.check: v for v in whole(GPU, empty, h200_profile())}
    assert vs["gpu.nodes-advertise"].status is Status.PASS
    pr = vs["gpu.pod-runs"]
    assert pr.status is Status.ERROR
    assert "no GPU pod was run or recorded" in pr.reason
    assert pr.remediation
    status, why = overall_and_reason([v.to_dict() for v in vs.values()])
    assert status == "fail", why
    # the same from a recorded bundle with "pods": []
    doc = ok.to_dict() | {"pods": []}
    vs2 = {v.check: v for v in whole(GPU, GpuRunEvidence.from_dict(doc), h200_profile())}
    assert vs2["gpu.pod-runs"].status is Status.ERROR


def test_a_gpu_run_without_pods_names_the_plan_notes() -> None:
    r = run(notes=("no node advertises nvidia.com/pgpu",), cl=cluster(node("a", 0),
                                                                      plugin_nodes=()))
    v = {c.check: c for c in whole(GPU, r, h200_profile())}["gpu.pod-runs"]
    assert v.status is Status.ERROR and "no node advertises nvidia.com/pgpu" in v.reason


# -------------------------------------------------------------------------- (c) no shape
def configs() -> dict[str, KataConfigSource]:
    return {"kata": KataConfigSource("kata", SOURCE_PROFILE, "test qemu", KATA_PRESETS["qemu"])}


@pytest.mark.parametrize("shapes", [(), None], ids=["empty", "not-recorded"])
def test_sizing_with_no_shape_measured_is_an_error(shapes: tuple[Any, ...] | None) -> None:
    ev = SizingEvidence(configs=configs(), shapes=shapes)
    ev = SizingEvidence.from_dict(json.loads(json.dumps(ev.to_dict())))
    vs = {v.check: v for v in whole(SIZING, ev, None)}
    v = vs["sizing.vm-matches-limits"]
    assert v.status is Status.ERROR and "no shape was measured" in v.reason, v.reason
    assert overall_and_reason([x.to_dict() for x in vs.values()])[0] == "fail"


def test_sizing_where_every_shape_was_not_applicable_is_an_error() -> None:
    na = ShapeObservation("gpu", shape_pod("gpu"), "kata",
                          error="not applicable: no node advertises nvidia.com/pgpu")
    v = SIZING_CHECKS.get("sizing.vm-matches-limits").judge(
        SizingEvidence(configs=configs(), shapes=(na,)), None, "cluster")
    assert v.status is Status.ERROR and "no shape was measured" in v.reason
    assert "not applicable: no node advertises nvidia.com/pgpu" in v.reason


# -------------------------------------------------------------- malformed evidence -> error
@pytest.mark.parametrize(("guest", "what"), [
    (GuestSize(memtotal_kib=4_000_000), "no vCPU count"),
    (GuestSize(nproc_all=3), "no MemTotal"),
])
def test_a_guest_that_reported_nothing_usable_is_an_error_not_a_skip(guest: GuestSize,
                                                                       what: str) -> None:
    obs = ShapeObservation("one-container", shape_pod("one-container", runtime_class="kata"),
                           "kata", guest=guest)
    v = SIZING_CHECKS.get("sizing.vm-matches-limits").judge(
        SizingEvidence(configs=configs(), shapes=(obs,)), None, "cluster")
    assert v.status is Status.ERROR and what in v.reason, v.reason


def test_a_guest_whose_memtotal_exceeds_its_ram_is_an_error() -> None:
    g = GuestSize(nproc_all=3, memtotal_kib=5_000_000, present_kib=4_000_000)
    obs = ShapeObservation("one-container", shape_pod("one-container", runtime_class="kata"),
                           "kata", guest=g)
    v = SIZING_CHECKS.get("sizing.vm-matches-limits").judge(
        SizingEvidence(configs=configs(), shapes=(obs,)), None, "cluster")
    assert v.status is Status.ERROR and "inconsistent evidence" in v.reason, v.reason


def test_a_shape_that_ran_without_guest_output_is_an_error() -> None:
    obs = ShapeObservation("one-container", shape_pod("one-container", runtime_class="kata"),
                           "kata")
    v = SIZING_CHECKS.get("sizing.vm-matches-limits").judge(
        SizingEvidence(configs=configs(), shapes=(obs,)), None, "cluster")
    assert v.status is Status.ERROR and "its guest reported nothing" in v.reason, v.reason


def test_only_unreadable_kata_pods_is_an_error_for_the_static_checks() -> None:
    from kgc.layers.sizing.evidence import ClusterObjects

    bad = shape_pod("one-container", runtime_class="kata")
    bad["spec"]["containers"][0]["resources"]["limits"]["memory"] = "2.5Gb"
    bad["spec"]["nodeName"] = "n1"
    bad["status"] = {"phase": "Running"}
    ev = SizingEvidence(configs=configs(), cluster=ClusterObjects(pods=(bad,)))
    for check in ("sizing.starved-pods", "sizing.node-overcommit"):
        v = SIZING_CHECKS.get(check).judge(ev, None, "cluster")
        assert v.status is Status.ERROR and "'2.5Gb' is not a Kubernetes quantity" in v.reason, \
            (check, v.reason)



def test_device_plugin_without_the_node_list_is_an_error() -> None:
    cl = dataclasses.replace(cluster(node()), nodes=None, errors={"nodes": "403 Forbidden"})
    v = GPU_CHECKS.get("gpu.device-plugin").judge(cl, h200_profile(), "cluster")
    assert v.status is Status.ERROR and "nodes could not be listed: 403 Forbidden" in v.reason

# -------------------------------------------------------------------------- (d) the profile
def profile_check(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> tuple[int,
                                                                                         str]:
    from kgc import cli

    p = tmp_path / "p.yaml"
    p.write_text(text)
    rc = cli.main(["profile", "check", str(p)])
    out = capsys.readouterr()
    return rc, out.err


def test_profile_check_refuses_a_sizing_layer_without_shapes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = profile_check(tmp_path, "name: x\ncluster:\n  sizing:\n    shapes: []\n", capsys)
    assert rc == 2
    assert err.count("\n") == 1, err  # one line
    assert "cluster.sizing.shapes" in err and "sizing" in err and "require_layers" in err
    # listing sizing as required explicitly is no different
    rc, err = profile_check(tmp_path, "name: x\ncluster:\n  sizing:\n    shapes: []\n"
                            "policy:\n  require_layers: [gpu, sizing]\n", capsys)
    assert rc == 2 and "cluster.sizing.shapes" in err


def test_profile_check_accepts_no_shapes_once_sizing_is_not_required(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = profile_check(tmp_path, "name: x\ncluster:\n  sizing:\n    shapes: []\n"
                            "policy:\n  require_layers: [iommu, vfio, gpu, keda]\n", capsys)
    assert rc == 0, err


def test_the_other_cluster_layers_cannot_be_left_without_a_subject(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # gpu: at least one pod per node and one node; keda: a Kata class and one repetition
    for text in ("cluster:\n  gpu:\n    pods_per_node: 0\n",
                 "cluster:\n  gpu:\n    max_nodes: 0\n",
                 "cluster:\n  keda:\n    runtime_class: ''\n",
                 "cluster:\n  keda:\n    repetitions: 0\n",
                 "cluster:\n  keda:\n    replicas: 0\n"):
        rc, err = profile_check(tmp_path, "name: x\n" + text, capsys)
        assert rc == 2 and err.count("\n") == 1, (text, err)


def test_the_shipped_profiles_still_load() -> None:
    from kgc.core.profile import builtin_profiles, load_profile

    for name in builtin_profiles():
        assert load_profile(name).cluster.sizing.shapes


def test_sizing_where_no_shape_could_be_predicted_is_an_error_and_never_certifies() -> None:
    """Every shape ran, but no Kata configuration is known for its RuntimeClass: nothing was
    compared with a prediction. Was a skip, so the layer passed on sizing.kata-config alone."""
    obs = ShapeObservation("one-container", shape_pod("one-container", runtime_class="other"),
                           "other", guest=GuestSize(nproc_all=3, memtotal_kib=4_000_000))
    ev = SizingEvidence(configs=configs(), shapes=(obs,))
    vs = {v.check: v for v in whole(SIZING, ev, None)}
    v = vs["sizing.vm-matches-limits"]
    assert v.status is Status.ERROR and "no shape could be judged" in v.reason, v.reason
    assert "no Kata configuration for other" in v.reason and v.remediation
    assert overall_and_reason([x.to_dict() for x in vs.values()])[0] == "fail"
