"""The trigger the run controls: the value KEDA reads, set by the run and stamped when the
endpoint acknowledged it.

``metrics-api`` in ``deploy`` mode: the run's own endpoint (``endpoint_server.py`` in a
ConfigMap, a Deployment and a Service in the run namespace), set through the API server's
service proxy (:class:`ProxyTrigger`); in ``url`` mode: the profile's endpoint, reached
directly (:class:`HttpTrigger`). ``kubernetes-workload``: the number of the run's marker pods
(:class:`WorkloadTrigger`).
"""

from __future__ import annotations

import importlib.resources
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.kube import builders
from kgc.layers.keda.evidence import Stamp
from kgc.layers.keda.profile import KedaProfile
from kgc.layers.keda.workloads import MARKER_LABEL, create

ENDPOINT = "kgc-keda-endpoint"


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


def marker_manifest(i: int, kp: KedaProfile) -> dict[str, Any]:
    """One marker pod of the ``kubernetes-workload`` trigger: the profile's image, no
    runtime class, tiny requests, gone at once when deleted."""
    return builders.pod(
        f"kgc-keda-marker-{i}",
        [builders.container("marker", kp.image, requests={"cpu": "1m", "memory": "4Mi"},
                            image_pull_policy="IfNotPresent")],
        labels={MARKER_LABEL: "true"}, node_selector=kp.endpoint.node_selector or None,
        restart_policy="Always", termination_grace_period_s=0)


def now() -> Stamp:
    return Stamp(time.monotonic(), time.time())


class TriggerError(Exception):
    """The run could not set its trigger value (one line, names the endpoint)."""


@dataclass
class HttpTrigger:
    """An endpoint kgc reaches directly (``url`` mode): ``PUT url {"value": N}``."""

    url: str
    timeout_s: float = 5.0

    @property
    def where(self) -> str:
        return self.url

    def put(self, value: float) -> Any:
        req = urllib.request.Request(  # noqa: S310 - the profile's URL
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


@dataclass
class Setup:
    """What the run made before measuring."""

    url: str
    trigger: Trigger
    clock: list[tuple[float, float, float]] = field(default_factory=list)


def setup(k: kube.Kube, run: kube.Run, kp: KedaProfile,
          clock: list[tuple[float, float, float]]) -> Setup:
    """The trigger endpoint (deploy mode: made and waited for; url: the profile's)."""
    if kp.trigger == "kubernetes-workload":
        return Setup("", WorkloadTrigger(k, run, kp), clock)
    if kp.endpoint.mode == "url":
        assert kp.endpoint.url is not None
        return Setup(kp.endpoint.url, HttpTrigger(kp.endpoint.url), clock)
    for m in endpoint_manifests(kp):
        create(run, m, clock)
    return Setup(endpoint_url(kp, run.namespace), ProxyTrigger(k, run.namespace), clock)


def wait_endpoint(k: kube.Kube, ns: str, timeout_s: float) -> None:
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
