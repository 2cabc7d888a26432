"""GPU scenarios of the cluster lab (``kgc lab run --scenario NAME``).

Each scenario puts the lab's simulated cluster into a documented state, runs the real gpu
layer against it **as the least-privilege ServiceAccount** of
``deploy/rbac/kgc-certify.yaml`` (the lab's authorizer and admission enforce it), and writes
``verdict.json`` (plus the profile and the evidence bundle it judged, for offline replay)
with the documented verdict of every gpu check and any mismatch:

=======================  ==============================================================
``cluster-good``         the lab as it comes up: every gpu.* passes (simulated: the
                         pods' output is the recorded H200 capture)
``no-device-plugin``     the GPU nodes advertise no GPU and no device-plugin pod runs:
                         gpu.nodes-advertise and gpu.device-plugin fail, gpu.pod-runs
                         fails classified ``no-device-plugin`` with its remediation
``runtimeclass-missing`` the profile's RuntimeClass (``kata-qemu-nvidia-gpu-snp``) is not
                         installed: gpu.runtimeclass fails naming it, the API refuses the
                         pod (gpu.pod-runs: ``runtimeclass-missing``)
``gpu-not-in-guest``     the nodes' VMs get no GPU (the recorded CPU-only capture):
                         gpu.pci-function and gpu.smi-count fail naming what is missing
``image-pull``           an image that cannot be pulled: gpu.pod-runs fails classified
                         ``image-pull`` within seconds, not at a timeout
``dra-good``             GPUs offered by DRA (the lab's stand-in driver,
                         :mod:`kgc_lab.cluster.sim_dra`: DeviceClass + ResourceSlices, no
                         device plugin), pods ask by a ResourceClaimTemplate, the real
                         scheduler allocates: every DRA and gpu check passes (simulated)
``dra-no-slices``        the DeviceClass exists, no node publishes a slice: gpu.dra-slices
                         fails naming the nodes, gpu.pod-runs ``dra-unallocatable`` (the
                         scheduler's "cannot allocate all claims"), settled at once
``dra-extended-by-name`` allocatable 0 and the DeviceClass maps ``nvidia.com/gpu``: a plain
                         request is served by DRA, gpu.nodes-advertise passes
``dra-kata-coldplug``    DRA devices on a RuntimeClass playing today's Kata (no DRA cold
                         plug): gpu.pod-runs names ``kata-dra-coldplug`` (#13322)
``cc-good``              CC asked; TRANSCRIBED CC records (SNP, ON, ready, released):
                         every gpu.cc-* passes (simulated)
``cc-off``               CC asked; transcribed records with CC OFF: gpu.cc-mode fails naming
                         the mode, gpu.cc-ready / gpu.cc-attestation fail
=======================  ==============================================================

The lab's own changes (node status, annotations, the device plugin's DaemonSet) are made
with the lab's admin credentials and undone afterwards, so scenarios can share one lab (the
self-tests do); ``kgc lab run --scenario`` starts a lab of its own for each.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kgc import kube
from kgc.core.bundle import write_bundle
from kgc.core.engine import Context
from kgc.core.layer import Scope
from kgc.core.profile import Profile, load_profile, profiles_dir
from kgc.core.registry import load_layers
from kgc.core.target import ClusterTarget
from kgc.layers.gpu.evidence import API_ONLY_CHECKS
from kgc_lab.cluster import lab as labmod
from kgc_lab.cluster import rbac, sim_dra
from kgc_lab.cluster.manifests import (
    DEVICE_PLUGIN_LABELS,
    DEVICE_PLUGIN_NAMESPACE,
    GPU_NODE_LABEL,
    UNPULLABLE_REGISTRY,
)
from kgc_lab.cluster.shape import shape_of
from kgc_lab.cluster.sim_gpu import SIM_GUEST
from kgc_lab.scenarios import (
    LabScenario,
    ScenarioOutcome,
    register_scenarios,
    write_scenario_verdict,
)

LAB = "cluster"
WAIT_S = 60.0
CHECKS = ("gpu.runtimeclass", "gpu.runtimeclass-overhead", "gpu.nodes-advertise",
          "gpu.device-plugin", "gpu.pod-runs", "gpu.in-vm", "gpu.pci-function",
          "gpu.smi-count", "gpu.mig", "gpu.product", "gpu.memory", "gpu.health", "gpu.driver",
          "gpu.cuda", "gpu.node-labels", "gpu.unique", "gpu.compute")
_GUEST_CHECKS = CHECKS[5:]
# judged only when the profile asks for them (platform.gpu.request / cluster.gpu.cc): every
# device-plugin scenario expects them skipped, each naming why
DRA_CHECKS = ("gpu.dra-api", "gpu.dra-device-class", "gpu.dra-slices", "gpu.dra-both-ways",
              "gpu.dra-allocation", "gpu.dra-device-match")
CC_CHECKS = ("gpu.cc-tee", "gpu.cc-mode", "gpu.cc-ready", "gpu.cc-attestation")


@dataclass
class LabHandle:
    """A running cluster lab: the admin client (to arrange), and the ServiceAccount's
    kubeconfig (to certify)."""

    admin: kube.Kube
    run_dir: Path
    sa_kubeconfig: Path
    cluster: Any  # ClusterProfile the lab was started with

    def gpu_nodes(self) -> list[dict[str, Any]]:
        resp: Any = self.admin.core.list_node(label_selector=f"{GPU_NODE_LABEL}=true",
                                              _preload_content=False)
        return list(json.loads(resp.data)["items"])


Arrange = Callable[[LabHandle], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def _as_is(lab: LabHandle) -> Iterator[None]:
    yield


@dataclass(frozen=True)
class GpuScenario:
    name: str
    description: str
    expected: Mapping[str, str]
    arrange: Arrange = _as_is
    gpu: Mapping[str, Any] = field(default_factory=dict)  # changes to cluster.gpu
    platform: Mapping[str, Any] = field(default_factory=dict)  # changes to platform.kata
    request: Mapping[str, Any] = field(default_factory=dict)  # changes to platform.gpu.request
    # changes to platform.gpu.device_plugin (a DRA node runs no device plugin: the DRA
    # scenarios name none, and the lab's stand-in driver has no kubelet-plugin pods to name)
    device_plugin: Mapping[str, Any] = field(default_factory=dict)
    cause: str | None = None  # the classified cause gpu.pod-runs must name


def _expect(**changes: str) -> dict[str, str]:
    out = {**dict.fromkeys(CHECKS, "pass"), **dict.fromkeys(DRA_CHECKS + CC_CHECKS, "skip")}
    out.update({k.replace("_", ".", 1).replace("_", "-"): v for k, v in changes.items()})
    return out


def _skip_guest(out: dict[str, str]) -> dict[str, str]:
    return {**out, **dict.fromkeys(_GUEST_CHECKS, "skip")}


# --------------------------------------------------------------------------- arrangements
def _plugin_pods(lab: LabHandle) -> list[Any]:
    sel = ",".join(f"{k}={v}" for k, v in DEVICE_PLUGIN_LABELS.items())
    return list(lab.admin.core.list_namespaced_pod(DEVICE_PLUGIN_NAMESPACE,
                                                   label_selector=sel).items)


@contextlib.contextmanager
def _no_device_plugin(lab: LabHandle) -> Iterator[None]:
    """The GPU nodes keep their GPU labels but advertise no GPU resource, and the device
    plugin's pods are gone (its DaemonSet selects no node)."""
    saved = {}
    ds_name = DEVICE_PLUGIN_LABELS["app"]
    for n in lab.gpu_nodes():
        name, st = n["metadata"]["name"], n["status"]
        gpu = {k: v for k, v in st.get("capacity", {}).items() if k.startswith("nvidia.com/")}
        saved[name] = (gpu, {k: v for k, v in st.get("allocatable", {}).items()
                             if k.startswith("nvidia.com/")})
        lab.admin.core.patch_node_status(name, {"status": {
            "capacity": dict.fromkeys(gpu), "allocatable": dict.fromkeys(gpu)}})
    lab.admin.apps.patch_namespaced_daemon_set(ds_name, DEVICE_PLUGIN_NAMESPACE, {
        "spec": {"template": {"spec": {"nodeSelector": {"kgc.io/no-device-plugin": "true"}}}}})
    kube.wait_for("the device plugin's pods gone", lambda: not _plugin_pods(lab)
                  or kube.NotYet([p.metadata.name for p in _plugin_pods(lab)]), WAIT_S, 0.5)
    try:
        yield
    finally:
        for name, (cap, alloc) in saved.items():
            lab.admin.core.patch_node_status(name, {"status": {"capacity": cap,
                                                               "allocatable": alloc}})
        lab.admin.apps.patch_namespaced_daemon_set(ds_name, DEVICE_PLUGIN_NAMESPACE, {
            "spec": {"template": {"spec": {"nodeSelector": {GPU_NODE_LABEL: "true",
                                                            "kgc.io/no-device-plugin": None}}}}})
        nodes = [n["metadata"]["name"] for n in lab.gpu_nodes()]
        kube.wait_for("the device plugin's pods Ready again",
                      lambda: labmod._plugin_ready(lab.admin, nodes), WAIT_S, 0.5)


def _guests(capture: str) -> Arrange:
    """Every GPU node's VMs show ``capture`` (a name of :mod:`kgc_lab.cluster.sim_gpu`)."""

    @contextlib.contextmanager
    def arrange(lab: LabHandle) -> Iterator[None]:
        names = [n["metadata"]["name"] for n in lab.gpu_nodes()]
        for name in names:
            lab.admin.core.patch_node(name, {"metadata": {"annotations": {SIM_GUEST: capture}}})
        try:
            yield
        finally:
            for name in names:
                lab.admin.core.patch_node(name, {"metadata": {"annotations": {
                    SIM_GUEST: None}}})

    return arrange


_cpu_only_guests = _guests("cpu-only-firecracker")


def _dra(*, slices: bool = True, extended: str | None = None) -> Arrange:
    """The GPU nodes offer their GPUs through DRA: no device plugin and no nvidia.com/*
    resource in their status (as on a DRA node: the scheduler hands an extended resource to
    DRA only where the node's allocatable for it is 0), the lab's stand-in driver's
    DeviceClass ``gpu.nvidia.com`` (naming ``extended`` in ``spec.extendedResourceName``)
    and, with ``slices``, one ResourceSlice per node with a device per GPU."""

    @contextlib.contextmanager
    def arrange(lab: LabHandle) -> Iterator[None]:
        per_node = shape_of(lab.cluster).gpus_per_node
        nodes = [(n["metadata"]["name"], per_node) for n in lab.gpu_nodes()]
        with _no_device_plugin(lab):
            sim_dra.unpublish(lab.admin)  # what an interrupted run left
            try:
                sim_dra.publish(lab.admin, nodes, extended_resource_name=extended,
                                slices=slices)
                yield
            finally:
                sim_dra.unpublish(lab.admin)

    return arrange


NO_PLUGIN = {"selector": None, "namespace": None}
# what the CC scenarios' profile asks: the CC records' profile part (fixtures/gpu/cc)
CC_PROFILE = {"tee": "snp", "attestation_resource": "default/gpu-key/key1"}


SCENARIOS = (
    GpuScenario(
        "cluster-good",
        "the lab as it comes up: RuntimeClass, GPU nodes, device plugin; GPU pods whose "
        "output is the recorded H200 capture (two per node, the second with a lab-varied "
        "UUID) - every gpu.* passes, marked simulated",
        _expect(),
    ),
    GpuScenario(
        "no-device-plugin",
        "GPU-labelled nodes advertise no GPU resource and no device-plugin pod runs",
        _skip_guest(_expect(gpu_nodes_advertise="fail", gpu_device_plugin="fail",
                            gpu_pod_runs="fail")),
        _no_device_plugin, cause="no-device-plugin",
    ),
    GpuScenario(
        "runtimeclass-missing",
        "the profile's RuntimeClass kata-qemu-nvidia-gpu-snp is not installed",
        _skip_guest(_expect(gpu_runtimeclass="fail", gpu_runtimeclass_overhead="skip",
                            gpu_pod_runs="fail")),
        platform={"runtime_class": "kata-qemu-nvidia-gpu-snp"}, cause="runtimeclass-missing",
    ),
    GpuScenario(
        "gpu-not-in-guest",
        "the GPU nodes' VMs get no GPU: the pods' output is the recorded CPU-only capture",
        {**_expect(gpu_pci_function="fail", gpu_smi_count="fail"),
         **dict.fromkeys(("gpu.mig", "gpu.product", "gpu.memory", "gpu.health", "gpu.driver",
                          "gpu.cuda", "gpu.node-labels", "gpu.unique", "gpu.compute"), "skip")},
        _cpu_only_guests,
    ),
    GpuScenario(
        "image-pull",
        f"the profile's image lies under {UNPULLABLE_REGISTRY}/ and cannot be pulled",
        _skip_guest(_expect(gpu_pod_runs="fail")),
        gpu={"image": f"{UNPULLABLE_REGISTRY}/nvidia/cuda:12.8.1-base-ubuntu24.04"},
        cause="image-pull",
    ),
    GpuScenario(
        "dra-good",
        "the GPU nodes offer their GPUs through DRA (the lab's stand-in driver's DeviceClass "
        "and ResourceSlices, no device plugin); GPU pods ask by a ResourceClaimTemplate, the "
        "real scheduler allocates, the guest shows the allocated GPU - every DRA and gpu "
        "check passes, marked simulated",
        {**_expect(gpu_device_plugin="skip"), **dict.fromkeys(DRA_CHECKS, "pass")},
        _dra(), request={"mode": "claim", "devices_per_node": 4}, device_plugin=NO_PLUGIN,
    ),
    GpuScenario(
        "dra-no-slices",
        "the DRA DeviceClass exists but no GPU node publishes a ResourceSlice",
        {**_skip_guest(_expect(gpu_device_plugin="skip", gpu_nodes_advertise="fail",
                               gpu_pod_runs="fail")),
         **dict.fromkeys(DRA_CHECKS, "pass"), "gpu.dra-slices": "fail",
         "gpu.dra-allocation": "fail", "gpu.dra-device-match": "skip"},
        _dra(slices=False), request={"mode": "claim"}, device_plugin=NO_PLUGIN,
        cause="dra-unallocatable",
    ),
    GpuScenario(
        "dra-extended-by-name",
        "the GPU nodes advertise no nvidia.com/gpu (allocatable 0) and the DeviceClass maps "
        "the name (spec.extendedResourceName): a plain nvidia.com/gpu request is served by "
        "DRA and gpu.nodes-advertise passes",
        {**_expect(gpu_device_plugin="skip"), **dict.fromkeys(DRA_CHECKS, "pass")},
        _dra(extended="nvidia.com/gpu"), request={"mode": "dra-extended"},
        device_plugin=NO_PLUGIN,
    ),
    GpuScenario(
        "dra-kata-coldplug",
        "DRA-allocated GPUs on the RuntimeClass kata-qemu-nvidia-gpu, which plays today's "
        "Kata (no DRA cold plug, kata-containers#13322): the container start fails with "
        "the shim's error and gpu.pod-runs names Kata's DRA cold-plug gap",
        {**_skip_guest(_expect(gpu_device_plugin="skip", gpu_pod_runs="fail")),
         **dict.fromkeys(DRA_CHECKS, "pass"), "gpu.dra-device-match": "skip"},
        _dra(), request={"mode": "claim"}, device_plugin=NO_PLUGIN,
        platform={"runtime_class": "kata-qemu-nvidia-gpu", "handler": "kata-qemu-nvidia-gpu"},
        cause="kata-dra-coldplug",
    ),
    GpuScenario(
        "cc-good",
        "confidential GPUs asked (cluster.gpu.cc: SEV-SNP, an attestation resource): the "
        "guests show the H200 capture with TRANSCRIBED CC records (SNP, CC ON, ready, "
        "resource released) - every gpu.cc-* passes, marked simulated",
        {**_expect(), **dict.fromkeys(CC_CHECKS, "pass")},
        _guests("h200-cc-snp"), gpu={"cc": CC_PROFILE},
    ),
    GpuScenario(
        "cc-off",
        "confidential GPUs asked, the guests' (transcribed) records show CC OFF: "
        "gpu.cc-mode fails naming the CC mode, gpu.cc-ready and gpu.cc-attestation fail",
        {**_expect(), "gpu.cc-tee": "pass", "gpu.cc-mode": "fail", "gpu.cc-ready": "fail",
         "gpu.cc-attestation": "fail"},
        _guests("h200-cc-off"), gpu={"cc": CC_PROFILE},
    ),
)
BY_NAME = {s.name: s for s in SCENARIOS}


# --------------------------------------------------------------------------- running
def scenario_profile(sc: GpuScenario, base: Profile | None = None) -> Profile:
    prof = base or load_profile(profiles_dir() / f"{labmod.LAB_PROFILE}.yaml")
    doc = prof.model_dump(mode="json", by_alias=True, exclude={"source"})
    doc["platform"]["kata"].update(sc.platform)
    doc["platform"]["gpu"]["request"].update(sc.request)
    doc["platform"]["gpu"]["device_plugin"].update(sc.device_plugin)
    doc["cluster"]["gpu"].update(sc.gpu)
    return Profile.model_validate(doc).model_copy(update={"source": prof.source})


def write_profile(prof: Profile, path: Path) -> Path:
    doc = prof.model_dump(mode="json", by_alias=True, exclude={"source"}, exclude_none=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _cause(results: list[dict[str, Any]]) -> str | None:
    """The cause id gpu.pod-runs classified (the first failing pod's)."""
    r = next((r for r in results if r["check"] == "gpu.pod-runs"), None)
    for pod in ((r or {}).get("evidence") or {}).get("pods", {}).values():
        cause = (pod.get("evidence") or {}).get("cause")
        if isinstance(cause, dict):
            return str(cause.get("id"))
    cause = ((r or {}).get("evidence") or {}).get("cause")
    return str(cause.get("id")) if isinstance(cause, dict) else None


def run_on_lab(sc: GpuScenario, lab: LabHandle, report_dir: Path) -> ScenarioOutcome:
    """Arrange the lab, judge the gpu layer as the ServiceAccount, write verdict.json."""
    report_dir.mkdir(parents=True, exist_ok=True)
    prof = scenario_profile(sc)
    prof_path = write_profile(prof, report_dir / f"{sc.name}.profile.yaml")
    t0 = time.monotonic()
    with sc.arrange(lab):
        ctx = Context(target=ClusterTarget(str(lab.sa_kubeconfig)), profile=prof,
                      layers=load_layers())
        verdicts = ctx.judge_all(["gpu"])
        bundle = write_bundle(report_dir / f"{sc.name}.bundle.json", scope=Scope.CLUSTER,
                              target=ctx.name, parts=ctx.record(["gpu"]),
                              meta={"lab-scenario": sc.name, "profile": prof_path.name})
    wall = round(time.monotonic() - t0, 1)
    results = [v.to_dict() for v in verdicts]
    got = {r["check"]: r["status"] for r in results}
    mismatches = {c: f"expected {want}, got {got.get(c, 'nothing')}"
                  for c, want in sc.expected.items() if got.get(c) != want}
    cause = _cause(results)
    if sc.cause is not None and cause != sc.cause:
        mismatches["gpu.pod-runs cause"] = f"expected {sc.cause}, got {cause}"
    # every pass resting on the lab's stand-ins is marked; only the RuntimeClass checks
    # (API objects of the real control plane) may pass unmarked
    unsimulated = [r["check"] for r in results if not r.get("simulated")
                   and r["status"] == "pass" and r["check"] not in API_ONLY_CHECKS]
    if unsimulated:
        mismatches["simulated"] = f"not marked simulated: {', '.join(unsimulated)}"
    path = write_scenario_verdict(
        report_dir / "verdict.json", LAB, sc.name, sc.description, results, sc.expected,
        mismatches, layers=["gpu"], cause=cause, expected_cause=sc.cause,
        identity=rbac.USER, wall_s=wall, profile_file=prof_path.name,
        bundle=bundle.name)
    return ScenarioOutcome(sc.name, LAB, path, mismatches)


@contextlib.contextmanager
def lab_for_scenarios(keep: bool = False) -> Iterator[LabHandle]:
    """A fresh lab (no KEDA) in its own run directory for one scenario, taken down
    afterwards unless ``keep`` (then ``kgc lab cluster status|down --run-dir DIR``). A lab
    someone else runs is never touched: scenarios change node status and the device
    plugin's DaemonSet while they run."""
    run_dir = Path(tempfile.mkdtemp(prefix="kgc-gpu-lab-"))
    lab = labmod.Lab(run_dir, keda=False)
    lab.up(say=lambda m: print(f"kgc lab: cluster: {m}", flush=True))
    st = labmod.status(run_dir)
    try:
        admin = kube.connect(st["kubeconfig"])
        yield handle(admin, run_dir, st["server"])
    finally:
        if keep:
            print(f"kgc lab: cluster lab left running: kgc lab cluster status --run-dir {run_dir}",
                  flush=True)
        else:
            rep = labmod.down(run_dir)
            if not rep["left"] and not rep["listening"]:
                shutil.rmtree(run_dir, ignore_errors=True)  # its PKI and token with it


def handle(admin: kube.Kube, run_dir: Path, server: str) -> LabHandle:
    """Apply the certification RBAC to the lab and mint the ServiceAccount's kubeconfig."""
    rbac.apply_certify_rbac(admin)
    sa = rbac.certify_kubeconfig(admin, server, run_dir / "pki" / "ca.crt",
                                 run_dir / "kubeconfig-kgc-certify")
    rbac.wait_policy_enforced(kube.connect(sa))
    return LabHandle(admin, run_dir, sa, labmod.lab_cluster_profile())


def _runner(sc: GpuScenario) -> Callable[[Path, bool], ScenarioOutcome]:
    def run(report_dir: Path, keep: bool) -> ScenarioOutcome:
        with lab_for_scenarios(keep) as lab:
            return run_on_lab(sc, lab, Path(report_dir))

    return run


register_scenarios(*(LabScenario(sc.name, LAB, sc.description, _runner(sc))
                     for sc in SCENARIOS))
