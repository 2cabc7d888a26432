"""What the live run creates, decided purely from the preflight evidence and the profile.

- :func:`plan` picks the GPU pods: which nodes (a bounded, deterministic sample), how many
  pods per node, which resource each requests — and, when no node advertises a GPU, one
  probe pod per GPU-labelled node so that the failure is *classified* (``no-device-plugin``)
  instead of merely reported;
- :func:`collector_configmap` and :func:`gpu_pod_manifest` build the objects (plain dicts in
  the API's JSON shape, for ``create_namespaced_*(body=...)``);
- :func:`settled` tells the waiter when a pod's fate is known, so a run does not sit out the
  whole budget on a pod that can never start.

No I/O here; ``kgc.kube`` creates, watches and deletes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kgc.guest import build_script
from kgc.layers.gpu.checks import gpu_nodes
from kgc.layers.gpu.classify import (
    _INSUFFICIENT,
    DRA_COLDPLUG,
    DRA_UNALLOCATABLE,
    PULL_REASONS,
    dra_publishers,
)
from kgc.layers.gpu.dra import dra_gpu_nodes, node_gpus, requested_name
from kgc.layers.gpu.evidence import ClusterGpuEvidence, GpuPodEvidence
from kgc.layers.gpu.profile import GpuProfile

SCRIPT_KEY = "collect.sh"
MOUNT = "/kgc"
CONTAINER = "collector"
# every pod that runs the in-guest collector says so (a simulated cluster can answer such
# pods with recorded evidence; the verdicts then say simulated)
COLLECTOR_LABEL = "kgc.io/collector"
# a sandbox failure repeated this often will not heal by itself within the budget
SANDBOX_RETRIES_SETTLE = 3


@dataclass(frozen=True)
class PodPlan:
    name: str
    node: str | None  # None: not pinned (no GPU node is known at all)
    resource: str
    count: int
    probe: bool = False  # a probe pod on a node that advertises no GPU (expected to fail)


def _dns(text: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:limit].strip("-") or "x"


def _dra_nodes(cluster: ClusterGpuEvidence, gp: GpuProfile) -> tuple[
        list[tuple[Any, str, int]], list[tuple[Any, str]]]:
    """Under DRA a GPU node advertises no GPU in allocatable (by design): its GPUs are the
    devices its ResourceSlices publish for the profile's driver (counted per PCI function,
    :func:`kgc.layers.gpu.dra.node_gpus`). (node, the name a pod requests, GPUs) for nodes
    that publish some; (node, why) for GPU nodes that publish none — they get a probe pod,
    whose failure to schedule is the evidence."""
    d = cluster.dra
    name = requested_name(gp, d)
    good: list[tuple[Any, str, int]] = []
    bad: list[tuple[Any, str]] = []
    for n in dra_gpu_nodes(cluster, gp):
        gpus = len(node_gpus(d, n.name, gp.request.driver)) if d is not None else 0
        if gpus:
            good.append((n, name, gpus))
        else:
            bad.append((n, f"publishes no {gp.request.driver} device in a ResourceSlice"))
    return good, bad


def plan(cluster: ClusterGpuEvidence, gp: GpuProfile) -> tuple[list[PodPlan], list[str]]:
    """(pods to create, notes saying what was left out and why). Deterministic: nodes in
    name order, at most ``max_nodes`` of them, ``pods_per_node`` each within what the node
    can hold."""
    notes: list[str] = []
    if cluster.nodes is None:
        return [], [f"nodes could not be listed: {cluster.errors.get('nodes', 'no reason')}"]
    if gp.request.dra:
        good, bad = _dra_nodes(cluster, gp)
    else:
        good, bad = gpu_nodes(cluster, gp)
    good.sort(key=lambda t: t[0].name)
    pods: list[PodPlan] = []
    for n, resource, allocatable in good[: gp.max_nodes]:
        fit = allocatable // gp.count
        if fit == 0:
            notes.append(f"{n.name}: {allocatable} {resource} allocatable, fewer than "
                         f"cluster.gpu.count={gp.count}")
            # still one pod: the scheduler's verdict (Insufficient ...) is the evidence
            fit = 1
        k = min(gp.pods_per_node, fit)
        if k < gp.pods_per_node:
            notes.append(f"{n.name}: room for {k} pod(s) of {gp.count} {resource}, not "
                         f"{gp.pods_per_node}")
        for i in range(k):
            pods.append(PodPlan(f"kgc-gpu-{_dns(n.name)}-{i}", n.name, resource, gp.count))
    if len(good) > gp.max_nodes:
        notes.append(f"{len(good) - gp.max_nodes} more GPU node(s) not sampled "
                     f"(cluster.gpu.max_nodes={gp.max_nodes}): "
                     + ", ".join(n.name for n, _, _ in good[gp.max_nodes:][:20]))
    if not good:
        res = (f"{gp.request.driver} devices (DRA)" if gp.request.dra
               else " or ".join(gp.resources))
        probe_res = requested_name(gp, cluster.dra) if gp.request.dra else gp.resources[0]
        if bad:
            notes.append(f"no node advertises {res}; probing "
                         + ", ".join(n.name for n, _ in bad[: gp.max_nodes]))
            for n, _why in sorted(bad, key=lambda t: t[0].name)[: gp.max_nodes]:
                pods.append(PodPlan(f"kgc-gpu-{_dns(n.name)}-probe", n.name, probe_res,
                                    gp.count, probe=True))
        else:
            notes.append(f"no node advertises {res} or carries a GPU label; one unpinned "
                         "probe pod")
            pods.append(PodPlan("kgc-gpu-probe", None, probe_res, gp.count, probe=True))
    return pods, notes


def collector_configmap(name: str, namespace: str, labels: Mapping[str, str],
                        boundary: str | None = None,
                        cdh_url: str | None = None) -> dict[str, Any]:
    """The ConfigMap that carries the collector script into every GPU pod (``cdh_url``: the
    confidential data hub resource the guest fetches, ``cluster.gpu.cc``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "data": {SCRIPT_KEY: build_script(boundary, cdh_url)},
    }


def gpu_pod_manifest(p: PodPlan, gp: GpuProfile, *, namespace: str, configmap: str,
                     labels: Mapping[str, str]) -> dict[str, Any]:
    """The GPU pod: the profile's RuntimeClass, image, resource and count; pinned to its
    node by node affinity (so the scheduler decides and says why not), the collector mounted
    from the ConfigMap, no service-account token, never restarted, bounded by
    ``activeDeadlineSeconds``."""
    limits = {p.resource: str(p.count), "cpu": gp.cpu, "memory": gp.memory}
    spec: dict[str, Any] = {
        "runtimeClassName": gp.runtime_class,
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "activeDeadlineSeconds": int(gp.start_timeout_s + gp.collector_timeout_s * 4),
        "terminationGracePeriodSeconds": 5,
        "tolerations": [{"key": r, "operator": "Exists", "effect": "NoSchedule"}
                        for r in gp.resources],
        "containers": [{
            "name": CONTAINER,
            "image": gp.image,
            "command": ["sh", f"{MOUNT}/{SCRIPT_KEY}"],
            "env": [{"name": "KGC_CMD_TIMEOUT", "value": str(gp.collector_timeout_s)}],
            "resources": {"limits": limits, "requests": dict(limits)},
            "volumeMounts": [{"name": "kgc-collector", "mountPath": MOUNT, "readOnly": True}],
        }],
        "volumes": [{"name": "kgc-collector",
                     "configMap": {"name": configmap, "defaultMode": 0o444}}],
    }
    if p.node is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [p.node]}]}]}}}
    if gp.node_selector:
        spec["nodeSelector"] = dict(gp.node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": p.name, "namespace": namespace,
                     "labels": {**labels, "kgc.io/layer": "gpu", COLLECTOR_LABEL: "gpu"},
                     "annotations": {"kgc.io/target-node": p.node or ""}},
        "spec": spec,
    }


CLAIM_REQUEST = "gpu"  # the request's name in the template and in the container's claim


def claim_template_name(p: PodPlan) -> str:
    return f"{p.name}-gpu"[:63]


def claim_template_manifest(p: PodPlan, gp: GpuProfile, *, namespace: str,
                            labels: Mapping[str, str]) -> dict[str, Any]:
    """``platform.gpu.request.mode: claim``: the ResourceClaimTemplate (resource.k8s.io/v1:
    ``spec.spec.devices.requests[]`` with ``exactly: {deviceClassName, count, selectors:
    [{cel: {expression}}]}``, k8s.io/api resource/v1 types.go ``ExactDeviceRequest``) in the
    run namespace, labelled like the pods so the run's cleanup removes it."""
    exactly: dict[str, Any] = {"deviceClassName": gp.request.device_class,
                               "allocationMode": "ExactCount", "count": p.count}
    if gp.request.selector:
        exactly["selectors"] = [{"cel": {"expression": gp.request.selector}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": claim_template_name(p), "namespace": namespace,
                     "labels": {**labels, "kgc.io/layer": "gpu"}},
        "spec": {"metadata": {"labels": {**labels, "kgc.io/layer": "gpu"}},
                 "spec": {"devices": {"requests": [{"name": CLAIM_REQUEST,
                                                    "exactly": exactly}]}}},
    }


def dra_pod_manifest(p: PodPlan, gp: GpuProfile, *, namespace: str, configmap: str,
                     labels: Mapping[str, str]) -> dict[str, Any]:
    """The GPU pod under the profile's ``request.mode``: ``device-plugin`` and
    ``dra-extended`` = :func:`gpu_pod_manifest` unchanged (the scheduler hands the extended
    resource to DRA itself); ``claim`` = no extended resource, ``spec.resourceClaims`` naming
    the template of :func:`claim_template_manifest` and the container's
    ``resources.claims``."""
    m = gpu_pod_manifest(p, gp, namespace=namespace, configmap=configmap, labels=labels)
    if gp.request.mode != "claim":
        return m
    spec = m["spec"]
    c = spec["containers"][0]
    for part in ("limits", "requests"):
        c["resources"][part].pop(p.resource, None)
    c["resources"]["claims"] = [{"name": "gpu", "request": CLAIM_REQUEST}]
    spec["resourceClaims"] = [{"name": "gpu",
                               "resourceClaimTemplateName": claim_template_name(p)}]
    return m


def settled(pod: GpuPodEvidence, cluster: ClusterGpuEvidence | None = None) -> str | None:
    """Why the waiter may stop now (the pod's fate is known), or None to keep waiting.

    Finished pods are settled; so is a refusal at creation, a scheduler verdict that no node
    advertises the resource at all (or, under DRA, that no claim can be allocated while no
    node publishes a device of the driver), an image that failed to pull and is backing off,
    a sandbox failure the kubelet has retried :data:`SANDBOX_RETRIES_SETTLE` times, and
    Kata's DRA cold-plug failure (it never heals: the VM booted without the device).
    """
    if pod.create_error is not None:
        return "the API refused the pod"
    # (a pod that ran, classify.pod_ran, has Succeeded: settled by the line above)
    if pod.phase in ("Succeeded", "Failed"):
        return f"the pod {pod.phase.lower()}"
    for e in pod.events:
        m = _INSUFFICIENT.search(e.message or "")
        if e.reason == "FailedScheduling" and m and cluster is not None and cluster.nodes:
            res = m.group(1).rstrip(".")
            if not any((n.count(res, "capacity") or 0) > 0 for n in cluster.nodes):
                return f"no node advertises {res}"
        if e.reason == "FailedCreatePodSandBox" and e.count >= SANDBOX_RETRIES_SETTLE:
            return f"the sandbox failed {e.count} times"
        if (e.reason == "FailedScheduling" and pod.request_mode != "device-plugin"
                and DRA_UNALLOCATABLE.search(e.message or "")):
            pub = dra_publishers(cluster)
            if pub is not None and not pub[1]:
                return f"no node publishes a {pub[0]} device"
        if e.type == "Warning" and DRA_COLDPLUG.search(e.message or ""):
            return "Kata did not cold-plug the DRA device (kata-containers#13322)"
    for c in pod.containers:
        if c.state == "waiting" and c.reason in ("ImagePullBackOff", "InvalidImageName",
                                                 "ErrImageNeverPull"):
            return f"image pull: {c.reason}"
        if c.state == "waiting" and c.reason in PULL_REASONS and c.restart_count > 0:
            return f"image pull: {c.reason}"
    return None
