"""Plain-dict manifests for what the cluster layers create: Pod, Deployment, ConfigMap,
Service and a KEDA ScaledObject with a ``metrics-api`` trigger.

Every builder takes ``labels`` (a run's ``Run.labels``) and puts them on the object and on
its pod template. Quantities may be given as ``int`` or ``str`` ("500m", "2Gi"); extended
resources (``nvidia.com/gpu``, ``nvidia.com/pgpu``) are just more keys of ``requests`` /
``limits``. Manifests are dicts so they can be recorded as evidence and replayed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Quantity = str | int
Manifest = dict[str, Any]


def _quantities(q: Mapping[str, Quantity] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (q or {}).items()}


def _meta(name: str, labels: Mapping[str, str] | None,
          annotations: Mapping[str, str] | None = None,
          namespace: str | None = None) -> dict[str, Any]:
    if not name:
        raise ValueError("a manifest needs a name")
    md: dict[str, Any] = {"name": name}
    if namespace:
        md["namespace"] = namespace
    if labels:
        md["labels"] = dict(labels)
    if annotations:
        md["annotations"] = dict(annotations)
    return md


def resources(requests: Mapping[str, Quantity] | None = None,
              limits: Mapping[str, Quantity] | None = None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if requests:
        out["requests"] = _quantities(requests)
    if limits:
        out["limits"] = _quantities(limits)
    return out


def volume_mount(name: str, mount_path: str, read_only: bool = True,
                 sub_path: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "mountPath": mount_path, "readOnly": read_only}
    if sub_path:
        m["subPath"] = sub_path
    return m


def config_map_volume(name: str, config_map: str, default_mode: int = 0o555,
                      items: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A volume with the keys of ConfigMap ``config_map`` as files (mode ``default_mode``:
    a collector script mounted this way is executable). ``items``: key -> file name."""
    cm: dict[str, Any] = {"name": config_map, "defaultMode": default_mode}
    if items:
        cm["items"] = [{"key": k, "path": p} for k, p in items.items()]
    return {"name": name, "configMap": cm}


def container(
    name: str,
    image: str,
    *,
    command: Sequence[str] = (),
    args: Sequence[str] = (),
    requests: Mapping[str, Quantity] | None = None,
    limits: Mapping[str, Quantity] | None = None,
    env: Mapping[str, str] | None = None,
    mounts: Sequence[Mapping[str, Any]] = (),
    image_pull_policy: str | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image}
    if command:
        c["command"] = list(command)
    if args:
        c["args"] = list(args)
    res = resources(requests, limits)
    if res:
        c["resources"] = res
    if env:
        c["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]
    if mounts:
        c["volumeMounts"] = [dict(m) for m in mounts]
    if image_pull_policy:
        c["imagePullPolicy"] = image_pull_policy
    return c


def toleration(key: str, operator: str = "Exists", value: str | None = None,
               effect: str | None = None) -> dict[str, Any]:
    t: dict[str, Any] = {"key": key, "operator": operator}
    if value is not None:
        t["value"] = value
    if effect is not None:
        t["effect"] = effect
    return t


def pod_spec(
    containers: Sequence[Mapping[str, Any]],
    *,
    runtime_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_name: str | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    volumes: Sequence[Mapping[str, Any]] = (),
    restart_policy: str | None = None,
    termination_grace_period_s: int | None = None,
) -> dict[str, Any]:
    if not containers:
        raise ValueError("a pod needs at least one container")
    spec: dict[str, Any] = {"containers": [dict(c) for c in containers]}
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if node_name:
        spec["nodeName"] = node_name
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if volumes:
        spec["volumes"] = [dict(v) for v in volumes]
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if termination_grace_period_s is not None:
        spec["terminationGracePeriodSeconds"] = termination_grace_period_s
    return spec


def pod(
    name: str,
    containers: Sequence[Mapping[str, Any]],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str | None = None,
    runtime_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_name: str | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    volumes: Sequence[Mapping[str, Any]] = (),
    restart_policy: str = "Never",
    termination_grace_period_s: int | None = None,
) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(name, labels, annotations, namespace),
        "spec": pod_spec(containers, runtime_class=runtime_class, node_selector=node_selector,
                         node_name=node_name, tolerations=tolerations, volumes=volumes,
                         restart_policy=restart_policy,
                         termination_grace_period_s=termination_grace_period_s),
    }


def deployment(
    name: str,
    containers: Sequence[Mapping[str, Any]],
    *,
    replicas: int = 0,
    labels: Mapping[str, str] | None = None,
    app_label: str = "app",
    namespace: str | None = None,
    runtime_class: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    volumes: Sequence[Mapping[str, Any]] = (),
    termination_grace_period_s: int | None = None,
) -> Manifest:
    """A Deployment selecting its pods by ``{app_label: name}``; the pod template carries
    those and ``labels``."""
    selector = {app_label: name}
    tmpl_labels = {**(labels or {}), **selector}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, tmpl_labels, namespace=namespace),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": tmpl_labels},
                "spec": pod_spec(containers, runtime_class=runtime_class,
                                 node_selector=node_selector, tolerations=tolerations,
                                 volumes=volumes,
                                 termination_grace_period_s=termination_grace_period_s),
            },
        },
    }


def config_map(name: str, data: Mapping[str, str], *,
               labels: Mapping[str, str] | None = None,
               namespace: str | None = None) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(name, labels, namespace=namespace),
        "data": {str(k): str(v) for k, v in data.items()},
    }


def service(name: str, selector: Mapping[str, str], ports: Mapping[str, int] | Sequence[int],
            *, labels: Mapping[str, str] | None = None, namespace: str | None = None,
            type_: str = "ClusterIP", target_ports: Mapping[str, int] | None = None
            ) -> Manifest:
    """A Service; ``ports`` maps port names to ports (or is a list of ports, named
    ``p<port>``); ``target_ports`` overrides a named port's targetPort."""
    named = dict(ports) if isinstance(ports, Mapping) else {f"p{p}": int(p) for p in ports}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, labels, namespace=namespace),
        "spec": {
            "type": type_,
            "selector": dict(selector),
            "ports": [{"name": n, "port": int(p), "protocol": "TCP",
                       "targetPort": int((target_ports or {}).get(n, p))}
                      for n, p in named.items()],
        },
    }


def scaled_object(
    name: str,
    *,
    target: str,
    url: str,
    value_location: str = "value",
    target_value: str | float = "1",
    activation_target_value: str | float | None = "0.5",
    metric_type: str = "AverageValue",
    min_replicas: int = 0,
    max_replicas: int = 4,
    polling_interval_s: int = 1,
    cooldown_period_s: int = 300,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    namespace: str | None = None,
) -> Manifest:
    """A KEDA ScaledObject scaling Deployment ``target`` on a ``metrics-api`` trigger
    (an HTTP JSON endpoint; ``value_location`` is the GJSON path of the number)."""
    meta: dict[str, Any] = {"url": url, "valueLocation": value_location,
                            "targetValue": str(target_value)}
    if activation_target_value is not None:
        meta["activationTargetValue"] = str(activation_target_value)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": _meta(name, labels, annotations, namespace),
        "spec": {
            "scaleTargetRef": {"name": target},
            "pollingInterval": polling_interval_s,
            "cooldownPeriod": cooldown_period_s,
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "triggers": [{"type": "metrics-api", "metricType": metric_type,
                          "metadata": meta}],
        },
    }
