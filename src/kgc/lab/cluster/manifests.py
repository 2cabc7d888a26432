"""Manifests of the cluster lab's own objects, from the profile's ``cluster`` section:
kwok nodes with GPU capacity, the RuntimeClasses, kwok pod stages (sandbox delay per
runtime class) and the KEDA metrics-API registration. Pure functions: no I/O."""

from __future__ import annotations

from typing import Any

from kgc.core.profile import ClusterProfile

KEDA_NAMESPACE = "keda"
KEDA_APISERVICE = "v1beta1.external.metrics.k8s.io"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_NODE_LABEL = "kgc.io/gpu"


def node_manifests(cluster: ClusterProfile) -> list[dict[str, Any]]:
    lab = cluster.lab
    nodes = []
    for i in range(lab.gpu_nodes + lab.cpu_nodes):
        gpu = i < lab.gpu_nodes
        name = f"kgc-gpu-{i}" if gpu else f"kgc-cpu-{i - lab.gpu_nodes}"
        capacity = {"cpu": lab.node_cpu, "memory": lab.node_memory, "pods": lab.node_pods}
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            GPU_NODE_LABEL: "true" if gpu else "false",
        }
        if gpu and cluster.gpu_resources:
            # GPU nodes alternate between the profile's resource names, as a real fleet
            # exposes either the container stack (nvidia.com/gpu) or passthrough (pgpu).
            resource = cluster.gpu_resources[i % len(cluster.gpu_resources)]
            capacity[resource] = str(lab.gpus_per_node)
            labels["kgc.io/gpu-resource"] = resource.replace("/", "_")
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": labels,
                },
                "spec": {},
                "status": {"capacity": capacity, "allocatable": dict(capacity)},
            }
        )
    return nodes


def runtime_class_manifests(cluster: ClusterProfile) -> list[dict[str, Any]]:
    lab = cluster.lab
    return [
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": cluster.runtime_class},
            "handler": cluster.runtime_class,
            "overhead": {
                "podFixed": {"cpu": lab.kata_overhead_cpu, "memory": lab.kata_overhead_memory}
            },
        },
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": cluster.baseline_runtime_class},
            "handler": cluster.baseline_runtime_class,
        },
    ]


_SANDBOX_TEMPLATE = """\
{{ $now := Now }}
conditions:
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodReadyToStartContainers
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  message: 'containers with unready status: [{{ range .spec.containers }} {{ .name }} {{ end }}]'
  reason: ContainersNotReady
  status: "False"
  type: Ready
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  message: 'containers with unready status: [{{ range .spec.containers }} {{ .name }} {{ end }}]'
  reason: ContainersNotReady
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    waiting:
      reason: ContainerCreating
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Pending
"""

_READY_TEMPLATE = """\
{{ $now := Now }}
conditions:
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""


def kwok_stages(cluster: ClusterProfile) -> list[dict[str, Any]]:
    """Pod stages: sandbox (delay per runtime class) -> PodReadyToStartContainers, then
    containers start -> Ready. Node and deletion stages come from kwok's own set."""
    lab = cluster.lab
    rc = cluster.runtime_class

    def sandbox(name: str, op: str, delay_ms: int) -> dict[str, Any]:
        return {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {
                    "matchExpressions": [
                        {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                        {"key": ".status.podIP", "operator": "DoesNotExist"},
                        {"key": ".spec.runtimeClassName", "operator": op, "values": [rc]},
                    ]
                },
                "delay": {"durationMilliseconds": delay_ms},
                "next": {
                    "event": {
                        "type": "Normal",
                        "reason": "SandboxReady",
                        "message": f"sandbox ready after simulated {delay_ms} ms ({name})",
                    },
                    "statusTemplate": _SANDBOX_TEMPLATE,
                },
            },
        }

    ready = {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": "kgc-pod-containers-ready"},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {
                "matchExpressions": [
                    {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                    {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
                    {
                        "key": ".status.conditions.[]"
                        ' | select( .type == "PodReadyToStartContainers" ) | .status',
                        "operator": "In",
                        "values": ["True"],
                    },
                    {
                        "key": ".status.containerStatuses.[].state.running.startedAt",
                        "operator": "DoesNotExist",
                    },
                ]
            },
            "delay": {"durationMilliseconds": lab.container_start_delay_ms},
            "next": {
                "event": {"type": "Normal", "reason": "Started", "message": "Started container"},
                "statusTemplate": _READY_TEMPLATE,
            },
        },
    }
    return [
        sandbox("kgc-pod-sandbox-kata", "In", lab.kata_sandbox_delay_ms),
        sandbox("kgc-pod-sandbox-other", "NotIn", lab.runc_sandbox_delay_ms),
        ready,
    ]


def keda_manifests(adapter_port: int) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "keda-metrics-apiserver", "namespace": KEDA_NAMESPACE},
            # ExternalName: the aggregator dials <externalName>:<APIService port>, i.e. the
            # adapter on loopback (Endpoints may not carry loopback addresses).
            "spec": {"type": "ExternalName", "externalName": "127.0.0.1"},
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": KEDA_APISERVICE},
            "spec": {
                "service": {
                    "name": "keda-metrics-apiserver",
                    "namespace": KEDA_NAMESPACE,
                    "port": adapter_port,
                },
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
    ]
