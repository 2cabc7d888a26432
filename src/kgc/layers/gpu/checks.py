"""Layer ``gpu`` — GPU pods get their GPU inside a real microVM (pure evaluators).

Two scopes:

- *preflight* checks judge :class:`ClusterGpuEvidence` once per cluster
  (``gpu.runtimeclass``, ``gpu.runtimeclass-overhead``, ``gpu.nodes-advertise``,
  ``gpu.device-plugin``);
- *per-pod* checks judge a :class:`PodSubject` — one GPU pod plus the run it belongs to
  (the run is needed by ``gpu.unique``: two pods on one node must not share a GPU).

:func:`inputs` turns one recorded :class:`GpuRunEvidence` into every (check, subject,
evidence) triple to judge, so live runs and replayed bundles take the same path.

The ``profile`` argument of every evaluator is the whole profile (``profile.cluster.gpu`` is
read) or a bare :class:`GpuProfile`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kgc.core.model import (
    Check,
    Outcome,
    Registry,
    Severity,
    Status,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from kgc.core.profile import layer_section
from kgc.evidence.guest import GuestEvidence, GuestPciFunction
from kgc.evidence.present import present
from kgc.kube.origin import played_by
from kgc.layers.gpu import dra as _dra
from kgc.layers.gpu import smi as nvsmi
from kgc.layers.gpu.classify import _DRA_FIX, classify, pod_ran, smi_missing
from kgc.layers.gpu.evidence import (
    ClusterGpuEvidence,
    GpuPodEvidence,
    GpuRunEvidence,
    NodeInfo,
)
from kgc.layers.gpu.profile import GpuProfile, parse_version

CHECKS = Registry()

Scope = Literal["cluster", "pod"]
SCOPE: dict[str, Scope] = {}


def _scoped(scope: Scope, id_: str, **kw: Any) -> Any:
    def deco(fn: Any) -> Check:
        SCOPE[id_] = scope
        return CHECKS.check(id_, **kw)(fn)

    return deco


def settings(profile: Any) -> GpuProfile:
    """The GPU settings of a whole profile (``cluster.gpu``) or a bare GpuProfile
    (:func:`kgc.core.profile.layer_section`)."""
    return layer_section(profile, "gpu", GpuProfile)


@dataclass(frozen=True)
class PodSubject:
    """What a per-pod check judges: one pod (None when the run created none) and its run."""

    pod: GpuPodEvidence | None
    run: GpuRunEvidence

    @property
    def others(self) -> tuple[GpuPodEvidence, ...]:
        return tuple(p for p in self.run.pods if p is not self.pod)


def _pod_ev(pod: GpuPodEvidence) -> dict[str, Any]:
    ev: dict[str, Any] = {"pod": pod.ref, "node": pod.node or pod.target_node}
    played = played_by((e.reason, e.source) for e in pod.events)
    if played:  # the pod's own events say its containers were played, not run
        ev["stand_in"] = played
    return ev


def _no_pod_why(run: GpuRunEvidence) -> str:
    return "; ".join(run.plan_notes) or "the run created no GPU pod"


def _ran(subj: PodSubject) -> tuple[GpuPodEvidence, GuestEvidence] | Outcome:
    """The pod and its guest evidence, or the skip that says why there is none."""
    pod = subj.pod
    if pod is None:
        return skipped(f"no GPU pod ran: {_no_pod_why(subj.run)} (see gpu.pod-runs)")
    if not pod_ran(pod):
        cause = classify(pod, subj.run.cluster)
        return skipped(f"{pod.ref} did not run, so there is no guest to judge "
                       f"(see gpu.pod-runs: {cause.id})", **_pod_ev(pod))
    assert pod.guest is not None  # pod_ran() guarantees it
    return pod, pod.guest


# =========================================================================== preflight
@_scoped(
    "cluster",
    "gpu.runtimeclass",
    title="The profile's RuntimeClass exists with the expected Kata handler",
    remediation="Install Kata with kata-deploy (it creates the RuntimeClasses) or create the "
    "RuntimeClass the profile names, with the containerd handler that runs Kata.",
    severity=Severity.BLOCKER,
)
def runtimeclass(ev: ClusterGpuEvidence, profile: Any) -> Outcome:
    gp = settings(profile)
    if ev.runtime_classes is None:
        return errored(
            f"RuntimeClasses could not be listed: {ev.errors.get('runtime_classes', 'no reason')}",
            "Grant the run's ServiceAccount list on runtimeclasses.node.k8s.io (see the RBAC "
            "manifest shipped with kgc).",
        )
    names = sorted(r.name for r in ev.runtime_classes)
    rc = ev.runtime_class(gp.runtime_class)
    if rc is None:
        return failed(
            f"RuntimeClass {gp.runtime_class!r} does not exist (the cluster has: "
            f"{', '.join(names) or 'none'})",
            f"Create RuntimeClass {gp.runtime_class} with handler {gp.expected_handler} "
            "(kata-deploy installs kata-qemu-nvidia-gpu and its variants), or set "
            "platform.kata.runtime_class to one of: " + (", ".join(names) or "(none exist)"),
            expected=f"RuntimeClass {gp.runtime_class}", found=", ".join(names) or "none",
            runtime_classes=names,
        )
    if rc.handler != gp.expected_handler:
        return failed(
            f"RuntimeClass {rc.name} has handler {rc.handler!r}, expected "
            f"{gp.expected_handler!r}",
            f"Set handler: {gp.expected_handler} in RuntimeClass {rc.name} (it must name the "
            "containerd runtime that runs Kata with the NVIDIA GPU config), or set "
            "platform.kata.handler if the cluster is right.",
            expected=gp.expected_handler, found=str(rc.handler), runtime_class=rc.to_dict(),
        )
    return passed(f"RuntimeClass {rc.name} uses handler {rc.handler}",
                  expected=gp.expected_handler, found=rc.handler, runtime_class=rc.to_dict())


@_scoped(
    "cluster",
    "gpu.runtimeclass-overhead",
    title="The RuntimeClass declares overhead.podFixed (the VMM's own CPU and memory)",
    remediation="Add overhead.podFixed (cpu and memory) to the RuntimeClass so the scheduler "
    "accounts for the VMM beside the pod's requests.",
    severity=Severity.NORMAL,
)
def runtimeclass_overhead(ev: ClusterGpuEvidence, profile: Any) -> Outcome:
    gp = settings(profile)
    rc = ev.runtime_class(gp.runtime_class) if ev.runtime_classes is not None else None
    if rc is None:
        return skipped(f"RuntimeClass {gp.runtime_class!r} is not available "
                       "(see gpu.runtimeclass)")
    if not gp.require_overhead:
        return skipped("the profile does not require an overhead "
                       "(cluster.gpu.require_overhead: false)", overhead=dict(rc.overhead))
    fix = (f"Add to RuntimeClass {rc.name}: overhead: {{podFixed: {{cpu: \"1\", memory: "
           "10240Mi}} (kata-deploy's values for the NVIDIA GPU classes; 250m/320Mi for plain "
           "QEMU). Without it the scheduler and the pod cgroup ignore the VMM's footprint.")
    missing = [k for k in ("cpu", "memory") if k not in rc.overhead]
    if len(missing) == 2:
        return failed(f"RuntimeClass {rc.name} declares no overhead.podFixed", fix,
                      expected="overhead.podFixed with cpu and memory", found="none")
    if missing:
        return warned(f"RuntimeClass {rc.name} overhead.podFixed lacks {missing[0]} "
                      f"(has {dict(rc.overhead)})", fix,
                      expected="cpu and memory", found=", ".join(sorted(rc.overhead)))
    return passed(f"RuntimeClass {rc.name} overhead.podFixed: cpu {rc.overhead['cpu']}, "
                  f"memory {rc.overhead['memory']}", overhead=dict(rc.overhead))


def gpu_nodes(ev: ClusterGpuEvidence, gp: GpuProfile) -> tuple[list[tuple[NodeInfo, str, int]],
                                                                 list[tuple[NodeInfo, str]]]:
    """(nodes advertising a GPU resource with capacity and allocatable > 0, as (node,
    resource, allocatable)), (GPU nodes by label or capacity that advertise none usable,
    with what is wrong). Nodes outside ``cluster.gpu.node_selector`` are ignored."""
    good: list[tuple[NodeInfo, str, int]] = []
    bad: list[tuple[NodeInfo, str]] = []
    for n in ev.nodes or ():
        if any(n.labels.get(k) != v for k, v in gp.node_selector.items()):
            continue
        offered = [(r, n.count(r, "capacity") or 0, n.count(r) or 0) for r in gp.resources
                   if r in n.capacity or r in n.allocatable]
        usable = [(r, a) for r, c, a in offered if c > 0 and a > 0]
        if usable:
            good.append((n, usable[0][0], usable[0][1]))
            continue
        labelled = gp.label_matches(dict(n.labels))
        others = {k: v for k, v in n.gpu_resources().items() if k not in gp.resources}
        if offered:
            what = ", ".join(f"{r} capacity {c}, allocatable {a}" for r, c, a in offered)
            bad.append((n, f"advertises {what}"))
        elif labelled or others:
            why = f"labelled {', '.join(labelled)}" if labelled else "has GPUs"
            extra = (f"; it advertises {', '.join(f'{k}={v}' for k, v in others.items())} "
                     "instead") if others else ""
            bad.append((n, f"{why} but advertises none of {', '.join(gp.resources)}{extra}"))
    return good, bad


@_scoped(
    "cluster",
    "gpu.nodes-advertise",
    title="GPU nodes advertise the GPU resource with capacity and allocatable > 0 (under DRA: "
    "publish it as ResourceSlice devices, allocatable 0)",
    remediation="Deploy the device plugin that exposes passthrough GPUs on every GPU node "
    "(under DRA: the DRA driver, whose kubelet plugin publishes them).",
    severity=Severity.BLOCKER,
)
def nodes_advertise(ev: ClusterGpuEvidence, profile: Any) -> Outcome:
    gp = settings(profile)
    if gp.request.dra:  # DRA: allocatable 0 by design, the GPUs are ResourceSlice devices
        return _dra.nodes_advertise_dra(ev, gp)
    if ev.nodes is None:
        return errored(f"nodes could not be listed: {ev.errors.get('nodes', 'no reason')}",
                       "Grant the run's ServiceAccount list on nodes (see the RBAC manifest).")
    good, bad = gpu_nodes(ev, gp)
    rows = {n.name: f"{r}={a}" for n, r, a in good}
    rows.update({n.name: why for n, why in bad})
    res = " or ".join(gp.resources)
    plugin_fix = (
        f"Deploy the device plugin for VFIO passthrough so these nodes advertise {res} "
        "(NVIDIA GPU Operator with sandboxWorkloads.enabled=true runs "
        "nvidia-sandbox-device-plugin; kubevirt-gpu-device-plugin also works), or set "
        "platform.gpu.resources to the name the nodes advertise. Allocatable below capacity "
        "means the plugin reports devices unhealthy: read its log."
    )
    if not good and not bad:
        sel = f" matching {gp.node_selector}" if gp.node_selector else ""
        return failed(
            f"no node{sel} advertises {res} or carries a GPU label "
            f"({', '.join(gp.gpu_node_labels)}); {len(ev.nodes)} node(s) in the cluster",
            plugin_fix, expected=f"nodes with {res} > 0", found="none", nodes=rows,
        )
    if bad:
        what = "; ".join(f"{n.name} {why}" for n, why in bad)
        fine = ", ".join(f"{rows[n.name]} on {n.name}" for n, _, _ in good)
        ok = f" ({len(good)} node(s) do: {fine})" if good else ""
        return failed(f"{len(bad)} GPU node(s) advertise no usable GPU: {what}{ok}", plugin_fix,
                      expected=f"{res} capacity and allocatable > 0 on every GPU node",
                      found=what, nodes=rows)
    return passed(f"{len(good)} GPU node(s) advertise GPUs: "
                  + ", ".join(f"{n.name} {r}={a}" for n, r, a in good),
                  nodes=rows)


@_scoped(
    "cluster",
    "gpu.device-plugin",
    title="The device plugin's pods are Ready on every GPU node",
    remediation="Fix the device plugin DaemonSet so that one Ready pod runs on each GPU node.",
    severity=Severity.CRITICAL,
)
def device_plugin(ev: ClusterGpuEvidence, profile: Any) -> Outcome:
    gp = settings(profile)
    if gp.device_plugin_selector is None:
        if gp.request.dra:
            return skipped(f"platform.gpu.request.mode: {gp.request.mode}: GPUs are allocated "
                           "by DRA, no device plugin is required (see gpu.dra-slices)")
        return skipped("platform.gpu.device_plugin.selector is not set: the profile does not "
                       "say which pods are the device plugin")
    if ev.plugin_pods is None:
        return errored(
            f"device-plugin pods ({gp.device_plugin_selector}) could not be listed: "
            f"{ev.errors.get('plugin_pods', 'no reason')}",
            "Grant the run's ServiceAccount list on pods in the device plugin's namespace.",
        )
    if ev.nodes is None:
        return errored(f"nodes could not be listed: {ev.errors.get('nodes', 'no reason')}")
    if gp.request.dra:  # the selected pods (the DRA driver's kubelet plugin) on DRA GPU nodes
        nodes = [n.name for n in _dra.dra_gpu_nodes(ev, gp)]
    else:
        good, bad = gpu_nodes(ev, gp)
        nodes = [n.name for n, _, _ in good] + [n.name for n, _ in bad]
    if not nodes:
        return skipped("no GPU node found to check the device plugin on (see gpu.nodes-advertise)")
    by_node: dict[str, list[Any]] = {}
    for p in ev.plugin_pods:
        by_node.setdefault(p.node or "", []).append(p)
    missing, unready = [], []
    for name in nodes:
        pods = by_node.get(name, [])
        if not pods:
            missing.append(name)
        elif not any(p.ready for p in pods):
            unready.append(", ".join(f"{p.namespace}/{p.name} on {name} "
                                     f"({p.phase or '?'}{', ' + p.waiting if p.waiting else ''})"
                                     for p in pods))
    rows = {n: [p.name + (" Ready" if p.ready else " not Ready") for p in by_node.get(n, [])]
            for n in nodes}
    ns = f" in {gp.device_plugin_namespace}" if gp.device_plugin_namespace else ""
    if missing or unready:
        parts = []
        if missing:
            parts.append(f"no pod matching {gp.device_plugin_selector}{ns} on {', '.join(missing)}")
        if unready:
            parts.append("not Ready: " + "; ".join(unready))
        if gp.request.dra:
            what = (f"DRA kubelet plugin (platform.gpu.device_plugin.selector under "
                    f"platform.gpu.request.mode: {gp.request.mode})")
            fix = ("Under DRA this check looks for the DRA driver's kubelet-plugin pods on the "
                   "nodes that publish devices: check that DaemonSet (kubectl get ds -A -l "
                   f"{gp.device_plugin_selector}; NVIDIA's driver runs it as the "
                   "nvidia-dra-driver-gpu kubelet plugin) and read its log; if the selector "
                   "names a device plugin (DRA nodes run none), set "
                   "platform.gpu.device_plugin.selector to the DRA plugin's pod labels, or to "
                   "null.")
        else:
            what = "device plugin"
            fix = ("Check the device plugin DaemonSet (kubectl get ds -A -l "
                   f"{gp.device_plugin_selector}): its nodeSelector/tolerations must cover the "
                   "GPU nodes (the GPU Operator schedules the sandbox plugin only on nodes "
                   "labelled nvidia.com/gpu.workload.config=vm-passthrough); for a pod that is "
                   "not Ready read its log.")
        return failed(f"{what}: " + "; ".join(parts), fix,
                      expected=f"a Ready pod on each of {', '.join(nodes)}",
                      found="; ".join(parts), pods=rows)
    return passed(f"device plugin Ready on {len(nodes)} GPU node(s): {', '.join(nodes)}",
                  pods=rows)


# the DRA preflight: gpu.dra-api, gpu.dra-device-class, gpu.dra-slices, gpu.dra-both-ways
_dra.register(_scoped)


# =========================================================================== per pod
def _requested(pod: Any) -> str:
    """What the pod asked for its GPU: under ``claim`` a ResourceClaim (the extended resource
    the plan recorded is not in its spec), else the extended resource (under
    ``dra-extended`` served by DRA)."""
    if pod.request_mode == "claim":
        names = ", ".join(c.name for c in pod.claims if c.name) or "not read back"
        return f"a DRA ResourceClaim for {pod.count} device(s) (claim {names})"
    via = " (served by DRA)" if pod.request_mode == "dra-extended" else ""
    return f"{pod.count} {pod.resource}{via}"


@_scoped(
    "pod",
    "gpu.pod-runs",
    title="A GPU pod with the Kata RuntimeClass starts, runs the collector and completes",
    remediation="See the named cause.",
    severity=Severity.BLOCKER,
)
def pod_runs(subj: PodSubject, profile: Any) -> Outcome:
    pod = subj.pod
    if pod is None:
        # the layer's subject is missing: without a pod nothing below was judged, and the
        # preflight alone must not certify the layer
        return errored(
            f"no GPU pod was run or recorded: {_no_pod_why(subj.run)}",
            "Make the run create its GPU pod: nodes must advertise the profile's GPU resource "
            "(see gpu.nodes-advertise, platform.gpu.resources and node_selector); a bundle "
            "whose gpu record has no pod cannot certify the layer — record it again with "
            "`kgc snapshot --kubeconfig`.",
        )
    if pod_ran(pod):
        took = f" in {pod.waited_s:.1f} s" if pod.waited_s is not None else ""
        return passed(f"{pod.ref} ran on {pod.node} with RuntimeClass {pod.runtime_class} and "
                      f"{_requested(pod)}{took}", **_pod_ev(pod))
    cause = classify(pod, subj.run.cluster)
    evidence = {
        **_pod_ev(pod),
        "cause": cause.to_dict(),
        "phase": pod.phase,
        "conditions": [c.to_dict() for c in pod.conditions],
        "containers": [c.to_dict() for c in pod.containers],
        "events": [e.describe() for e in pod.events],
    }
    if cause.status is Status.ERROR:
        return errored(cause.summary, cause.remediation, **evidence)
    return failed(cause.summary, cause.remediation, expected="pod Succeeded with collector output",
                  found=cause.id, **evidence)


def not_a_vm(pod: Any, g: Any) -> list[str]:
    """Why the pod's sandbox is not a VM ([] when nothing says so): it runs the node's own
    kernel (runc), gVisor's, or sees the host's IOMMU groups. The CPU's hypervisor flag
    cannot tell: a node that is itself a VM shows it to a runc container too."""
    problems = []
    if g.kernel and pod.node_kernel and g.kernel.strip() == pod.node_kernel.strip():
        problems.append(f"the pod's kernel {g.kernel} is the node's own kernel: the container "
                        "shares the host kernel (runc?)")
    if g.gvisor:
        problems.append(f"kernel {g.kernel} is gVisor's, a user-space sandbox, not a VM")
    if g.iommu_groups:
        problems.append(f"the pod sees {len(g.iommu_groups)} IOMMU group(s): the host's /sys, "
                        "not a guest's")
    return problems


@_scoped(
    "pod",
    "gpu.in-vm",
    title="The GPU pod runs in a VM: its kernel is not the node's and it has no IOMMU groups",
    remediation="Run GPU pods with the Kata RuntimeClass; check its handler runs Kata.",
    severity=Severity.BLOCKER,
)
def in_vm(subj: PodSubject, profile: Any) -> Outcome:
    got = _ran(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    ev = {**_pod_ev(pod), "guest_kernel": g.kernel, "node_kernel": pod.node_kernel,
          "guest_iommu_groups": None if g.iommu_groups is None else len(g.iommu_groups),
          "hypervisor_flag": g.hypervisor_flag}
    if pod.node_kernel is None:
        return errored(f"the kernel of node {pod.node} (status.nodeInfo.kernelVersion) was not "
                       "recorded; cannot compare", **ev)
    if g.kernel is None:
        return errored(f"{pod.ref}: the collector reported no kernel release "
                       "(/proc/sys/kernel/osrelease, uname -r)", **ev)
    if g.iommu_groups is None and not g.pci_listed:
        return errored(f"{pod.ref}: the guest's /sys was not readable (no PCI listing, no "
                       "/sys/kernel/iommu_groups); cannot tell a VM from the host", **ev)
    problems = not_a_vm(pod, g)
    if problems:
        return failed(
            f"{pod.ref} on {pod.node} is not in a VM: " + "; ".join(problems),
            f"Check RuntimeClass {pod.runtime_class}: its handler must be a Kata runtime in "
            f"containerd on {pod.node} (runtime_type io.containerd.kata.v2), not runc or runsc "
            "(see runtime.kata-handler).",
            expected=f"guest kernel != {pod.node_kernel}, no IOMMU groups in the guest",
            found=f"guest kernel {g.kernel}, {len(g.iommu_groups or ())} IOMMU group(s)", **ev,
        )
    return passed(f"{pod.ref} runs guest kernel {g.kernel} (node: {pod.node_kernel}) with no "
                  "IOMMU groups of its own", **ev)


def _bar_problem(fn: GuestPciFunction) -> str | None:
    if fn.bars is None:
        return f"{fn.bdf}: its BARs could not be read (resource file missing)"
    mem = [b for b in fn.bars if b.is_mem and b.index != 6]
    bar0 = next((b for b in mem if b.index == 0), None)
    pref = [b for b in mem if b.prefetch and b.assigned]
    if bar0 is None or not bar0.assigned:
        return f"{fn.bdf}: BAR0 (registers) is not assigned"
    if not pref:
        return f"{fn.bdf}: no prefetchable BAR (the VRAM aperture) is assigned"
    return None


@_scoped(
    "pod",
    "gpu.pci-function",
    title="The GPU is an NVIDIA (10de) PCI function inside the guest, with its BARs assigned",
    remediation="Check the VFIO plug configuration of Kata (cold_plug_vfio=root-port).",
    severity=Severity.BLOCKER,
)
def pci_function(subj: PodSubject, profile: Any) -> Outcome:
    got = _ran(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    if not g.pci_listed:
        return errored(f"{pod.ref}: the guest's /sys/bus/pci/devices was not listed",
                       **_pod_ev(pod))
    gpus = sorted(g.nvidia_gpus, key=lambda d: d.bdf)
    rows = {d.bdf: {"id": d.ident, "class": d.pci_class, "driver": d.driver,
                    "bars": [b.describe() for b in d.bars or ()]} for d in gpus}
    ev = {**_pod_ev(pod), "gpus": rows}
    if len(gpus) < pod.count:
        seen = ", ".join(d.describe() for d in g.pci) or "none"
        return failed(
            f"{pod.ref} requested {pod.count} {pod.resource} but the guest has "
            f"{len(gpus)} NVIDIA GPU PCI function(s) (vendor 10de, class 03xx); it sees: {seen}",
            _DRA_FIX.format(node=pod.node or "the node") if pod.request_mode != "device-plugin"
            else
            f"The GPU was not passed into the VM: the device plugin's allocation must reach Kata "
            f"as a VFIO device (CDI annotation or /dev/vfio/<group> in the container spec); check "
            f"cold_plug_vfio in the Kata config on {pod.node} (see runtime.kata-vfio) and the Kata "
            "shim log.",
            expected=f">= {pod.count} PCI function(s) 10de:* class 03xx",
            found=f"{len(gpus)}", **ev, pci=[d.describe() for d in g.pci],
        )
    probs = [p for p in (_bar_problem(d) for d in gpus) if p]
    if probs:
        dm = [ln for ln in g.dmesg or () if "no space" in ln or "failed to assign" in ln][:10]
        return failed(
            f"{pod.ref}: " + "; ".join(probs)
            + (f" (guest kernel: {dm[0]})" if dm else ""),
            "The guest could not place the GPU's BARs: Kata's NVIDIA configs plug the GPU on a "
            "PCIe root port (cold_plug_vfio=\"root-port\", pcie_root_port >= 1) and boot the "
            "guest with pci=realloc so the 64-bit window fits the VRAM aperture.",
            expected="BAR0 and a prefetchable BAR assigned", found="; ".join(probs),
            **ev, dmesg=dm,
        )
    desc = "; ".join(f"{d.bdf} [{d.ident}] " + ", ".join(b.describe() for b in d.bars or ()
                                                        if b.is_mem and b.index != 6)
                     for d in gpus)
    return passed(f"{len(gpus)} NVIDIA GPU function(s) in the guest: {desc}", **ev)


def _smi_named(pod: GpuPodEvidence, g: GuestEvidence, code: str) -> Outcome | None:
    """The failure nvidia-smi names (NVML's own words, :data:`kgc.layers.gpu.smi.
    NVML_FAILURES`), as the outcome that says so; None when no line names one."""
    named = nvsmi.named_failures([g.smi_error, *g.smi_messages])
    if not named:
        return None
    f, line = named[0]
    more = [ln for _, ln in named[1:]]
    return failed(
        f"{pod.ref}: nvidia-smi {code}: {f.meaning} (\"{line}\")"
        + (f"; also: {'; '.join(more)}" if more else ""),
        f.fix, expected="nvidia-smi reports every GPU", found=f.id, **_pod_ev(pod),
        nvml=[line, *more], smi_failure=f.id, source=f.source,
        dmesg=[ln for ln in g.dmesg or () if "NVRM" in ln][:10],
    )


def _smi(pod: GpuPodEvidence, g: GuestEvidence) -> Outcome | None:
    """None when nvidia-smi reported; else the outcome that says why it did not."""
    miss = smi_missing(pod)
    if miss is not None:
        return failed(miss.summary, miss.remediation, expected="nvidia-smi in the container",
                      found="exit 127", **_pod_ev(pod))
    if g.smi_rc is not None and g.smi_rc != 0:
        if g.smi_rc == 124:
            return failed(f"{pod.ref}: nvidia-smi did not answer within the collector's timeout",
                          "The driver in the guest hangs: read the guest's NVRM messages "
                          "(dmesg) and the Kata shim log.", **_pod_ev(pod))
        named = _smi_named(pod, g, f"failed (exit {g.smi_rc})")
        if named is not None:
            return named
        return failed(
            f"{pod.ref}: nvidia-smi failed (exit {g.smi_rc}): {g.smi_error}",
            "nvidia-smi runs but cannot talk to a GPU: the NVIDIA driver in the guest did not "
            "bind the passed-through device (guest dmesg: NVRM), or the container lacks "
            "/dev/nvidia* (the toolkit in the guest injects them).",
            expected="nvidia-smi exit 0", found=f"exit {g.smi_rc}", **_pod_ev(pod),
            dmesg=[ln for ln in g.dmesg or () if "NVRM" in ln][:10],
        )
    if g.smi_xml_error is not None:
        return errored(f"{pod.ref}: nvidia-smi -q -x printed a report kgc cannot use: "
                       f"{g.smi_xml_error}",
                       "Run `nvidia-smi -q -x` in a pod on that node by hand: a report that "
                       "is cut short means nvidia-smi or the collector was killed mid-way "
                       "(the collector's timeout, the pod's memory limit).", **_pod_ev(pod))
    if g.smi is None:
        return errored(f"{pod.ref}: nvidia-smi printed no report kgc could parse "
                       f"({'; '.join(g.problems) or 'no output'})", **_pod_ev(pod))
    return None


@_scoped(
    "pod",
    "gpu.smi-count",
    title="nvidia-smi in the pod sees exactly the requested number of GPUs",
    remediation="Make the device plugin pass exactly the requested GPUs into the VM.",
    severity=Severity.BLOCKER,
)
def smi_count(subj: PodSubject, profile: Any) -> Outcome:
    got = _ran(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    bad = _smi(pod, g)
    if bad is not None:
        return bad
    assert g.smi is not None
    seen = [x.describe() for x in g.smi.gpus]
    ev = {**_pod_ev(pod), "gpus": seen, "attached_gpus": g.smi.attached_gpus,
          "nvml": list(g.smi_messages)}
    n = len(g.smi.gpus)
    attached = g.smi.attached_gpus
    if attached is None:
        return errored(f"{pod.ref}: nvidia-smi's report has no attached_gpus count kgc can "
                       f"read (it lists {n} GPU(s)): cannot tell whether it lists every "
                       "attached GPU", **ev)
    if attached != n:
        named = _smi_named(pod, g, f"lists {n} of its {attached} attached GPU(s)")
        if named is not None:
            return named
        return failed(
            f"{pod.ref}: nvidia-smi reports {attached} attached GPU(s) but lists {n}: "
            + (", ".join(seen) or "none") + "; the driver has GPU(s) NVML cannot read",
            "An attached GPU that nvidia-smi does not list could not be opened (lost, or not "
            "initialized): read the guest's kernel log (dmesg: NVRM, Xid) and run "
            "`nvidia-smi -q` in a pod on that node.",
            expected=f"attached_gpus = listed GPUs = {pod.count}",
            found=f"attached_gpus {attached}, listed {n}", **ev,
        )
    if n != pod.count:
        more = n > pod.count
        return failed(
            f"{pod.ref} requested {pod.count} {pod.resource}; nvidia-smi sees {n}: "
            + (", ".join(seen) or "none"),
            ("The VM got more GPUs than requested: another allocation leaked into this sandbox "
             "(check the device plugin and Kata's cold-plug of all VFIO devices of the node)."
             if more else
             "The VM got fewer GPUs than requested: some passed-through devices did not bind "
             "the NVIDIA driver in the guest (dmesg: NVRM) or were not plugged "
             "(see gpu.pci-function)."),
            expected=str(pod.count), found=str(n), **ev,
        )
    lost = _smi_named(pod, g, f"lists all {n} GPU(s) but says")
    if lost is not None:  # e.g. a GPU lost beside the ones listed
        return lost
    return passed(f"nvidia-smi sees {n} GPU(s) as requested (attached_gpus {attached}): "
                  f"{', '.join(seen)}", **ev)


def _smi_gpus(subj: PodSubject) -> tuple[GpuPodEvidence, GuestEvidence] | Outcome:
    got = _ran(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    if g.smi is None or not g.smi.gpus:
        return skipped(f"{pod.ref}: no nvidia-smi report of a GPU (see gpu.smi-count)",
                       **_pod_ev(pod))
    return pod, g


@_scoped(
    "pod",
    "gpu.product",
    title="The GPU model is the one the profile expects",
    remediation="Run the suite against nodes with the expected GPU model, or fix the profile.",
    severity=Severity.CRITICAL,
)
def product(subj: PodSubject, profile: Any) -> Outcome:
    gp = settings(profile)
    got = _smi_gpus(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    assert g.smi is not None
    names = [x.product_name for x in g.smi.gpus]
    if gp.product_pattern is None:
        return skipped(f"cluster.gpu.product_pattern is not set (the guest sees "
                       f"{', '.join(n or '?' for n in names)})", **_pod_ev(pod))
    rx = re.compile(gp.product_pattern, re.I)
    bad = [n for n in names if n is None or not rx.search(n)]
    if bad:
        return failed(
            f"{pod.ref}: GPU model {', '.join(repr(n) for n in bad)} does not match "
            f"{gp.product_pattern!r}",
            f"Node {pod.node} has a different GPU than the profile certifies: target the right "
            "nodes (cluster.gpu.node_selector) or correct cluster.gpu.product_pattern.",
            expected=gp.product_pattern, found=", ".join(str(n) for n in names), **_pod_ev(pod),
        )
    return passed(f"GPU model {', '.join(str(n) for n in names)} matches {gp.product_pattern!r}",
                  expected=gp.product_pattern, found=", ".join(str(n) for n in names),
                  **_pod_ev(pod))


@_scoped(
    "pod",
    "gpu.mig",
    title="The pod's workload gets what the profile expects of each GPU: the whole GPU, or "
    "MIG devices (MIG mode current and pending)",
    remediation="Set the GPUs' MIG mode to what the profile expects (cluster.gpu.allocation).",
    severity=Severity.CRITICAL,
)
def mig(subj: PodSubject, profile: Any) -> Outcome:
    gp = settings(profile)
    got = _smi_gpus(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    assert g.smi is not None
    states = {x.name: nvsmi.mig_state(x) for x in g.smi.gpus}
    ev = {**_pod_ev(pod), "mig": states,
          "mig_devices": {x.name: [m.describe() for m in x.mig_devices or ()]
                          for x in g.smi.gpus if x.mig_devices}}
    found = "; ".join(f"{k}: {v}" for k, v in states.items())
    unknown = [x.name for x in g.smi.gpus if x.mig_current is None]
    if unknown and g.smi.source == "xml":
        return errored(f"{pod.ref}: nvidia-smi's report has no MIG mode (mig_mode/current_mig) "
                       f"for {', '.join(unknown)}: cannot tell a whole GPU from a MIG slice",
                       **ev)
    if unknown:  # the CSV fallback carries no MIG mode
        return skipped(f"{pod.ref}: nvidia-smi's CSV query (used instead of -q -x) carries no "
                       "MIG mode", **ev)
    want = gp.allocation
    if want == "whole":
        sliced = [x for x in g.smi.gpus
                  if x.mig_enabled or (x.mig_pending or "").lower() == "enabled"]
        if sliced:
            what = "; ".join(f"{x.name}: {states[x.name]}" for x in sliced)
            return failed(
                f"{pod.ref}: the workload does not get the whole GPU: {what}",
                "The GPU is in MIG mode (or will be after its next reset): CUDA in the pod sees "
                "its MIG devices (none when no GPU instance exists), not the whole GPU. On the "
                "host, disable MIG (nvidia-smi -i <gpu> -mig 0, then reset the GPU; with the GPU "
                "Operator set the node label nvidia.com/mig.config=all-disabled), or set "
                "cluster.gpu.allocation: mig if slices are what this platform certifies.",
                expected="MIG disabled (current and pending)", found=found, **ev,
            )
        return passed(f"the workload gets the whole GPU: {found}",
                      expected="MIG disabled (current and pending)", found=found, **ev)
    not_mig = [x for x in g.smi.gpus if not x.mig_enabled]
    empty = [x for x in g.smi.gpus if x.mig_enabled and not x.mig_devices]
    pending_off = [x for x in g.smi.gpus if x.mig_enabled
                   and (x.mig_pending or "").lower() == "disabled"]
    if not_mig or empty:
        parts = [f"{x.name} is not in MIG mode ({states[x.name]})" for x in not_mig]
        parts += [f"{x.name} is in MIG mode with no MIG device: CUDA sees no device"
                  for x in empty]
        return failed(
            f"{pod.ref}: the profile expects MIG devices: " + "; ".join(parts),
            "Enable MIG on the host and create the GPU and compute instances the platform "
            "certifies (nvidia-smi mig -cgi <profiles> -C; with the GPU Operator the node label "
            "nvidia.com/mig.config), or set cluster.gpu.allocation: whole.",
            expected="MIG enabled with >= 1 MIG device", found=found, **ev,
        )
    if pending_off:
        return warned(
            f"{pod.ref}: MIG is enabled now but pending disabled: "
            + "; ".join(f"{x.name}: {states[x.name]}" for x in pending_off),
            "The next GPU reset turns MIG off and the pods get whole GPUs: set the pending MIG "
            "mode back to enabled on the host (nvidia-smi -i <gpu> -mig 1).",
            expected="MIG enabled (current and pending)", found=found, **ev,
        )
    return passed(f"the workload gets MIG devices: {found}",
                  expected="MIG enabled with >= 1 MIG device", found=found, **ev)


@_scoped(
    "pod",
    "gpu.memory",
    title="The GPU memory the workload gets (each GPU, or each MIG device) is at least the "
    "profile's minimum",
    remediation="Use GPUs (or MIG devices) with the memory the profile certifies.",
    severity=Severity.CRITICAL,
)
def memory(subj: PodSubject, profile: Any) -> Outcome:
    gp = settings(profile)
    got = _smi_gpus(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    assert g.smi is not None
    mems: dict[str, int | None] = {}
    for x in g.smi.gpus:
        mems.update(nvsmi.workload_memory(x))
    found = ", ".join(f"{k}: {v if v is not None else '?'} MiB" for k, v in mems.items())
    # the memory a workload gets is the whole GPU's only when MIG is off; say which it is
    mig_note = "; ".join((f"{x.name}: " if len(g.smi.gpus) > 1 else "") + nvsmi.mig_state(x)
                         for x in g.smi.gpus)
    ev = {**_pod_ev(pod), "mig": mig_note,
          "whole_gpu_mib": {x.name: x.memory_total_mib for x in g.smi.gpus}}
    if gp.min_memory_mib is None:
        return skipped(f"cluster.gpu.min_memory_mib is not set (the workload gets {found}; "
                       f"{mig_note})", **ev)
    want = f">= {gp.min_memory_mib} MiB"
    empty = [x.name for x in g.smi.gpus if x.mig_enabled and not x.mig_devices]
    if empty:
        return failed(
            f"{pod.ref}: {', '.join(empty)} is in MIG mode with no MIG device: the workload "
            f"gets no GPU memory ({mig_note})",
            "A GPU in MIG mode gives CUDA only its MIG devices: create the GPU instances the "
            "platform certifies, or disable MIG on the host (see gpu.mig).",
            expected=want, found="no MIG device", **ev,
        )
    unknown = [k for k, v in mems.items() if v is None]
    if unknown:
        return errored(f"{pod.ref}: nvidia-smi reported no memory total for {', '.join(unknown)}",
                       **ev)
    small = {k: v for k, v in mems.items() if v is not None and v < gp.min_memory_mib}
    if small:
        sliced = any(x.mig_enabled for x in g.smi.gpus)
        return failed(
            f"{pod.ref}: GPU memory the workload gets is below {gp.min_memory_mib} MiB: "
            + ", ".join(f"{k} has {v} MiB" for k, v in small.items()) + f" ({mig_note})",
            ("The GPU is in MIG mode: the workload gets a MIG device's memory, not the whole "
             "GPU's. Use larger MIG devices, or disable MIG to pass the whole GPU (see gpu.mig)."
             if sliced else
             "The GPU in the guest has less memory than the profile certifies: a smaller model, "
             "or a vGPU slice instead of the whole GPU; pass the whole GPU through."),
            expected=want, found=found, **ev,
        )
    return passed(f"GPU memory the workload gets: {found} ({mig_note}; {want})",
                  expected=want, found=found, **ev)


@_scoped(
    "pod",
    "gpu.health",
    title="nvidia-smi reports each GPU healthy: no uncorrectable ECC errors, no pending or "
    "failed row remapping or page retirement, no hardware slowdown, no recovery action",
    remediation="Reset, repair or replace the GPU as its health fields say.",
    severity=Severity.CRITICAL,
)
def health(subj: PodSubject, profile: Any) -> Outcome:
    got = _smi_gpus(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    assert g.smi is not None
    bad: list[nvsmi.Finding] = nvsmi.inforom_findings(g.smi_messages)
    fine: dict[str, list[str]] = {}
    for x in g.smi.gpus:
        b, f = nvsmi.health_findings(x)
        bad += b
        fine[x.name] = f
    ev = {**_pod_ev(pod), "judged": fine,
          "health": {x.name: dict(x.health) for x in g.smi.gpus},
          "findings": [f"{f.gpu}: {f.what}" for f in bad]}
    if not bad and not any(fine.values()):
        return skipped(f"{pod.ref}: nvidia-smi's report carries no health field kgc judges "
                       f"(source: {g.smi.source})", **ev)
    fails = [f for f in bad if f.status is Status.FAIL]
    worst = fails or bad
    if worst:
        fixes = list(dict.fromkeys(f.fix for f in worst))
        # a remedy that another one already spells out is said once (the volatile-ECC remedy
        # ends with the RMA step a failed row remapping asks for)
        fixes = [f for f in fixes if not any(f in o for o in fixes if o != f)]
        what = "; ".join(f"{f.gpu}: {f.what}" for f in worst)
        make = failed if fails else warned
        return make(f"{pod.ref}: {what}", " ".join(fixes),
                    expected="no uncorrectable error, nothing pending or failed",
                    found=what, **ev)
    summary = "; ".join(f"{k}: {', '.join(v)}" for k, v in fine.items() if v)
    return passed(f"GPU health: {summary}", **ev)


def _min_version(subj: PodSubject, what: str, setting: str, minimum: str | None,
                 value_of: Any) -> Outcome:
    got = _smi_gpus(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    assert g.smi is not None
    value = value_of(g.smi)
    if minimum is None:
        return skipped(f"cluster.gpu.{setting} is not set (the guest reports {what} "
                       f"{value or 'unknown'})", **_pod_ev(pod))
    have, want = parse_version(value), parse_version(minimum)
    if have is None or want is None:
        return errored(f"{pod.ref}: nvidia-smi reported no {what} kgc can compare "
                       f"({value!r})", **_pod_ev(pod))
    if have < want:
        return failed(
            f"{pod.ref}: {what} {value} is older than {minimum}",
            f"Update the {what} in the guest image on {pod.node} (Kata's NVIDIA guest image "
            "carries the driver; rebuild or upgrade it) to >= " + minimum + ".",
            expected=f">= {minimum}", found=str(value), **_pod_ev(pod),
        )
    return passed(f"{what} {value} (>= {minimum})", expected=f">= {minimum}", found=str(value),
                  **_pod_ev(pod))


@_scoped(
    "pod",
    "gpu.driver",
    title="The NVIDIA driver in the guest is at least the profile's minimum",
    remediation="Upgrade the NVIDIA driver of the guest image.",
    severity=Severity.NORMAL,
)
def driver(subj: PodSubject, profile: Any) -> Outcome:
    gp = settings(profile)
    return _min_version(subj, "driver version", "min_driver", gp.min_driver,
                        lambda s: s.driver_version)


@_scoped(
    "pod",
    "gpu.cuda",
    title="The CUDA version the guest driver supports is at least the profile's minimum",
    remediation="Upgrade the NVIDIA driver of the guest image (it sets the CUDA version).",
    severity=Severity.NORMAL,
)
def cuda(subj: PodSubject, profile: Any) -> Outcome:
    gp = settings(profile)
    return _min_version(subj, "CUDA version", "min_cuda", gp.min_cuda,
                        lambda s: s.cuda_version)


def normalize_product(name: str) -> str:
    """GFD writes the product with spaces as dashes (``NVIDIA-H100-80GB-HBM3``), with
    ``-SHARED`` when the GPU is time-sliced and ``-MIG-...`` for MIG; compare without them."""
    n = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    n = re.sub(r"-shared$", "", n)
    return re.sub(r"-mig-.*$", "", n)


@_scoped(
    "pod",
    "gpu.node-labels",
    title="The GPU the guest sees agrees with the node's GPU product label",
    remediation="Re-run GPU feature discovery on the node or correct its labels.",
    severity=Severity.NORMAL,
)
def node_labels(subj: PodSubject, profile: Any) -> Outcome:
    gp = settings(profile)
    got = _smi_gpus(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    assert g.smi is not None
    label = present(pod.node_labels.get(gp.product_label))
    if label is None:
        return skipped(f"node {pod.node} has no {gp.product_label} label to compare with",
                       **_pod_ev(pod))
    names = [x.product_name or "?" for x in g.smi.gpus]
    bad = [n for n in names if normalize_product(n) != normalize_product(label)]
    if bad:
        return failed(
            f"node {pod.node} is labelled {gp.product_label}={label} but its pod sees "
            f"{', '.join(bad)}",
            f"The label is stale or the pod got another node's GPU: re-run GPU feature "
            f"discovery on {pod.node} (or relabel it) and check the device plugin's allocation.",
            expected=label, found=", ".join(names), **_pod_ev(pod),
        )
    return passed(f"node label {gp.product_label}={label} agrees with {', '.join(names)}",
                  expected=label, found=", ".join(names), **_pod_ev(pod))


@_scoped(
    "pod",
    "gpu.unique",
    title="No two GPU pods on one node see the same GPU (UUID)",
    remediation="Fix the device plugin: each GPU must go to one sandbox only.",
    severity=Severity.BLOCKER,
)
def unique(subj: PodSubject, profile: Any) -> Outcome:
    got = _smi_gpus(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    mine = set(g.gpu_uuids)
    if not mine:
        return errored(f"{pod.ref}: nvidia-smi reported no GPU UUID", **_pod_ev(pod))
    peers = [p for p in subj.others if p.node == pod.node and p.guest is not None
             and pod_ran(p)]
    if not peers:
        return skipped(f"{pod.ref} is the only GPU pod that ran on {pod.node}: nothing to "
                       "compare (cluster.gpu.pods_per_node >= 2 proves it on a node with "
                       "enough GPUs)", **_pod_ev(pod), uuids=sorted(mine))
    clashes = {p.ref: sorted(mine & set(p.guest.gpu_uuids if p.guest else ()))
               for p in peers}
    clashes = {k: v for k, v in clashes.items() if v}
    if clashes:
        what = "; ".join(f"{k} also sees {', '.join(v)}" for k, v in clashes.items())
        return failed(
            f"{pod.ref} on {pod.node} shares a GPU with another pod: {what}",
            f"Two sandboxes on {pod.node} got the same GPU: check the device plugin's "
            "allocations (one VFIO device per pod) and that Kata does not cold-plug every VFIO "
            "group of the node into each VM.",
            expected="disjoint GPU UUIDs per pod", found=what, **_pod_ev(pod),
            uuids=sorted(mine),
        )
    return passed(f"{pod.ref}'s GPU(s) {', '.join(sorted(mine))} are seen by none of the "
                  f"{len(peers)} other GPU pod(s) on {pod.node}", **_pod_ev(pod),
                  uuids=sorted(mine), peers=[p.ref for p in peers])


@_scoped(
    "pod",
    "gpu.compute",
    title="A CUDA matmul in the guest matches the CPU result (when the image has PyTorch)",
    remediation="Fix the CUDA stack in the guest.",
    severity=Severity.NORMAL,
)
def compute(subj: PodSubject, profile: Any) -> Outcome:
    got = _ran(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    cc: Mapping[str, Any] | None = g.cuda_check
    ev = {**_pod_ev(pod), "probe": dict(cc) if cc else None}
    if cc is None:
        return skipped(f"{pod.ref}: the collector ran no compute probe", **ev)
    if cc.get("python3") is False:
        return skipped(f"{pod.image} has no python3, so the optional torch probe did not run",
                       **ev)
    no_torch = "torch" not in cc and re.match(r"(ModuleNotFoundError|ImportError)\b.*torch",
                                              str(cc.get("error", "")))
    if ("torch" in cc and cc.get("torch") is None) or no_torch:
        return skipped(f"{pod.image} has no PyTorch ({cc.get('error', 'import failed')}), so "
                       "the optional compute probe did not run", **ev)
    if present(cc.get("torch")) is None:  # the probe ran but named no torch version
        return errored(f"{pod.ref}: the compute probe printed no result kgc understands: "
                       f"{cc.get('error', dict(cc))}", **ev)
    if cc.get("available") is not True:
        return failed(
            f"{pod.ref}: torch {cc['torch']} reports no usable CUDA device"
            + (f" ({cc['error']})" if cc.get("error") else ""),
            "The CUDA runtime in the image cannot use the GPU: its CUDA must be supported by "
            "the guest driver (see gpu.cuda), and /dev/nvidia* must be in the container.",
            expected="torch.cuda.is_available() is True", found=str(cc.get("available")), **ev,
        )
    if cc.get("error") or cc.get("matmul_ok") is not True:
        err = cc.get("error") or f"max abs error {cc.get('matmul_max_abs_err')}"
        return failed(
            f"{pod.ref}: the GPU matmul did not match the CPU result: {err}",
            "The GPU computes wrong results or fails mid-kernel: read the guest's NVRM/Xid "
            "messages (dmesg) and check the GPU's health (nvidia-smi -q: ECC, retired pages).",
            expected="allclose(gpu, cpu), rtol=atol=1e-9", found=str(err), **ev,
        )
    return passed(f"float64 512x512 matmul on {cc.get('name', 'the GPU')} matches the CPU "
                  f"(max abs error {cc.get('matmul_max_abs_err')}, torch {cc['torch']})", **ev)


# =========================================================================== wiring
@dataclass(frozen=True)
class CheckInput:
    """One thing to judge: a check, what it is about (``cluster`` or ``<node>/<pod>``), and
    the evidence its evaluator takes."""

    check: Check
    subject: str
    evidence: ClusterGpuEvidence | PodSubject


def inputs(run: GpuRunEvidence) -> list[CheckInput]:
    """Every (check, subject, evidence) of one run, in catalogue order: preflight checks once
    on the cluster evidence, per-pod checks once per pod (once with ``pod=None`` when the run
    created no pod, so each still yields a verdict that says why)."""
    out: list[CheckInput] = []
    pod_subjects = [PodSubject(p, run) for p in run.pods] or [PodSubject(None, run)]
    for check in CHECKS:
        if SCOPE[check.id] == "cluster":
            out.append(CheckInput(check, "cluster", run.cluster))
        else:
            for s in pod_subjects:
                name = (f"{s.pod.node or s.pod.target_node or '-'}/{s.pod.name}"
                        if s.pod is not None else "no-pod")
                out.append(CheckInput(check, name, s))
    return out
