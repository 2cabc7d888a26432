"""Cluster lab: a real Kubernetes control plane with simulated (kwok) GPU nodes and KEDA.

``kgc lab cluster up | down | status`` (lab/cluster/README.md). Modules: ``lab`` (the
lab: paths, state, up/down/status), ``manifests`` (its objects, pure), ``pki``,
``metric_server`` (the metric KEDA scales on), ``simulate`` (the responder for simulated
collector pods; ``sim_gpu`` its GPU chooser), ``evidence`` (metric and recorded logs for
the suites), ``cli``. Process supervision is shared by all labs (``kgc_lab.supervise``).
"""

from kgc_lab.cluster.cli import register
from kgc_lab.cluster.evidence import cri_log, serve_recorded_logs, set_metric
from kgc_lab.cluster.lab import (
    LAB_PROFILE,
    Binaries,
    Lab,
    RunPaths,
    binaries,
    cache_dir,
    certify_stage,
    default_run_dir,
    down,
    lab_cluster_profile,
    read_state,
    running,
    status,
    write_state,
)
from kgc_lab.cluster.manifests import (
    DEVICE_PLUGIN_LABELS,
    DEVICE_PLUGIN_NAMESPACE,
    GPU_NODE_LABEL,
    KEDA_APISERVICE,
    KEDA_NAMESPACE,
    KWOK_ANNOTATION,
    UNPULLABLE_REGISTRY,
    device_plugin_manifests,
    keda_manifests,
    kwok_stages,
    node_manifests,
    runtime_class_manifests,
)
from kgc_lab.common import LabError, free_port
from kgc_lab.procs import group_members, listening_ports, pid_alive

__all__ = [
    "DEVICE_PLUGIN_LABELS", "DEVICE_PLUGIN_NAMESPACE", "UNPULLABLE_REGISTRY",
    "device_plugin_manifests", "GPU_NODE_LABEL", "KEDA_APISERVICE", "KEDA_NAMESPACE",
    "KWOK_ANNOTATION", "LAB_PROFILE",
    "Binaries", "Lab", "LabError", "RunPaths", "binaries", "cache_dir", "certify_stage",
    "cri_log", "default_run_dir", "down", "free_port", "group_members", "keda_manifests",
    "kwok_stages", "lab_cluster_profile", "listening_ports", "node_manifests", "pid_alive",
    "read_state", "register", "running", "runtime_class_manifests", "serve_recorded_logs",
    "set_metric", "status", "write_state",
]
