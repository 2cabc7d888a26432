"""What the run reads of the cluster before it measures: KEDA's API served, its metrics
adapter Available, its operator Ready where the cluster shows it, the RuntimeClasses; and
the HPA sync period (the API's controller-manager pod, else the profile).
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.layers.keda.evidence import Preflight
from kgc.layers.keda.observe import controller_manager_sync_period
from kgc.layers.keda.profile import KedaProfile
from kgc.layers.keda.workloads import KEDA_GROUP, KEDA_VERSION, SO_PLURAL, runtime_classes

SO_CRD = "scaledobjects.keda.sh"
METRICS_APISERVICE = "v1beta1.external.metrics.k8s.io"
HPA_SYNC_DEFAULT_S = 15.0
PROFILE_HPA_SYNC_SOURCE = "profile cluster.keda.hpa_sync_period_s: not visible in the API"


def hpa_sync_period(k: kube.Kube, kp: KedaProfile) -> tuple[float | None, str]:
    """``--horizontal-pod-autoscaler-sync-period`` of kube-controller-manager and where it
    came from: its static pod in kube-system when the API shows one (kubeadm and most
    self-managed clusters), else the profile's ``hpa_sync_period_s`` (managed control
    planes do not show it); neither: (None, "") and the checks assume the Kubernetes
    default."""
    try:
        pods: Any = k.call("list", "pods", k.core.list_namespaced_pod, "kube-system",
                           label_selector="component=kube-controller-manager",
                           _request_timeout=15)
    except (kube.KubeError, ApiException):
        pods = None
    for p in (pods.items if pods is not None else []) or []:
        for c in p.spec.containers or []:
            args = list(c.command or []) + list(c.args or [])
            if not any("controller-manager" in a for a in args[:2]):
                continue
            v = controller_manager_sync_period(args)
            return (v if v is not None else HPA_SYNC_DEFAULT_S,
                    f"kube-controller-manager pod {p.metadata.name}"
                    + ("" if v is not None else " (flag not set: Kubernetes default)"))
    if kp.hpa_sync_period_s is not None:
        return kp.hpa_sync_period_s, PROFILE_HPA_SYNC_SOURCE
    return None, ""


def preflight(k: kube.Kube, kp: KedaProfile) -> Preflight:
    """KEDA's API served, its metrics adapter Available, its operator Ready where the
    cluster shows a Deployment for it, and the RuntimeClasses present."""
    missing: list[str] = []
    notes: list[str] = []
    installed: bool | None = None
    try:
        res: Any = k.call("get", f"/apis/{KEDA_GROUP}/{KEDA_VERSION}",
                          k.custom.get_api_resources, KEDA_GROUP, KEDA_VERSION,
                          _request_timeout=15)
        kinds = {r.name for r in res.resources or []}
        installed = SO_PLURAL in kinds
    except ApiException as exc:
        if exc.status != 404:
            raise
        installed = False
    if not installed:
        missing.append(f"CRD {SO_CRD}")
    ready: bool | None = None
    version: str | None = None
    if installed:
        try:
            svc: Any = k.call("get", "apiservices", k.registration.read_api_service,
                              METRICS_APISERVICE, _request_timeout=15)
            conds = {c.type: c for c in (svc.status.conditions or [])} if svc.status else {}
            av = conds.get("Available")
            if av is None or av.status != "True":
                ready = False
                notes.append(f"APIService {METRICS_APISERVICE} not Available"
                             + (f" ({av.reason}: {av.message})" if av is not None else ""))
            else:
                ready = True
        except ApiException as exc:
            if exc.status != 404:
                raise
            ready = False
            notes.append(f"APIService {METRICS_APISERVICE} missing (KEDA's metrics adapter "
                         "is not registered)")
        ready_op, version, op_note = _operator(k)
        if ready_op is False:
            ready = False
        if op_note:
            notes.append(op_note)
    for rc in sorted({c for c in runtime_classes(kp).values() if c}):
        try:
            k.call("get", "runtimeclasses", k.node.read_runtime_class, rc, _request_timeout=15)
        except ApiException as exc:
            if exc.status != 404:
                raise
            missing.append(f"RuntimeClass {rc}")
    return Preflight(keda_installed=installed, keda_version=version, missing=tuple(missing),
                     operator_ready=ready, message="; ".join(notes))


def _operator(k: kube.Kube) -> tuple[bool | None, str | None, str]:
    """(ready, version, note) of the keda-operator Deployment, wherever it is; (None, None,
    "") when the cluster shows none or the credentials may not list Deployments (then the
    run's own ScaledObjects becoming Ready is the proof that the operator works)."""
    try:
        deps: Any = k.call("list", "deployments", k.apps.list_deployment_for_all_namespaces,
                           label_selector="app.kubernetes.io/name=keda-operator",
                           _request_timeout=15)
    except (kube.KubeError, ApiException):
        return None, None, ""
    items = deps.items or []
    if not items:
        return None, None, ""
    d = items[0]
    labels = d.metadata.labels or {}
    version = labels.get("app.kubernetes.io/version")
    if not version:
        image = (d.spec.template.spec.containers or [None])[0]
        tag = str(getattr(image, "image", "") or "").rpartition(":")[2]
        version = tag or None
    want = d.spec.replicas if d.spec.replicas is not None else 1
    got = (d.status.ready_replicas or 0) if d.status else 0
    if got < max(want, 1):
        return False, version, (f"Deployment {d.metadata.namespace}/{d.metadata.name} has "
                                f"{got}/{want} Ready replicas")
    return True, version, ""
