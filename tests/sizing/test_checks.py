"""The sizing checks' verdicts: pass, fail, warn, skip, error — each with a reason naming the
concrete thing, and evidence that round-trips through to_dict/from_dict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kgc.core.hostfs import HostSnapshot
from kgc.core.model import EvidenceError, Status
from kgc.layers.sizing.checks import CHECKS
from kgc.layers.sizing.evidence import (
    SOURCE_NODE,
    SOURCE_PROFILE,
    ClusterObjects,
    GuestSize,
    KataConfigSource,
    ShapeObservation,
    SizingEvidence,
    resolve_config,
)
from kgc.layers.sizing.model import KATA_PRESETS, KataSizing
from kgc.layers.sizing.profile import SizingProfile, shape_manifest, shape_pod

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "guest" / "sizing"
PROFILE = SizingProfile()


def judge(check: str, ev: SizingEvidence, profile: Any = PROFILE):  # type: ignore[no-untyped-def]
    # evidence is recorded and replayed: judge the replayed copy, as an offline run would
    ev2 = SizingEvidence.from_dict(json.loads(json.dumps(ev.to_dict())))
    assert ev2 == ev
    return CHECKS.get(check).judge(ev2, profile, "cluster")


def src(rc: str, preset: str, kind: str = SOURCE_PROFILE) -> KataConfigSource:
    return KataConfigSource(rc, kind, f"test {preset}", KATA_PRESETS[preset])


def capture(name: str) -> tuple[dict, GuestSize]:
    doc = json.loads((FIX / f"{name}.bundle.json").read_text())
    return doc, GuestSize.from_snapshot(HostSnapshot.from_dict(doc["host"]))


def observed(name: str, rc: str, simulated: bool = True) -> ShapeObservation:
    doc, g = capture(name)
    shape = doc["capture"]["spec"]["shape"]
    return ShapeObservation(shape, shape_pod(shape, runtime_class=rc), rc, node="n1", guest=g,
                            simulated=simulated)


def test_registry_ids_are_stable() -> None:
    assert [c.id for c in CHECKS] == ["sizing.kata-config", "sizing.node-overcommit",
                                      "sizing.starved-pods", "sizing.vm-matches-limits"]


# -- sizing.kata-config ------------------------------------------------------------------------
def test_kata_config_names_each_source() -> None:
    ev = SizingEvidence(configs={"kata-qemu-nvidia-gpu": src("kata-qemu-nvidia-gpu",
                                                             "qemu-nvidia-gpu", SOURCE_NODE)})
    v = judge("sizing.kata-config", ev)
    assert v.status is Status.PASS
    assert v.reason == ("kata-qemu-nvidia-gpu: Go static (default_vcpus=1, default_memory=8192) "
                        "from node: test qemu-nvidia-gpu")


@pytest.mark.parametrize(("k", "status", "text"), [
    (KataSizing("go", True, default_memory=100), Status.WARN, "silently uses 2048"),
    (KataSizing("go", False, default_vcpus=4, default_maxvcpus=2), Status.FAIL,
     "QEMU refuses to boot"),
    (KataSizing("go", True, default_memory=4096, default_maxmemory=2048), Status.FAIL,
     "below default_memory=4096"),
    (KataSizing("runtime-rs", True, overhead_memory=0), Status.WARN, "0 MiB VM"),
    (KataSizing("runtime-rs", False), Status.WARN, "not modelled"),
])
def test_kata_config_absurd_settings(k: KataSizing, status: Status, text: str) -> None:
    ev = SizingEvidence(configs={"kata": KataConfigSource("kata", SOURCE_PROFILE, "p", k)})
    v = judge("sizing.kata-config", ev)
    assert v.status is status
    assert text in v.reason and "kata (profile: p)" in v.reason


def test_kata_config_broken_file_fails_and_missing_skips() -> None:
    broken = KataConfigSource("kata", SOURCE_NODE, "/etc/kata-containers/configuration.toml",
                              error="invalid TOML: line 3")
    v = judge("sizing.kata-config", SizingEvidence(configs={"kata": broken}))
    assert v.status is Status.FAIL and "invalid TOML" in v.reason
    none = resolve_config("kata")
    v = judge("sizing.kata-config", SizingEvidence(configs={"kata": none}))
    assert v.status is Status.SKIP and "no probe pod was run" in v.reason
    assert judge("sizing.kata-config", SizingEvidence()).status is Status.SKIP


# -- sizing.vm-matches-limits ------------------------------------------------------------------
RC_GO, RC_NV, RC_RS = "kata-qemu", "kata-qemu-nvidia-gpu", "kata-qemu-runtime-rs"
CONFIGS = {RC_GO: src(RC_GO, "qemu"), RC_NV: src(RC_NV, "qemu-nvidia-gpu"),
           RC_RS: src(RC_RS, "qemu-runtime-rs")}


def test_live_shapes_pass_on_the_real_captures() -> None:
    ev = SizingEvidence(configs=CONFIGS, shapes=(
        observed("go-qemu-one-container-3x4096-hotplug", RC_GO),
        observed("go-qemu-fractional-2x2304-hotplug", RC_GO),
        observed("go-nvidia-one-container-3x10240", RC_NV),
        observed("go-nvidia-gpu-pod-5x24576", RC_NV),
        observed("rs-qemu-one-container-3x2080", RC_RS),
    ))
    v = judge("sizing.vm-matches-limits", ev)
    assert v.status is Status.PASS, v.reason
    assert ("one-container (simulated): expected 3 vCPU / 10240 MiB (Go static, default_vcpus=1, "
            "default_memory=8192), found 3 / 9942 MiB") in v.reason
    assert "[simulated pods: recorded guest evidence]" in v.reason
    assert len(v.evidence["shapes"]) == 5
    assert v.expected and v.found


def test_live_shape_with_the_wrong_config_fails_naming_the_shape() -> None:
    # the NVIDIA capture judged as if the class were plain Go QEMU (dynamic, 2048 MiB default)
    ev = SizingEvidence(configs={RC_NV: src(RC_NV, "qemu")},
                        shapes=(observed("go-nvidia-one-container-3x10240", RC_NV, False),))
    v = judge("sizing.vm-matches-limits", ev)
    assert v.status is Status.FAIL
    assert v.reason.startswith("one-container: expected 3 vCPU / 4096 MiB (Go dynamic")
    assert "6143.5 MiB more RAM than predicted" in v.reason
    assert "test qemu" in v.remediation


def test_live_shape_measured_source_accepts_static_or_block_rounding() -> None:
    _, g = capture("go-qemu-probe-1x2048")
    probe = ShapeObservation("probe", shape_pod("probe"), RC_GO, guest=g)
    measured = resolve_config(RC_GO, probe=probe)
    ev = SizingEvidence(configs={RC_GO: measured}, shapes=(
        observed("go-qemu-one-container-3x4096-hotplug", RC_GO),
        observed("go-qemu-fractional-2x2304-hotplug", RC_GO)))
    v = judge("sizing.vm-matches-limits", ev)
    assert v.status is Status.PASS, v.reason


def test_live_shape_errors_skips_and_empty() -> None:
    ok = observed("go-qemu-probe-1x2048", RC_GO)
    failed_pod = ShapeObservation("gpu", shape_pod("gpu"), RC_NV,
                                  error="pod did not start within 300 s: Insufficient "
                                        "nvidia.com/pgpu")
    v = judge("sizing.vm-matches-limits",
              SizingEvidence(configs=CONFIGS, shapes=(ok, failed_pod)))
    assert v.status is Status.ERROR and "Insufficient nvidia.com/pgpu" in v.reason
    na = ShapeObservation("gpu", shape_pod("gpu"), RC_NV,
                          error="not applicable: no node has nvidia.com/pgpu capacity")
    v = judge("sizing.vm-matches-limits", SizingEvidence(configs=CONFIGS, shapes=(ok, na)))
    assert v.status is Status.PASS and "not judged: gpu: not run: not applicable" in v.reason
    # a shape that ran but could not be predicted (no Kata config known) measured nothing:
    # an error, never a skip the layer could pass around (issue 21, item 3)
    v = judge("sizing.vm-matches-limits", SizingEvidence(configs={}, shapes=(ok,)))
    assert v.status is Status.ERROR and "no Kata configuration for kata-qemu" in v.reason
    # no shape measured (none recorded, an empty matrix): no subject, an error (issue 21)
    assert judge("sizing.vm-matches-limits", SizingEvidence()).status is Status.ERROR
    assert judge("sizing.vm-matches-limits", SizingEvidence(shapes=())).status is Status.ERROR


def test_live_shape_with_a_malformed_pod_is_an_error_with_the_field() -> None:
    bad = shape_manifest(SizingProfile().shapes[0])
    bad["spec"]["containers"][0]["resources"]["limits"]["memory"] = "2.5Gb"
    obs = ShapeObservation("one-container", bad, RC_GO, guest=GuestSize(nproc_all=3,
                                                                        memtotal_kib=4000000))
    v = judge("sizing.vm-matches-limits", SizingEvidence(configs=CONFIGS, shapes=(obs,)))
    assert v.status is Status.ERROR
    assert "main.resources.limits.memory: '2.5Gb' is not a Kubernetes quantity" in v.reason


def test_live_shape_vcpus_not_online_fail() -> None:
    _, g = capture("go-qemu-one-container-3x4096-hotplug")
    from dataclasses import replace

    obs = ShapeObservation("one-container", shape_pod("one-container"), RC_GO,
                           guest=replace(g, cpuinfo_processors=1))
    v = judge("sizing.vm-matches-limits", SizingEvidence(configs=CONFIGS, shapes=(obs,)))
    assert v.status is Status.FAIL and "3 vCPUs present but 1 online" in v.reason


# -- cluster objects ---------------------------------------------------------------------------
def kpod(name: str, rc: str | None, node: str | None, *ctrs: dict, phase: str = "Running",
         overhead: dict | None = None) -> dict:
    spec: dict = {"containers": list(ctrs)}
    if rc:
        spec["runtimeClassName"] = rc
    if node:
        spec["nodeName"] = node
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": name, "namespace": "ml"}, "spec": spec,
            "status": {"phase": phase}}


def ctr(name: str, limits: dict | None = None, requests: dict | None = None) -> dict:
    res: dict = {}
    if limits:
        res["limits"] = limits
    if requests:
        res["requests"] = requests
    return {"name": name, "resources": res}


def node(name: str, mem: str, cpu: str = "32") -> dict:
    return {"metadata": {"name": name},
            "status": {"allocatable": {"memory": mem, "cpu": cpu},
                       "capacity": {"memory": mem, "cpu": cpu}}}


RCS = ({"metadata": {"name": RC_NV}, "handler": "kata-qemu-nvidia-gpu",
        "overhead": {"podFixed": {"memory": "10240Mi", "cpu": "1"}}},
       {"metadata": {"name": RC_GO}, "handler": "kata-qemu",
        "overhead": {"podFixed": {"memory": "320Mi", "cpu": "250m"}}},
       {"metadata": {"name": "runc"}, "handler": "runc"})


def test_starved_pods_warns_naming_pods_and_containers() -> None:
    pods = (
        kpod("req-only", RC_GO, "n1", ctr("app", requests={"cpu": "2", "memory": "4Gi"})),
        kpod("good", RC_NV, "n1", ctr("app", {"cpu": "2", "memory": "2Gi"})),
        kpod("rs-cpu-only", RC_RS, "n1", ctr("app", {"cpu": "2"})),
        kpod("plain", "runc", "n1", ctr("app", requests={"memory": "1Gi"})),
        kpod("done", RC_GO, "n1", ctr("app", requests={"cpu": "1"}), phase="Succeeded"),
    )
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects(pods, (node("n1", "64Gi"),), RCS))
    v = judge("sizing.starved-pods", ev)
    assert v.status is Status.WARN
    assert "2 Kata pod(s) the VM will starve" in v.reason
    assert "ml/req-only: app: cpu request 2 without a limit, memory request 4096Mi without a " \
           "limit; its VM gets 1 vCPU for 2 requested; its VM gets 2048 MiB for 4096 MiB " \
           "requested" in v.reason
    assert "ml/rs-cpu-only: no memory limit: the VM gets only overhead_memory=32 MiB" in v.reason
    assert "plain" not in v.reason and "done" not in v.reason
    assert "ml/req-only: app: limits.cpu=2, app: limits.memory=4096Mi" in v.remediation


def test_starved_pods_pass_skip_error() -> None:
    good = kpod("good", RC_NV, "n1", ctr("app", {"cpu": "2", "memory": "2Gi"}))
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects((good,), (), RCS))
    assert judge("sizing.starved-pods", ev).status is Status.PASS
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects(
        (kpod("plain", "runc", "n1", ctr("app")),), (), RCS))
    assert judge("sizing.starved-pods", ev).status is Status.SKIP
    bad = kpod("bad", RC_GO, "n1", ctr("app", {"memory": "lots"}))
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects((good, bad), (), RCS))
    v = judge("sizing.starved-pods", ev)
    assert v.status is Status.ERROR and "'lots' is not a Kubernetes quantity" in v.reason
    assert judge("sizing.starved-pods", SizingEvidence()).status is Status.SKIP


def gpu_pod(name: str, node_name: str = "gpu-a") -> dict:
    return kpod(name, RC_NV, node_name, ctr("cuda", {"cpu": "2", "memory": "2Gi",
                                                      "nvidia.com/pgpu": "1"}))


def test_node_overcommit_fails_naming_node_and_pods_with_a_table() -> None:
    pods = (gpu_pod("train-0"), gpu_pod("train-1"),
            kpod("web", "runc", "gpu-a", ctr("app", requests={"memory": "1Gi"})),
            gpu_pod("train-2", "gpu-b"))
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects(
        pods, (node("gpu-a", "40Gi"), node("gpu-b", "64Gi")), RCS))
    v = judge("sizing.node-overcommit", ev)
    assert v.status is Status.FAIL
    assert v.reason == (
        "node gpu-a: Kata VMs + overhead 40960 MiB + other pods' requests 1024 MiB = 41984 MiB "
        "> allocatable 40960 MiB; Kata pods: ml/train-0 (10240 MiB VM + 10240 MiB overhead), "
        "ml/train-1 (10240 MiB VM + 10240 MiB overhead)")
    table = {r["node"]: r for r in v.evidence["nodes"]}
    assert table["gpu-b"]["sum_mib"] == 20480 and table["gpu-a"]["allocatable_mib"] == 40960
    assert table["gpu-a"]["kata_pods"][0]["overhead_from"] == "RuntimeClass"


def test_node_overcommit_pass_skip_error() -> None:
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects(
        (gpu_pod("a"),), (node("gpu-a", "64Gi"),), RCS))
    v = judge("sizing.node-overcommit", ev)
    assert v.status is Status.PASS and "gpu-a 20480/65536 MiB" in v.reason
    # the pod's own spec.overhead (what admission copied from the RuntimeClass) wins
    p = gpu_pod("a")
    p["spec"]["overhead"] = {"memory": "1Gi"}
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects((p,), (node("gpu-a", "64Gi"),),
                                                                RCS))
    assert "gpu-a 11264/65536" in judge("sizing.node-overcommit", ev).reason
    ev = SizingEvidence(configs={}, cluster=ClusterObjects(
        (kpod("x", "kata-other", "gpu-a", ctr("a", {"memory": "1Gi"})),),
        (node("gpu-a", "64Gi"),), ({"metadata": {"name": "kata-other"}, "handler": "kata-x"},)))
    v = judge("sizing.node-overcommit", ev)
    assert v.status is Status.SKIP and "no Kata configuration for kata-other" in v.reason
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects(
        (gpu_pod("a"),), ({"metadata": {"name": "gpu-a"}, "status": {}},), RCS))
    v = judge("sizing.node-overcommit", ev)
    assert v.status is Status.ERROR and "allocatable.memory missing" in v.reason
    ev = SizingEvidence(configs=CONFIGS, cluster=ClusterObjects((), (node("n", "1Gi"),), RCS))
    assert judge("sizing.node-overcommit", ev).status is Status.SKIP


# -- evidence (de)serialisation ----------------------------------------------------------------
@pytest.mark.parametrize(("doc", "msg"), [
    ([], "sizing: expected an object"),
    ({"configs": {"k": {"kind": "node"}}}, "sizing.configs.k.runtime_class: missing"),
    ({"configs": {"k": {"runtime_class": "k", "kind": "psychic", "detail": "", "sizing": None,
                        "error": "", "tried": []}}},
     "sizing.configs.k.kind: 'psychic' is not one of node"),
    ({"shapes": {}}, "sizing.shapes: expected a list"),
    ({"shapes": [{"shape": "s", "pod": {}, "runtime_class": "k",
                  "guest": {"nproc_all": "3"}}]}, "guest.nproc_all: expected an integer"),
    ({"shapes": [{"shape": "s", "pod": {}, "runtime_class": "k", "guest": None,
                  "simulated": "yes"}]}, "simulated: expected true/false"),
    ({"cluster": {"pods": [1]}}, "cluster.pods[0]: expected an object"),
    ({"configs": {"k": {"runtime_class": "k", "kind": "node", "detail": "", "error": "",
                        "tried": [], "sizing": {"runtime": "go"}}}},
     "sizing.configs.k.sizing.static: missing"),
])
def test_malformed_evidence_raises_evidence_error_naming_the_field(doc: Any, msg: str) -> None:
    with pytest.raises(EvidenceError, match=msg.replace("[", r"\[").replace("]", r"\]")):
        SizingEvidence.from_dict(doc)
