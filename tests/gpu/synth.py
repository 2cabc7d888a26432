"""Synthetic GPU-run evidence built programmatically from the REAL in-guest captures in
``fixtures/guest/`` (H200 Firecracker microVM, CPU-only microVM).

Only what a real cluster adds around the guest is made up here — the node record, the pod's
status and events — and each variant changes exactly one thing of the real capture, so a
failing check can be traced to that one change. ``write_fixtures()`` writes the same cases
to ``fixtures/gpu/`` for the cluster lab (a self-test keeps the files equal to this code).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from kgc.core.hostfs import HostSnapshot
from kgc.evidence.guest import GuestEvidence, SmiGpu, parse_guest
from kgc.layers.gpu.evidence import (
    ClusterGpuEvidence,
    ContainerState,
    GpuPodEvidence,
    GpuRunEvidence,
    NodeInfo,
    PluginPod,
    PodCondition,
    PodEvent,
    RuntimeClassInfo,
)
from kgc.layers.gpu.profile import GpuProfile

REPO = Path(__file__).resolve().parents[2]
GUEST_FIX = REPO / "fixtures" / "guest"
GPU_FIX = REPO / "fixtures" / "gpu"

# A plausible host kernel for the node the real capture stands in for (the capture itself
# is the guest: 6.18.44-fc-v657-gpu).
NODE_KERNEL = "6.8.0-57-generic"
RC = "kata-qemu-nvidia-gpu"
RESOURCE = "nvidia.com/pgpu"
IMAGE = "nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04"
H200_UUID = "GPU-296e81e0-41dc-e3a5-5798-0bddebd2f1d0"


def snapshot(name: str) -> HostSnapshot:
    return HostSnapshot.from_dict(json.loads((GUEST_FIX / name).read_text())["host"])


def h200_guest() -> GuestEvidence:
    return parse_guest(snapshot("h200-firecracker.bundle.json"))


def cpu_guest() -> GuestEvidence:
    return parse_guest(snapshot("cpu-only-firecracker.bundle.json"))


def h200_profile(**kw: Any) -> GpuProfile:
    """The profile the real H200 capture is certified against."""
    base: dict[str, Any] = dict(
        runtime_class=RC,
        resources=(RESOURCE,),
        count=1,
        product_pattern=r"\bH200\b",
        min_memory_mib=140000,
        min_driver="550.54",
        min_cuda="12.4",
        device_plugin_selector="app=nvidia-sandbox-device-plugin-daemonset",
        device_plugin_namespace="gpu-operator",
    )
    base.update(kw)
    return GpuProfile(**base)


def node(name: str = "gpu-a", gpus: int = 1, *, kernel: str = NODE_KERNEL,
         product: str | None = "NVIDIA-H200", resource: str = RESOURCE,
         allocatable: int | None = None) -> NodeInfo:
    labels = {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true"}
    if product:
        labels["nvidia.com/gpu.product"] = product
    cap = {"cpu": "192", "memory": "2113412Mi", "pods": "110"}
    alloc = dict(cap)
    if gpus:
        cap[resource] = str(gpus)
        alloc[resource] = str(gpus if allocatable is None else allocatable)
    return NodeInfo(name, kernel, labels, cap, alloc, True, False)


def runtime_class(handler: str = RC, overhead: dict[str, str] | None = None) -> RuntimeClassInfo:
    return RuntimeClassInfo(RC, handler, {"cpu": "1", "memory": "10240Mi"}
                            if overhead is None else overhead)


def cluster(*nodes: NodeInfo, plugin_nodes: tuple[str, ...] | None = None,
            rcs: tuple[RuntimeClassInfo, ...] | None = None) -> ClusterGpuEvidence:
    nodes = nodes or (node(),)
    pn = tuple(n.name for n in nodes) if plugin_nodes is None else plugin_nodes
    return ClusterGpuEvidence(
        runtime_classes=(runtime_class(),) if rcs is None else rcs,
        nodes=tuple(nodes),
        plugin_pods=tuple(PluginPod(f"nvidia-sandbox-device-plugin-daemonset-{i}",
                                    "gpu-operator", n, "Running", True)
                          for i, n in enumerate(pn)),
        plugin_selector="app=nvidia-sandbox-device-plugin-daemonset",
        plugin_namespace="gpu-operator",
    )


def pod(guest: GuestEvidence | None, n: NodeInfo | None = None, name: str = "kgc-gpu-0",
        **kw: Any) -> GpuPodEvidence:
    n = n or node()
    base: dict[str, Any] = dict(
        name=name, namespace="kgc-run1", target_node=n.name, node=n.name,
        node_kernel=n.kernel_version, node_labels=dict(n.labels), runtime_class=RC,
        image=IMAGE, resource=RESOURCE, count=1, phase="Succeeded",
        conditions=(PodCondition("PodScheduled", "True"),),
        containers=(ContainerState("collector", "terminated", "Completed", None, 0),),
        events=(PodEvent("Normal", "Scheduled", f"Successfully assigned kgc-run1/{name} to "
                         f"{n.name}", 1, "default-scheduler"),),
        waited_s=41.7, budget_s=1200.0, guest=guest,
    )
    base.update(kw)
    return GpuPodEvidence(**base)


SCHEDULED = (PodCondition("PodScheduled", "True"),)


def pending(**kw: Any) -> GpuPodEvidence:
    """A scheduled pod stuck in ContainerCreating until the budget ran out."""
    base: dict[str, Any] = dict(phase="Pending", timed_out=True, waited_s=1200.0,
                                containers=(ContainerState("collector", "waiting",
                                                           "ContainerCreating"),),
                                conditions=SCHEDULED, events=())
    base.update(kw)
    return pod(None, **base)


def run(*pods: GpuPodEvidence, cl: ClusterGpuEvidence | None = None,
        notes: tuple[str, ...] = ()) -> GpuRunEvidence:
    return GpuRunEvidence(cl or cluster(), tuple(pods), notes)


def with_uuid(g: GuestEvidence, uuid: str) -> GuestEvidence:
    assert g.smi is not None
    gpus = tuple(dataclasses.replace(x, uuid=uuid) for x in g.smi.gpus)
    return dataclasses.replace(g, smi=dataclasses.replace(g.smi, gpus=gpus))


def with_smi_gpus(g: GuestEvidence, n: int) -> GuestEvidence:
    """The real report with its one GPU repeated n times (distinct UUIDs and bus ids)."""
    assert g.smi is not None
    one = g.smi.gpus[0]
    gpus: tuple[SmiGpu, ...] = tuple(
        dataclasses.replace(one, uuid=f"{one.uuid}"[:-2] + f"{i:02x}",
                            bus_id=f"00000000:00:{6 + i:02x}.0")
        for i in range(n)
    )
    return dataclasses.replace(g, smi=dataclasses.replace(g.smi, gpus=gpus, attached_gpus=n))


def with_vendor(g: GuestEvidence, vendor: str) -> GuestEvidence:
    pci = tuple(dataclasses.replace(d, vendor=vendor) if d.vendor == "10de" else d
                for d in g.pci)
    return dataclasses.replace(g, pci=pci)


def with_iommu_groups(g: GuestEvidence, n: int = 3) -> GuestEvidence:
    return dataclasses.replace(g, iommu_groups=tuple(str(i) for i in range(n)))


# --------------------------------------------------------------------------- fixtures
def cases() -> dict[str, GpuRunEvidence]:
    """The recorded runs written to fixtures/gpu (name -> run)."""
    h = h200_guest()
    a, b = node("gpu-a", 2), node("gpu-b", 1)
    return {
        # the real H200 capture as one pod's output on a one-GPU node: every gpu.* passes
        "h200-good": run(pod(h)),
        # the CPU-only capture as the pod's output: no GPU in the guest
        "gpu-not-in-guest": run(pod(cpu_guest())),
        # two pods on one node that both see the same (real) GPU
        "duplicate-uuid": run(pod(h, a, "kgc-gpu-0"), pod(h, a, "kgc-gpu-1"),
                              cl=cluster(a)),
        # two pods on one node with distinct GPUs (UUID changed in the second)
        "two-pods-distinct": run(pod(h, a, "kgc-gpu-0"),
                                 pod(with_uuid(h, "GPU-00000000-0000-0000-0000-0000000000b1"),
                                     a, "kgc-gpu-1"), cl=cluster(a)),
        # the pod landed on a runc handler: the "guest" kernel is the node's
        "same-kernel-as-node": run(pod(h, node(kernel=h.kernel or ""))),
        # no device plugin: nodes labelled as GPU nodes advertise nothing; pod Pending
        "no-device-plugin": run(
            pod(None, node(gpus=0), phase="Pending", node=None, timed_out=True, waited_s=300.0,
                budget_s=300.0, containers=(),
                conditions=(PodCondition("PodScheduled", "False", "Unschedulable",
                                         "0/2 nodes are available: 2 Insufficient "
                                         "nvidia.com/pgpu. preemption: 0/2 nodes are available: "
                                         "2 No preemption victims found for incoming pod."),),
                events=(PodEvent("Warning", "FailedScheduling",
                                 "0/2 nodes are available: 2 Insufficient nvidia.com/pgpu. "
                                 "preemption: 0/2 nodes are available: 2 No preemption victims "
                                 "found for incoming pod.", 3, "default-scheduler"),)),
            cl=cluster(node("gpu-a", 0), node("gpu-b", 0), plugin_nodes=()),
        ),
        "image-pull": run(pod(
            None, b, phase="Pending", timed_out=True, waited_s=300.0, budget_s=1200.0,
            image="nvcr.io/nvidia/cuda:0.0-does-not-exist",
            containers=(ContainerState("collector", "waiting", "ImagePullBackOff",
                                       'Back-off pulling image "nvcr.io/nvidia/cuda:0.0-does-not-'
                                       'exist"'),),
            events=(PodEvent("Warning", "Failed", 'Failed to pull image "nvcr.io/nvidia/cuda:0.0-'
                             'does-not-exist": rpc error: code = NotFound desc = failed to pull '
                             'and unpack image "nvcr.io/nvidia/cuda:0.0-does-not-exist": failed '
                             "to resolve reference \"nvcr.io/nvidia/cuda:0.0-does-not-exist\": "
                             "nvcr.io/nvidia/cuda:0.0-does-not-exist: not found", 2, "kubelet"),),
        ), cl=cluster(b)),
        "runtimeclass-missing": run(
            pod(None, b, phase=None, node=None, conditions=(), containers=(), events=(),
                waited_s=0.0, create_error='pods "kgc-gpu-0" is forbidden: pod rejected: '
                'RuntimeClass "kata-qemu-nvidia-gpu" not found'),
            cl=cluster(b, rcs=(RuntimeClassInfo("kata-qemu", "kata-qemu",
                                                {"cpu": "250m", "memory": "160Mi"}),)),
        ),
    }


# Cluster bundles (kgc-bundle/2, scope cluster) for `kgc evaluate` / `pytest --snapshot`:
# the real guests inside synthetic cluster surroundings (see fixtures/gpu/README.md).
BUNDLES = {
    "h200": ("h200-good", "2026-11-30T01:29:00Z",
             "one GPU pod whose collector output is the real H200 capture "
             "(fixtures/guest/h200-firecracker.*); the node, pod status and events around it "
             "are synthetic (tests/gpu/synth.py)"),
    "cpu-only": ("gpu-not-in-guest", "2026-11-30T01:28:00Z",
                 "one GPU pod whose collector output is the real CPU-only capture "
                 "(fixtures/guest/cpu-only-firecracker.bundle.json); the node, pod status and "
                 "events around it are synthetic (tests/gpu/synth.py)"),
}


def bundle_doc(case: str, collected_at: str, note: str) -> dict[str, Any]:
    return {
        "format": "kgc-bundle/2",
        "scope": "cluster",
        "target": "synthetic-h200-cluster",
        "collected_at": collected_at,
        "complete": True,
        "layers": {"gpu": cases()[case].to_dict()},
        "meta": {"synthetic": note, "profile": "fixtures/gpu/h200.profile.yaml"},
    }


def profile_doc() -> dict[str, Any]:
    gp = h200_profile()
    platform = {"kata": {"runtime_class": gp.runtime_class},
                "gpu": {"resources": list(gp.resources),
                        "device_plugin": {"selector": gp.device_plugin_selector,
                                          "namespace": gp.device_plugin_namespace}}}
    return {"name": "h200-passthrough",
            "description": "the profile the recorded H200 guest is certified against "
                           "(fixtures/gpu bundles)",
            "platform": platform,
            "cluster": {"gpu": gp.model_dump(mode="json", exclude_defaults=True)}}


def write_fixtures(dest: Path = GPU_FIX) -> list[Path]:
    import yaml

    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for name, r in cases().items():
        p = dest / f"{name}.run.json"
        p.write_text(json.dumps(r.to_dict(), indent=1, sort_keys=True) + "\n")
        out.append(p)
    for name, (case, when, note) in BUNDLES.items():
        p = dest / f"{name}.bundle.json"
        p.write_text(json.dumps(bundle_doc(case, when, note), indent=1, sort_keys=True) + "\n")
        out.append(p)
    p = dest / "h200.profile.yaml"
    p.write_text("# generated by tests/gpu/synth.py: the profile the fixtures/gpu bundles are "
                 "judged with\n" + yaml.safe_dump(profile_doc(), sort_keys=False))
    out.append(p)
    return out


if __name__ == "__main__":
    for p in write_fixtures():
        print(p.relative_to(REPO))
