"""The live driver of the KEDA latency layer: it owns two scale-to-zero workloads, drives
them 0 → K → 0 with a trigger it controls, and records what the watches saw.

What one run does (every object labelled with the run, torn down by ``kgc.kube.Run`` on
exit, failure, Ctrl-C and SIGTERM)::

    preflight     KEDA's API group served (CRD scaledobjects.keda.sh), the external metrics
                  APIService Available, the RuntimeClasses; the operator's Deployment when
                  the cluster shows one
    endpoint      mode deploy: ConfigMap + Deployment + Service in the run namespace
                  (``endpoint_server.py`` on the profile's image); lab/url: an existing one
    workloads     two identical Deployments (replicas 0), the Kata class and the baseline
                  class, each under a ScaledObject (minReplicaCount 0, metrics-api trigger,
                  AverageValue target 1: value K -> K replicas); wait until both are Ready
                  (the operator is alive and has made their HPAs)
    repetitions   N times: open watches (pods, Deployments, HPAs, ScaledObjects, Events) at
                  a resourceVersion listed before the trigger -> raise the value to K ->
                  wait (bounded) for activation, then for K Ready pods per class -> lower
                  the value to 0 -> wait (bounded) until no pod of either class is left
    record        a ``KedaEvidence`` (see the recording contract in evidence.py)

Every timestamp is the client's receipt time of a watch event (``time.monotonic()`` and
``time.time()``, taken as the event is decoded, see ``kgc.kube.watch``), next to the API's
own whole-second timestamp. A wait that gives up becomes a ``Stall`` naming the phase; a
repetition that stalled ends the run (the next one would stall the same way, as long).

The stall classification, the manifests and the config readers are pure functions (unit
tested); ``measure()`` does the I/O.
"""

from __future__ import annotations

import importlib.resources
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import urllib3
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.kube import builders
from kgc.kube.origin import NodeOrigin
from kgc.kube.watch import EventWatcher, ObservedEvent, _Follower, _Watcher
from kgc.kube.watch import Stamp as KubeStamp
from kgc.layers.keda.evidence import (
    ClassRun,
    KedaEvidence,
    PodRecord,
    Preflight,
    Repetition,
    ScaleMark,
    ScalingConfig,
    Stall,
    Stamp,
)
from kgc.layers.keda.observe import (
    controller_manager_sync_period,
    deployment_replicas,
    hpa_desired,
    merge_observation,
    pod_observation,
    scaled_object_active,
    scaling_config,
)
from kgc.layers.keda.phases import estimate_clock_offset
from kgc.layers.keda.profile import KedaProfile

log = logging.getLogger("kgc.keda")

ROLE_LABEL = "kgc.io/keda-role"
MARKER_LABEL = "kgc.io/keda-marker"
ENDPOINT = "kgc-keda-endpoint"
KEDA_GROUP, KEDA_VERSION, SO_PLURAL = "keda.sh", "v1alpha1", "scaledobjects"
SO_CRD = "scaledobjects.keda.sh"
METRICS_APISERVICE = "v1beta1.external.metrics.k8s.io"
HPA_SYNC_DEFAULT_S = 15.0
WORKLOAD_CONTAINER = "app"


def workload_name(role: str) -> str:
    return f"kgc-keda-{role}"


def runtime_classes(kp: KedaProfile) -> dict[str, str | None]:
    """role -> RuntimeClass of the measured pods (None: the cluster's default handler)."""
    out: dict[str, str | None] = {"kata": kp.runtime_class}
    if kp.compare_baseline:
        out["baseline"] = kp.baseline_runtime_class
    return out


# ---------------------------------------------------------------------------------------
# manifests (pure)


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


def endpoint_url(kp: KedaProfile, namespace: str) -> str:
    """What KEDA reads in ``deploy`` mode: the run's Service by its cluster DNS name."""
    e = kp.endpoint
    return f"http://{ENDPOINT}.{namespace}.svc.{e.cluster_domain}:{e.port}/metric"


def endpoint_script() -> str:
    return (importlib.resources.files("kgc.layers.keda") / "endpoint_server.py").read_text()


def endpoint_manifests(kp: KedaProfile) -> list[dict[str, Any]]:
    """ConfigMap (the script), Deployment (1 replica, the profile's image, readiness on
    /healthz) and Service of the run's own trigger endpoint (``deploy`` mode)."""
    e = kp.endpoint
    labels = {"app": ENDPOINT}
    cm = builders.config_map(ENDPOINT, {"endpoint_server.py": endpoint_script()})
    c = builders.container(
        "endpoint", e.image, command=["python3", "/kgc/endpoint_server.py"],
        args=["--port", str(e.port)], requests={"cpu": "10m", "memory": "32Mi"},
        mounts=[builders.volume_mount("script", "/kgc")], image_pull_policy="IfNotPresent")
    c["ports"] = [{"containerPort": e.port, "name": "http"}]
    c["readinessProbe"] = {"httpGet": {"path": "/healthz", "port": e.port},
                           "periodSeconds": 1, "failureThreshold": 3}
    dep = builders.deployment(
        ENDPOINT, [c], replicas=1, labels=labels,
        node_selector=e.node_selector or None,
        volumes=[builders.config_map_volume("script", ENDPOINT, default_mode=0o444)],
        termination_grace_period_s=1)
    svc = builders.service(ENDPOINT, labels, {"http": e.port})
    return [cm, dep, svc]


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


def marker_manifest(i: int, kp: KedaProfile) -> dict[str, Any]:
    """One marker pod of the ``kubernetes-workload`` trigger: the profile's image, no
    runtime class, tiny requests, gone at once when deleted."""
    return builders.pod(
        f"kgc-keda-marker-{i}",
        [builders.container("marker", kp.image, requests={"cpu": "1m", "memory": "4Mi"},
                            image_pull_policy="IfNotPresent")],
        labels={MARKER_LABEL: "true"}, node_selector=kp.endpoint.node_selector or None,
        restart_policy="Always", termination_grace_period_s=0)


# ---------------------------------------------------------------------------------------
# stall classification (pure)

NEXT_PHASE = {"created": "scheduling", "scheduled": "sandbox", "sandbox_ready": "start",
              "started": "ready"}
_ORDER = ("created", "scheduled", "sandbox_ready", "started", "ready")


def stuck_phase(rec: PodRecord) -> str:
    """The phase a pod that is not Ready is in: the one after its last milestone."""
    last = "created"
    for m in _ORDER[:-1]:
        if m in rec.observed:
            last = m
    return NEXT_PHASE[last]


def ready_stalls(pods: Sequence[PodRecord], marks: Sequence[ScaleMark], k: int, *,
                 timeout_s: float, waited_s: float, at: Stamp,
                 hints: Mapping[str, str] | None = None) -> list[Stall]:
    """What a scale-up that did not reach K Ready pods within the wait was stuck in: one
    stall per pod that is not Ready (its phase, its last status), and one general stall
    for pods never created -- ``decision`` when the Deployment's desired replicas never
    reached K, ``creation`` when they did but the ReplicaSet made fewer pods.
    ``hints``: extra words per phase (e.g. the latest Warning event)."""
    hints = hints or {}
    out: list[Stall] = []
    for rec in pods:
        if "ready" in rec.observed:
            continue
        phase = stuck_phase(rec)
        detail = _with_hint(rec.detail, hints.get(rec.name, ""))
        out.append(Stall(phase, timeout_s, waited_s, detail or "not Ready", rec.name, at))
    short = k - len(pods)
    if short > 0:
        dep = [m.replicas for m in marks if m.source == "deployment"]
        hpa = [m.replicas for m in marks if m.source == "hpa"]
        top = max(dep, default=0)
        if top < k:
            words = (f"the Deployment's desired replicas reached {top} of {k}"
                     + (f" (HPA desiredReplicas at most {max(hpa)})" if hpa else ""))
            phase = "decision"
        else:
            words = (f"the Deployment was scaled to {top} but only {len(pods)} of {k} pods "
                     "were created")
            phase = "creation"
        out.append(Stall(phase, timeout_s, waited_s, _with_hint(words, hints.get(phase, "")),
                         None, at))
    return out


def _with_hint(detail: str, hint: str) -> str:
    """``detail; hint`` unless the hint's message already is in the detail."""
    msg = hint.partition(": ")[2].strip()
    if not hint or (msg and msg in detail):
        return detail
    return f"{detail}; {hint}" if detail else hint


def event_hint(events: Iterable[ObservedEvent], name: str | None = None,
               kinds: Sequence[str] = ()) -> str:
    """The latest Warning event about ``name`` (or any object of ``kinds``), in words."""
    hits = [e for e in events if e.type == "Warning"
            and (name is None or e.name == name) and (not kinds or e.kind in kinds)]
    if not hits:
        return ""
    e = max(hits, key=lambda e: e.received.mono)
    return f"{e.kind} {e.name} {e.reason}: {e.message}"[:300]


def conditions_text(obj: Any) -> str:
    """``Ready=False Reason: message, Active=...`` of an object's status conditions."""
    conds = ((obj or {}).get("status") or {}).get("conditions") if isinstance(obj, dict) else None
    parts = []
    for c in conds or []:
        if not isinstance(c, dict):
            continue
        s = f"{c.get('type')}={c.get('status')}"
        if c.get("status") != "True" and (c.get("reason") or c.get("message")):
            s += f" {c.get('reason') or ''}: {c.get('message') or ''}".rstrip(": ")
        parts.append(s)
    return ", ".join(parts) or "no conditions"


# ---------------------------------------------------------------------------------------
# the watch of one repetition


def _stamp(s: KubeStamp) -> Stamp:
    return Stamp(s.mono, s.wall)


def now() -> Stamp:
    return Stamp(time.monotonic(), time.time())


@dataclass
class RoleState:
    """What the watches showed for one role during one repetition."""

    role: str
    deployment: str
    pods: dict[str, PodRecord] = field(default_factory=dict)  # uid -> record
    listed: set[str] = field(default_factory=set)  # uids present before the trigger
    live: set[str] = field(default_factory=set)  # uids not yet DELETED
    marks: list[ScaleMark] = field(default_factory=list)
    replicas: int | None = None
    desired: int | None = None
    active: Stamp | None = None
    active_now: bool | None = None
    scaled_down: Stamp | None = None
    so: dict[str, Any] | None = None
    hpa: dict[str, Any] | None = None
    dep: dict[str, Any] | None = None

    def new_pods(self) -> list[PodRecord]:
        return [r for uid, r in self.pods.items() if uid not in self.listed]

    def ready_count(self) -> int:
        return sum(1 for r in self.new_pods() if "ready" in r.observed)

    def activated(self) -> bool:
        return (self.active is not None or any(m.replicas >= 1 for m in self.marks)
                or bool(self.new_pods()))


class ScaleWatcher(_Watcher):
    """Follows, from one list taken before the trigger, the run namespace's measured pods
    (by role label), Deployments, HPAs and ScaledObjects, and keeps a ``RoleState`` per
    role (receipt stamps taken by ``kgc.kube.watch`` as each event is decoded)."""

    def __init__(self, k: kube.Kube, namespace: str, roles: Sequence[str]) -> None:
        super().__init__()
        self.namespace = namespace
        self.states = {r: RoleState(r, workload_name(r)) for r in roles}
        self._by_name = {workload_name(r): r for r in roles}
        self.lowered: Stamp | None = None
        sel = {"label_selector": ROLE_LABEL}
        for name, fn, args, kw, handle in (
            ("pods", k.core.list_namespaced_pod, (namespace,), sel, self._pod),
            ("deployments", k.apps.list_namespaced_deployment, (namespace,), sel, self._dep),
            ("hpas", k.autoscaling.list_namespaced_horizontal_pod_autoscaler, (namespace,), {},
             self._hpa),
            ("scaledobjects", k.custom.list_namespaced_custom_object,
             (KEDA_GROUP, KEDA_VERSION, namespace, SO_PLURAL), {}, self._so),
        ):
            self._followers.append(_Follower(f"kgc-keda-{name}-{namespace}", fn, args, kw,
                                             handle, self._changed))

    def start(self) -> ScaleWatcher:
        super().start()
        return self

    def __enter__(self) -> ScaleWatcher:
        return self.start()

    def snapshot(self) -> dict[str, RoleState]:
        return self.states

    def wait(self, what: str, predicate: Callable[[dict[str, RoleState]], Any],
             timeout_s: float) -> Any:
        """Sleep until ``predicate(states)`` holds (woken by each event); ``WaitTimeout``."""
        return self._wait(what, self.snapshot, predicate, max(timeout_s, 0.0))

    def lower(self, at: Stamp) -> None:
        with self._lock:
            self.lowered = at
            for st in self.states.values():
                self._settle(st, at)

    # -- handlers (under no lock: take it)
    def _pod(self, kind: str, pod: dict[str, Any], s: KubeStamp) -> None:
        role = ((pod.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL)
        st = self.states.get(role) if isinstance(role, str) else None
        if st is None:
            return
        at = _stamp(s)
        obs = pod_observation(pod)
        uid = obs.uid or obs.name or "?"
        with self._lock:
            if kind == "LISTED":
                st.listed.add(uid)
            st.pods[uid] = merge_observation(st.pods.get(uid), obs, at)
            if kind == "DELETED":
                st.live.discard(uid)
            else:
                st.live.add(uid)
            self._settle(st, at)

    def _dep(self, kind: str, dep: dict[str, Any], s: KubeStamp) -> None:
        st = self._role_of((dep.get("metadata") or {}).get("name"))
        if st is None or kind == "DELETED":
            return
        at = _stamp(s)
        n = deployment_replicas(dep)
        with self._lock:
            st.dep = dep
            if n is not None and n != st.replicas:
                if kind != "LISTED":
                    st.marks.append(ScaleMark("deployment", n, at))
                st.replicas = n
            self._settle(st, at)

    def _hpa(self, kind: str, hpa: dict[str, Any], s: KubeStamp) -> None:
        ref = ((hpa.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
        st = self._role_of(ref)
        if st is None or kind == "DELETED":
            return
        at = _stamp(s)
        n = hpa_desired(hpa)
        with self._lock:
            st.hpa = hpa
            if n is not None and n != st.desired:
                if kind != "LISTED":
                    st.marks.append(ScaleMark("hpa", n, at))
                st.desired = n

    def _so(self, kind: str, so: dict[str, Any], s: KubeStamp) -> None:
        st = self._role_of((so.get("metadata") or {}).get("name"))
        if st is None or kind == "DELETED":
            return
        at = _stamp(s)
        active = scaled_object_active(so)
        with self._lock:
            st.so = so
            if active and not st.active_now and kind != "LISTED" and st.active is None:
                st.active = at
            st.active_now = active

    def _role_of(self, name: Any) -> RoleState | None:
        role = self._by_name.get(name) if isinstance(name, str) else None
        return self.states.get(role) if role else None

    def _settle(self, st: RoleState, at: Stamp) -> None:
        """Scale-down is complete at the first event after the trigger was lowered that
        leaves no pod of the role and the Deployment at 0 replicas."""
        if self.lowered is None or st.scaled_down is not None:
            return
        if not st.live and st.replicas == 0:
            st.scaled_down = at if at.mono >= self.lowered.mono else self.lowered


# ---------------------------------------------------------------------------------------
# triggers


class TriggerError(Exception):
    """The run could not set its trigger value (one line, names the endpoint)."""


@dataclass
class HttpTrigger:
    """An endpoint kgc reaches directly (``lab``/``url`` mode): ``PUT url {"value": N}``."""

    url: str
    timeout_s: float = 5.0

    @property
    def where(self) -> str:
        return self.url

    def put(self, value: float) -> Any:
        req = urllib.request.Request(  # noqa: S310 - the profile's (or the lab's) URL
            self.url, data=json.dumps({"value": value}).encode(), method="PUT",
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as r:  # noqa: S310
                return json.loads(r.read() or b"{}")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise TriggerError(f"PUT {self.url}: {type(exc).__name__}: {exc}") from None


@dataclass
class ProxyTrigger:
    """The run's own endpoint (``deploy`` mode), reached through the API server's service
    proxy (``PUT /api/v1/namespaces/NS/services/NAME/proxy/metric``): kgc needs no network
    path to the cluster's pods, only RBAC ``create`` on ``services/proxy``."""

    kube: kube.Kube
    namespace: str
    service: str = ENDPOINT
    timeout_s: float = 10.0

    @property
    def where(self) -> str:
        return f"service {self.namespace}/{self.service} (through the API server proxy)"

    def put(self, value: float) -> Any:
        api = self.kube.api
        try:
            method, url, headers, body, post = api.param_serialize(
                method="PUT",
                resource_path="/api/v1/namespaces/{namespace}/services/{name}/proxy/metric",
                path_params={"namespace": self.namespace, "name": self.service},
                header_params={"Content-Type": "application/json",
                               "Accept": "application/json"},
                body={"value": value}, auth_settings=["BearerToken"])
            resp = self.kube.call("create", "services/proxy", api.call_api, method, url,
                                  header_params=headers, body=body, post_params=post,
                                  _request_timeout=self.timeout_s)
            resp.read()
        except ApiException as exc:
            raise TriggerError(f"PUT {self.where}: {exc.status} {exc.reason}") from None
        except kube.KubeError as exc:
            raise TriggerError(f"PUT {self.where}: {exc}") from None
        if resp.status != 200:
            raise TriggerError(f"PUT {self.where}: HTTP {resp.status}: "
                               f"{(resp.data or b'')[:200]!r}")
        try:
            return json.loads(resp.data or b"{}")
        except ValueError as exc:
            raise TriggerError(f"PUT {self.where}: answer is not JSON ({exc})") from None


@dataclass
class WorkloadTrigger:
    """The ``kubernetes-workload`` trigger: the value is the number of the run's marker pods
    (created, or deleted with grace 0, in the run's namespace)."""

    cluster: kube.Kube
    run: kube.Run
    kp: KedaProfile
    timeout_s: float = 15.0

    @property
    def where(self) -> str:
        return f"marker pods {MARKER_LABEL}=true in {self.run.namespace}"

    def put(self, value: float) -> Any:
        k, ns = self.cluster, self.run.namespace
        want = int(value)
        if want != value or want < 0:
            raise TriggerError(f"{self.where}: a pod count must be a whole number, not {value}")
        try:
            pods: Any = k.call("list", "pods", k.core.list_namespaced_pod, ns,
                               label_selector=f"{MARKER_LABEL}=true",
                               _request_timeout=self.timeout_s)
            have = sorted(p.metadata.name for p in pods.items or []
                          if p.metadata.deletion_timestamp is None)
            for name in have[want:]:
                k.call("delete", "pods", k.core.delete_namespaced_pod, name, ns,
                       grace_period_seconds=0, _request_timeout=self.timeout_s)
            taken = set(have)
            i = 0
            while len(taken) < want:
                i += 1
                m = marker_manifest(i, self.kp)
                if m["metadata"]["name"] in taken:
                    continue
                self.run.create(m)
                taken.add(m["metadata"]["name"])
        except ApiException as exc:
            raise TriggerError(f"{self.where}: {exc.status} {exc.reason}") from None
        except kube.KubeError as exc:
            raise TriggerError(f"{self.where}: {exc}") from None
        return {"value": float(len(taken) if len(have) < want else want)}


Trigger = HttpTrigger | ProxyTrigger | WorkloadTrigger


def set_value(trigger: Trigger, value: float, timeout_s: float) -> Stamp:
    """Set the trigger value, retrying (bounded) while the endpoint does not answer; the
    stamp is taken right after the endpoint acknowledged the value."""
    last: list[str] = []

    def attempt() -> Any:
        try:
            doc = trigger.put(value)
        except TriggerError as exc:
            last[:] = [str(exc)]
            return kube.NotYet(str(exc))
        got = doc.get("value") if isinstance(doc, dict) else None
        if not isinstance(got, int | float) or isinstance(got, bool) or float(got) != value:
            last[:] = [f"the endpoint answered {str(doc)[:120]} instead of value {value:g}"]
            return kube.NotYet(last[0])
        return now()

    try:
        stamped: Stamp = kube.wait_for(f"trigger endpoint {trigger.where} to take value "
                                       f"{value:g}", attempt, timeout_s, interval_s=0.5)
    except kube.WaitTimeout as exc:
        raise TriggerError(str(exc) if not last else f"{last[0]} (gave up after "
                           f"{timeout_s:g} s)") from None
    return stamped


# ---------------------------------------------------------------------------------------
# preflight and configuration readers


def lab_run_dir(kubeconfig: str | None) -> Path | None:
    """The cluster lab's run directory of this kubeconfig: the lab writes its kubeconfig
    into the run directory next to ``state.json``; else ``$KGC_CLUSTER_RUN_DIR``."""
    cands = []
    if kubeconfig:
        cands.append(Path(kubeconfig).expanduser().resolve().parent)
    if os.environ.get("KGC_CLUSTER_RUN_DIR"):
        cands.append(Path(os.environ["KGC_CLUSTER_RUN_DIR"]))
    for c in cands:
        if (c / "state.json").is_file():
            return c
    return None


def _lab_state(kubeconfig: str | None) -> tuple[Path, dict[str, Any]]:
    """The cluster lab's ``state.json`` (read as data: the product never imports the labs)."""
    run_dir = lab_run_dir(kubeconfig)
    if run_dir is None:
        raise TriggerError(
            "endpoint mode lab: no cluster lab run directory next to the kubeconfig "
            f"({kubeconfig}) and $KGC_CLUSTER_RUN_DIR unset; use mode deploy on a real "
            "cluster")
    try:
        state = json.loads((run_dir / "state.json").read_text())
    except (OSError, ValueError) as exc:
        raise TriggerError(f"endpoint mode lab: {run_dir}/state.json unreadable ({exc})"
                           ) from None
    if not isinstance(state, dict):
        raise TriggerError(f"endpoint mode lab: {run_dir}/state.json is not a lab state")
    return run_dir, state


def lab_metric_url(kubeconfig: str | None) -> str:
    run_dir, state = _lab_state(kubeconfig)
    url = state.get("metric_url")
    if state.get("phase") != "up" or not isinstance(url, str) or not url:
        raise TriggerError(f"endpoint mode lab: the lab at {run_dir} has no metric endpoint "
                           f"(phase {state.get('phase')!r}; is it up? `kgc lab cluster "
                           "status`)")
    return url


def lab_hpa_sync_period(kubeconfig: str | None) -> tuple[float | None, str]:
    """The lab's kube-controller-manager runs as a process, not a pod: read its command
    line from /proc (only while the recorded pid still runs the recorded binary)."""
    try:
        _, state = _lab_state(kubeconfig)
    except TriggerError:
        return None, ""
    for p in state.get("processes") or []:
        if not isinstance(p, dict) or p.get("name") != "kube-controller-manager":
            continue
        pid = p.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool):
            continue
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        argv = args.split("\0")
        if not argv or argv[0] != p.get("exe"):
            continue  # the pid was reused by another program
        v = controller_manager_sync_period(argv)
        return (v if v is not None else HPA_SYNC_DEFAULT_S,
                "lab kube-controller-manager command line"
                + ("" if v is not None else " (flag not set: Kubernetes default)"))
    return None, ""


def hpa_sync_period(k: kube.Kube, kubeconfig: str | None) -> tuple[float | None, str]:
    """``--horizontal-pod-autoscaler-sync-period`` of kube-controller-manager when visible:
    its static pod in kube-system (kubeadm and most self-managed clusters), else the lab's
    process; managed control planes do not show it (None)."""
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
    return lab_hpa_sync_period(kubeconfig)


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


# ---------------------------------------------------------------------------------------
# the run


@dataclass
class Setup:
    """What the run made before measuring."""

    url: str
    trigger: Trigger
    clock: list[tuple[float, float, float]] = field(default_factory=list)


def _create(run: kube.Run, manifest: Mapping[str, Any],
            clock: list[tuple[float, float, float]]) -> dict[str, Any]:
    """``run.create`` with a clock sample: (wall before, creationTimestamp, wall after)."""
    from kgc.layers.keda.observe import parse_time

    before = time.time()
    obj = run.create(manifest)
    after = time.time()
    api = parse_time((obj.get("metadata") or {}).get("creationTimestamp"))
    if api is not None:
        clock.append((before, api, after))
    return obj


def _wait_endpoint(k: kube.Kube, ns: str, timeout_s: float) -> None:
    def ready(objs: Mapping[str, Any]) -> Any:
        pods = list(objs.values())
        for p in pods:
            if kube.pod_ready()(p):
                return True
        return kube.NotYet("; ".join(f"{p.metadata.name}: {kube.describe_pod(p)}"
                                     for p in pods) or "no endpoint pod yet")

    kube.watch_until(f"the trigger endpoint pod ({ns}, app={ENDPOINT}) Ready",
                     k.core.list_namespaced_pod, ready, timeout_s, ns,
                     label_selector=f"app={ENDPOINT}")


def _wait_scaled_objects_ready(k: kube.Kube, ns: str, roles: Sequence[str],
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


def setup(k: kube.Kube, run: kube.Run, kp: KedaProfile, kubeconfig: str | None,
          clock: list[tuple[float, float, float]]) -> Setup:
    """The trigger endpoint (deploy mode: made and waited for; lab/url: located)."""
    if kp.trigger == "kubernetes-workload":
        return Setup("", WorkloadTrigger(k, run, kp), clock)
    mode = kp.endpoint.mode
    if mode == "lab":
        url = lab_metric_url(kubeconfig)
        return Setup(url, HttpTrigger(url), clock)
    if mode == "url":
        assert kp.endpoint.url is not None
        return Setup(kp.endpoint.url, HttpTrigger(kp.endpoint.url), clock)
    for m in endpoint_manifests(kp):
        _create(run, m, clock)
    return Setup(endpoint_url(kp, run.namespace), ProxyTrigger(k, run.namespace), clock)


def _live_pods_words(st: RoleState, limit: int = 3) -> str:
    left = [r for uid, r in st.pods.items() if uid in st.live]
    words = [f"{r.name} ({r.detail or 'Ready'})" for r in left[:limit]]
    more = f" and {len(left) - limit} more" if len(left) > limit else ""
    return f"{len(left)} pod(s) left: {', '.join(words)}{more}" if left else "no pod left"


def repetition(k: kube.Kube, run: kube.Run, kp: KedaProfile, su: Setup, index: int,
               roles: Sequence[str]) -> tuple[dict[str, Repetition], bool]:
    """One 0 → K → 0 of every role; (repetitions by role, whether to go on)."""
    t = kp.timeouts
    K = kp.replicas  # noqa: N806 - K as in the issue
    stalls: dict[str, list[Stall]] = {r: [] for r in roles}
    trig: Stamp | None = None
    lowered: Stamp | None = None
    go_on = True
    events = EventWatcher(k, run.namespace).start()
    w = ScaleWatcher(k, run.namespace, roles).start()  # lists now: before the trigger
    try:
        try:
            trig = set_value(su.trigger, K, t.endpoint_s)
        except TriggerError as exc:
            at = now()
            for r in roles:
                stalls[r].append(Stall("trigger", t.endpoint_s, t.endpoint_s, str(exc), None,
                                       at))
            return _assemble(w, index, K, None, None, stalls), False
        log.info("keda repetition %d: trigger raised to %d", index, K)

        pending = set(roles)
        try:
            w.wait(f"the ScaledObjects of {', '.join(roles)} to activate",
                   lambda s: all(s[r].activated() for r in roles) or kube.NotYet(
                       ", ".join(f"{r}: replicas {s[r].replicas}, Active={s[r].active_now}"
                                 for r in roles)),
                   t.activation_s - (time.monotonic() - trig.mono))
        except kube.WaitTimeout:
            at = now()
            for r in roles:
                st = w.states[r]
                if st.activated():
                    continue
                hint = event_hint(events.events, st.deployment) or event_hint(
                    events.events, kinds=("ScaledObject", "HorizontalPodAutoscaler"))
                stalls[r].append(Stall(
                    "decision", t.activation_s, at.mono - trig.mono,
                    f"ScaledObject {st.deployment} never became active "
                    f"({conditions_text(st.so)}); Deployment replicas {st.replicas}"
                    + (f"; {hint}" if hint else ""), None, at))
                pending.discard(r)
                go_on = False

        def done(s: dict[str, RoleState]) -> Any:
            short = {r: s[r].ready_count() for r in pending if s[r].ready_count() < K}
            return not short or kube.NotYet(f"Ready pods {short} of {K}")

        try:
            w.wait(f"{K} Ready pods of each of {', '.join(sorted(pending))}", done,
                   t.ready_s - (time.monotonic() - trig.mono))
        except kube.WaitTimeout:
            at = now()
            for r in sorted(pending):
                st = w.states[r]
                if st.ready_count() >= K:
                    continue
                hints = {p.name: event_hint(events.events, p.name) for p in st.new_pods()}
                hints["decision"] = event_hint(events.events, kinds=(
                    "ScaledObject", "HorizontalPodAutoscaler"))
                hints["creation"] = event_hint(events.events, kinds=("ReplicaSet",))
                stalls[r].extend(ready_stalls(st.new_pods(), st.marks, K,
                                              timeout_s=t.ready_s,
                                              waited_s=at.mono - trig.mono, at=at,
                                              hints=hints))
                go_on = False
        log.info("keda repetition %d: scale-up %s", index, "complete" if go_on else "stalled")

        try:
            lowered = set_value(su.trigger, 0, t.endpoint_s)
        except TriggerError as exc:
            at = now()
            for r in roles:
                stalls[r].append(Stall("scale-down", t.scale_down_s, 0.0,
                                       f"the run could not lower its trigger: {exc}", None, at))
            return _assemble(w, index, K, trig, None, stalls), False
        w.lower(lowered)
        try:
            w.wait("no pod left of " + ", ".join(roles),
                   lambda s: all(s[r].scaled_down is not None for r in roles) or kube.NotYet(
                       "; ".join(f"{r}: {_live_pods_words(s[r])}, replicas {s[r].replicas}"
                                 for r in roles)),
                   t.scale_down_s)
        except kube.WaitTimeout:
            at = now()
            for r in roles:
                st = w.states[r]
                if st.scaled_down is not None:
                    continue
                stalls[r].append(Stall(
                    "scale-down", t.scale_down_s, at.mono - lowered.mono,
                    f"{_live_pods_words(st)}; Deployment replicas {st.replicas}; "
                    f"ScaledObject {conditions_text(st.so)}", None, at))
            go_on = False
        return _assemble(w, index, K, trig, lowered, stalls), go_on
    finally:
        w.stop()
        events.stop()


def _assemble(w: ScaleWatcher, index: int, k: int, trig: Stamp | None, lowered: Stamp | None,
              stalls: Mapping[str, list[Stall]]) -> dict[str, Repetition]:
    if w.error is not None:
        raise w.error
    out = {}
    with w._lock:
        for role, st in w.states.items():
            out[role] = Repetition(
                index=index, target_replicas=k, trigger=trig, active=st.active,
                scale=tuple(sorted(st.marks, key=lambda m: m.at.mono)),
                pods=tuple(st.new_pods()), lowered=lowered, scaled_down=st.scaled_down,
                stalls=tuple(stalls.get(role, ())))
    return out


def node_origins(k: kube.Kube, names: Iterable[str]) -> tuple[NodeOrigin, ...] | None:
    """The origin of every node a measured pod ran on (a real kubelet or a stand-in, see
    :mod:`kgc.kube.origin`), from one list of the nodes after the run (``list`` is what
    the certification role grants); a node that is gone by then is "not seen". None when
    the credentials may not list nodes: nothing is recorded then."""
    want = sorted(set(names))
    if not want:
        return ()
    try:
        listed: Any = k.core.list_node(_request_timeout=30)
    except ApiException as exc:
        if exc.status not in (401, 403):
            raise
        log.info("keda: node origins not recorded: list nodes refused (%s %s)",
                 exc.status, exc.reason)
        return None
    raw = {n.metadata.name: k.api.sanitize_for_serialization(n) for n in listed.items or []}
    return tuple(NodeOrigin.of(name, raw.get(name)) for name in want)


def _pod_nodes(reps: Mapping[str, Sequence[Repetition]]) -> set[str]:
    return {p.node for rs in reps.values() for rep in rs for p in rep.pods if p.node}


def measure(k: kube.Kube, profile: Any, kubeconfig: str | None = None) -> KedaEvidence:
    """Preflight, then the whole run. Raises only what ``gather`` turns into an error."""
    from kgc.layers.keda.checks import keda_profile

    kp = keda_profile(profile)
    pf = preflight(k, kp)
    if pf.missing or pf.keda_installed is False or pf.operator_ready is False:
        return KedaEvidence("preflight-failed", preflight=pf)
    roles = list(runtime_classes(kp))
    cluster = getattr(profile, "cluster", None)
    run = (kube.Run.for_profile(k, cluster) if cluster is not None else kube.Run(k))
    clock: list[tuple[float, float, float]] = []
    reps: dict[str, list[Repetition]] = {r: [] for r in roles}
    configs: dict[str, ScalingConfig] = {}
    with run:
        su = setup(k, run, kp, kubeconfig, clock)
        for role in roles:
            _create(run, workload_manifest(role, kp), clock)
            _create(run, scaled_object_manifest(role, kp, su.url), clock)
        try:
            if kp.trigger == "metrics-api" and kp.endpoint.mode == "deploy":
                _wait_endpoint(k, run.namespace, kp.timeouts.endpoint_s)
            set_value(su.trigger, 0, kp.timeouts.endpoint_s)
        except (kube.WaitTimeout, TriggerError) as exc:
            stall = Stall("trigger", kp.timeouts.endpoint_s, kp.timeouts.endpoint_s,
                          f"the trigger endpoint never answered: {exc}", None, now())
            return _evidence(pf, kp, roles, {r: [Repetition(1, kp.replicas, None,
                                                            stalls=(stall,))] for r in roles},
                             {}, clock, ())
        try:
            _wait_scaled_objects_ready(k, run.namespace, roles, kp.timeouts.endpoint_s)
        except kube.WaitTimeout as exc:
            pf = Preflight(pf.keda_installed, pf.keda_version, pf.missing, False,
                           "; ".join(x for x in (pf.message, str(exc)) if x))
            return KedaEvidence("preflight-failed", preflight=pf)
        sync, source = hpa_sync_period(k, kubeconfig)
        try:
            for i in range(1, kp.repetitions + 1):
                by_role, go_on = repetition(k, run, kp, su, i, roles)
                for r in roles:
                    reps[r].append(by_role[r])
                if not go_on:
                    log.info("keda: repetition %d stalled; the run ends here", i)
                    break
        finally:
            if isinstance(su.trigger, HttpTrigger):
                try:  # a shared (lab/url) endpoint is left at 0 for whoever comes next
                    su.trigger.put(0)
                except TriggerError as exc:
                    log.warning("keda: could not reset the trigger endpoint: %s", exc)
        for r in roles:
            name = workload_name(r)
            so = k.call("get", SO_PLURAL, k.custom.get_namespaced_custom_object, KEDA_GROUP,
                        KEDA_VERSION, run.namespace, SO_PLURAL, name)
            hpas: Any = k.call("list", "horizontalpodautoscalers",
                               k.autoscaling.list_namespaced_horizontal_pod_autoscaler,
                               run.namespace)
            hpa = next((k.api.sanitize_for_serialization(h) for h in hpas.items or []
                        if h.spec.scale_target_ref.name == name), None)
            configs[r] = scaling_config(so, hpa, hpa_sync_period_s=sync,
                                        hpa_sync_source=source)
        nodes = node_origins(k, _pod_nodes(reps))
    return _evidence(pf, kp, roles, reps, configs, clock, nodes)


def _evidence(pf: Preflight, kp: KedaProfile, roles: Sequence[str],
              reps: Mapping[str, list[Repetition]], configs: Mapping[str, ScalingConfig],
              clock: Sequence[tuple[float, float, float]],
              nodes: tuple[NodeOrigin, ...] | None) -> KedaEvidence:
    rcs = runtime_classes(kp)
    runs = {r: ClassRun(role=r, runtime_class=rcs[r], repetitions=tuple(reps[r]),
                        config=configs.get(r, ScalingConfig()), deployment=workload_name(r),
                        scaled_object=workload_name(r)) for r in roles}
    return KedaEvidence("done", preflight=pf, kata=runs.get("kata"),
                        baseline=runs.get("baseline"), clock=estimate_clock_offset(clock),
                        nodes=nodes)


def gather(ctx: Any) -> KedaEvidence:
    """The layer's ``gather``: connect (a ``TargetError`` names the kubeconfig problem),
    measure; the cluster's refusals and failures become ``status: error`` with the one-line
    message (they are the cluster's answer, not a kgc defect)."""
    k = ctx.target.connect()
    try:
        return measure(k, ctx.profile, getattr(ctx.target, "kubeconfig", None))
    except kube.KubeError as exc:
        return KedaEvidence("error", f"{exc}" + (f" -- {exc.remediation}"
                                                 if exc.remediation else ""))
    except ApiException as exc:
        return KedaEvidence("error", f"the API server answered {exc.status} {exc.reason}: "
                            f"{_api_message(exc)}")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        return KedaEvidence("error", f"lost the API server {k.server}: "
                            f"{type(exc).__name__}: {exc}")
    except kube.WaitTimeout as exc:
        return KedaEvidence("error", str(exc))
    except TriggerError as exc:
        return KedaEvidence("error", str(exc))
    finally:
        k.close()


def _api_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return str(exc.reason or "")
    return str(body.get("message") or exc.reason or "") if isinstance(body, dict) else ""
