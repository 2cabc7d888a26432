"""gpu.* judged offline on the REAL captures and on variants derived from them.

The H200 capture (a Firecracker microVM with an H200 passed through) passes every per-pod
check against a profile expecting one H200; the CPU-only capture fails them, naming what is
missing; each synthetic variant changes one thing of the real capture and fails the check
that judges that thing. Boundary cases pin every comparison (a flipped operator fails a test).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from gpu.synth import (
    H200_UUID,
    NODE_KERNEL,
    RC,
    cases,
    cluster,
    h200_guest,
    h200_profile,
    node,
    pod,
    run,
    runtime_class,
    with_iommu_groups,
    with_smi_gpus,
    with_uuid,
    with_vendor,
)
from kgc.core.model import Status, Verdict
from kgc.evidence.guest import Bar
from kgc.layers.gpu.checks import CHECKS, SCOPE, PodSubject, inputs, settings
from kgc.layers.gpu.dra import DRA_CHECKS
from kgc.layers.gpu.evidence import (
    ClusterGpuEvidence,
    GpuRunEvidence,
    PluginPod,
    RuntimeClassInfo,
)
from kgc.layers.gpu.profile import GpuProfile

PER_POD = sorted(c for c, s in SCOPE.items() if s == "pod")
PREFLIGHT = sorted(c for c, s in SCOPE.items() if s == "cluster")


def judge(r: GpuRunEvidence, profile: GpuProfile | None = None) -> dict[tuple[str, str], Verdict]:
    gp = profile or h200_profile()
    return {(ci.check.id, ci.subject): ci.check.judge(ci.evidence, gp, "cluster")
            for ci in inputs(r)}


def one(check: str, subj: Any, profile: GpuProfile | None = None) -> Verdict:
    return CHECKS.get(check).judge(subj, profile or h200_profile(), "cluster")


def pod_check(check: str, r: GpuRunEvidence, i: int = 0,
              profile: GpuProfile | None = None) -> Verdict:
    return one(check, PodSubject(r.pods[i], r), profile)


# =========================================================================== real captures
def _dra_mode_skip(check_id: str, x: Any) -> bool:
    """The DRA pod checks skip, naming the mode, under request.mode device-plugin."""
    return (check_id.startswith("gpu.dra-") and x.status is Status.SKIP
            and "device-plugin" in x.reason)


def test_catalogue_has_stable_ids_and_scopes() -> None:
    assert PREFLIGHT == ["gpu.device-plugin", "gpu.dra-api", "gpu.dra-both-ways",
                         "gpu.dra-device-class", "gpu.dra-slices", "gpu.nodes-advertise",
                         "gpu.runtimeclass", "gpu.runtimeclass-overhead"]
    assert PER_POD == ["gpu.cc-attestation", "gpu.cc-mode", "gpu.cc-ready", "gpu.cc-tee",
                       "gpu.compute", "gpu.cuda", "gpu.dra-allocation", "gpu.dra-device-match",
                       "gpu.driver", "gpu.health", "gpu.in-vm",
                       "gpu.memory", "gpu.mig", "gpu.node-labels", "gpu.pci-function",
                       "gpu.pod-runs", "gpu.product", "gpu.smi-count", "gpu.unique"]
    assert {c.id for c in CHECKS} == set(SCOPE)
    for c in CHECKS:
        assert c.title and c.remediation and c.doc is not None


def _dra_skipped(v: dict[Any, Any]) -> None:
    """A device-plugin profile: the DRA preflight skips, naming the mode (then set aside)."""
    dra = [k for k in v if k[0] in DRA_CHECKS]
    assert len(dra) == len(DRA_CHECKS)
    for k in dra:
        o = v.pop(k)
        assert o.status is Status.SKIP and "request.mode: device-plugin" in o.reason, (k, o)


def test_real_h200_capture_passes_every_gpu_check() -> None:
    v = judge(cases()["h200-good"])
    _dra_skipped(v)
    # the confidential-GPU checks skip: the profile does not ask for CC (tests/gpu/test_cc.py)
    assert all(x.status is Status.SKIP and "cluster.gpu.cc" in x.reason
               for k, x in v.items() if k[0].startswith("gpu.cc-"))
    bad = {k: (x.status, x.reason) for k, x in v.items()
           if x.status is not Status.PASS and not k[0].startswith("gpu.cc-")
           and not _dra_mode_skip(k[0], x)}
    # one pod on the node: nothing to compare UUIDs with -> a skip that says so, not a pass
    assert bad == {("gpu.unique", "gpu-a/kgc-gpu-0"): (Status.SKIP, bad[("gpu.unique",
                                                                         "gpu-a/kgc-gpu-0")][1])}
    assert "only GPU pod" in bad[("gpu.unique", "gpu-a/kgc-gpu-0")][1]
    assert "NVIDIA H200" in v[("gpu.product", "gpu-a/kgc-gpu-0")].reason
    assert "BAR2 256 GiB" in v[("gpu.pci-function", "gpu-a/kgc-gpu-0")].reason


def test_pass_reasons_name_what_was_judged() -> None:
    v = judge(cases()["h200-good"])
    assert "in 41.7 s" in v[("gpu.pod-runs", "gpu-a/kgc-gpu-0")].reason
    assert v[("gpu.memory", "gpu-a/kgc-gpu-0")].found == f"{H200_UUID}: 143771 MiB"
    r = run(pod(h200_guest(), waited_s=None))
    assert " s" not in pod_check("gpu.pod-runs", r).reason.split("nvidia.com/pgpu")[1]


def test_real_h200_capture_twice_on_one_node_with_distinct_gpus_passes_everything() -> None:
    v = judge(cases()["two-pods-distinct"])
    _dra_skipped(v)
    assert {k: x.status for k, x in v.items()
            if x.status is not Status.PASS and not k[0].startswith("gpu.cc-")
            and not _dra_mode_skip(k[0], x)} == {}
    assert len([k for k in v if k[0] == "gpu.unique"]) == 2


def test_cpu_only_capture_fails_naming_what_is_missing() -> None:
    v = judge(cases()["gpu-not-in-guest"])
    s = {k[0]: x for k, x in v.items()}
    assert s["gpu.pod-runs"].status is Status.PASS  # the pod ran; its guest has no GPU
    assert s["gpu.in-vm"].status is Status.PASS  # it is a microVM, just without a GPU
    pci = s["gpu.pci-function"]
    assert pci.status is Status.FAIL and "0 NVIDIA GPU PCI function" in pci.reason
    assert "1af4" in pci.reason  # it names what the guest does see (virtio functions)
    smi = s["gpu.smi-count"]
    assert smi.status is Status.FAIL and "nvidia-smi is not found" in smi.reason
    assert "NVIDIA_DRIVER_CAPABILITIES" in smi.remediation
    for c in ("gpu.product", "gpu.memory", "gpu.driver", "gpu.cuda", "gpu.node-labels",
              "gpu.unique"):
        assert s[c].status is Status.SKIP and "gpu.smi-count" in s[c].reason, c
    assert s["gpu.compute"].status is Status.SKIP and "PyTorch" in s["gpu.compute"].reason


def test_verdicts_replay_identically_from_the_recorded_json() -> None:
    for name, r in cases().items():
        replayed = GpuRunEvidence.from_dict(json.loads(json.dumps(r.to_dict())))
        assert replayed == r, name
        a = {k: v.to_dict() for k, v in judge(r).items()}
        b = {k: v.to_dict() for k, v in judge(replayed).items()}
        assert a == b, name


def test_fixture_files_are_what_the_generator_writes(tmp_path: Any) -> None:
    from gpu.synth import GPU_FIX, write_fixtures

    for p in write_fixtures(tmp_path):
        assert (GPU_FIX / p.name).read_text() == p.read_text(), (
            f"fixtures/gpu/{p.name} is stale: run python tests/gpu/synth.py")


# =========================================================================== variants
def test_count_mismatch_fewer_gpus_than_requested() -> None:
    r = run(pod(h200_guest(), count=2))
    v = pod_check("gpu.smi-count", r)
    assert v.status is Status.FAIL and "requested 2" in v.reason and "sees 1" in v.reason
    assert "fewer" in v.remediation
    p = pod_check("gpu.pci-function", r)
    assert p.status is Status.FAIL and "1 NVIDIA GPU PCI function" in p.reason


def test_count_mismatch_more_gpus_than_requested() -> None:
    v = pod_check("gpu.smi-count", run(pod(with_smi_gpus(h200_guest(), 2))))
    assert v.status is Status.FAIL and "sees 2" in v.reason and "more" in v.remediation


def test_count_exact_with_two_gpus_passes() -> None:
    g = with_smi_gpus(h200_guest(), 2)
    pci = g.pci + tuple(dataclasses.replace(d, bdf="0000:00:07.0") for d in g.nvidia_gpus)
    r = run(pod(dataclasses.replace(g, pci=pci), count=2))
    assert pod_check("gpu.smi-count", r).status is Status.PASS
    assert pod_check("gpu.pci-function", r).status is Status.PASS


def test_duplicate_uuid_across_two_pods_on_one_node_fails_both() -> None:
    v = judge(cases()["duplicate-uuid"])
    for name in ("kgc-gpu-0", "kgc-gpu-1"):
        u = v[("gpu.unique", f"gpu-a/{name}")]
        assert u.status is Status.FAIL and H200_UUID in u.reason


def test_same_uuid_on_different_nodes_is_not_a_same_node_clash() -> None:
    h = h200_guest()
    a, b = node("gpu-a"), node("gpu-b")
    r = run(pod(h, a, "p0"), pod(h, b, "p1"), cl=cluster(a, b))
    assert pod_check("gpu.unique", r).status is Status.SKIP


def test_unique_ignores_a_peer_that_did_not_run() -> None:
    h, a = h200_guest(), node("gpu-a", 2)
    r = run(pod(h, a, "p0"), pod(h, a, "p1", phase="Failed"), cl=cluster(a))
    assert pod_check("gpu.unique", r).status is Status.SKIP


def test_unique_without_uuid_is_an_error() -> None:
    r = run(pod(with_uuid(h200_guest(), "")))
    assert pod_check("gpu.unique", r).status is Status.ERROR


def test_same_kernel_as_node_is_not_a_vm() -> None:
    v = judge(cases()["same-kernel-as-node"])[("gpu.in-vm", "gpu-a/kgc-gpu-0")]
    assert v.status is Status.FAIL and "node's own kernel" in v.reason
    assert "runtime.kata-handler" in v.remediation


def test_iommu_groups_in_the_guest_mean_the_hosts_sysfs() -> None:
    v = pod_check("gpu.in-vm", run(pod(with_iommu_groups(h200_guest(), 1))))
    assert v.status is Status.FAIL and "1 IOMMU group" in v.reason


def test_gvisor_kernel_is_not_a_vm() -> None:
    g = dataclasses.replace(h200_guest(), kernel="4.4.0", gvisor=True)
    v = pod_check("gpu.in-vm", run(pod(g)))
    assert v.status is Status.FAIL and "gVisor" in v.reason


@pytest.mark.parametrize("change,status,text", [
    (dict(node_kernel=None), Status.ERROR, "kernelVersion"),
    (dict(guest_kernel=None), Status.ERROR, "no kernel release"),
    (dict(no_sys=True), Status.ERROR, "not readable"),
    (dict(iommu_missing=True), Status.PASS, "no IOMMU groups"),
])
def test_in_vm_missing_evidence(change: dict[str, Any], status: Status, text: str) -> None:
    g = h200_guest()
    kw: dict[str, Any] = {}
    if "node_kernel" in change:
        kw["node_kernel"] = None
    if "guest_kernel" in change:
        g = dataclasses.replace(g, kernel=None)
    if "no_sys" in change:
        g = dataclasses.replace(g, iommu_groups=None, pci_listed=False, pci=())
    if "iommu_missing" in change:
        g = dataclasses.replace(g, iommu_groups=None)
    v = pod_check("gpu.in-vm", run(pod(g, **kw)))
    assert v.status is status and text in v.reason


def test_wrong_vendor_is_no_gpu_in_the_guest() -> None:
    v = pod_check("gpu.pci-function", run(pod(with_vendor(h200_guest(), "1002"))))
    assert v.status is Status.FAIL and "0 NVIDIA GPU PCI function" in v.reason
    assert "1002:2335" in v.reason


def test_nvidia_non_display_function_is_not_a_gpu() -> None:
    g = h200_guest()
    pci = tuple(dataclasses.replace(d, pci_class="040300") if d.vendor == "10de" else d
                for d in g.pci)
    v = pod_check("gpu.pci-function", run(pod(dataclasses.replace(g, pci=pci))))
    assert v.status is Status.FAIL


def _bars(g: Any, bars: tuple[Bar, ...] | None) -> Any:
    pci = tuple(dataclasses.replace(d, bars=bars) if d.vendor == "10de" else d for d in g.pci)
    return dataclasses.replace(g, pci=pci)


def test_unassigned_bar_fails_naming_it() -> None:
    g = h200_guest()
    real = g.nvidia_gpus[0].bars
    assert real is not None
    unassigned0 = tuple(dataclasses.replace(b, start=0) if b.index == 0 else b for b in real)
    v = pod_check("gpu.pci-function", run(pod(_bars(g, unassigned0))))
    assert v.status is Status.FAIL and "BAR0" in v.reason
    no_pref = tuple(b for b in real if b.index == 0)
    no_pref = tuple(dataclasses.replace(b, flags=0x40200) for b in no_pref)  # mem, not pref
    g2 = dataclasses.replace(_bars(g, no_pref), dmesg=(
        "[    3.34] pci 0000:00:06.0: BAR 2: no space for [mem size 0x4000000000 64bit pref]",))
    v2 = pod_check("gpu.pci-function", run(pod(g2)))
    assert v2.status is Status.FAIL and "prefetchable" in v2.reason and "no space" in v2.reason
    g3 = dataclasses.replace(_bars(g, no_pref), dmesg=(
        "[    3.34] pci 0000:00:06.0: BAR 2: failed to assign [mem size 0x4000000000]",
        "[    3.35] nvidia 0000:00:06.0: enabling device (0000 -> 0002)"))
    v3 = pod_check("gpu.pci-function", run(pod(g3)))
    assert v3.evidence["dmesg"] == [g3.dmesg[0]]
    v3 = pod_check("gpu.pci-function", run(pod(_bars(g, None))))
    assert v3.status is Status.FAIL and "could not be read" in v3.reason
    v4 = pod_check("gpu.pci-function", run(pod(dataclasses.replace(g, pci_listed=False))))
    assert v4.status is Status.ERROR


def test_a_bar_at_address_1_counts_as_assigned() -> None:
    g = h200_guest()
    bars = (Bar(0, 1, 16 << 20, 0x14220c), Bar(2, 1, 1 << 30, 0x14220c))
    assert pod_check("gpu.pci-function", run(pod(_bars(g, bars)))).status is Status.PASS
    zero = (Bar(0, 1, 0, 0x14220c), Bar(2, 1, 1 << 30, 0x14220c))  # size 0: not assigned
    assert pod_check("gpu.pci-function", run(pod(_bars(g, zero)))).status is Status.FAIL


@pytest.mark.parametrize("rc,err,status,text", [
    (124, "", Status.FAIL, "did not answer"),
    (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
     Status.FAIL, "couldn't communicate"),
    (6, "No devices were found", Status.FAIL, "No devices"),
    (0, None, Status.ERROR, "no report"),
])
def test_nvidia_smi_failures(rc: int, err: str | None, status: Status, text: str) -> None:
    nvrm = "[ 12.1] NVRM: GPU 0000:00:06.0: RmInitAdapter failed! (0x22:0x56:762)"
    g = dataclasses.replace(h200_guest(), smi_rc=rc, smi_error=err, smi=None,
                            dmesg=("[ 1.0] pci 0000:00:06.0: BAR 0 [mem 0x1 64bit]", nvrm))
    v = pod_check("gpu.smi-count", run(pod(g)))
    assert v.status is status and text in v.reason
    if rc not in (0, 124):
        assert v.evidence["dmesg"] == [nvrm]


# =========================================================================== expectations
@pytest.mark.parametrize("pattern,status", [
    (r"\bH200\b", Status.PASS), ("h200", Status.PASS), ("A100|H100", Status.FAIL),
    (None, Status.SKIP),
])
def test_product_pattern(pattern: str | None, status: Status) -> None:
    v = pod_check("gpu.product", cases()["h200-good"], profile=h200_profile(
        product_pattern=pattern))
    assert v.status is status
    if status is Status.SKIP:
        assert "cluster.gpu.product_pattern is not set" in v.reason and "H200" in v.reason


def test_product_none_fails() -> None:
    g = h200_guest()
    assert g.smi is not None
    smi = dataclasses.replace(g.smi, gpus=(dataclasses.replace(g.smi.gpus[0],
                                                               product_name=None),))
    v = pod_check("gpu.product", run(pod(dataclasses.replace(g, smi=smi))))
    assert v.status is Status.FAIL


@pytest.mark.parametrize("minimum,status", [
    (143771, Status.PASS), (143772, Status.FAIL), (80000, Status.PASS), (None, Status.SKIP),
])
def test_min_memory_boundary(minimum: int | None, status: Status) -> None:
    v = pod_check("gpu.memory", cases()["h200-good"],
                  profile=h200_profile(min_memory_mib=minimum))
    assert v.status is status, v.reason


def test_memory_unknown_is_an_error() -> None:
    g = h200_guest()
    assert g.smi is not None
    smi = dataclasses.replace(g.smi, gpus=(dataclasses.replace(g.smi.gpus[0],
                                                               memory_total_mib=None),))
    assert pod_check("gpu.memory", run(pod(dataclasses.replace(g, smi=smi)))).status \
        is Status.ERROR


@pytest.mark.parametrize("minimum,status", [
    ("580.159.04", Status.PASS), ("580.159.05", Status.FAIL), ("580.159", Status.PASS),
    ("581", Status.FAIL), ("550.54.15", Status.PASS), ("1000", Status.FAIL), (None, Status.SKIP),
])
def test_min_driver_boundary(minimum: str | None, status: Status) -> None:
    v = pod_check("gpu.driver", cases()["h200-good"], profile=h200_profile(min_driver=minimum))
    assert v.status is status, v.reason


@pytest.mark.parametrize("minimum,status", [
    ("13.0", Status.PASS), ("13.1", Status.FAIL), ("12.4", Status.PASS), ("13", Status.PASS),
    (None, Status.SKIP),
])
def test_min_cuda_boundary(minimum: str | None, status: Status) -> None:
    v = pod_check("gpu.cuda", cases()["h200-good"], profile=h200_profile(min_cuda=minimum))
    assert v.status is status, v.reason


def test_unparseable_version_is_an_error() -> None:
    g = h200_guest()
    assert g.smi is not None
    smi = dataclasses.replace(g.smi, cuda_version="N/A")
    v = pod_check("gpu.cuda", run(pod(dataclasses.replace(g, smi=smi))))
    assert v.status is Status.ERROR and "N/A" in v.reason


@pytest.mark.parametrize("label,status", [
    ("NVIDIA-H200", Status.PASS), ("NVIDIA-H200-SHARED", Status.PASS),
    ("NVIDIA-H200-MIG-1g.18gb", Status.PASS), ("NVIDIA-H100-80GB-HBM3", Status.FAIL),
    ("NVIDIA-H2000", Status.FAIL), (None, Status.SKIP),
])
def test_node_product_label(label: str | None, status: Status) -> None:
    n = node(product=label)
    v = pod_check("gpu.node-labels", run(pod(h200_guest(), n), cl=cluster(n)))
    assert v.status is status, v.reason


@pytest.mark.parametrize("probe,status,text", [
    ({"python3": False}, Status.SKIP, "no python3"),
    ({"torch": None, "error": "ModuleNotFoundError: No module named 'torch'"}, Status.SKIP,
     "no PyTorch"),
    ({"error": "ModuleNotFoundError: No module named 'torch'"}, Status.SKIP, "no PyTorch"),
    ({"torch": "2.11.0", "available": False}, Status.FAIL, "no usable CUDA"),
    ({"torch": "2.11.0", "available": True, "matmul_ok": False, "matmul_max_abs_err": 3.0},
     Status.FAIL, "did not match"),
    ({"torch": "2.11.0", "available": True, "error": "RuntimeError: CUDA error: ECC"},
     Status.FAIL, "ECC"),
    ({"error": "no JSON (exit 139): Segmentation fault"}, Status.ERROR, "Segmentation"),
    (None, Status.SKIP, "no compute probe"),
])
def test_compute_probe(probe: dict[str, Any] | None, status: Status, text: str) -> None:
    g = dataclasses.replace(h200_guest(), cuda_check=probe)
    v = pod_check("gpu.compute", run(pod(g)))
    assert v.status is status and text in v.reason, v.reason


def test_real_probe_passes_and_names_the_error() -> None:
    v = pod_check("gpu.compute", cases()["h200-good"])
    assert v.status is Status.PASS and "NVIDIA H200" in v.reason and "e-13" in v.reason


# =========================================================================== preflight
def cl_check(check: str, cl: ClusterGpuEvidence, **kw: Any) -> Verdict:
    return one(check, cl, h200_profile(**kw))


def test_runtimeclass_cases() -> None:
    assert cl_check("gpu.runtimeclass", cluster()).status is Status.PASS
    v = cl_check("gpu.runtimeclass", cluster(rcs=(RuntimeClassInfo("kata", "kata"),)))
    assert v.status is Status.FAIL and "does not exist" in v.reason and "kata" in v.reason
    v = cl_check("gpu.runtimeclass", cluster(rcs=(runtime_class(handler="runc"),)))
    assert v.status is Status.FAIL and "'runc'" in v.reason
    v = cl_check("gpu.runtimeclass", cluster(rcs=(runtime_class(handler="kata-gpu"),)),
                 handler="kata-gpu")
    assert v.status is Status.PASS
    err = dataclasses.replace(cluster(), runtime_classes=None,
                              errors={"runtime_classes": "403 Forbidden"})
    v = cl_check("gpu.runtimeclass", err)
    assert v.status is Status.ERROR and "403" in v.reason


def test_runtimeclass_overhead_cases() -> None:
    assert cl_check("gpu.runtimeclass-overhead", cluster()).status is Status.PASS
    none = cluster(rcs=(runtime_class(overhead={}),))
    v = cl_check("gpu.runtimeclass-overhead", none)
    assert v.status is Status.FAIL and "10240Mi" in v.remediation
    part = cluster(rcs=(runtime_class(overhead={"memory": "10240Mi"}),))
    v = cl_check("gpu.runtimeclass-overhead", part)
    assert v.status is Status.WARN and "cpu" in v.reason
    assert cl_check("gpu.runtimeclass-overhead", none,
                    require_overhead=False).status is Status.SKIP
    missing = cluster(rcs=())
    assert cl_check("gpu.runtimeclass-overhead", missing).status is Status.SKIP


def test_nodes_advertise_cases() -> None:
    assert cl_check("gpu.nodes-advertise", cluster(node("a", 1))).status is Status.PASS
    # capacity but nothing allocatable: unhealthy devices
    v = cl_check("gpu.nodes-advertise", cluster(node("a", 1), node("b", 4, allocatable=0)))
    assert v.status is Status.FAIL and "b advertises nvidia.com/pgpu capacity 4, allocatable 0" \
        in v.reason and "a nvidia.com/pgpu=1" not in v.reason and "1 node(s) do" in v.reason
    # labelled as a GPU node, advertises nothing
    v = cl_check("gpu.nodes-advertise", cluster(node("a", 0)))
    assert v.status is Status.FAIL and "labelled nvidia.com/gpu.present=true" in v.reason
    # advertises the other stack's resource name
    v = cl_check("gpu.nodes-advertise", cluster(node("a", 2, resource="nvidia.com/gpu")))
    assert v.status is Status.FAIL and "nvidia.com/gpu=2 instead" in v.reason
    # no GPU node at all
    plain = dataclasses.replace(node("cpu", 0, product=None), labels={})
    v = cl_check("gpu.nodes-advertise", cluster(plain))
    assert v.status is Status.FAIL and "no node" in v.reason
    # node_selector leaves the advertising node out
    v = cl_check("gpu.nodes-advertise", cluster(node("a", 1)), node_selector={"pool": "gpu"})
    assert v.status is Status.FAIL
    err = dataclasses.replace(cluster(), nodes=None, errors={"nodes": "403"})
    assert cl_check("gpu.nodes-advertise", err).status is Status.ERROR


def test_nodes_advertise_capacity_one_is_enough() -> None:
    v = cl_check("gpu.nodes-advertise", cluster(node("a", 1, allocatable=1)))
    assert v.status is Status.PASS and "a nvidia.com/pgpu=1" in v.reason


def test_device_plugin_cases() -> None:
    a, b = node("a", 1), node("b", 1)
    assert cl_check("gpu.device-plugin", cluster(a, b)).status is Status.PASS
    v = cl_check("gpu.device-plugin", cluster(a, b, plugin_nodes=("a",)))
    assert v.status is Status.FAIL and "on b" in v.reason and "gpu-operator" in v.reason
    cl = cluster(a)
    cl = dataclasses.replace(cl, plugin_pods=(PluginPod("dp-0", "gpu-operator", "a", "Running",
                                                        False, "CrashLoopBackOff"),))
    v = cl_check("gpu.device-plugin", cl)
    assert v.status is Status.FAIL and "CrashLoopBackOff" in v.reason
    v = cl_check("gpu.device-plugin", cluster(a), device_plugin_selector=None)
    assert v.status is Status.SKIP and "device_plugin.selector is not set" in v.reason
    err = dataclasses.replace(cluster(a), plugin_pods=None, errors={"plugin_pods": "403"})
    assert cl_check("gpu.device-plugin", err).status is Status.ERROR
    plain = dataclasses.replace(node("cpu", 0, product=None), labels={})
    assert cl_check("gpu.device-plugin", cluster(plain, plugin_nodes=())).status is Status.SKIP
    # a GPU node that advertises nothing still needs its plugin: that is usually why
    v = cl_check("gpu.device-plugin", cluster(node("c", 0), plugin_nodes=()))
    assert v.status is Status.FAIL and "on c" in v.reason


# =========================================================================== wiring
def test_inputs_cover_every_check_for_every_pod() -> None:
    r = cases()["duplicate-uuid"]
    ins = inputs(r)
    assert len(ins) == len(PREFLIGHT) + len(PER_POD) * 2
    assert {i.subject for i in ins} == {"cluster", "gpu-a/kgc-gpu-0", "gpu-a/kgc-gpu-1"}


def test_a_run_without_pods_still_gives_a_verdict_per_check_saying_why() -> None:
    r = run(notes=("no node advertises nvidia.com/pgpu",),
            cl=cluster(node("a", 0), plugin_nodes=()))
    v = judge(r)
    assert len(v) == len(PREFLIGHT) + len(PER_POD)
    for c in PER_POD:
        x = v[(c, "no-pod")]
        # gpu.pod-runs carries the missing subject as an error (issue 21); the rest skip
        want = Status.ERROR if c == "gpu.pod-runs" else Status.SKIP
        if _dra_mode_skip(c, x):  # the mode decides before the missing pod does
            continue
        assert x.status is want and "no node advertises nvidia.com/pgpu" in x.reason, c


def test_settings_reads_cluster_gpu_of_a_whole_profile() -> None:
    gp = h200_profile()

    class Cluster:
        gpu = gp

    class Whole:
        cluster = Cluster()

    assert settings(Whole()) is gp and settings(gp) is gp
    # one accessor, one fallback (kgc.core.profile.layer_section): no section, the defaults
    assert settings(object()) == GpuProfile()
    # the same judgement either way
    r = cases()["h200-good"]
    assert CHECKS.get("gpu.product").judge(PodSubject(r.pods[0], r), Whole(), "t") == \
        CHECKS.get("gpu.product").judge(PodSubject(r.pods[0], r), gp, "t")


def test_profile_defaults_and_strictness() -> None:
    gp = GpuProfile()
    assert gp.expected_handler == RC and gp.count == 1
    for bad in (dict(foo=1), dict(min_driver="abc"), dict(product_pattern="("),
                dict(count=0), dict(memory="4GB"), dict(schedule_timeout_s=600,
                                                          start_timeout_s=60),
                dict(gpu_node_labels=("=x",))):
        with pytest.raises(ValueError):
            GpuProfile(**bad)
    with pytest.raises(ValueError):
        gp.count = 2  # type: ignore[misc]
    # the selector and the resources are the platform's, validated there
    from kgc.core.profile import DevicePluginPlatform, GpuPlatform

    for bad_platform in (lambda: DevicePluginPlatform(selector="app in (x)"),
                         lambda: GpuPlatform(resources=("gpu",))):
        with pytest.raises(ValueError):
            bad_platform()
    assert DevicePluginPlatform(selector="app=nvidia-device-plugin-daemonset,tier!=x")
    assert NODE_KERNEL != h200_guest().kernel
