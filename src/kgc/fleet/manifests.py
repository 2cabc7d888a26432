"""Pure builders of the fleet's Kubernetes objects (plain dicts) and its Sonobuoy plugin.

``deploy/fleet/daemonset.yaml`` and ``deploy/sonobuoy/kgc-node-plugin.yaml`` are these
builders' output with the defaults (``kgc fleet manifests``); a self-test keeps them equal.

The pod, and why each setting:

* the node's root at ``/host``, **read-only and recursively read-only**
  (``recursiveReadOnly: Enabled``, Kubernetes >= 1.30 with a runtime that supports it —
  containerd >= 2.0, CRI-O >= 1.30; on an older one the pod does not start, and
  ``recursive_read_only="IfPossible"`` falls back, then the pod prints its mounts and
  ``kgc fleet collect`` names any writable one). The node's /proc and /sys arrive through
  that mount: ``/host/proc`` is the node's procfs, so no ``hostPID`` is needed (no check
  reads the process table), and no ``hostNetwork`` (the node's name comes from the
  downward API, ``spec.nodeName``);
* root (uid 0: the node's files are root's) with every capability dropped except
  ``SYS_CHROOT`` (the collector runs the node's own ``sh``/``containerd`` under
  ``chroot /host``) and ``DAC_READ_SEARCH`` (read files another owner keeps 0600); no
  privilege escalation, a read-only root filesystem, the runtime's default seccomp profile;
* writable only: an ``emptyDir`` for the report and one for ``/tmp``;
* no ServiceAccount token (``automountServiceAccountToken: false``): the pod never talks to
  the API server; the verdict leaves through its log;
* **not** under Kata: the pod must see the node, not a microVM (leave ``runtimeClassName``
  unset — the node's default runtime — or name the runc class);
* scheduling: ``nodeSelector`` ``kgc.io/certify=true`` (label the nodes to certify) and a
  toleration of the ``nvidia.com/gpu`` NoSchedule taint GPU nodes commonly carry; change
  both for your fleet (``kgc fleet manifests --node-selector ... --toleration ...``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kgc import __version__

NAMESPACE = "kgc-system"
NAME = "kgc-node"
SERVICE_ACCOUNT = "kgc-node"
HOST_ROOT = "/host"
# the pod's scratch emptyDir mounted over the node's /tmp (lsinitramfs unpacks there)
HOST_SCRATCH = f"{HOST_ROOT}/tmp"
REPORT_DIR = "/var/lib/kgc/report"
IMAGE = f"localhost/kata-gpu-conformance:{__version__}"
PROFILE = "generic-nvidia-passthrough"
# every object carries these; the DaemonSet's pods are selected by FLEET_LABEL=<name>
PART_OF = {"kgc.io/part-of": "kata-gpu-conformance"}
FLEET_LABEL = "kgc.io/fleet"
COMPONENT_LABEL = "kgc.io/component"
NODE_SELECTOR = {"kgc.io/certify": "true"}
TOLERATIONS: tuple[Mapping[str, Any], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
SONOBUOY_RESULTS = "/tmp/sonobuoy/results"
SONOBUOY_PLUGIN = "kgc-node"
NODE_NAME_ENV = {"name": "KGC_NODE_NAME",
                 "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def labels(component: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**PART_OF, COMPONENT_LABEL: component, **(extra or {})}


def namespace(name: str = NAMESPACE) -> dict[str, Any]:
    """The fleet's namespace. Its pods mount a hostPath, which only Pod Security's
    ``privileged`` level admits (``baseline`` forbids hostPath volumes)."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {
                **labels("fleet"),
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/warn": "baseline"}}}


def service_account(name: str = SERVICE_ACCOUNT, ns: str = NAMESPACE) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns, "labels": labels("fleet")},
            "automountServiceAccountToken": False}


def node_run_args(profile: str = PROFILE, mode: str = "daemonset",
                  extra: Sequence[str] = ()) -> list[str]:
    return ["node-run", "--host-root", HOST_ROOT, "--profile", profile, "--mode", mode,
            "--report-dir", REPORT_DIR, *(["--", *extra] if extra else [])]


def security_context() -> dict[str, Any]:
    return {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True, "privileged": False,
            "capabilities": {"drop": ["ALL"], "add": ["SYS_CHROOT", "DAC_READ_SEARCH"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def host_mount(recursive_read_only: str | None = "Enabled") -> dict[str, Any]:
    m: dict[str, Any] = {"name": "host", "mountPath": HOST_ROOT, "readOnly": True}
    if recursive_read_only:
        m["recursiveReadOnly"] = recursive_read_only
    return m


def host_volume() -> dict[str, Any]:
    return {"name": "host", "hostPath": {"path": "/", "type": "Directory"}}


def host_daemonset(name: str, containers: Sequence[Mapping[str, Any]], *,
                   ns: str | None = NAMESPACE,
                   volumes: Sequence[Mapping[str, Any]] = (),
                   pod_labels: Mapping[str, str] | None = None,
                   service_account: str | None = SERVICE_ACCOUNT,
                   node_selector: Mapping[str, str] | None = None,
                   tolerations: Sequence[Mapping[str, Any]] = (),
                   runtime_class: str | None = None,
                   host_network: bool = False,
                   grace_s: int = 5) -> dict[str, Any]:
    """A DaemonSet whose pods mount the node's root (volume ``host``) and run
    ``containers``. The pods are selected by ``kgc.io/fleet=<name>``; every object and pod
    is labelled ``kgc.io/part-of`` and ``kgc.io/component``."""
    selector = {FLEET_LABEL: name}
    obj_labels = labels("node-run", {**(pod_labels or {}), **selector})
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": grace_s,
        "containers": [dict(c) for c in containers],
        "volumes": [host_volume(), *(dict(v) for v in volumes)],
    }
    if service_account:
        spec["serviceAccountName"] = service_account
    if host_network:
        spec["hostNetwork"] = True
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {}),
                            "labels": dict(obj_labels)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta,
        "spec": {"selector": {"matchLabels": selector},
                 "updateStrategy": {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxUnavailable": "100%"}},
                 "template": {"metadata": {"labels": obj_labels}, "spec": spec}},
    }


def node_run_container(image: str = IMAGE, *, profile: str = PROFILE, mode: str = "daemonset",
                       extra_args: Sequence[str] = (),
                       recursive_read_only: str | None = "Enabled",
                       name: str = "node-run") -> dict[str, Any]:
    """The container running ``kgc node-run`` (the image's entry point is ``kgc``)."""
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": node_run_args(profile, mode, extra_args),
        "env": [NODE_NAME_ENV, {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "securityContext": security_context(),
        # a run that could not start leaves its last words as the termination message
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                      "limits": {"memory": "1Gi"}},
        "volumeMounts": [host_mount(recursive_read_only),
                         {"name": "report", "mountPath": REPORT_DIR},
                         {"name": "tmp", "mountPath": "/tmp"},
                         # the same scratch volume as the chrooted node's /tmp (in the
                         # pod's mount namespace only): lsinitramfs unpacks there
                         {"name": "tmp", "mountPath": HOST_SCRATCH}],
    }


def scratch_volumes() -> list[dict[str, Any]]:
    return [{"name": "report", "emptyDir": {"sizeLimit": "64Mi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]


def fleet_daemonset(image: str = IMAGE, *, name: str = NAME, ns: str = NAMESPACE,
                    profile: str = PROFILE,
                    node_selector: Mapping[str, str] | None = None,
                    tolerations: Sequence[Mapping[str, Any]] | None = None,
                    runtime_class: str | None = None,
                    recursive_read_only: str | None = "Enabled",
                    extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """The fleet DaemonSet: ``kgc node-run`` on every node it selects."""
    return host_daemonset(
        name, [node_run_container(image, profile=profile, extra_args=extra_args,
                                  recursive_read_only=recursive_read_only)],
        ns=ns, volumes=scratch_volumes(),
        node_selector=NODE_SELECTOR if node_selector is None else node_selector,
        tolerations=TOLERATIONS if tolerations is None else tolerations,
        runtime_class=runtime_class)


def fleet_objects(image: str = IMAGE, **kw: Any) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, DaemonSet: what ``deploy/fleet/daemonset.yaml`` holds."""
    ns = kw.get("ns", NAMESPACE)
    return [namespace(ns), service_account(ns=ns), fleet_daemonset(image, **kw)]


def collector_rbac(ns: str = NAMESPACE) -> list[dict[str, Any]]:
    """What ``kgc fleet collect`` needs (read only): the fleet's DaemonSets, pods and their
    logs in its namespace, and the nodes (which ones the DaemonSet should cover). Bind it to
    the user or ServiceAccount that collects."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "kgc-fleet-collect", "namespace": ns,
                         "labels": labels("fleet-collect")},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                       "verbs": ["get", "list"]},
                      {"apiGroups": ["apps"], "resources": ["daemonsets"],
                       "verbs": ["get", "list"]}]}
    crole = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "kgc-fleet-collect", "labels": labels("fleet-collect")},
             "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}
    return [role, crole]


def sonobuoy_plugin(image: str = IMAGE, *, profile: str = PROFILE,
                    node_selector: Mapping[str, str] | None = None,
                    tolerations: Sequence[Mapping[str, Any]] | None = None,
                    recursive_read_only: str | None = "Enabled") -> dict[str, Any]:
    """A Sonobuoy plugin definition (not a Kubernetes object): a DaemonSet-driver plugin
    whose container runs ``kgc node-run --mode sonobuoy``, which writes the run's JUnit into
    ``$SONOBUOY_RESULTS_DIR`` (Sonobuoy mounts its ``results`` volume at
    /tmp/sonobuoy/results), then the path of that file into the ``done`` file there (the
    worker sidecar's signal to upload), then idles so the DaemonSet does not restart it.
    Sonobuoy adds the ``results`` volume and its worker container to ``podSpec``."""
    c = node_run_container(image, profile=profile, mode="sonobuoy",
                           recursive_read_only=recursive_read_only, name="plugin")
    c["volumeMounts"] = [m for m in c["volumeMounts"]] + [
        {"name": "results", "mountPath": SONOBUOY_RESULTS}]
    c["env"] = [*c["env"], {"name": "SONOBUOY_RESULTS_DIR", "value": SONOBUOY_RESULTS}]
    pod: dict[str, Any] = {
        "containers": [],
        "serviceAccountName": "sonobuoy-serviceaccount",
        "nodeSelector": dict(NODE_SELECTOR if node_selector is None else node_selector),
        "tolerations": [dict(t) for t in (TOLERATIONS if tolerations is None else tolerations)],
        "volumes": [host_volume(), *scratch_volumes()],
    }
    return {
        "sonobuoy-config": {
            "driver": "DaemonSet",
            "plugin-name": SONOBUOY_PLUGIN,
            "result-format": "junit",
            "description": "kata-gpu-conformance node layers (IOMMU, VFIO, persistence, "
                           "containerd/NRI, Kata) on every selected node, read-only",
        },
        "spec": c,
        "podSpec": pod,
    }


def sonobuoy_as_daemonset(plugin: Mapping[str, Any], name: str = "sonobuoy-kgc-node",
                          ns: str = NAMESPACE) -> dict[str, Any]:
    """The DaemonSet Sonobuoy would make of ``plugin`` (its podSpec, the plugin container,
    the ``results`` emptyDir Sonobuoy adds; the worker sidecar left out): what a server-side
    dry-run can validate, since the plugin file itself is not a Kubernetes object."""
    pod = dict(plugin["podSpec"])
    spec = {**{k: v for k, v in pod.items() if k not in ("containers", "volumes",
                                                         "serviceAccountName")},
            "automountServiceAccountToken": False,
            "containers": [dict(plugin["spec"])],
            "volumes": [*pod.get("volumes", []), {"name": "results", "emptyDir": {}}]}
    sel = {FLEET_LABEL: name}
    lab = labels("sonobuoy-plugin", sel)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": ns, "labels": dict(lab)},
            "spec": {"selector": {"matchLabels": sel},
                     "template": {"metadata": {"labels": dict(lab)}, "spec": spec}}}
