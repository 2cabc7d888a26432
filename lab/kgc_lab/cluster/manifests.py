"""Manifests of the cluster lab's own objects, from the lab's shape (kgc_lab.cluster.shape):
kwok nodes with GPU capacity, the RuntimeClasses, a simulated device-plugin DaemonSet, kwok
pod stages (sandbox delay per runtime class, image pulls that fail, collector pods ending as
the simulator decides) and the KEDA metrics-API registration. Pure functions: no I/O."""

from __future__ import annotations

from typing import Any

from kgc.core.profile import ClusterProfile
from kgc_lab.cluster.shape import shape_of

KEDA_NAMESPACE = "keda"
KEDA_APISERVICE = "v1beta1.external.metrics.k8s.io"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_NODE_LABEL = "kgc.io/gpu"
# images under this registry cannot be pulled in the lab (.invalid never resolves, RFC 6761):
# their pods end in ErrImagePull -> ImagePullBackOff, as a real kubelet's would
UNPULLABLE_REGISTRY = "unreachable.invalid"
DEVICE_PLUGIN_NAMESPACE = "gpu-operator"
DEVICE_PLUGIN_LABELS = {"app": "nvidia-sandbox-device-plugin-daemonset"}
# set by the collector simulator (kgc_lab.cluster.simulate) on a collector pod it answered
SIM_EXIT_ANNOTATION = "kgc.io/sim-exit-code"


_NODE_INFO_EMPTY = ("bootID", "containerRuntimeVersion", "kubeProxyVersion", "kubeletVersion",
                    "machineID", "osImage", "systemUUID")


def node_manifests(cluster: ClusterProfile) -> list[dict[str, Any]]:
    lab = shape_of(cluster)
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
        if gpu:
            # what GPU feature discovery labels a GPU node with
            labels["nvidia.com/gpu.present"] = "true"
            labels["nvidia.com/gpu.product"] = lab.gpu_product
        if gpu and lab.gpu_resources:
            # GPU nodes alternate between the lab's resource names, as a real fleet
            # exposes either the container stack (nvidia.com/gpu) or passthrough (pgpu).
            resource = lab.gpu_resources[i % len(lab.gpu_resources)]
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
                "status": {"capacity": capacity, "allocatable": dict(capacity),
                           # both addresses from the start: with only kwok's InternalIP, its
                           # stages' patches alternately drop and restore the node's
                           # addresses (~every minute), and the API server then cannot
                           # reach the node for `kubectl logs` ("no preferred addresses")
                           "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                         {"type": "Hostname", "address": name}],
                           # every field (the client's model requires them); kwok fills
                           # the empty ones with its own version
                           "nodeInfo": {"kernelVersion": lab.node_kernel,
                                        "architecture": "amd64", "operatingSystem": "linux",
                                        **dict.fromkeys(_NODE_INFO_EMPTY, "")}},
            }
        )
    return nodes


def runtime_class_manifests(cluster: ClusterProfile) -> list[dict[str, Any]]:
    lab = shape_of(cluster)
    kata = [
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": rc},
            "handler": rc,
            "overhead": {
                "podFixed": {"cpu": lab.kata_overhead_cpu, "memory": lab.kata_overhead_memory}
            },
        }
        for rc in lab.kata_runtime_classes
    ]
    return [*kata, {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": lab.baseline_runtime_class},
        "handler": lab.baseline_runtime_class,
    }]


def device_plugin_manifests(cluster: ClusterProfile) -> list[dict[str, Any]]:
    """A stand-in for the GPU Operator's sandbox device plugin: a DaemonSet whose (kwok)
    pods run on the GPU nodes, so the cluster has device-plugin pods to check. None when the
    lab shape says there is no device plugin."""
    lab = shape_of(cluster)
    if not lab.device_plugin or not lab.gpu_nodes:
        return []
    labels = dict(DEVICE_PLUGIN_LABELS)
    return [
        {"apiVersion": "v1", "kind": "Namespace",
         "metadata": {"name": DEVICE_PLUGIN_NAMESPACE}},
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": labels["app"], "namespace": DEVICE_PLUGIN_NAMESPACE,
                         "labels": labels,
                         "annotations": {"kgc.io/simulated": "kwok pods, no device plugin runs"}},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "nodeSelector": {GPU_NODE_LABEL: "true"},
                        "tolerations": [{"operator": "Exists"}],
                        "containers": [{
                            "name": "nvidia-sandbox-device-plugin-ctr",
                            "image": "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.3.1",
                        }],
                    },
                },
            },
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


_UNPULLABLE_KEY = f'.spec.containers.[].image | startswith("{UNPULLABLE_REGISTRY}/")'
_START_FAILED = ["ErrImagePull", "ImagePullBackOff", "RunContainerError"]
# the shim's error of Kata's DRA cold-plug gap, quoted in kata-containers PR #13323 (fixes
# #13322), with containerd's wrapping (fixtures/gpu/dra-pod/kata-events.yaml)
KATA_DRA_COLDPLUG = ("failed to create containerd task: failed to create shim task: device "
                     "/dev/vfio/devices/vfio0 is a known CDI device type but failed to match "
                     "any sibling by path or BDF: unknown")
# kubelet's texts (pkg/kubelet/images/image_manager.go: "Failed to pull image %q: %v",
# "Back-off pulling image %q"; containerd's resolver error for an unknown host)
_NO_SUCH_HOST = f"dial tcp: lookup {UNPULLABLE_REGISTRY}: no such host"

_PULL_FAILED_TEMPLATE = """\
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
  reason: ContainersNotReady
  status: "False"
  type: Ready
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
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
      reason: REASON
      message: {{ printf "MESSAGE" .image .image | Quote }}
{{ end }}
hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
podIP: {{ PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) \
( or .metadata.name "" ) ( or .metadata.namespace "" ) | Quote }}
phase: Pending
"""

_COLLECTOR_DONE_TEMPLATE = """\
{{ $now := Now }}
{{ $code := index .metadata.annotations "ANNOTATION" }}
conditions:
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
  status: "False"
  type: Ready
- lastProbeTime: null
  lastTransitionTime: {{ $now | Quote }}
  reason: PodCompleted
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
    terminated:
      exitCode: {{ $code }}
      finishedAt: {{ $now | Quote }}
      reason: REASON
      startedAt: {{ $now | Quote }}
{{ end }}
phase: PHASE
""".replace("ANNOTATION", SIM_EXIT_ANNOTATION)


def kwok_stages(cluster: ClusterProfile) -> list[dict[str, Any]]:
    """Pod stages: sandbox (delay per runtime class) -> PodReadyToStartContainers, then
    containers start -> Ready; an image under ``UNPULLABLE_REGISTRY`` fails to pull
    (ErrImagePull, then ImagePullBackOff) instead; a collector pod the simulator answered
    (annotation ``kgc.io/sim-exit-code``) ends Succeeded (exit 0) or Failed. Node and
    deletion stages come from kwok's own set."""
    lab = shape_of(cluster)
    kata = list(lab.kata_runtime_classes) or [lab.runtime_class]
    gap = [c for c in kata if c in lab.kata_without_dra_coldplug]
    alive = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}

    def stage(name: str, match: list[dict[str, Any]], delay_ms: int,
              event: dict[str, str] | None, template: str) -> dict[str, Any]:
        nxt: dict[str, Any] = {"statusTemplate": template}
        if event:
            nxt["event"] = event
        return {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": name},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {"matchExpressions": [alive, *match]},
                "delay": {"durationMilliseconds": delay_ms},
                "next": nxt,
            },
        }

    def sandbox(name: str, op: str, delay_ms: int, classes: list[str] | None = None,
                extra: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
        return stage(name, [
            {"key": ".status.podIP", "operator": "DoesNotExist"},
            {"key": ".spec.runtimeClassName", "operator": op, "values": classes or kata},
            {"key": _UNPULLABLE_KEY, "operator": "NotIn", "values": ["true"]},
            *extra,
        ], delay_ms, {
            "type": "Normal",
            "reason": "SandboxReady",
            "message": f"sandbox ready after simulated {delay_ms} ms ({name})",
        }, _SANDBOX_TEMPLATE)

    # Kata's DRA cold-plug gap (kata_without_dra_coldplug): the VM boots without the
    # DRA-allocated device and the container's start fails with the shim's error, as kata-
    # containers PR #13323 quotes it, in the kubelet's wording around it ("Error: %v",
    # reason Failed, pkg/kubelet/kuberuntime/kuberuntime_container.go; waiting reason
    # RunContainerError) - a pod with a claim from a template (spec.resourceClaims) or an
    # extended-resource claim the scheduler made (status.extendedResourceClaimStatus)
    no_claims = ({"key": ".spec.resourceClaims", "operator": "DoesNotExist"},
                 {"key": ".status.extendedResourceClaimStatus", "operator": "DoesNotExist"})

    def coldplug_gap(name: str, has: str) -> dict[str, Any]:
        return stage(name, [
            {"key": ".status.podIP", "operator": "DoesNotExist"},
            {"key": ".spec.runtimeClassName", "operator": "In", "values": gap},
            {"key": _UNPULLABLE_KEY, "operator": "NotIn", "values": ["true"]},
            {"key": has, "operator": "Exists"},
        ], lab.kata_sandbox_delay_ms, {
            "type": "Warning", "reason": "Failed", "message": f"Error: {KATA_DRA_COLDPLUG}",
        }, _PULL_FAILED_TEMPLATE.replace("REASON", "RunContainerError").replace(
            "MESSAGE", KATA_DRA_COLDPLUG.replace("%", "%%") + "%.0s%.0s"))

    # Kata pods without a DRA claim: every Kata class alike; with one: a sandbox on the
    # classes that play a Kata with the fix, the shim's failure on the others
    fixed = [c for c in kata if c not in gap]
    kata_stages = [sandbox("kgc-pod-sandbox-kata", "In", lab.kata_sandbox_delay_ms, kata,
                           no_claims)]
    for suffix, has in (("", ".spec.resourceClaims"),
                        ("-extended", ".status.extendedResourceClaimStatus")):
        if fixed:
            kata_stages.append(sandbox(f"kgc-pod-sandbox-kata-dra{suffix}", "In",
                                       lab.kata_sandbox_delay_ms, fixed,
                                       ({"key": has, "operator": "Exists"},)))
        if gap:
            kata_stages.append(coldplug_gap(f"kgc-pod-kata-dra-coldplug-gap{suffix}", has))

    ready = stage("kgc-pod-containers-ready", [
        {"key": ".status.phase", "operator": "In", "values": ["Pending"]},
        {
            "key": ".status.conditions.[]"
            ' | select( .type == "PodReadyToStartContainers" ) | .status',
            "operator": "In",
            "values": ["True"],
        },
        {"key": ".status.containerStatuses.[].state.running.startedAt",
         "operator": "DoesNotExist"},
        {"key": ".status.containerStatuses.[].state.waiting.reason", "operator": "NotIn",
         "values": _START_FAILED},
    ], lab.container_start_delay_ms,
        {"type": "Normal", "reason": "Started", "message": "Started container"},
        _READY_TEMPLATE)

    pull_failed = stage("kgc-pod-image-pull-failed", [
        {"key": ".status.podIP", "operator": "DoesNotExist"},
        {"key": _UNPULLABLE_KEY, "operator": "In", "values": ["true"]},
    ], lab.runc_sandbox_delay_ms, {
        "type": "Warning",
        "reason": "Failed",
        "message": f"Failed to pull image: failed to resolve reference: {_NO_SUCH_HOST} "
                   f"(simulated by the kgc lab: images under {UNPULLABLE_REGISTRY}/ cannot be "
                   "pulled)",
    }, _PULL_FAILED_TEMPLATE.replace("REASON", "ErrImagePull").replace(
        "MESSAGE", "failed to pull and unpack image %q: failed to resolve reference %q: "
        + _NO_SUCH_HOST))
    pull_backoff = stage("kgc-pod-image-pull-backoff", [
        {"key": ".status.containerStatuses.[].state.waiting.reason", "operator": "In",
         "values": ["ErrImagePull"]},
    ], 500, {
        "type": "Normal",
        "reason": "BackOff",
        "message": f"Back-off pulling image under {UNPULLABLE_REGISTRY}/ (simulated by the "
                   "kgc lab)",
    }, _PULL_FAILED_TEMPLATE.replace("REASON", "ImagePullBackOff").replace(
        "MESSAGE", "Back-off pulling image %q%.0s"))

    def collector(name: str, op: str, phase: str, reason: str) -> dict[str, Any]:
        code = f'.metadata.annotations["{SIM_EXIT_ANNOTATION}"]'
        match: list[dict[str, Any]] = [
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {"key": code, "operator": "Exists"},
            {"key": code, "operator": op, "values": ["0"]},
        ]
        return stage(name, match, 100, None, _COLLECTOR_DONE_TEMPLATE.replace(
            "REASON", reason).replace("PHASE", phase))

    return [
        *kata_stages,
        sandbox("kgc-pod-sandbox-other", "NotIn", lab.runc_sandbox_delay_ms),
        ready,
        pull_failed,
        pull_backoff,
        collector("kgc-collector-succeeded", "In", "Succeeded", "Completed"),
        collector("kgc-collector-failed", "NotIn", "Failed", "Error"),
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
