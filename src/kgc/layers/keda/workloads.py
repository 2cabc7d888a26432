"""The run's measured workloads (pure manifests, their names and labels) and the waits on them:
two identical Deployments at 0 replicas, one per class (the Kata RuntimeClass, the baseline),
each under a ScaledObject whose value is the desired replica count.

Every object the run makes goes through :func:`create`, which samples the clock against the
API's ``creationTimestamp`` (:func:`kgc.layers.keda.phases.estimate_clock_offset`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from kgc import kube
from kgc.kube import builders
from kgc.layers.keda.observe import parse_time
from kgc.layers.keda.profile import KedaProfile
from kgc.layers.keda.stalls import conditions_text

ROLE_LABEL = "kgc.io/keda-role"
MARKER_LABEL = "kgc.io/keda-marker"
KEDA_GROUP, KEDA_VERSION, SO_PLURAL = "keda.sh", "v1alpha1", "scaledobjects"
WORKLOAD_CONTAINER = "app"


def workload_name(role: str) -> str:
    return f"kgc-keda-{role}"


def runtime_classes(kp: KedaProfile) -> dict[str, str | None]:
    """role -> RuntimeClass of the measured pods (None: the cluster's default handler)."""
    out: dict[str, str | None] = {"kata": kp.runtime_class}
    if kp.compare_baseline:
        out["baseline"] = kp.baseline_runtime_class
    return out


def workload_manifest(role: str, kp: KedaProfile) -> dict[str, Any]:
    """The measured Deployment of one role: replicas 0, the role's RuntimeClass and
    placement (``placement.<role>``: nodeSelector, tolerations), the profile's image and
    GPU request; identical otherwise."""
    qty: dict[str, Any] = {"cpu": "50m", "memory": "32Mi"}
    limits: dict[str, Any] = {}
    if kp.gpu.per_pod:
        qty[kp.gpu_resource] = kp.gpu.per_pod
        limits[kp.gpu_resource] = kp.gpu.per_pod
    name = workload_name(role)
    place = kp.placement.baseline if role == "baseline" else kp.placement.kata
    dep = builders.deployment(
        name,
        [builders.container(WORKLOAD_CONTAINER, kp.image, requests=qty, limits=limits or None,
                            image_pull_policy="IfNotPresent")],
        replicas=0, labels={ROLE_LABEL: role}, runtime_class=runtime_classes(kp)[role],
        node_selector=place.node_selector or None,
        tolerations=[t.manifest() for t in place.tolerations],
        termination_grace_period_s=1,
    )
    return dep


def scaled_object_manifest(role: str, kp: KedaProfile, url: str) -> dict[str, Any]:
    """The role's ScaledObject: minReplicaCount 0, max K, the value is the desired replica
    count (``AverageValue`` target 1), active above 0.5. ``metrics-api``: the number at
    ``url``; ``kubernetes-workload``: the number of the run's marker pods (KEDA counts
    every matching pod not Succeeded/Failed, Pending ones included)."""
    name = workload_name(role)
    so = builders.scaled_object(
        name, target=name, url=url or "http://unused.invalid/", value_location="value",
        target_value="1", activation_target_value="0.5", metric_type="AverageValue",
        min_replicas=0, max_replicas=kp.replicas, polling_interval_s=kp.polling_interval_s,
        cooldown_period_s=kp.cooldown_period_s, labels={ROLE_LABEL: role})
    if kp.trigger == "kubernetes-workload":
        so["spec"]["triggers"] = [{"type": "kubernetes-workload", "metricType": "AverageValue",
                                   "metadata": {"podSelector": f"{MARKER_LABEL}=true",
                                                "value": "1", "activationValue": "0.5"}}]
    return so


def create(run: kube.Run, manifest: Mapping[str, Any],
            clock: list[tuple[float, float, float]]) -> dict[str, Any]:
    """``run.create`` with a clock sample: (wall before, creationTimestamp, wall after)."""
    before = time.time()
    obj = run.create(manifest)
    after = time.time()
    api = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if api is not None:
        clock.append((before, api, after))
    return obj


def wait_scaled_objects_ready(k: kube.Kube, ns: str, roles: Sequence[str],
                               timeout_s: float) -> None:
    names = [workload_name(r) for r in roles]

    def ready(objs: Mapping[str, Any]) -> Any:
        bad = []
        for n in names:
            so = objs.get(f"{ns}/{n}")
            conds = {c.get("type"): c.get("status")
                     for c in ((so or {}).get("status") or {}).get("conditions") or []
                     if isinstance(c, dict)}
            if conds.get("Ready") != "True":
                bad.append(f"{n}: {conditions_text(so) if so else 'not found'}")
        return True if not bad else kube.NotYet("; ".join(bad))

    kube.watch_until(f"ScaledObjects {', '.join(names)} Ready (the KEDA operator has "
                     "taken them and made their HPAs)", k.custom.list_namespaced_custom_object,
                     ready, timeout_s, KEDA_GROUP, KEDA_VERSION, ns, SO_PLURAL)
