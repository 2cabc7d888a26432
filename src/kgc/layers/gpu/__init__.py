"""Layer ``gpu`` — GPU pods get their GPU inside a real microVM (provisional: names only;
the lead wires the Layer object)."""

from kgc.layers.gpu.checks import CHECKS, SCOPE, CheckInput, PodSubject, inputs, settings
from kgc.layers.gpu.classify import Cause, classify, pod_ran
from kgc.layers.gpu.evidence import (
    ClusterGpuEvidence,
    GpuPodEvidence,
    GpuRunEvidence,
    NodeInfo,
    PluginPod,
    RuntimeClassInfo,
    event_from_api,
    node_from_api,
    plugin_pod_from_api,
    pod_from_api,
    runtime_class_from_api,
)
from kgc.layers.gpu.profile import GpuProfile

__all__ = [
    "CHECKS", "SCOPE", "Cause", "CheckInput", "ClusterGpuEvidence", "GpuPodEvidence",
    "GpuProfile", "GpuRunEvidence", "NodeInfo", "PluginPod", "PodSubject", "RuntimeClassInfo",
    "classify", "event_from_api", "inputs", "node_from_api", "plugin_pod_from_api",
    "pod_ran", "pod_from_api", "runtime_class_from_api", "settings",
]
