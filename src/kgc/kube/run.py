"""A run: one namespace ``<prefix><run_id>`` and every object the run creates, labelled
``<label_key>=<run_id>`` (cluster-scoped ones too), torn down by label when the run ends —
on normal exit, on an exception, on Ctrl-C and on SIGTERM.

    with Run(kube, prefix="kgc-", label_key="kgc.io/run") as run:
        run.create(builders.pod("gpu", [...], labels=run.labels))
        ...
    # namespace and labelled cluster-scoped objects deleted here

``cleanup(kube, label_key, run_id=None, all_runs=False)`` deletes what runs left behind
(a SIGKILLed run cannot clean up after itself) and returns what it removed.
"""

from __future__ import annotations

import contextlib
import copy
import re
import signal
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kgc.kube import runrole
from kgc.kube.client import Kube, KubeError
from kgc.kube.wait import NotYet, WaitTimeout, wait_for_deleted, watch_until
from kgc.progress import note

DEFAULT_PREFIX = "kgc-"
DEFAULT_LABEL = "kgc.io/run"
# a run namespace's Pod Security labels (deploy/rbac's admission policy requires them)
POD_SECURITY = {"pod-security.kubernetes.io/enforce": "baseline",
                "pod-security.kubernetes.io/enforce-version": "latest"}

# Cluster-scoped kinds a run may create, and how to list/delete them by label.
CLUSTER_KINDS: tuple[str, ...] = (
    "runtimeclass", "clusterrolebinding", "clusterrole", "priorityclass",
)

# Well-known plurals of custom resources the cluster layers create.
PLURALS = {
    "ScaledObject": "scaledobjects",
    "ScaledJob": "scaledjobs",
    "TriggerAuthentication": "triggerauthentications",
    "ClusterTriggerAuthentication": "clustertriggerauthentications",
}
_CLUSTER_SCOPED = {
    "Namespace", "Node", "RuntimeClass", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
    "PersistentVolume", "StorageClass", "CustomResourceDefinition", "APIService",
    "ClusterTriggerAuthentication",
}
# apiVersion -> typed API class of the kubernetes client, by name: the client (37.x) loads
# an API class and the models it names on first access, ≈ 1.5 CPU-s for these eight, which
# every `kgc` and `pytest` process paid at import even when it never talks to a cluster
_TYPED = {
    "v1": "CoreV1Api",
    "apps/v1": "AppsV1Api",
    "batch/v1": "BatchV1Api",
    "node.k8s.io/v1": "NodeV1Api",
    "rbac.authorization.k8s.io/v1": "RbacAuthorizationV1Api",
    "scheduling.k8s.io/v1": "SchedulingV1Api",
    "autoscaling/v2": "AutoscalingV2Api",
    "policy/v1": "PolicyV1Api",
}


def _typed_api(api_version: str) -> Any:
    name = _TYPED.get(api_version)
    return None if name is None else getattr(client, name)


_RUN_ID = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def new_run_id() -> str:
    return uuid.uuid4().hex[:10]


def _snake(kind: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def create_object(kube: Kube, manifest: Mapping[str, Any],
                  namespace: str | None = None) -> dict[str, Any]:
    """Create ``manifest`` (a plain dict) with the typed API of its kind, or the custom
    objects API for custom resources; return the created object as a dict."""
    api_version, kind = str(manifest.get("apiVersion", "")), str(manifest.get("kind", ""))
    if not api_version or not kind:
        raise ValueError("a manifest needs apiVersion and kind")
    scoped = kind not in _CLUSTER_SCOPED
    ns = namespace or (manifest.get("metadata") or {}).get("namespace")
    api_cls = _typed_api(api_version)
    if api_cls is not None and scoped and not ns:
        raise ValueError(f"{kind} {manifest.get('metadata', {}).get('name')!r} is namespaced: "
                         "give a namespace")
    resource = _snake(kind)
    if api_cls is not None:
        api = api_cls(kube.api)
        if scoped:
            fn = getattr(api, f"create_namespaced_{resource}")
            created = kube.call("create", f"{resource}s", fn, ns, manifest)
        else:
            fn = getattr(api, f"create_{resource}")
            created = kube.call("create", f"{resource}s", fn, manifest)
        return dict(kube.api.sanitize_for_serialization(created))
    group, _, version = api_version.rpartition("/")
    plural, scoped = _custom_resource(kube, group, version, kind, scoped)
    if scoped:
        if not ns:
            raise ValueError(f"{kind} {manifest.get('metadata', {}).get('name')!r} is "
                             "namespaced: give a namespace")
        made: Any = kube.call("create", f"{plural}.{group}",
                              kube.custom.create_namespaced_custom_object,
                              group, version, ns, plural, manifest)
    else:
        made = kube.call("create", f"{plural}.{group}", kube.custom.create_cluster_custom_object,
                         group, version, plural, manifest)
    return dict(made)


_DISCOVERED: dict[tuple[str, str, str], dict[str, tuple[str, bool]]] = {}


def _custom_resource(kube: Kube, group: str, version: str, kind: str,
                     default_scoped: bool) -> tuple[str, bool]:
    """(plural, namespaced) of a custom resource kind, from the API's discovery document
    (cached per server); the well-known ``PLURALS`` when discovery does not answer."""
    key = (kube.server, group, version)
    if kind not in _DISCOVERED.get(key, {}):  # new kinds appear as CRDs are installed
        try:
            found: Any = kube.call("get", f"/apis/{group}/{version}",
                                   kube.custom.get_api_resources, group, version)
            _DISCOVERED[key] = {r.kind: (r.name, bool(r.namespaced))
                                for r in found.resources or [] if "/" not in r.name}
        except ApiException:
            pass  # not served (yet): the create below will say so
    hit = _DISCOVERED.get(key, {}).get(kind)
    if hit is not None:
        return hit
    return PLURALS.get(kind, kind.lower() + "s"), default_scoped


def with_labels(manifest: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    """A copy of ``manifest`` carrying ``labels`` on the object and on its pod template
    (so pods a Deployment creates carry them too)."""
    out = copy.deepcopy(dict(manifest))
    md = out.setdefault("metadata", {})
    md["labels"] = {**(md.get("labels") or {}), **labels}
    tmpl = (out.get("spec") or {}).get("template")
    if isinstance(tmpl, dict):
        tmd = tmpl.setdefault("metadata", {})
        tmd["labels"] = {**(tmd.get("labels") or {}), **labels}
    return out


@dataclass
class Run:
    """One run's namespace and labelled objects; a context manager that tears them down."""

    kube: Kube
    prefix: str = DEFAULT_PREFIX
    label_key: str = DEFAULT_LABEL
    run_id: str = field(default_factory=new_run_id)
    keep: bool = False  # leave everything in place (debugging)
    ready_timeout_s: float = 60.0  # for the namespace's default ServiceAccount
    teardown_wait_s: float = 0.0  # >0: wait that long for the deleted namespace to go
    bind_role: bool = True  # bind kgc-certify-run to the caller in the namespace (runrole)
    # the namespace's Pod Security labels: baseline for every layer's run; only an admin's
    # run of a host-reading pod (the lab's in-cluster host run) asks for more, and the
    # certification role's admission policy refuses that
    pod_security: Mapping[str, str] = field(default_factory=lambda: dict(POD_SECURITY))
    notes: list[str] = field(default_factory=list, init=False)
    created: list[str] = field(default_factory=list, init=False)
    removed: list[str] = field(default_factory=list, init=False)
    _old_sigterm: Any = field(default=None, init=False, repr=False)
    _installed: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not _RUN_ID.match(self.run_id) or len(self.namespace) > 63:
            raise ValueError(f"run id {self.run_id!r} does not make a valid namespace name "
                             f"({self.namespace!r})")

    @classmethod
    def for_profile(cls, kube: Kube, cluster: Any, **kw: Any) -> Run:
        """A run named and labelled as the profile's ``cluster`` section says
        (``namespace_prefix``, ``label``)."""
        return cls(kube, prefix=cluster.namespace_prefix, label_key=cluster.label, **kw)

    @property
    def namespace(self) -> str:
        return f"{self.prefix}{self.run_id}"

    @property
    def labels(self) -> dict[str, str]:
        return {self.label_key: self.run_id}

    @property
    def selector(self) -> str:
        return f"{self.label_key}={self.run_id}"

    # ---- lifecycle
    def __enter__(self) -> Run:
        self._install_sigterm()
        try:
            self.setup()
        except BaseException as exc:
            self._teardown_and_restore(exc)
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        self._teardown_and_restore(exc)

    def setup(self) -> None:
        """Create the namespace (Pod Security ``baseline`` enforced: no run pod needs more,
        and the certification role may create no other), bind the run's in-namespace role
        (:mod:`kgc.kube.runrole`) and wait until pods can be created in it."""
        self.create({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": self.namespace, "labels": dict(self.pod_security)}})
        note("namespace %s created (the run's objects are labelled %s)", self.namespace,
             self.selector)
        if self.bind_role:
            self.notes.append(f"run role {runrole.RUN_ROLE}: {runrole.bind_run_role(self)}")

        def has_sa(objs: Mapping[str, Any]) -> Any:
            return (f"{self.namespace}/default" in objs
                    or NotYet("no default ServiceAccount yet (kube-controller-manager "
                              "creates it)"))

        self.kube.call("watch", "serviceaccounts", watch_until,
                       f"ServiceAccount {self.namespace}/default",
                       self.kube.core.list_namespaced_service_account, has_sa,
                       self.ready_timeout_s, self.namespace)

    def create(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``manifest`` labelled with the run (in the run's namespace when it is
        namespaced and names none); record it in ``created``."""
        body = with_labels(manifest, self.labels)
        obj = create_object(self.kube, body, namespace=self.namespace
                            if body["kind"] not in _CLUSTER_SCOPED else None)
        md = obj.get("metadata") or {}
        ns = md.get("namespace")
        self.created.append(f"{body['kind'].lower()}/" + (f"{ns}/" if ns else "")
                            + str(md.get("name")))
        return obj

    def teardown(self) -> list[str]:
        if self.keep:
            return []
        note("tearing down namespace %s%s", self.namespace,
             f" (waiting up to {self.teardown_wait_s:g} s)" if self.teardown_wait_s > 0 else "")
        self.removed = cleanup(self.kube, self.label_key, run_id=self.run_id,
                               wait_s=self.teardown_wait_s)
        return self.removed

    # ---- signals
    def _install_sigterm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers belong to the main thread; the caller owns signals
        self._old_sigterm = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, _raise_terminated)
        self._installed = True

    def _teardown_and_restore(self, pending: BaseException | None = None) -> None:
        """Tear down; a teardown failure while another exception is on its way out is
        noted on that exception (which stays the one raised), never swallowed silently."""
        try:
            with _deferred_signals():
                try:
                    self.teardown()
                except (KubeError, ApiException, WaitTimeout) as exc:
                    if pending is None:
                        raise
                    pending.add_note(f"kgc.kube: tearing down run {self.run_id} failed too: "
                                     f"{exc}; `kgc.kube.cleanup(kube, {self.label_key!r}, "
                                     f"run_id={self.run_id!r})` removes what is left")
        finally:
            if self._installed:
                old = self._old_sigterm
                signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)
                self._installed = False


class Terminated(SystemExit):
    """SIGTERM arrived during a run: unwinds like an exception (tearing the run down), then
    exits with 143 unless caught."""

    def __init__(self) -> None:
        super().__init__(128 + signal.SIGTERM)


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


@contextlib.contextmanager
def _deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while a teardown runs; re-raise the first one afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def note(signum: int, frame: FrameType | None) -> None:
        got.append(signum)

    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, note)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if got:
            if got[0] == signal.SIGINT:
                raise KeyboardInterrupt
            raise Terminated()


def _cluster_kind_ops(kube: Kube) -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    return {
        "runtimeclass": (kube.node.list_runtime_class, kube.node.delete_runtime_class),
        "clusterrolebinding": (kube.rbac.list_cluster_role_binding,
                               kube.rbac.delete_cluster_role_binding),
        "clusterrole": (kube.rbac.list_cluster_role, kube.rbac.delete_cluster_role),
        "priorityclass": (kube.scheduling.list_priority_class,
                          kube.scheduling.delete_priority_class),
    }


def cleanup(
    kube: Kube,
    label_key: str = DEFAULT_LABEL,
    run_id: str | None = None,
    all_runs: bool = False,
    wait_s: float = 0.0,
) -> list[str]:
    """Delete the namespaces and cluster-scoped objects (``CLUSTER_KINDS``) labelled
    ``label_key=run_id`` — or, with ``all_runs``, labelled ``label_key`` at all. Returns
    what it deleted, as ``kind/name`` ("namespace/kgc-abc", "runtimeclass/kgc-x").
    Objects already being deleted are not counted. ``wait_s`` > 0 waits (watch) until the
    namespaces are gone."""
    if run_id is None and not all_runs:
        raise ValueError("cleanup needs a run_id, or all_runs=True")
    selector = label_key if all_runs else f"{label_key}={run_id}"
    removed: list[str] = []
    body = client.V1DeleteOptions(propagation_policy="Background")
    for kind, (list_fn, delete_fn) in _cluster_kind_ops(kube).items():
        items: list[Any] = kube.call("list", f"{kind}s", list_fn,
                                     label_selector=selector).items or []
        for obj in items:
            if obj.metadata.deletion_timestamp is not None:
                continue
            if _delete(kube, kind, delete_fn, obj.metadata.name, body):
                removed.append(f"{kind}/{obj.metadata.name}")
    namespaces: list[str] = []
    listed: list[Any] = kube.call("list", "namespaces", kube.core.list_namespace,
                                  label_selector=selector).items or []
    for ns in listed:
        name = str(ns.metadata.name)
        if ns.metadata.deletion_timestamp is not None:
            namespaces.append(name)
            continue
        if _delete(kube, "namespace", kube.core.delete_namespace, name, body):
            removed.append(f"namespace/{name}")
            namespaces.append(name)
    if wait_s > 0 and namespaces:
        wait_for_deleted(kube, "namespace", namespaces, wait_s)
    return removed


def _delete(kube: Kube, kind: str, fn: Callable[..., Any], name: str,
            body: client.V1DeleteOptions) -> bool:
    try:
        kube.call("delete", f"{kind}s", fn, name, body=body)
    except ApiException as exc:
        if exc.status in (404, 409):  # gone meanwhile / already terminating
            return False
        raise
    return True
