"""What the cluster lab's self-tests share: the running lab's facts. Kubernetes helpers
(waits, watchers, builders, run namespaces) come from ``kgc.kube``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgc import kube
from kgc.core.profile import ClusterProfile
from kgc_lab import cluster as labc


@dataclass
class LabInfo:
    run_dir: Path
    kubeconfig: Path
    server: str
    metric_url: str
    cluster: ClusterProfile
    state: dict[str, Any]
    kube: kube.Kube
    keda_missing: tuple[str, ...] = ()

    @property
    def api(self) -> Any:
        return self.kube.api

    def set_metric(self, value: float) -> None:
        labc.set_metric(value, self.run_dir)


def gpu_pod(name: str, resource: str, runtime_class: str = "kata",
            labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod asking for one GPU (``resource``) under ``runtime_class``."""
    quantities = {resource: 1, "cpu": 1, "memory": "1Gi"}
    return kube.builders.pod(
        name,
        [kube.builders.container("cuda", "registry.invalid/kgc/cuda-vectoradd:lab",
                                 requests=quantities, limits=quantities)],
        labels=labels, runtime_class=runtime_class,
    )
