"""Hand-made verdict vectors for the gpu layer's own evaluators (``kgc.layers.gpu.checks``)
and its pod-failure classifier (``kgc.layers.gpu.classify``), issue 21 item 8.

Each vector is one recorded run -- the REAL guest captures of ``fixtures/guest`` inside the
synthetic cluster surroundings of :mod:`gpu.synth`, changed in the one way the vector is
about, or a pod that did not run with the texts the components print (the failure cases of
``tests/gpu/test_classify.py`` and ``fixtures/gpu/kata-events/events.yaml``, and more of the
same kind below) -- a profile, and the status the named checks must give on its first
subject (``cluster`` or the first pod), stated by hand, with words its reason must carry.
:mod:`gpu.gpu_verdicts` records every verdict in full; the generator refuses to write a
corpus that contradicts these statements.

The DRA and confidential-GPU checks have their own corpora (tests/gpu/test_dra_survivors.py,
tests/gpu/test_cc_survivors.py) and are left out here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpu.synth import (
    IMAGE,
    RC,
    RESOURCE,
    SCHEDULED,
    cases,
    cluster,
    cpu_guest,
    h200_profile,
    node,
    pending,
    pod,
    run,
    runtime_class,
    with_iommu_groups,
    with_smi_gpus,
    with_uuid,
    with_vendor,
)
from gpu.synth import h200_guest as _h200_guest
from kgc.core.profile import GpuRequestPlatform
from kgc.evidence.guest import Bar, GuestEvidence, SmiMigDevice
from kgc.layers.gpu.dra import DraEvidence, DraSlice
from kgc.layers.gpu.evidence import (
    ClaimEvidence,
    ClusterGpuEvidence,
    ContainerState,
    GpuPodEvidence,
    GpuRunEvidence,
    PluginPod,
    PodCondition,
    PodEvent,
    RuntimeClassInfo,
)
from kgc.layers.gpu.profile import GpuProfile

# the checks kgc.layers.gpu.checks itself defines (gpu.dra-*, gpu.cc-* live in dra*.py, cc.py)
PREFLIGHT = ("gpu.runtimeclass", "gpu.runtimeclass-overhead", "gpu.nodes-advertise",
             "gpu.device-plugin")
PER_POD = ("gpu.pod-runs", "gpu.in-vm", "gpu.pci-function", "gpu.smi-count", "gpu.product",
           "gpu.mig", "gpu.memory", "gpu.health", "gpu.driver", "gpu.cuda", "gpu.node-labels",
           "gpu.unique", "gpu.compute")
OWN = PREFLIGHT + PER_POD


@functools.cache
def h200_guest() -> GuestEvidence:
    return _h200_guest()


@dataclass(frozen=True)
class Vector:
    name: str
    run: GpuRunEvidence
    expect: Mapping[str, str]  # check id -> status on its first subject
    profile: GpuProfile = field(default_factory=h200_profile)
    checks: tuple[str, ...] = OWN  # the checks whose verdicts the corpus records
    words: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # id -> in reason
    fix: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # id -> in remediation


def first(reg: Any, v: Vector, check_id: str) -> Any:
    """The verdict of ``check_id`` on its first subject of vector ``v``."""
    from kgc.layers.gpu.checks import inputs

    ci = next(i for i in inputs(v.run) if i.check.id == check_id)
    return reg.get(check_id).judge(ci.evidence, v.profile, "corpus")


def mismatch(reg: Any, v: Vector) -> list[str]:
    """How the checks of registry ``reg`` contradict vector ``v`` (empty: they agree)."""
    out = []
    for cid, want in v.expect.items():
        got = first(reg, v, cid)
        if str(got.status) != want:
            out.append(f"{cid}: {got.status} != {want} ({got.reason})")
            continue
        for w in v.words.get(cid, ()):
            if w not in got.reason:
                out.append(f"{cid}: {w!r} not in reason {got.reason!r}")
        for w in v.fix.get(cid, ()):
            if w not in got.remediation:
                out.append(f"{cid}: {w!r} not in remediation {got.remediation!r}")
    return out


# --------------------------------------------------------------------------- helpers
def smi(g: GuestEvidence, **kw: Any) -> GuestEvidence:
    """The guest with its nvidia-smi report changed (``gpus`` changes every GPU alike)."""
    assert g.smi is not None
    gpu_kw = {k: kw.pop(k) for k in list(kw) if k.startswith("gpu_")}
    gpus = tuple(dataclasses.replace(x, **{k[4:]: v for k, v in gpu_kw.items()})
                 for x in g.smi.gpus)
    return dataclasses.replace(g, smi=dataclasses.replace(g.smi, **{"gpus": gpus, **kw}))


def health(g: GuestEvidence, **fields: str) -> GuestEvidence:
    assert g.smi is not None
    h = {**g.smi.gpus[0].health, **{k.replace("__", "/"): v for k, v in fields.items()}}
    return smi(g, gpu_health=h)


def bars(g: GuestEvidence, b: tuple[Bar, ...] | None) -> GuestEvidence:
    pci = tuple(dataclasses.replace(d, bars=b) if d.vendor == "10de" else d for d in g.pci)
    return dataclasses.replace(g, pci=pci)


def second_in_mig(g: GuestEvidence) -> GuestEvidence:
    """The guest's second GPU switched to MIG mode with no MIG device created."""
    assert g.smi is not None
    x = g.smi.gpus[1]
    gpus = (g.smi.gpus[0], dataclasses.replace(x, mig_current="Enabled", mig_devices=()),
            *g.smi.gpus[2:])
    return dataclasses.replace(g, smi=dataclasses.replace(g.smi, gpus=gpus))


def probe(p: dict[str, Any] | None) -> GuestEvidence:
    return dataclasses.replace(h200_guest(), cuda_check=p)


def one(name: str, p: GpuPodEvidence, expect: Mapping[str, str], *,
        cl: ClusterGpuEvidence | None = None, checks: tuple[str, ...] = PER_POD,
        profile: GpuProfile | None = None, **kw: Any) -> Vector:
    return Vector(name, run(p, cl=cl), expect, profile or h200_profile(), checks, **kw)


def warn(reason: str, message: str, count: int = 1, source: str = "kubelet") -> PodEvent:
    return PodEvent("Warning", reason, message, count, source)


SANDBOX = "Failed to create pod sandbox: rpc error: code = Unknown desc = "
# a real-length kubelet sandbox error: the wrappers containerd and the Kata shim add around
# QEMU's line make these messages several hundred characters long
LONG_SHIM = ("failed to create containerd task: failed to create shim task: Failed to create "
             "the sandbox: failed to launch qemu: exit status 1, error messages from qemu log: "
             "qemu-system-x86_64: -device vfio-pci,host=0000:41:00.0,x-pci-vendor-id=0x10de,"
             "x-pci-device-id=0x2335,bus=rp0,id=vfio-41-00-0,romfile=: ")



def unscheduled(*events: PodEvent, **kw: Any) -> GpuPodEvidence:
    base: dict[str, Any] = dict(phase="Pending", node=None, timed_out=True, waited_s=300.0,
                                containers=(), conditions=(PodCondition(
                                    "PodScheduled", "False", "Unschedulable"),), events=events)
    base.update(kw)
    return pod(None, **base)


def refused(err: str) -> GpuPodEvidence:
    return pod(None, phase=None, node=None, conditions=(), containers=(), events=(),
               waited_s=0.0, create_error=err)


def dra_cluster(*publishing: str, driver: str | None = "gpu.nvidia.com") -> ClusterGpuEvidence:
    return dataclasses.replace(cluster(node("gpu-a", 0), node("gpu-b", 0)), dra=DraEvidence(
        api_versions=("v1",), driver=driver,
        slices=tuple(DraSlice(name=f"{n}-gpu.nvidia.com-x", driver="gpu.nvidia.com", pool=n,
                              generation=1, node=n, device_count=1) for n in publishing)))


def claim_profile(**kw: Any) -> GpuProfile:
    return h200_profile(request=GpuRequestPlatform(mode="claim"), **kw)


# --------------------------------------------------------------------------- preflight
def _preflight() -> list[Vector]:
    a, b = node("gpu-a", 1), node("gpu-b", 1)
    plain = dataclasses.replace(node("cpu-0", 0, product=None), labels={})
    forbidden = ('runtimeclasses.node.k8s.io is forbidden: User "system:serviceaccount:kgc:kgc" '
                 'cannot list resource "runtimeclasses" in API group "node.k8s.io" at the '
                 "cluster scope")
    nodes_forbidden = ('nodes is forbidden: User "system:serviceaccount:kgc:kgc" cannot list '
                       'resource "nodes" in API group "" at the cluster scope')
    pods_forbidden = ('pods is forbidden: User "system:serviceaccount:kgc:kgc" cannot list '
                      'resource "pods" in API group "" in the namespace "gpu-operator"')

    def v(name: str, cl: ClusterGpuEvidence, expect: Mapping[str, str],
          profile: GpuProfile | None = None, **kw: Any) -> Vector:
        return Vector(name, GpuRunEvidence(cl, ()), expect, profile or h200_profile(),
                      PREFLIGHT, **kw)

    def plugin(n: str, ready: bool, phase: str | None = "Running",
               waiting: str | None = None, i: int = 0) -> PluginPod:
        return PluginPod(f"nvidia-sandbox-device-plugin-daemonset-{n}{i}", "gpu-operator", n,
                         phase, ready, waiting)

    good = cluster(a, b)
    return [
        v("preflight-good", good, {c: "pass" for c in PREFLIGHT},
          words={"gpu.runtimeclass": ("RuntimeClass kata-qemu-nvidia-gpu uses handler "
                                      "kata-qemu-nvidia-gpu",),
                 "gpu.nodes-advertise": ("2 GPU node(s)", "gpu-a nvidia.com/pgpu=1"),
                 "gpu.device-plugin": ("Ready on 2 GPU node(s): gpu-a, gpu-b",)}),
        v("preflight-nothing-listable",
          dataclasses.replace(good, runtime_classes=None, nodes=None, plugin_pods=None,
                              errors={"runtime_classes": forbidden, "nodes": nodes_forbidden,
                                      "plugin_pods": pods_forbidden}),
          {"gpu.runtimeclass": "error", "gpu.runtimeclass-overhead": "skip",
           "gpu.nodes-advertise": "error", "gpu.device-plugin": "error"},
          words={"gpu.runtimeclass": ("cannot list resource",),
                 "gpu.device-plugin": ("app=nvidia-sandbox-device-plugin-daemonset",)}),
        v("preflight-nothing-listable-no-reason",
          dataclasses.replace(good, runtime_classes=None, nodes=None, plugin_pods=None),
          {"gpu.runtimeclass": "error", "gpu.nodes-advertise": "error",
           "gpu.device-plugin": "error"},
          words={"gpu.runtimeclass": ("no reason",), "gpu.nodes-advertise": ("no reason",),
                 "gpu.device-plugin": ("no reason",)}),
        v("preflight-nodes-unlistable",
          dataclasses.replace(good, nodes=None, errors={"nodes": nodes_forbidden}),
          {"gpu.nodes-advertise": "error", "gpu.device-plugin": "error"},
          words={"gpu.device-plugin": ("nodes could not be listed",)}),
        v("preflight-nodes-unlistable-no-reason", dataclasses.replace(good, nodes=None),
          {"gpu.device-plugin": "error"}, words={"gpu.device-plugin": ("no reason",)}),
        v("runtimeclass-missing-others",
          cluster(a, rcs=(RuntimeClassInfo("kata-qemu", "kata-qemu", {"cpu": "250m",
                                                                      "memory": "160Mi"}),
                          RuntimeClassInfo("kata-clh", "kata-clh"))),
          {"gpu.runtimeclass": "fail", "gpu.runtimeclass-overhead": "skip"},
          words={"gpu.runtimeclass": ("kata-clh, kata-qemu",)}),
        v("runtimeclass-none-at-all", cluster(a, rcs=()),
          {"gpu.runtimeclass": "fail"}, words={"gpu.runtimeclass": ("(the cluster has: none)",)}),
        v("runtimeclass-wrong-handler", cluster(a, rcs=(runtime_class(handler="runc"),)),
          {"gpu.runtimeclass": "fail", "gpu.runtimeclass-overhead": "pass"},
          words={"gpu.runtimeclass": ("'runc'",)}),
        v("runtimeclass-own-handler", cluster(a, rcs=(runtime_class(handler="kata-nvidia"),)),
          {"gpu.runtimeclass": "pass"}, profile=h200_profile(handler="kata-nvidia")),
        v("overhead-none", cluster(a, rcs=(runtime_class(overhead={}),)),
          {"gpu.runtimeclass-overhead": "fail"}),
        v("overhead-cpu-only", cluster(a, rcs=(runtime_class(overhead={"cpu": "1"}),)),
          {"gpu.runtimeclass-overhead": "warn"},
          words={"gpu.runtimeclass-overhead": ("lacks memory",)}),
        v("overhead-memory-only",
          cluster(a, rcs=(runtime_class(overhead={"memory": "10240Mi"}),)),
          {"gpu.runtimeclass-overhead": "warn"},
          words={"gpu.runtimeclass-overhead": ("lacks cpu",)}),
        v("overhead-not-required", cluster(a, rcs=(runtime_class(overhead={}),)),
          {"gpu.runtimeclass-overhead": "skip"}, profile=h200_profile(require_overhead=False)),
        v("nodes-unhealthy-devices",
          cluster(a, node("gpu-c", 4, allocatable=0), plugin_nodes=("gpu-a",)),
          {"gpu.nodes-advertise": "fail", "gpu.device-plugin": "fail"},
          words={"gpu.nodes-advertise": ("gpu-c advertises nvidia.com/pgpu capacity 4, "
                                         "allocatable 0", "(1 node(s) do: nvidia.com/pgpu=1 on "
                                         "gpu-a)")}),
        v("nodes-all-unhealthy", cluster(node("gpu-c", 2, allocatable=0)),
          {"gpu.nodes-advertise": "fail", "gpu.device-plugin": "pass"}),
        v("nodes-labelled-advertise-none", cluster(node("gpu-a", 0), plugin_nodes=()),
          {"gpu.nodes-advertise": "fail", "gpu.device-plugin": "fail"},
          words={"gpu.nodes-advertise": ("labelled nvidia.com/gpu.present=true but advertises "
                                         "none of nvidia.com/pgpu",)}),
        v("nodes-other-stack-resource",
          cluster(node("gpu-a", 2, resource="nvidia.com/gpu")),
          {"gpu.nodes-advertise": "fail"},
          words={"gpu.nodes-advertise": ("; it advertises nvidia.com/gpu=2 instead",)}),
        v("nodes-unlabelled-other-resource",
          cluster(dataclasses.replace(node("gpu-a", 2, resource="nvidia.com/gpu"), labels={})),
          {"gpu.nodes-advertise": "fail"},
          words={"gpu.nodes-advertise": ("gpu-a has GPUs but advertises none",)}),
        v("nodes-no-gpu-node", cluster(plain, plugin_nodes=()),
          {"gpu.nodes-advertise": "fail", "gpu.device-plugin": "skip"},
          words={"gpu.nodes-advertise": ("1 node(s) in the cluster",)}),
        v("nodes-selector-matches-none", cluster(a),
          {"gpu.nodes-advertise": "fail", "gpu.device-plugin": "skip"},
          profile=h200_profile(node_selector={"pool": "gpu"}),
          words={"gpu.nodes-advertise": ("matching {'pool': 'gpu'}",)}),
        v("nodes-two-resources", cluster(a, node("gpu-d", 2, resource="nvidia.com/gpu")),
          {"gpu.nodes-advertise": "pass"},
          profile=h200_profile(resources=(RESOURCE, "nvidia.com/gpu")),
          words={"gpu.nodes-advertise": ("gpu-d nvidia.com/gpu=2",)}),
        v("nodes-two-unhealthy-two-healthy",
          cluster(a, b, node("gpu-c", 4, allocatable=0), node("gpu-d", 2, allocatable=1),
                  node("gpu-e", 0)),
          {"gpu.nodes-advertise": "fail"},
          words={"gpu.nodes-advertise": ("2 GPU node(s) advertise no usable GPU: gpu-c "
                                         "advertises nvidia.com/pgpu capacity 4, allocatable 0; "
                                         "gpu-e labelled",
                                         "(3 node(s) do: nvidia.com/pgpu=1 on gpu-a, "
                                         "nvidia.com/pgpu=1 on gpu-b, nvidia.com/pgpu=1 on "
                                         "gpu-d)")}),
        v("nodes-two-resources-none-advertised", cluster(plain),
          {"gpu.nodes-advertise": "fail"},
          profile=h200_profile(resources=(RESOURCE, "nvidia.com/gpu")),
          words={"gpu.nodes-advertise": ("advertises nvidia.com/pgpu or nvidia.com/gpu",)}),
        v("nodes-both-resources-unhealthy",
          cluster(dataclasses.replace(node("gpu-a", 2, allocatable=0), capacity={
              **node("gpu-a", 2).capacity, "nvidia.com/gpu": "2"}, allocatable={
              **node("gpu-a", 2, allocatable=0).allocatable, "nvidia.com/gpu": "0"})),
          {"gpu.nodes-advertise": "fail"},
          profile=h200_profile(resources=(RESOURCE, "nvidia.com/gpu")),
          words={"gpu.nodes-advertise": ("nvidia.com/pgpu capacity 2, allocatable 0, "
                                         "nvidia.com/gpu capacity 2, allocatable 0",)}),
        v("nodes-two-labels-two-other-resources",
          cluster(dataclasses.replace(node("gpu-a", 0), labels={
              **node("gpu-a", 0).labels, "feature.node.kubernetes.io/pci-10de.present": "true"},
              capacity={**node("gpu-a", 0).capacity, "nvidia.com/gpu": "1",
                        "nvidia.com/mig-1g.18gb": "7"})),
          {"gpu.nodes-advertise": "fail"},
          profile=h200_profile(resources=(RESOURCE, "nvidia.com/vgpu")),
          words={"gpu.nodes-advertise": (
              "labelled nvidia.com/gpu.present=true, feature.node.kubernetes.io/pci-10de."
              "present=true but advertises none of nvidia.com/pgpu, nvidia.com/vgpu; it "
              "advertises nvidia.com/gpu=1, nvidia.com/mig-1g.18gb=7 instead",)}),
        # a record whose capacity lost the resource the allocatable still lists
        v("nodes-allocatable-without-capacity",
          cluster(dataclasses.replace(node("gpu-a", 1), capacity={
              k: v for k, v in node("gpu-a", 1).capacity.items() if k != RESOURCE})),
          {"gpu.nodes-advertise": "fail"},
          words={"gpu.nodes-advertise": ("capacity 0, allocatable 1",)}),
        v("nodes-selector-picks-the-gpu-pool",
          cluster(dataclasses.replace(node("cpu-0", 1), labels={"pool": "cpu"}),
                  dataclasses.replace(a, labels={**a.labels, "pool": "gpu"})),
          {"gpu.nodes-advertise": "pass", "gpu.device-plugin": "pass"},
          profile=h200_profile(node_selector={"pool": "gpu"}),
          words={"gpu.nodes-advertise": ("1 GPU node(s) advertise GPUs: gpu-a",)}),
        v("overhead-memory-and-storage",
          cluster(a, rcs=(runtime_class(overhead={"memory": "10240Mi",
                                                  "ephemeral-storage": "1Gi"}),)),
          {"gpu.runtimeclass-overhead": "warn"}),
        v("plugin-unready-on-two",
          dataclasses.replace(good, plugin_pods=(
              plugin("gpu-a", False, "Running", "CrashLoopBackOff"),
              plugin("gpu-b", False, "Pending", "ImagePullBackOff"))),
          {"gpu.device-plugin": "fail"},
          words={"gpu.device-plugin": ("(Running, CrashLoopBackOff); gpu-operator/",)}),
        v("plugin-missing-on-one", cluster(a, b, plugin_nodes=("gpu-a",)),
          {"gpu.device-plugin": "fail"},
          words={"gpu.device-plugin": ("in gpu-operator on gpu-b",)}),
        v("plugin-crashlooping",
          dataclasses.replace(good, plugin_pods=(plugin("gpu-a", True), plugin(
              "gpu-b", False, "Running", "CrashLoopBackOff"), plugin("gpu-b", False, None, i=1))),
          {"gpu.device-plugin": "fail"},
          words={"gpu.device-plugin": ("(Running, CrashLoopBackOff)", "(?)")}),
        v("plugin-missing-and-unready",
          dataclasses.replace(cluster(a, b, node("gpu-c", 1)), plugin_pods=(
              plugin("gpu-a", False, "Pending", "ContainerCreating"),)),
          {"gpu.device-plugin": "fail"},
          words={"gpu.device-plugin": ("on gpu-b, gpu-c", "not Ready: ")}),
        v("plugin-no-namespace", cluster(a, b, plugin_nodes=("gpu-a",)),
          {"gpu.device-plugin": "fail"}, profile=h200_profile(device_plugin_namespace=None)),
        v("plugin-no-selector", good, {"gpu.device-plugin": "skip"},
          profile=h200_profile(device_plugin_selector=None)),
        v("plugin-no-selector-dra", good, {"gpu.device-plugin": "skip"},
          profile=claim_profile(device_plugin_selector=None),
          words={"gpu.device-plugin": ("request.mode: claim",)}),
        v("plugin-dra-kubelet-plugin-missing",
          dataclasses.replace(dra_cluster("gpu-a", "gpu-b"), plugin_pods=(
              PluginPod("nvidia-dra-driver-gpu-kubelet-plugin-x", "nvidia-dra", "gpu-a",
                        "Running", True),)),
          {"gpu.device-plugin": "fail"},
          profile=claim_profile(device_plugin_selector="app=nvidia-dra-driver-gpu",
                                device_plugin_namespace="nvidia-dra"),
          words={"gpu.device-plugin": ("DRA kubelet plugin", "on gpu-b")}),
    ]


# --------------------------------------------------------------------------- per pod
def _per_pod() -> list[Vector]:
    h = h200_guest()
    c = cases()
    a2 = node("gpu-a", 2)
    out = [
        Vector("h200-good", c["h200-good"], {**{x: "pass" for x in PER_POD},
                                              "gpu.unique": "skip"}),
        Vector("two-pods-distinct", c["two-pods-distinct"], {"gpu.unique": "pass"},
               words={"gpu.unique": ("seen by none of the 1 other GPU pod(s) on gpu-a",)}),
        Vector("duplicate-uuid", c["duplicate-uuid"], {"gpu.unique": "fail"}),
        Vector("cpu-only-guest", c["gpu-not-in-guest"],
               {"gpu.pod-runs": "pass", "gpu.in-vm": "pass", "gpu.pci-function": "fail",
                "gpu.smi-count": "fail", "gpu.product": "skip", "gpu.compute": "skip"}),
        Vector("same-kernel-as-node", c["same-kernel-as-node"], {"gpu.in-vm": "fail"}),
        Vector("no-pod-with-notes",
               run(notes=("no node advertises nvidia.com/pgpu", "max_nodes 4 reached"),
                   cl=cluster(node("gpu-a", 0), plugin_nodes=())),
               {"gpu.pod-runs": "error", "gpu.in-vm": "skip", "gpu.memory": "skip"},
               words={"gpu.pod-runs": ("no node advertises nvidia.com/pgpu; max_nodes",)}),
        Vector("no-pod-without-notes", run(), {"gpu.pod-runs": "error", "gpu.compute": "skip"},
               words={"gpu.pod-runs": ("the run created no GPU pod",)}),
        # a pod that did not run: every guest check skips naming the cause
        one("not-run-skips", pending(), {"gpu.pod-runs": "fail", "gpu.in-vm": "skip",
                                         "gpu.smi-count": "skip", "gpu.unique": "skip"},
            words={"gpu.in-vm": ("(see gpu.pod-runs: start-timeout)",)}),
        # the guest checks' skip names the cause the cluster evidence gives (no node
        # advertises the resource: no device plugin, not a shortage)
        Vector("not-run-no-device-plugin", c["no-device-plugin"],
               {"gpu.pod-runs": "fail", "gpu.in-vm": "skip", "gpu.compute": "skip"},
               checks=PER_POD, words={"gpu.in-vm": ("(see gpu.pod-runs: no-device-plugin)",)}),
        one("not-run-never-scheduled-unnamed",
            pod(None, name="kgc-gpu-9", node=None, target_node=None, phase="Pending",
                conditions=(), containers=(), events=(), waited_s=None, budget_s=None),
            {"gpu.pod-runs": "fail"}),
        one("runs-without-wait-recorded", pod(h, waited_s=None), {"gpu.pod-runs": "pass"}),
        one("runs-claim-named", pod(h, request_mode="claim", claims=(
            ClaimEvidence("kgc-gpu-0-gpu", True, "gpu-a"), ClaimEvidence(None))),
            {"gpu.pod-runs": "pass"}, checks=("gpu.pod-runs",),
            words={"gpu.pod-runs": ("(claim kgc-gpu-0-gpu)",)}),
        one("runs-two-claims", pod(h, request_mode="claim", claims=(
            ClaimEvidence("kgc-gpu-0-gpu", True, "gpu-a"),
            ClaimEvidence("kgc-gpu-0-gpu-2", True, "gpu-a"))),
            {"gpu.pod-runs": "pass"}, checks=("gpu.pod-runs",),
            words={"gpu.pod-runs": ("(claim kgc-gpu-0-gpu, kgc-gpu-0-gpu-2)",)}),
        one("runs-claim-not-read-back", pod(h, request_mode="claim"), {"gpu.pod-runs": "pass"},
            checks=("gpu.pod-runs",), words={"gpu.pod-runs": ("not read back",)}),
        one("runs-dra-extended", pod(h, request_mode="dra-extended"), {"gpu.pod-runs": "pass"},
            checks=("gpu.pod-runs",), words={"gpu.pod-runs": ("(served by DRA)",)}),
        one("stand-in-node", pod(h, events=(PodEvent(
            "Normal", "Started", "Started container collector (played by kwok)", 1,
            "kwok"),)), {"gpu.pod-runs": "pass"}, checks=("gpu.pod-runs", "gpu.in-vm")),
        # in-vm
        one("gvisor", pod(dataclasses.replace(h, kernel="4.4.0", gvisor=True)),
            {"gpu.in-vm": "fail"}, checks=("gpu.in-vm",)),
        one("host-sysfs-and-kernel",
            pod(with_iommu_groups(h, 3), node(kernel=h.kernel or "")), {"gpu.in-vm": "fail"},
            checks=("gpu.in-vm",), words={"gpu.in-vm": ("3 IOMMU group(s)",)}),
        one("node-kernel-unknown", pod(h, node_kernel=None), {"gpu.in-vm": "error"},
            checks=("gpu.in-vm",)),
        one("guest-kernel-unknown", pod(dataclasses.replace(h, kernel=None)),
            {"gpu.in-vm": "error"}, checks=("gpu.in-vm",)),
        one("guest-sys-unreadable",
            pod(dataclasses.replace(h, iommu_groups=None, pci_listed=False, pci=())),
            {"gpu.in-vm": "error", "gpu.pci-function": "error"},
            checks=("gpu.in-vm", "gpu.pci-function")),
        one("no-iommu-dir", pod(dataclasses.replace(h, iommu_groups=None)),
            {"gpu.in-vm": "pass"}, checks=("gpu.in-vm",)),
        # pci-function
        one("wrong-vendor", pod(with_vendor(h, "1002")), {"gpu.pci-function": "fail"},
            checks=("gpu.pci-function",)),
        one("fewer-functions-than-requested", pod(h, count=2),
            {"gpu.pci-function": "fail", "gpu.smi-count": "fail"},
            checks=("gpu.pci-function", "gpu.smi-count"),
            fix={"gpu.smi-count": ("fewer",)}),
        one("no-function-under-dra", pod(cpu_guest(), request_mode="claim"),
            {"gpu.pci-function": "fail"}, checks=("gpu.pci-function",),
            fix={"gpu.pci-function": ("kata-containers#13322", "on gpu-a")}),
        one("no-function-under-dra-unscheduled-node",
            pod(dataclasses.replace(cpu_guest(), pci=()), request_mode="dra-extended",
                node=None), {"gpu.pci-function": "fail"}, checks=("gpu.pci-function",),
            fix={"gpu.pci-function": ("Kata on the node does not yet cold-plug",)}),
        one("bars-unreadable", pod(bars(h, None)), {"gpu.pci-function": "fail"},
            checks=("gpu.pci-function",)),
        one("bar0-unassigned", pod(bars(h, (Bar(0, 0, 16 << 20, 0x14220c),
                                             Bar(2, 0x100000000000, 256 << 30, 0x14220c)))),
            {"gpu.pci-function": "fail"}, checks=("gpu.pci-function",)),
        one("no-prefetchable-bar", pod(dataclasses.replace(
            bars(h, (Bar(0, 0x104002000000, 16 << 20, 0x40200),
                     Bar(6, 0xfe000000, 1 << 19, 0x4c200))),
            dmesg=("[    0.95] pci 0000:00:06.0: BAR 2 [mem size 0x4000000000 64bit pref]: "
                   "can't assign; no space",
                   "[    0.96] pci 0000:00:06.0: BAR 2: failed to assign [mem size "
                   "0x4000000000 64bit pref]",
                   "[    3.10] NVRM: GPU 0000:00:06.0: RmInitAdapter failed!"))),
            {"gpu.pci-function": "fail"}, checks=("gpu.pci-function",)),
        # the expansion ROM (index 6; Linux flags it MEM|PREFETCH|READONLY) is no VRAM
        # aperture: it is neither counted nor described as one
        one("rom-bar-beside-the-real-bars", pod(bars(h, (*(h.nvidia_gpus[0].bars or ()),
                                                         Bar(6, 0xfe800000, 512 << 10,
                                                             0x46200)))),
            {"gpu.pci-function": "pass"}, checks=("gpu.pci-function",)),
        one("only-the-rom-prefetchable", pod(bars(h, (Bar(0, 0x104002000000, 16 << 20, 0x40200),
                                                      Bar(6, 0xfe800000, 512 << 10,
                                                          0x46200)))),
            {"gpu.pci-function": "fail"}, checks=("gpu.pci-function",),
            words={"gpu.pci-function": ("no prefetchable BAR",)}),
        one("two-gpus-pass", pod(dataclasses.replace(
            with_smi_gpus(h, 2), pci=h.pci + tuple(dataclasses.replace(d, bdf="0000:00:07.0")
                                                   for d in h.nvidia_gpus)), a2, count=2),
            {"gpu.pci-function": "pass", "gpu.smi-count": "pass", "gpu.memory": "pass",
             "gpu.mig": "pass"}, cl=cluster(a2)),
        # a BAR0 line of all zeros is dropped from the resource file: no BAR0 at all
        one("no-bar0-at-all", pod(bars(h, (Bar(2, 0x100000000000, 256 << 30, 0x14220c),
                                            Bar(4, 0x104000000000, 32 << 20, 0x14220c)))),
            {"gpu.pci-function": "fail"}, checks=("gpu.pci-function",),
            words={"gpu.pci-function": ("BAR0 (registers) is not assigned",)}),
        one("two-gpus-bars-unplaced", pod(dataclasses.replace(bars(dataclasses.replace(
            h, pci=h.pci + tuple(dataclasses.replace(d, bdf="0000:00:07.0")
                                 for d in h.nvidia_gpus)),
            (Bar(0, 0x104002000000, 16 << 20, 0x40200),)), dmesg=tuple(
                f"[    0.9{i}] pci 0000:00:0{6 + i % 2}.0: BAR {2 + 2 * (i % 2)} [mem size "
                f"0x4000000000 64bit pref]: can't assign; no space" for i in range(12))),
            a2, count=2), {"gpu.pci-function": "fail"}, cl=cluster(a2),
            checks=("gpu.pci-function",),
            words={"gpu.pci-function": ("is assigned; 0000:00:07.0: no prefetchable",)}),
        # nvidia-smi
        one("smi-timeout", pod(dataclasses.replace(h, smi_rc=124, smi=None)),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",)),
        one("smi-driver-not-loaded", pod(dataclasses.replace(
            h, smi_rc=9, smi=None, smi_error="NVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is "
            "installed and running.", dmesg=(
                "[    2.41] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04",
                "[    3.02] NVRM: GPU 0000:00:06.0: RmInitAdapter failed! (0x22:0x56:762)",
                "[    3.03] pci 0000:00:06.0: enabling device (0000 -> 0002)")),
            ), {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",)),
        one("smi-two-named-lines", pod(dataclasses.replace(
            h, smi_rc=15, smi=None, smi_error="Unable to determine the device handle for GPU "
            "0000:00:06.0: Unknown Error",
            smi_messages=("Unable to determine the device handle for GPU 0000:00:07.0: GPU is "
                          "lost.  Reboot the system to recover this GPU",
                          "No devices were found"))),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",),
            words={"gpu.smi-count": ("; also: ",)}),
        one("smi-unnamed-failure", pod(dataclasses.replace(
            h, smi_rc=255, smi=None, smi_error="Segmentation fault (core dumped)",
            dmesg=("[    3.02] NVRM: Xid (PCI:0000:00:06): 79, pid=1, GPU has fallen off "
                   "the bus.",))), {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",)),
        # a driver that fails to bind prints NVRM lines by the dozen: ten are kept
        one("smi-unnamed-failure-many-nvrm", pod(dataclasses.replace(
            h, smi_rc=255, smi=None, smi_error="Segmentation fault (core dumped)",
            dmesg=tuple(f"[    3.{i:02d}] NVRM: GPU 0000:00:06.0: RmInitAdapter failed! "
                        f"(0x22:0x56:{700 + i})" for i in range(12)))),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",)),
        one("smi-named-failure-many-nvrm", pod(dataclasses.replace(
            h, smi_rc=9, smi=None, smi_error="NVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver.",
            dmesg=tuple(f"[    3.{i:02d}] NVRM: GPU 0000:00:06.0: RmInitAdapter failed! "
                        f"(0x22:0x56:{700 + i})" for i in range(12)))),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",)),
        one("smi-attached-three-listed-two", pod(smi(with_smi_gpus(h, 2), attached_gpus=3),
                                                 a2, count=3),
            {"gpu.smi-count": "fail"}, cl=cluster(a2), checks=("gpu.smi-count",)),
        one("smi-attached-one-listed-none", pod(smi(h, gpus=(), attached_gpus=1)),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",),
            words={"gpu.smi-count": ("but lists 0: none;",)}),
        one("smi-xml-cut", pod(dataclasses.replace(
            h, smi=None, smi_xml_error="no element found: line 812, column 0")),
            {"gpu.smi-count": "error", "gpu.product": "skip"},
            checks=("gpu.smi-count", "gpu.product")),
        one("smi-no-report", pod(dataclasses.replace(
            h, smi=None, problems=("nvidia-smi -q -x: empty output",
                                   "nvidia-smi --query-gpu: empty output"))),
            {"gpu.smi-count": "error"}, checks=("gpu.smi-count",)),
        one("smi-no-output", pod(dataclasses.replace(h, smi=None)), {"gpu.smi-count": "error"},
            checks=("gpu.smi-count",), words={"gpu.smi-count": ("(no output)",)}),
        one("smi-missing-exit-127", pod(dataclasses.replace(
            h, smi=None, smi_rc=127, smi_error="sh: 1: nvidia-smi: not found")),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",)),
        one("smi-no-attached-count", pod(smi(h, attached_gpus=None)),
            {"gpu.smi-count": "error"}, checks=("gpu.smi-count",)),
        one("smi-attached-more-than-listed", pod(smi(h, attached_gpus=2)),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",)),
        one("smi-attached-more-lost", pod(dataclasses.replace(smi(h, attached_gpus=2),
            smi_messages=("Unable to determine the device handle for GPU 0000:00:07.0: GPU "
                          "is lost.  Reboot the system to recover this GPU",))),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",),
            words={"gpu.smi-count": ("lists 1 of its 2 attached GPU(s)",)}),
        one("smi-none-listed", pod(smi(h, gpus=(), attached_gpus=0)),
            {"gpu.smi-count": "fail", "gpu.product": "skip"},
            checks=("gpu.smi-count", "gpu.product"), words={"gpu.smi-count": ("sees 0: none",)}),
        one("smi-more-than-requested", pod(with_smi_gpus(h, 2)), {"gpu.smi-count": "fail"},
            checks=("gpu.smi-count",), fix={"gpu.smi-count": ("more GPUs",)}),
        one("smi-all-listed-but-lost", pod(dataclasses.replace(
            h, smi_messages=("Unable to determine the device handle for GPU 0000:00:07.0: GPU "
                             "is lost.  Reboot the system to recover this GPU",))),
            {"gpu.smi-count": "fail"}, checks=("gpu.smi-count",),
            words={"gpu.smi-count": ("lists all 1 GPU(s) but says",)}),
        # product
        one("product-not-set", pod(h), {"gpu.product": "skip"}, checks=("gpu.product",),
            profile=h200_profile(product_pattern=None)),
        one("product-unnamed", pod(smi(h, gpu_product_name=None)),
            {"gpu.product": "fail", "gpu.node-labels": "fail"},
            checks=("gpu.product", "gpu.node-labels")),
        one("product-unnamed-not-set", pod(smi(h, gpu_product_name=None)),
            {"gpu.product": "skip"}, checks=("gpu.product",),
            profile=h200_profile(product_pattern=None), words={"gpu.product": ("sees ?",)}),
        one("product-other-model", pod(h), {"gpu.product": "fail"}, checks=("gpu.product",),
            profile=h200_profile(product_pattern="A100|H100")),
        one("product-two-unnamed-not-set", pod(smi(with_smi_gpus(h, 2), gpu_product_name=None),
                                               a2, count=2),
            {"gpu.product": "skip"}, cl=cluster(a2), checks=("gpu.product",),
            profile=h200_profile(product_pattern=None), words={"gpu.product": ("sees ?, ?",)}),
        one("product-two-other-model", pod(with_smi_gpus(h, 2), a2, count=2),
            {"gpu.product": "fail"}, cl=cluster(a2), checks=("gpu.product",),
            profile=h200_profile(product_pattern=r"\bB200\b"),
            words={"gpu.product": ("'NVIDIA H200', 'NVIDIA H200' does not match",)}),
        # MIG
        one("mig-on-whole-profile", pod(smi(h, gpu_mig_current="Enabled", gpu_mig_pending=
                                             "Enabled", gpu_mig_devices=(
            SmiMigDevice(0, 1, 0, 71424, 66), SmiMigDevice(1, 2, 0, 71424, 66,
                                                           {"ecc_error_count/volatile_count/"
                                                            "sram_uncorrectable": "2"})))),
            {"gpu.mig": "fail", "gpu.memory": "fail", "gpu.health": "fail"},
            checks=("gpu.mig", "gpu.memory", "gpu.health")),
        one("mig-on-both-gpus-whole-profile", pod(smi(with_smi_gpus(h, 2),
                                                       gpu_mig_current="Enabled",
                                                       gpu_mig_pending="Enabled",
                                                       gpu_mig_devices=()), a2, count=2),
            {"gpu.mig": "fail", "gpu.node-labels": "pass"}, cl=cluster(a2),
            checks=("gpu.mig", "gpu.node-labels")),
        one("mig-pending-on-whole-profile", pod(smi(h, gpu_mig_pending="Enabled")),
            {"gpu.mig": "fail"}, checks=("gpu.mig",),
            words={"gpu.mig": ("pending enabled after the next GPU reset",)}),
        one("mig-wanted-but-off", pod(h), {"gpu.mig": "fail"}, checks=("gpu.mig",),
            profile=h200_profile(allocation="mig")),
        one("mig-wanted-no-devices", pod(smi(h, gpu_mig_current="Enabled",
                                             gpu_mig_pending="Enabled", gpu_mig_devices=())),
            {"gpu.mig": "fail", "gpu.memory": "fail"}, checks=("gpu.mig", "gpu.memory"),
            profile=h200_profile(allocation="mig")),
        one("mig-pending-off", pod(smi(h, gpu_mig_current="Enabled", gpu_mig_pending="Disabled",
                                       gpu_mig_devices=(SmiMigDevice(0, 1, 0, 17920, 16),))),
            {"gpu.mig": "warn", "gpu.memory": "fail"}, checks=("gpu.mig", "gpu.memory"),
            profile=h200_profile(allocation="mig")),
        one("mig-wanted-and-on", pod(smi(h, gpu_mig_current="Enabled", gpu_mig_pending="Enabled",
                                         gpu_mig_devices=(SmiMigDevice(None, None, None, None),
                                                          ))),
            {"gpu.mig": "pass", "gpu.memory": "error"}, checks=("gpu.mig", "gpu.memory"),
            profile=h200_profile(allocation="mig")),
        one("mig-mode-missing-xml", pod(smi(h, gpu_mig_current=None, gpu_mig_pending=None)),
            {"gpu.mig": "error"}, checks=("gpu.mig",)),
        one("mig-mode-missing-csv", pod(smi(h, source="csv", gpu_mig_current=None,
                                            gpu_mig_pending=None, gpu_health={})),
            {"gpu.mig": "skip", "gpu.memory": "pass", "gpu.health": "skip"},
            checks=("gpu.mig", "gpu.memory", "gpu.health")),
        one("mig-mode-missing-two-gpus", pod(smi(with_smi_gpus(h, 2), gpu_mig_current=None,
                                                 gpu_mig_pending=None), a2, count=2),
            {"gpu.mig": "error"}, cl=cluster(a2), checks=("gpu.mig",)),
        one("mig-wanted-two-gpus-off", pod(with_smi_gpus(h, 2), a2, count=2),
            {"gpu.mig": "fail"}, cl=cluster(a2), checks=("gpu.mig",),
            profile=h200_profile(allocation="mig")),
        one("mig-pending-off-two-gpus", pod(smi(with_smi_gpus(h, 2), gpu_mig_current="Enabled",
                                                gpu_mig_pending="Disabled", gpu_mig_devices=(
                                                    SmiMigDevice(0, 1, 0, 71424, 66),)),
                                            a2, count=2),
            {"gpu.mig": "warn"}, cl=cluster(a2), checks=("gpu.mig",),
            profile=h200_profile(allocation="mig")),
        # memory
        one("memory-not-set", pod(h), {"gpu.memory": "skip"}, checks=("gpu.memory",),
            profile=h200_profile(min_memory_mib=None)),
        one("memory-too-small", pod(h), {"gpu.memory": "fail"}, checks=("gpu.memory",),
            profile=h200_profile(min_memory_mib=143772),
            fix={"gpu.memory": ("vGPU slice",)}),
        one("memory-unknown", pod(smi(h, gpu_memory_total_mib=None)), {"gpu.memory": "error"},
            checks=("gpu.memory",)),
        one("memory-two-gpus-one-mig-empty", pod(second_in_mig(with_smi_gpus(h, 2)), a2,
                                                   count=2),
            {"gpu.memory": "fail", "gpu.mig": "fail"}, cl=cluster(a2),
            checks=("gpu.memory", "gpu.mig")),
        one("memory-two-gpus-mig-empty", pod(smi(with_smi_gpus(h, 2), gpu_mig_current="Enabled",
                                                 gpu_mig_pending="Enabled", gpu_mig_devices=()),
                                             a2, count=2),
            {"gpu.memory": "fail"}, cl=cluster(a2), checks=("gpu.memory",)),
        one("memory-two-gpus-unknown", pod(smi(with_smi_gpus(h, 2), gpu_memory_total_mib=None),
                                           a2, count=2),
            {"gpu.memory": "error"}, cl=cluster(a2), checks=("gpu.memory",)),
        one("memory-unknown-not-set", pod(smi(h, gpu_memory_total_mib=None)),
            {"gpu.memory": "skip"}, checks=("gpu.memory",),
            profile=h200_profile(min_memory_mib=None), words={"gpu.memory": (": ? MiB",)}),
        # health
        one("health-volatile-uncorrectable", pod(health(
            h, ecc_errors__volatile__dram_uncorrectable="3",
            ecc_errors__aggregate__dram_uncorrectable="3",
            remapped_rows__remapped_row_pending="Yes")), {"gpu.health": "fail"},
            checks=("gpu.health",)),
        # two failures with two remedies: the reset first, then the RMA the row remapper needs
        one("health-two-failures", pod(health(
            h, ecc_errors__volatile__dram_uncorrectable="1",
            remapped_rows__remapped_row_failure="Yes")), {"gpu.health": "fail"},
            checks=("gpu.health",), fix={"gpu.health": ("nvidia-smi -r", "RMA process")}),
        one("health-warn-only", pod(health(
            h, clocks_event_reasons__clocks_event_reason_hw_slowdown="Active",
            ecc_errors__volatile__dram_correctable="12")), {"gpu.health": "warn"},
            checks=("gpu.health",)),
        one("health-ecc-and-recovery-action", pod(health(
            h, ecc_errors__volatile__dram_uncorrectable="2", gpu_recovery_action="Reset")),
            {"gpu.health": "fail"}, checks=("gpu.health",),
            fix={"gpu.health": ("RMA process", "Do what NVIDIA's recovery action says")}),
        one("health-inforom", pod(dataclasses.replace(h, smi_messages=(
            "WARNING: infoROM is corrupted at gpu 00000000:00:06.0",))), {"gpu.health": "warn"},
            checks=("gpu.health", "gpu.smi-count")),
        one("health-no-fields", pod(smi(h, gpu_health={})), {"gpu.health": "skip"},
            checks=("gpu.health",)),
        # driver / cuda
        one("versions-not-set", pod(h), {"gpu.driver": "skip", "gpu.cuda": "skip"},
            checks=("gpu.driver", "gpu.cuda"), profile=h200_profile(min_driver=None,
                                                                    min_cuda=None)),
        one("versions-unknown-not-set", pod(smi(h, driver_version=None, cuda_version=None)),
            {"gpu.driver": "skip", "gpu.cuda": "skip"}, checks=("gpu.driver", "gpu.cuda"),
            profile=h200_profile(min_driver=None, min_cuda=None),
            words={"gpu.driver": ("reports driver version unknown",)}),
        one("versions-unparseable", pod(smi(h, driver_version="N/A", cuda_version=None)),
            {"gpu.driver": "error", "gpu.cuda": "error"}, checks=("gpu.driver", "gpu.cuda")),
        one("versions-too-old", pod(h), {"gpu.driver": "fail", "gpu.cuda": "fail"},
            checks=("gpu.driver", "gpu.cuda"),
            profile=h200_profile(min_driver="590.1", min_cuda="13.1")),
        # node labels
        one("label-missing", pod(h, node(product=None)), {"gpu.node-labels": "skip"},
            cl=cluster(node(product=None)), checks=("gpu.node-labels",)),
        one("label-other-gpu", pod(h, node(product="NVIDIA-H100-80GB-HBM3")),
            {"gpu.node-labels": "fail"}, cl=cluster(node(product="NVIDIA-H100-80GB-HBM3")),
            checks=("gpu.node-labels",)),
        one("label-other-gpu-two-gpus", pod(with_smi_gpus(h, 2), node(
            "gpu-a", 2, product="NVIDIA-A100-SXM4-80GB"), count=2),
            {"gpu.node-labels": "fail"}, cl=cluster(node("gpu-a", 2,
                                                          product="NVIDIA-A100-SXM4-80GB")),
            checks=("gpu.node-labels",),
            words={"gpu.node-labels": ("sees NVIDIA H200, NVIDIA H200",)}),
        one("label-under-the-profiles-key", pod(h, dataclasses.replace(node(product=None),
                                                                    labels={
            **node(product=None).labels, "gpu.example.com/model": "NVIDIA-H200"})),
            {"gpu.node-labels": "pass"}, checks=("gpu.node-labels",),
            profile=h200_profile(product_label="gpu.example.com/model")),
        # unique
        one("uuid-missing", pod(with_uuid(h, "")), {"gpu.unique": "error"},
            checks=("gpu.unique",)),
        Vector("uuid-shared-three-pods", run(
            pod(h, a2, "kgc-gpu-0"), pod(h, a2, "kgc-gpu-1"),
            pod(with_uuid(h, "GPU-00000000-0000-0000-0000-0000000000b1"), a2, "kgc-gpu-2"),
            pod(h, node("gpu-b"), "kgc-gpu-3"), cl=cluster(a2, node("gpu-b"))),
            {"gpu.unique": "fail"}, checks=("gpu.unique",),
            words={"gpu.unique": ("kgc-run1/kgc-gpu-1 also sees GPU-296e81e0",)}),
        Vector("uuid-shared-by-three", run(
            pod(h, a2, "kgc-gpu-0"), pod(h, a2, "kgc-gpu-1"), pod(h, a2, "kgc-gpu-2"),
            cl=cluster(a2)), {"gpu.unique": "fail"}, checks=("gpu.unique",),
            words={"gpu.unique": ("kgc-run1/kgc-gpu-1 also sees GPU-296e81e0-41dc-e3a5-5798-"
                                  "0bddebd2f1d0; kgc-run1/kgc-gpu-2 also sees",)}),
        Vector("two-gpus-each-shared-and-distinct", run(
            pod(with_smi_gpus(h, 2), node("gpu-a", 4), "kgc-gpu-0", count=2),
            pod(with_smi_gpus(h, 2), node("gpu-a", 4), "kgc-gpu-1", count=2),
            pod(with_uuid(h, "GPU-00000000-0000-0000-0000-0000000000b1"), node("gpu-a", 4),
                "kgc-gpu-2"), cl=cluster(node("gpu-a", 4))),
            {"gpu.unique": "fail"}, checks=("gpu.unique",),
            words={"gpu.unique": ("also sees GPU-296e81e0-41dc-e3a5-5798-0bddebd2f100, "
                                  "GPU-296e81e0-41dc-e3a5-5798-0bddebd2f101",)}),
        Vector("two-gpus-distinct-from-a-peer", run(
            pod(with_smi_gpus(h, 2), node("gpu-a", 4), "kgc-gpu-0", count=2),
            pod(with_uuid(h, "GPU-00000000-0000-0000-0000-0000000000b1"), node("gpu-a", 4),
                "kgc-gpu-1"), cl=cluster(node("gpu-a", 4))),
            {"gpu.unique": "pass"}, checks=("gpu.unique",),
            words={"gpu.unique": ("GPU(s) GPU-296e81e0-41dc-e3a5-5798-0bddebd2f100, GPU-296e81e0"
                                  "-41dc-e3a5-5798-0bddebd2f101 are seen by none",)}),
        # compute
        one("probe-none", pod(probe(None)), {"gpu.compute": "skip"}, checks=("gpu.compute",)),
        one("probe-no-python", pod(probe({"python3": False})), {"gpu.compute": "skip"},
            checks=("gpu.compute",)),
        one("probe-no-torch", pod(probe({"torch": None, "error": "ModuleNotFoundError: No "
                                         "module named 'torch'"})), {"gpu.compute": "skip"},
            checks=("gpu.compute",)),
        one("probe-no-torch-import-error", pod(probe({"error": "ImportError: libcudart.so.13: "
                                                      "cannot open shared object file; torch"})),
            {"gpu.compute": "skip"}, checks=("gpu.compute",)),
        one("probe-torch-none-no-error", pod(probe({"torch": None})), {"gpu.compute": "skip"},
            checks=("gpu.compute",), words={"gpu.compute": ("(import failed)",)}),
        # torch imported but its CUDA part did not: a failure, not a missing PyTorch
        one("probe-torch-cuda-import-error", pod(probe({
            "torch": "2.11.0+cu130", "available": False, "error": "ImportError: "
            "libtorch_cuda.so: cannot open shared object file: No such file or directory"})),
            {"gpu.compute": "fail"}, checks=("gpu.compute",)),
        one("probe-garbled", pod(probe({"error": "no JSON (exit 139): Segmentation fault"})),
            {"gpu.compute": "error"}, checks=("gpu.compute",)),
        one("probe-garbled-no-error", pod(probe({"torch": ""})), {"gpu.compute": "error"},
            checks=("gpu.compute",)),
        one("probe-no-cuda", pod(probe({"torch": "2.11.0+cu130", "available": False,
                                        "error": "CUDA driver initialization failed"})),
            {"gpu.compute": "fail"}, checks=("gpu.compute",)),
        one("probe-no-cuda-silent", pod(probe({"torch": "2.11.0+cu130", "available": None})),
            {"gpu.compute": "fail"}, checks=("gpu.compute",)),
        one("probe-wrong-result", pod(probe({"torch": "2.11.0+cu130", "available": True,
                                             "matmul_ok": False, "matmul_max_abs_err": 3.5})),
            {"gpu.compute": "fail"}, checks=("gpu.compute",)),
        one("probe-kernel-error", pod(probe({"torch": "2.11.0+cu130", "available": True,
                                             "matmul_ok": True, "error": "RuntimeError: CUDA "
                                             "error: uncorrectable ECC error encountered"})),
            {"gpu.compute": "fail"}, checks=("gpu.compute",)),
        one("probe-pass-unnamed", pod(probe({"torch": "2.11.0+cu130", "available": True,
                                             "matmul_ok": True, "matmul_max_abs_err": 0.0})),
            {"gpu.compute": "pass"}, checks=("gpu.compute",),
            words={"gpu.compute": ("on the GPU matches",)}),
    ]
    return out


# --------------------------------------------------------------------------- not run
def _not_run() -> list[Vector]:
    """Pods that did not run: gpu.pod-runs' verdict carries the classifier's cause."""
    from gpu.test_classify import CASES as CLASSIFY_CASES
    from gpu.test_kata_events import CASES as KATA_CASES
    from gpu.test_kata_events import build

    out: list[Vector] = []
    for name, p, cl, _cause, _words in CLASSIFY_CASES:
        if name == "smi-missing-in-guest":  # it ran (a CPU-only guest): a per-pod vector
            continue
        out.append(one(f"classify-{name}", p, {"gpu.pod-runs": "fail"},
                       cl=None if cl == "none" else cl, checks=("gpu.pod-runs",)))
    for case in KATA_CASES:
        p = build(case)
        out.append(one(f"kata-{case['id']}", p, {"gpu.pod-runs": case["expect"]["status"]},
                       checks=("gpu.pod-runs",)))
        if case["expect"]["cause"] == "cdi-timeout":  # under DRA: Kata's cold-plug gap
            out.append(one(f"kata-{case['id']}-under-dra", dataclasses.replace(
                p, request_mode="claim"), {"gpu.pod-runs": "fail"}, checks=("gpu.pod-runs",),
                profile=claim_profile(), words={"gpu.pod-runs": ("kata-containers#13322",)}))

    long_tail = " (" + "; ".join(f"field spec.containers[0].env[{i}]: Invalid value"
                                 for i in range(12)) + ")"

    def pr(name: str, p: GpuPodEvidence, status: str, *words: str,
           cl: ClusterGpuEvidence | None = None, profile: GpuProfile | None = None) -> Vector:
        return one(name, p, {"gpu.pod-runs": status}, cl=cl, checks=("gpu.pod-runs",),
                   profile=profile, words={"gpu.pod-runs": words})

    out += [
        pr("refused-pod-security-long", refused(
            'pods "kgc-gpu-0" is forbidden: violates PodSecurity "restricted:latest": '
            'privileged (container "collector" must not set securityContext.privileged=true)'
            + long_tail), "fail", "violates PodSecurity"),
        pr("refused-quota", refused(
            'pods "kgc-gpu-0" is forbidden: exceeded quota: gpu-quota, requested: '
            "requests.nvidia.com/pgpu=1, used: requests.nvidia.com/pgpu=1, limited: "
            "requests.nvidia.com/pgpu=1" + long_tail), "fail", "exceeded quota"),
        pr("refused-webhook-long", refused(
            'Internal error occurred: failed calling webhook "validate.kyverno.svc-fail": '
            'failed to call webhook: Post "https://kyverno-svc.kyverno.svc:443/validate/fail?'
            'timeout=10s": context deadline exceeded' + long_tail), "error", "webhook"),
        pr("refused-runtimeclass-unquoted", refused(
            "pod rejected: RuntimeClass kata-qemu-nvidia-gpu not found"), "fail"),
        pr("kubelet-allocate-failed-long", pod(
            None, phase="Failed", reason="UnexpectedAdmissionError", containers=(), events=(),
            message="Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = "
            "failed to allocate devices: no healthy device found for nvidia.com/pgpu; devices "
            "[0000:41:00.0 0000:42:00.0] are registered as unhealthy since the last "
            "ListAndWatch update, which is unexpected" + long_tail), "fail"),
        pr("kubelet-allocate-failed-no-reason", pod(
            None, phase="Failed", containers=(), events=(), node=None, target_node="gpu-b",
            message="Allocate failed due to device plugin GetPreferredAllocation rpc failed "
            "with err: rpc error: code = Unavailable desc = error reading from server: EOF, "
            "which is unexpected"), "fail", "gpu-b"),
        pr("kubelet-out-of-gpus-long", pod(
            None, phase="Failed", reason="OutOfnvidia.com/pgpu", containers=(), events=(),
            message="Pod was rejected: Node didn't have enough resource: nvidia.com/pgpu, "
            "requested: 1, used: 1, capacity: 1" + long_tail), "fail"),
        pr("insufficient-long", unscheduled(warn(
            "FailedScheduling", "0/5 nodes are available: 2 Insufficient nvidia.com/pgpu, 3 "
            "node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. "
            "preemption: 0/5 nodes are available: 2 No preemption victims found for incoming "
            "pod, 3 Preemption is not helpful for scheduling." + long_tail, 6,
            "default-scheduler")), "fail", "advertised by gpu-a, gpu-b",
            cl=cluster(node("gpu-a", 1), node("gpu-b", 1), node("cpu-0", 0, product=None))),
        # capacity without allocatable: the device plugin marked the GPUs unhealthy; the
        # node still has them, so this is a shortage, not a missing device plugin
        pr("insufficient-unhealthy-devices", unscheduled(warn(
            "FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/pgpu. "
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming "
            "pod.", 5, "default-scheduler")), "fail", "(advertised by gpu-a)",
            cl=cluster(node("gpu-a", 2, allocatable=0))),
        # cluster-autoscaler's Normal event names a shortage too; the scheduler's Warning is
        # what stops the pod (a taint here): Normal events are history, never the cause
        pr("unschedulable-beside-autoscaler-note", unscheduled(
            warn("FailedScheduling", "0/3 nodes are available: 3 node(s) had untolerated taint "
                 "{nvidia.com/gpu: present}. preemption: 0/3 nodes are available: 3 Preemption "
                 "is not helpful for scheduling.", 4, "default-scheduler"),
            PodEvent("Normal", "NotTriggerScaleUp", "pod didn't trigger scale-up: 1 "
                     "Insufficient nvidia.com/pgpu, 2 node(s) had untolerated taint "
                     "{nvidia.com/gpu: present}", 9, "cluster-autoscaler")), "fail",
            "untolerated taint {nvidia.com/gpu: present}"),
        pr("insufficient-nodes-unlisted", unscheduled(warn(
            "FailedScheduling", "0/4 nodes are available: 4 Insufficient nvidia.com/pgpu.", 2,
            "default-scheduler")), "fail", "no node has 1 free nvidia.com/pgpu: ",
            cl=dataclasses.replace(cluster(), nodes=None)),
        # kubelet's admission-failure handler (pkg/kubelet/preemption) under the same status
        # reason as the device manager's Allocate error
        pr("kubelet-admission-preemption", pod(
            None, phase="Failed", reason="UnexpectedAdmissionError", containers=(), events=(),
            message="Pod was rejected: unexpected error while attempting to recover from "
            "admission failure: preemption: error finding a set of pods to preempt: no set of "
            "running pods found to reclaim resources: [(res: nvidia.com/pgpu, q: 1), ]"),
            "fail", "could not allocate nvidia.com/pgpu"),
        pr("kubelet-admission-no-message", pod(
            None, phase="Failed", reason="UnexpectedAdmissionError", containers=(), events=()),
            "fail", "could not allocate nvidia.com/pgpu: "),
        pr("insufficient-trailing-dot", unscheduled(warn(
            "FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/pgpu.", 1,
            "default-scheduler"), count=2), "fail", "no node has 2 free nvidia.com/pgpu"),
        pr("insufficient-other-nvidia-resource", unscheduled(warn(
            "FailedScheduling", "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.", 1,
            "default-scheduler")), "fail", "no node advertises nvidia.com/gpu",
            cl=cluster(node("gpu-a", 1))),
        pr("unschedulable-long", unscheduled(warn(
            "FailedScheduling", "0/4 nodes are available: 1 node(s) had untolerated taint "
            "{nvidia.com/gpu: present}, 3 node(s) didn't match Pod's node affinity/selector. "
            "preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling."
            + long_tail + long_tail, 3, "default-scheduler")), "fail", "untolerated taint"),
        pr("unschedulable-newest-event", unscheduled(
            warn("FailedScheduling", "0/2 nodes are available: 2 node(s) had untolerated taint "
                 "{gpu: true}.", 1, "default-scheduler"),
            warn("FailedScheduling", "0/2 nodes are available: 2 node(s) didn't match Pod's "
                 "node affinity/selector.", 1, "default-scheduler")), "fail",
            "didn't match Pod's node affinity"),
        pr("never-scheduled-no-budget", unscheduled(waited_s=None, budget_s=None), "fail"),
        pr("never-scheduled-budget-only", unscheduled(waited_s=None, budget_s=300.0), "fail",
           "within 300 s"),
        pr("dra-unallocatable-no-slices", unscheduled(warn(
            "FailedScheduling", "0/3 nodes are available: 1 cannot allocate all claims, 2 "
            "node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are "
            "available: 3 Preemption is not helpful for scheduling.", 2, "default-scheduler"),
            request_mode="claim"), "fail", "what the nodes publish was not recorded",
            profile=claim_profile()),
        pr("dra-unallocatable-none-published", unscheduled(
            warn("FailedScheduling", "0/3 nodes are available: 3 cannot allocate all claims."),
            request_mode="claim", target_node="gpu-b"), "fail",
            "no node publishes a gpu.nvidia.com device (see gpu.dra-slices)", "on gpu-b",
            cl=dra_cluster(), profile=claim_profile()),
        pr("dra-unallocatable-published", unscheduled(request_mode="dra-extended",
                                                       conditions=(PodCondition(
            "PodScheduled", "False", "Unschedulable", "0/3 nodes are available: 2 cannot "
            "allocate all claims, 1 node(s) were unschedulable." + long_tail),)), "fail",
            "nodes publishing gpu.nvidia.com devices: gpu-a, gpu-b",
            cl=dra_cluster("gpu-b", "gpu-a", "gpu-a"), profile=claim_profile()),
        pr("dra-unallocatable-no-driver-named", unscheduled(
            warn("FailedScheduling", "0/1 nodes are available: 1 cannot allocate all claims."),
            request_mode="claim"), "fail", "the profile's driver devices: gpu-a",
            cl=dra_cluster("gpu-a", driver=None), profile=claim_profile()),
        # an empty slice and another driver's slice (NVIDIA's compute-domain driver) offer no
        # GPU: only gpu-a publishes one
        pr("dra-unallocatable-empty-and-foreign-slices", unscheduled(
            warn("FailedScheduling", "0/3 nodes are available: 3 cannot allocate all claims."),
            request_mode="claim", target_node=None), "fail",
            "on its node (nodes publishing gpu.nvidia.com devices: gpu-a)",
            cl=dataclasses.replace(dra_cluster("gpu-a"), dra=DraEvidence(
                api_versions=("v1",), driver="gpu.nvidia.com", slices=(
                    DraSlice("gpu-a-gpu.nvidia.com-x", "gpu.nvidia.com", "gpu-a", 1, "gpu-a", 1),
                    DraSlice("gpu-b-gpu.nvidia.com-x", "gpu.nvidia.com", "gpu-b", 1, "gpu-b", 0),
                    DraSlice("gpu-c-compute-domain", "compute-domain.nvidia.com", "gpu-c", 1,
                             "gpu-c", 1),
                    DraSlice("all-nodes-gpu.nvidia.com", "gpu.nvidia.com", "pool-x", 1, None,
                             2)))),
            profile=claim_profile()),
        pr("dra-words-under-device-plugin", unscheduled(
            warn("FailedScheduling", "0/1 nodes are available: 1 cannot allocate all claims.")),
            "fail", "could not be scheduled: 0/1"),
        pr("handler-missing-on-target", pending(node=None, target_node="gpu-b", events=(
            warn("FailedCreatePodSandBox", SANDBOX + "failed to get sandbox runtime: no "
                 'runtime for "kata-qemu-nvidia-gpu" is configured', 7),)), "fail", "on gpu-b"),
        pr("create-timeout-long", pending(events=(warn(
            "FailedCreatePodSandBox", SANDBOX + LONG_SHIM + "CreateContainerRequest timed out: "
            "context deadline exceeded: unknown" + long_tail, 3),)), "fail"),
        pr("create-timeout-failed-create", pending(events=(warn(
            "FailedCreate", "Error: failed to create containerd task: Timeout reached after "
            "1200s waiting for the sandbox"),)), "fail", "timed out"),
        pr("create-timeout-not-a-warning", pending(events=(PodEvent(
            "Normal", "Failed", "Error: context deadline exceeded"),)), "fail",
            "did not start within 1200 s"),
        pr("sandbox-failed-long", pending(events=(warn(
            "FailedCreatePodSandBox", SANDBOX + LONG_SHIM + "Could not create the sandbox "
            "resource controller cgroups: cgroup mountpoint does not exist" + long_tail
            + long_tail, 4),)), "error", "does not recognise why"),
        # virtcontainers/qemu.go hotplugAddMemory "Add %dMB %s fail" around QEMU's ENOMEM
        # (transcription: format): the host's overcommit refusal, not the maxmem window
        pr("memory-hotplug-enomem", pending(events=(warn(
            "Failed", "Error: failed to create containerd task: failed to create shim task: "
            "Add 65536MB memory-backend-ram fail QMP command failed: cannot set up guest "
            "memory 'dimm1': Cannot allocate memory: unknown"),)), "fail",
            "could not hot-plug the pod's memory"),
        # the classifier reads status.message first: a record that carries the runtime's
        # failure there is named from it
        pr("kata-text-in-status-message", pending(message=(
            "failed to create containerd task: failed to create shim task: failed to hotplug "
            "VFIO device: QMP command failed: vfio 0000:41:00.0: group 45 is not viable"),
            events=()), "fail", "IOMMU group 45 (0000:41:00.0) is not viable"),
        # QEMU hw/vfio vfio_get_group's hint when the group is held (the group form of the
        # busy text: no /dev/vfio path in it)
        pr("vfio-group-held", pending(events=(warn(
            "FailedCreatePodSandBox", SANDBOX + "failed to create containerd task: failed to "
            "create shim task: QMP command failed: vfio 0000:41:00.0: failed to setup container "
            "for group 45: Failed to set iommu for container: Device or resource busy\nVerify "
            "all devices in group 45 are bound to vfio-<bus> or pci-stub and not already in use"),
        )), "fail", "(group 45 busy)"),
        # the open driver's refusal without its first line (the collector keeps the last 200
        # matching lines): no GPU address to name
        pr("kata-text-in-guest-dmesg-partial", pod(dataclasses.replace(
            h200_guest(), smi=None, complete=False, dmesg=(
                "[    3.40] NVRM: installed in this system is not supported by open",
                "[    3.40] NVRM: nvidia.ko because it does not include the required GPU",)),
            phase="Failed", containers=(ContainerState("collector", "terminated", "Error",
                                                       None, 1),)), "fail", "(no GSP)"),
        pr("kata-text-in-guest-dmesg", pod(dataclasses.replace(
            h200_guest(), smi=None, complete=False, dmesg=(
                "[    3.40] NVRM: The NVIDIA GPU 0000:00:06.0 (PCI ID: 10de:1db4)",
                "[    3.40] NVRM: installed in this system is not supported by open",
                "[    3.40] NVRM: nvidia.ko because it does not include the required GPU",)),
            phase="Failed", containers=(ContainerState("collector", "terminated", "Error",
                                                       None, 1),)), "fail",
           "does not support the GPU 0000:00:06.0 (10de:1db4)"),
        pr("image-invalid-name", pending(containers=(ContainerState(
            "collector", "waiting", "InvalidImageName", 'Failed to apply default image tag '
            '"nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04 ": couldn\'t parse image name: '
            "invalid reference format"),), image="nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04 "),
            "fail", "the image name is invalid"),
        pr("image-pull-other-long", pending(events=(warn(
            "Failed", 'Failed to pull image "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04": '
            "rpc error: code = Unknown desc = failed to pull and unpack image: failed to "
            "extract layer sha256:7f4e8b1c: write /var/lib/containerd/io.containerd.snapshotter"
            ".v1.overlayfs/snapshots/81/fs/usr/lib: no space left on device" + long_tail),)),
            "fail", "pull failed"),
        pr("image-pull-event-reason", pending(events=(warn(
            "ErrImagePull", "rpc error: code = Unknown desc = 403 Forbidden"),)), "fail",
            "refused the credentials"),
        pr("image-waiting-without-message", pending(containers=(ContainerState(
            "collector", "waiting", "ErrImageNeverPull"),), image="kgc-collector:local"),
            "fail", "could not pull kgc-collector:local"),
        pr("no-shell-kata-agent", pod(None, phase="Failed", containers=(ContainerState(
            "collector", "terminated", "StartError", "failed to create containerd task: failed "
            "to create shim task: the file /bin/sh was not found: unknown", 128),)),
            "fail", "has no shell"),
        pr("smi-missing-shell-words", pod(None, phase="Failed", containers=(ContainerState(
            "collector", "terminated", "Error", "/bin/sh: 1: nvidia-smi: not found", 127),)),
            "fail", "nvidia-smi is not found in kgc-run1/kgc-gpu-0"),
        pr("smi-missing-exit-127-silent", pod(dataclasses.replace(
            h200_guest(), smi=None, smi_rc=127, smi_error=None, complete=False),
            phase="Failed", image=""), "fail", "(exit 127: not found)"),
        pr("create-container-error", pod(None, phase="Pending", containers=(ContainerState(
            "collector", "waiting", "CreateContainerError", 'failed to reserve container name '
            '"collector_kgc-gpu-0_kgc-run1_3f1c_0": name "collector_kgc-gpu-0_kgc-run1_3f1c_0" '
            'is reserved for "8d0c4f"'),)), "error", "CreateContainerError"),
        pr("run-container-error", pod(None, phase="Running", containers=(ContainerState(
            "collector", "waiting", "RunContainerError", 'failed to start containerd task '
            '"8d0c4f": cannot start a stopped process: unknown', None, 2),)), "error",
            "RunContainerError"),
        pr("smi-missing-exit-127-not-run", pod(dataclasses.replace(
            h200_guest(), smi=None, smi_rc=127, smi_error="sh: 1: nvidia-smi: not found",
            complete=False), phase="Failed"), "fail", "(exit 127: sh: 1: nvidia-smi: not found)"),
        pr("oom-last-state", pod(None, phase="Running", timed_out=True, containers=(
            ContainerState("collector", "running", None, None, None, 1, "OOMKilled", 137),)),
            "fail", "was OOM-killed"),
        pr("oom-message", pod(None, phase="Failed", containers=(ContainerState(
            "collector", "terminated", "OOMKilled", "Memory cgroup out of memory: Killed "
            "process 412 (nvidia-smi)", 137),)), "fail"),
        pr("crashloop", pod(None, phase="Running", containers=(ContainerState(
            "collector", "waiting", "CrashLoopBackOff", "back-off 40s restarting failed "
            "container=collector pod=kgc-gpu-0_kgc-run1", None, 3, "Error", 2),)), "error",
            "CrashLoopBackOff"),
        pr("create-container-config-error", pod(None, phase="Pending", containers=(
            ContainerState("collector", "waiting", "CreateContainerConfigError",
                           'configmap "kgc-collector" not found'),)), "error"),
        pr("container-exit-1", pod(None, phase="Failed", containers=(ContainerState(
            "collector", "terminated", "Error", "collector: /proc/sys/kernel/osrelease: "
            "Permission denied", 1),)), "error", "the collector container failed"),
        pr("unknown-many-warnings", pending(events=(
            warn("FailedScheduling", "0/2 nodes are available: 2 Insufficient nvidia.com/pgpu.",
                 1, "default-scheduler"),
            *(warn(f"FailedMount{i}", f'MountVolume.SetUp failed for volume "v{i}" : '
                   f'configmap "c{i}" not found') for i in range(4)),
            PodEvent(None, None, "a warning without type or reason"))), "error",
            "(and 2 earlier)"),
        pr("unknown-four-warnings", pending(events=tuple(
            warn("FailedMount", f'MountVolume.SetUp failed for volume "v{i}" : configmap '
                 f'"c{i}" not found') for i in range(4))), "error", "(and 1 earlier)"),
        pr("unknown-three-warnings", pod(None, phase=None, events=tuple(
            warn("FailedMount", f'MountVolume.SetUp failed for volume "v{i}"' + long_tail * 3)
            for i in range(3))), "error", "(phase unknown)"),
        pr("unknown-unscheduled-history-kept", pod(None, phase="Failed", node=None,
                                                   conditions=SCHEDULED, events=(
            warn("FailedScheduling", "0/2 nodes are available: 2 node(s) were unschedulable."),
            warn("FailedMount", 'MountVolume.SetUp failed for volume "collector"'))), "error"),
        pr("start-timeout-no-wait", pending(waited_s=None, budget_s=None), "fail",
           "within 0 s"),
        pr("start-timeout-budget", pending(waited_s=None, budget_s=900.0,
                                           containers=(ContainerState(
                                               "collector", "waiting", "PodInitializing"),)),
           "fail", "within 900 s"),
        pr("start-timeout-no-containers", pending(containers=()), "fail"),
        pr("collector-hung-budget", pod(None, phase="Running", timed_out=True, waited_s=None,
                                        budget_s=600.0, containers=(ContainerState(
                                            "collector", "running"),)), "fail",
           "after 600 s"),
        pr("collector-hung-no-wait", pod(None, phase="Running", timed_out=True, waited_s=None,
                                         budget_s=None, containers=()), "fail", "after 0 s"),
        pr("no-output-guest-problems", pod(dataclasses.replace(
            h200_guest(), complete=False, problems=("no END record", "smi: truncated"))),
            "error", "no END record; smi: truncated"),
        pr("no-output-no-guest", pod(None, phase="Succeeded"), "error", "no log"),
        pr("no-output-log-error", pod(dataclasses.replace(h200_guest(), complete=False),
                                      log_error="the log was rotated away"), "error",
           "the log was rotated away"),
        pr("unknown-running-not-timed-out", pod(None, phase="Running", containers=(
            ContainerState("collector", "running"),)), "error", "phase Running"),
        pr("unknown-no-phase", pod(None, phase=None, containers=()), "error",
           "phase unknown"),
    ]
    return out


VECTORS: list[Vector] = [*_preflight(), *_per_pod(), *_not_run()]

__all__ = ["IMAGE", "OWN", "PER_POD", "PREFLIGHT", "RC", "VECTORS", "Vector", "mismatch"]
