"""The cluster lab's shape: what the simulated cluster HAS (nodes, GPUs, RuntimeClasses,
delays). The lab's own model, not the product's: the product's profile schema has no lab
section. The defaults are the lab's cluster (``kgc lab cluster up``); a test or a scenario
that wants another shape passes one (``LabClusterProfile(lab=ClusterLabProfile(...))``, or
``lab_cluster(cluster, shape)``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kgc.core.profile import ClusterProfile, Strict


class ClusterLabProfile(Strict):
    """Shape of the simulated cluster that ``kgc lab cluster up`` starts: what the lab's
    cluster HAS. What the suites EXPECT of a cluster is the profile's (``platform``, each
    layer's ``cluster.<layer>``); the product's profile schema has no lab section."""

    gpu_nodes: int = Field(default=2, ge=0)
    gpus_per_node: int = Field(default=4, ge=1)
    cpu_nodes: int = Field(default=1, ge=0)
    node_cpu: str = "32"
    node_memory: str = "256Gi"
    node_pods: str = "110"
    # extended resources the GPU nodes advertise (alternating over the nodes, as a fleet
    # exposes either nvidia.com/gpu or passthrough nvidia.com/pgpu); empty: no device plugin
    gpu_resources: tuple[str, ...] = ("nvidia.com/gpu", "nvidia.com/pgpu")
    # a simulated device-plugin DaemonSet (gpu-operator/nvidia-sandbox-device-plugin) whose
    # pods run on the GPU nodes
    device_plugin: bool = True
    # GPU feature discovery's product label on the GPU nodes (matches the recorded guest)
    gpu_product: str = "NVIDIA-H200"
    # status.nodeInfo.kernelVersion of every node: a host kernel, never the guest's
    node_kernel: str = "6.8.0-60-generic"
    # RuntimeClasses the lab creates: Kata ones (handler = name, with the overhead below,
    # sandbox delay kata_sandbox_delay_ms) and a baseline one (runc_sandbox_delay_ms)
    kata_runtime_classes: tuple[str, ...] = ("kata", "kata-qemu-nvidia-gpu")
    # the Kata RuntimeClasses (of kata_runtime_classes) that play today's Kata release,
    # whose shim cold-plugs only device-plugin devices (kata-containers#13322; fix PR #13323
    # open): a pod of theirs with a DRA claim gets the container-start failure Kata logs
    # (manifests.kwok_stages); the other Kata classes play a Kata with the fix
    kata_without_dra_coldplug: tuple[str, ...] = ("kata-qemu-nvidia-gpu",)
    baseline_runtime_class: str = "runc"
    kata_overhead_cpu: str = "250m"
    kata_overhead_memory: str = "320Mi"
    kata_sandbox_delay_ms: int = Field(default=3000, ge=0)
    runc_sandbox_delay_ms: int = Field(default=300, ge=0)
    container_start_delay_ms: int = Field(default=200, ge=0)
    hpa_sync_period_s: int = Field(default=5, ge=1)

    @property
    def runtime_class(self) -> str:
        """The lab's first Kata RuntimeClass (what lab self-tests create plain Kata pods
        with)."""
        return self.kata_runtime_classes[0] if self.kata_runtime_classes else "kata"


class LabClusterProfile(ClusterProfile):
    """A product ``cluster`` section with the lab's shape beside it (lab code only)."""

    lab: ClusterLabProfile = ClusterLabProfile()


def lab_cluster(cluster: ClusterProfile | None = None,
                shape: ClusterLabProfile | None = None) -> LabClusterProfile:
    """``cluster`` (the product's section of the profile the lab runs) with the lab's shape:
    ``shape``, else the one ``cluster`` already carries, else the lab's default."""
    if isinstance(cluster, LabClusterProfile) and shape is None:
        return cluster
    base = cluster if cluster is not None else ClusterProfile()
    fields: dict[str, Any] = {k: getattr(base, k) for k in ClusterProfile.model_fields}
    return LabClusterProfile(**fields, lab=shape or shape_of(base))


def shape_of(cluster: Any) -> ClusterLabProfile:
    """The lab's shape a cluster section carries (the default one when it carries none)."""
    lab = getattr(cluster, "lab", None)
    return lab if isinstance(lab, ClusterLabProfile) else ClusterLabProfile()
