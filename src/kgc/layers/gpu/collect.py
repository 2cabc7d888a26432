"""The live side of the gpu layer: what it reads from a cluster and the pods it runs there.

1. **Preflight** (reads only): RuntimeClasses, nodes, — when the profile names them —
   the device plugin's pods, and — when GPUs are allocated by DRA
   (``platform.gpu.request.mode`` dra-extended / claim) — API discovery, the DeviceClasses
   and the driver's ResourceSlices (:func:`dra_preflight`, :mod:`kgc.layers.gpu.dra`).
   A list the API refuses becomes ``None`` with the reason in ``ClusterGpuEvidence.errors``
   (or ``DraEvidence.errors``; its checks say so), never an exception.
2. **Plan** (pure, :func:`kgc.layers.gpu.plan.plan`): which GPU pods to create.
3. **Run** (``kgc.kube``): one labelled namespace per run, the collector ConfigMap, the
   GPU pods (at most ``cluster.gpu.max_parallel`` in flight), each followed by watches until
   it finished, its fate is known (:func:`kgc.layers.gpu.plan.settled`) or its budget ran
   out; its events and its collector's log are read, and everything is torn down — on
   success, failure, Ctrl-C and SIGTERM.
4. **Evidence**: :class:`GpuRunEvidence` (cluster, pods, plan notes), what a bundle
   records; the checks judge it, live or replayed, the same way.

An API server that does not answer at all is a :class:`~kgc.core.target.TargetError`
(every gpu check ``error`` with the transport's remediation). A run that cannot create
its namespace or follow its pods records each planned pod with that refusal as its
``create_error`` — ``gpu.pod-runs`` is then an ``error`` naming it, never a skip that could
let a cluster pass without a single GPU pod.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.core.target import TargetError
from kgc.evidence.guest import parse_guest_output
from kgc.kube import KubeError, PodOutcome
from kgc.layers.gpu import dra
from kgc.layers.gpu.checks import settings
from kgc.layers.gpu.dra import DraEvidence
from kgc.layers.gpu.dra_pod import claim_from_api, pod_claim_refs
from kgc.layers.gpu.evidence import (
    ClaimEvidence,
    ClusterGpuEvidence,
    GpuPodEvidence,
    GpuRunEvidence,
    node_from_api,
    plugin_pod_from_api,
    pod_from_api,
    runtime_class_from_api,
)
from kgc.layers.gpu.plan import (
    CONTAINER,
    PodPlan,
    claim_template_manifest,
    collector_configmap,
    dra_pod_manifest,
    plan,
    settled,
)
from kgc.layers.gpu.profile import GpuProfile
from kgc.progress import note

CONFIGMAP = "kgc-gpu-collector"
LIST_TIMEOUT_S = 60
CLAIM_READ_WORKERS: int | None = None  # None: cluster.gpu.max_parallel; 0: in the caller


def _items(k: kube.Kube, resource: str, fn: Callable[..., Any], *args: Any,
           **kw: Any) -> list[dict[str, Any]]:
    """One list call, as the plain dicts the API served."""
    resp: Any = k.call("list", resource, fn, *args, _preload_content=False,
                       _request_timeout=LIST_TIMEOUT_S, **kw)
    doc = json.loads(resp.data)
    items = doc.get("items") if isinstance(doc, dict) else None
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _why(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        try:
            body = json.loads(exc.body or "")
        except (TypeError, ValueError):
            body = None
        msg = body.get("message") if isinstance(body, dict) else None
        return f"{exc.status} {exc.reason}: {msg or ''}".strip(": ")
    return str(exc)


def preflight(k: kube.Kube, gp: GpuProfile) -> ClusterGpuEvidence:
    """The cluster-wide facts the preflight checks judge and the plan is made from."""
    errors: dict[str, str] = {}

    def listed(name: str, resource: str, fn: Callable[..., Any], *args: Any,
               **kw: Any) -> list[dict[str, Any]] | None:
        try:
            return _items(k, resource, fn, *args, **kw)
        except (KubeError, ApiException, ValueError) as exc:
            errors[name] = _why(exc)
            return None

    rcs = listed("runtime_classes", "runtimeclasses.node.k8s.io", k.node.list_runtime_class)
    nodes = listed("nodes", "nodes", k.core.list_node)
    plugin = None
    if gp.device_plugin_selector:
        if gp.device_plugin_namespace:
            plugin = listed("plugin_pods", f"pods in {gp.device_plugin_namespace}",
                            k.core.list_namespaced_pod, gp.device_plugin_namespace,
                            label_selector=gp.device_plugin_selector)
        else:
            plugin = listed("plugin_pods", "pods (all namespaces)",
                            k.core.list_pod_for_all_namespaces,
                            label_selector=gp.device_plugin_selector)
    return ClusterGpuEvidence(
        dra=dra_preflight(k, gp) if gp.request.dra else None,
        runtime_classes=None if rcs is None else tuple(
            sorted((runtime_class_from_api(r) for r in rcs), key=lambda r: r.name)),
        nodes=None if nodes is None else tuple(
            sorted((node_from_api(n, gp.node_selector) for n in nodes), key=lambda n: n.name)),
        plugin_pods=None if plugin is None else tuple(
            sorted((plugin_pod_from_api(p) for p in plugin), key=lambda p: (p.node or "",
                                                                              p.name))),
        plugin_selector=gp.device_plugin_selector,
        plugin_namespace=gp.device_plugin_namespace,
        errors=errors,
    )


def dra_preflight(k: kube.Kube, gp: GpuProfile) -> DraEvidence:
    """DRA's cluster-scoped facts in three reads: API discovery (``/apis``: is
    resource.k8s.io/v1 served), the DeviceClasses, and the driver's ResourceSlices (one
    page of at most ``MAX_SLICES``, the rest counted). A refusal or a 404 is evidence with
    its reason in ``errors``, never an exception; the lists are not read where v1 is not
    served."""
    errors: dict[str, str] = {}

    def doc(name: str, resource: str, fn: Callable[..., Any], **kw: Any) -> Any:
        try:
            resp: Any = k.call("list" if name != "discovery" else "get", resource, fn,
                               _preload_content=False, _request_timeout=LIST_TIMEOUT_S, **kw)
            return json.loads(resp.data)
        except (KubeError, ApiException, ValueError) as exc:
            errors[name] = _why(exc)
            return None

    discovery = doc("discovery", "/apis", client.ApisApi(k.api).get_api_versions)
    classes = slices = None
    if discovery is not None and dra.VERSION in dra.api_versions_from_discovery(discovery):
        api = client.ResourceV1Api(k.api)
        classes = doc("device_classes", "deviceclasses.resource.k8s.io", api.list_device_class,
                      limit=dra.MAX_CLASSES)
        slices = doc("slices", "resourceslices.resource.k8s.io", api.list_resource_slice,
                     field_selector=f"spec.driver={gp.request.driver}", limit=dra.MAX_SLICES)
    return dra.evidence_from_api(discovery, classes, slices, driver=gp.request.driver,
                                 errors=errors)


def finish_budget_s(gp: GpuProfile) -> float:
    """How long a pod may take from its creation to its end: the pod's own
    activeDeadlineSeconds (start budget + the collector's) plus a margin, so that the API's
    deadline, which names itself in the pod's status, decides first."""
    return gp.start_timeout_s + gp.collector_timeout_s * 4 + 30


def pod_evidence(p: PodPlan, manifest: Mapping[str, Any], o: PodOutcome,
                 cluster: ClusterGpuEvidence, gp: GpuProfile) -> GpuPodEvidence:
    """One pod's outcome -> its evidence (the manifest stands in for a pod never created)."""
    obj = o.pod if o.pod is not None else manifest
    node_name = ((obj.get("spec") or {}) if isinstance(obj, Mapping) else {}).get("nodeName")
    scheduled = isinstance(node_name, str) and bool(node_name)
    return pod_from_api(
        obj,
        events=o.events,
        node=cluster.node(node_name if scheduled else p.node),
        target_node=p.node,
        resource=p.resource,
        count=p.count,
        guest=parse_guest_output(o.log) if o.log is not None else None,
        log_error=o.log_error,
        create_error=o.create_error,
        waited_s=o.waited_s,
        budget_s=finish_budget_s(gp) if scheduled else gp.schedule_timeout_s,
        timed_out=o.timed_out,
    )


def run_plan(k: kube.Kube, cluster_section: Any, gp: GpuProfile, cluster: ClusterGpuEvidence,
             plans: Sequence[PodPlan]) -> list[GpuPodEvidence]:
    """Create and follow the planned pods in one run namespace; tear it all down."""
    manifests: list[dict[str, Any]] = []
    try:
        with kube.Run.for_profile(k, cluster_section) as run:
            run.create(collector_configmap(
                CONFIGMAP, run.namespace, run.labels,
                cdh_url=gp.cc.attestation_url if gp.cc is not None else None))
            if gp.request.mode == "claim":  # in the run namespace: it goes with it
                for p in plans:
                    run.create(claim_template_manifest(p, gp, namespace=run.namespace,
                                                       labels=run.labels))
            manifests = [dra_pod_manifest(p, gp, namespace=run.namespace, configmap=CONFIGMAP,
                                          labels=run.labels) for p in plans]

            by_name = {p.name: p for p in plans}
            # a claim generated for a pod is released once the pod is done (the ResourceClaim
            # controller unreserves, deallocates and deletes it): read it while the pod
            # lives (ClaimReader), and at the end only if that was missed
            claims = ClaimReader(k, run.namespace, gp, CLAIM_READ_WORKERS
                                 if CLAIM_READ_WORKERS is not None else gp.max_parallel)

            def stop_early(pod: Mapping[str, Any],
                           events: Sequence[Mapping[str, Any]]) -> str | None:
                node = (pod.get("spec") or {}).get("nodeName")
                pname = str((pod.get("metadata") or {}).get("name"))
                p = by_name.get(pname, plans[0])
                ev = dataclasses.replace(
                    pod_from_api(pod, events=events, node=cluster.node(node),
                                 resource=p.resource, count=p.count),
                    request_mode=gp.request.mode)
                done = settled(ev, cluster)
                if gp.request.dra:
                    claims.saw(pod, settled=done is not None)
                return done

            try:
                outcomes = kube.run_pods(
                    run, manifests, container=CONTAINER,
                    schedule_timeout_s=gp.schedule_timeout_s,
                    finish_timeout_s=finish_budget_s(gp),
                    max_parallel=gp.max_parallel, settled=stop_early)
            except BaseException:
                claims.abandon()
                raise
            seen = claims.finish()
            dra = ([seen.get(p.name) or claims.read_now(o.pod)
                    for p, o in zip(plans, outcomes, strict=True)]
                   if gp.request.dra else [None] * len(outcomes))
    except (KubeError, ApiException, kube.WaitTimeout) as exc:
        # the run itself could not proceed (namespace refused, pods not watchable): each
        # planned pod carries that as its refusal, so gpu.pod-runs is an error naming it
        why = f"the gpu run could not proceed: {_why(exc)}"
        return [pod_from_api(
            manifests[i] if manifests else _stand_in(p, gp), node=cluster.node(p.node),
            target_node=p.node, resource=p.resource, count=p.count, create_error=why)
            for i, p in enumerate(plans)]
    out = [pod_evidence(p, m, o, cluster, gp)
           for p, m, o in zip(plans, manifests, outcomes, strict=True)]
    return [e if d is None else dataclasses.replace(e, **d) for e, d in zip(out, dra, strict=True)]


class ClaimReader:
    """Reads the ResourceClaims of a run's DRA pods at the moments the pods' watch loop
    reports (:meth:`saw`), and keeps per pod what the readings showed (:func:`merge_readings`).

    A pod's claims are read once per moment: when they are first named (maybe not allocated
    yet), when the pod is bound (the scheduler allocated and reserved them before binding),
    when it runs, and when its fate is known - and no more once everything was seen
    (:func:`observed`). The loop sees a pod's latest state only, and calls :meth:`saw` under
    its watch lock: each read runs on a worker of its own (``workers`` at most; 0 reads at
    once, in the caller), so that one pod's read never waits behind another's nor the loop
    behind a read - under load a read queued behind the others reached the API after its
    pod had finished and found the claim deleted. A read that still comes too late cannot
    erase what an earlier one saw."""

    def __init__(self, k: kube.Kube, namespace: str, gp: GpuProfile, workers: int) -> None:
        self._k, self._ns, self._gp = k, namespace, gp
        self._pool = (ThreadPoolExecutor(max_workers=workers,
                                         thread_name_prefix="kgc-gpu-claims")
                      if workers > 0 else None)
        self._lock = threading.Lock()
        self._seen: dict[str, dict[str, Any]] = {}
        self._read_at: set[tuple[str, str]] = set()  # (pod, moment) its claims were read
        self._slices_of: dict[str, list[dict[str, Any]]] = {}  # node -> its slices, once
        self._reads: list[Future[None]] = []

    def saw(self, pod: Mapping[str, Any], *, settled: bool) -> None:
        """The loop saw ``pod`` in this state (``settled``: its fate is known)."""
        pname = str((pod.get("metadata") or {}).get("name"))
        names, ext, _ = pod_claim_refs(pod)
        named = bool(names or ext)
        moment = ("settled" if settled else "running"
                  if (pod.get("status") or {}).get("phase") == "Running" else "scheduled"
                  if named and (pod.get("spec") or {}).get("nodeName") else "named"
                  if named else None)
        with self._lock:
            if (moment is None or (pname, moment) in self._read_at
                    or observed(self._seen.get(pname), names, pname)):
                return
            self._read_at.add((pname, moment))
        if self._pool is None:
            self._read(pname, pod)
        else:
            self._reads.append(self._pool.submit(self._read, pname, pod))

    def _read(self, pname: str, pod: Mapping[str, Any]) -> None:
        d = dra_evidence(self._k, self._ns, pod, self._gp, self._slices_of)
        with self._lock:
            self._seen[pname] = merge_readings(self._seen.get(pname), d, pname)

    def read_now(self, pod: Mapping[str, Any] | None) -> dict[str, Any]:
        """One read in the caller (a pod whose claims were never read while it lived)."""
        return dra_evidence(self._k, self._ns, pod, self._gp, self._slices_of)

    def finish(self) -> dict[str, dict[str, Any]]:
        """Wait for the reads under way; per pod, what they showed. Raises what a read
        raised beyond the API errors it records."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        for f in self._reads:
            f.result()
        return dict(self._seen)

    def abandon(self) -> None:
        """The run failed: drop the reads not started, do not wait for the others."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def dra_evidence(k: kube.Kube, namespace: str, pod: Mapping[str, Any] | None,
                 gp: GpuProfile,
                 slices_of: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """A DRA pod's claims (read back by name, with the allocated devices' attributes from
    the ResourceSlices of the pod's node - or, before the pod is bound, of the node the
    claim is allocated on: one list per node, kept in ``slices_of`` across calls) and its
    extendedResourceClaimStatus, as GpuPodEvidence fields. A claim that cannot be read is
    recorded with the reason (an error verdict names it), never left out silently. The
    claims are read first: they are what may be released any moment."""
    names, ext, mappings = pod_claim_refs(pod)
    api = client.ResourceV1Api(k.api)
    read: list[Any] = []  # per name: the claim object, or the evidence of why it is unread
    for n in names:
        try:
            resp: Any = k.call("get", "resourceclaims.resource.k8s.io",
                               api.read_namespaced_resource_claim, n, namespace,
                               _preload_content=False, _request_timeout=LIST_TIMEOUT_S)
            read.append(json.loads(resp.data))
        except (KubeError, ApiException, ValueError) as exc:
            read.append(ClaimEvidence(name=n, error=f"could not be read: {_why(exc)}"))
    node = ((pod or {}).get("spec") or {}).get("nodeName")
    nodes = [node] if node else list(dict.fromkeys(
        c.node for c in (claim_from_api(o) for o in read if not isinstance(o, ClaimEvidence))
        if c.node))
    cache = {} if slices_of is None else slices_of
    slices: list[Any] = []
    for nd in nodes[:4]:
        if nd not in cache:
            try:
                cache[nd] = _items(k, "resourceslices.resource.k8s.io",
                                   api.list_resource_slice, field_selector=f"spec.nodeName={nd}")
            except (KubeError, ApiException, ValueError):
                continue  # the device-match check then says the attributes were not recorded
        slices += cache[nd]
    claims = tuple(o if isinstance(o, ClaimEvidence) else claim_from_api(o, slices)
                   for o in read)
    return {"request_mode": gp.request.mode, "claims": claims, "extended_claim": ext,
            "extended_mappings": mappings}


def observed(reading: Mapping[str, Any] | None, names: Sequence[str], pod: str) -> bool:
    """Whether ``reading`` already shows each of ``names`` allocated and reserved for the
    pod, with its devices' slice attributes: nothing a later read can add while the pod
    lives, so the pod's claims are read no more."""
    claims = {c.name: c for c in (reading or {}).get("claims") or ()}
    return bool(names) and all(
        n in claims and _rank(claims[n], pod) == 2
        and all(r.device in claims[n].device_attributes for r in claims[n].results)
        for n in names)


def _rank(c: ClaimEvidence, pod: str) -> int:
    """How much a reading of a claim shows: 2 allocated and reserved for the pod, 1
    allocated, 0 anything else (not allocated yet or any more, deleted, unreadable)."""
    if c.error is not None or not c.allocated:
        return 0
    return 2 if pod in c.reserved_for else 1


def merge_readings(earlier: Mapping[str, Any] | None, later: Mapping[str, Any],
                   pod: str) -> dict[str, Any]:
    """Two readings of a pod's claims (:func:`dra_evidence`) as one: per claim the reading
    that shows the most (:func:`_rank`), the later one on a tie. The scheduler writes a
    claim's allocation and reservation before it binds the pod, and nothing changes them
    while the pod lives; once the pod is done the ResourceClaim controller unreserves,
    deallocates and deletes a claim generated for it. So a later reading that finds the
    claim released or gone (404) is its normal end, not evidence against the allocation
    an earlier reading observed; a claim never read allocated keeps its latest reading."""
    if earlier is None:
        return dict(later)
    before = {c.name: c for c in earlier.get("claims") or ()}
    claims = []
    for c in later.get("claims") or ():
        old = before.pop(c.name, None)
        claims.append(old if old is not None and _rank(old, pod) > _rank(c, pod) else c)
    claims += before.values()  # named before, not any more: keep what was read
    return {**earlier, **later, "claims": tuple(claims),
            "extended_claim": later.get("extended_claim") or earlier.get("extended_claim"),
            "extended_mappings": later.get("extended_mappings")
            or earlier.get("extended_mappings") or ()}


def _stand_in(p: PodPlan, gp: GpuProfile) -> dict[str, Any]:
    """What the pod would have been, for a run that never got to build it."""
    return {"metadata": {"name": p.name, "namespace": ""},
            "spec": {"runtimeClassName": gp.runtime_class,
                     "containers": [{"name": CONTAINER, "image": gp.image}]}}


def gather(ctx: Any) -> GpuRunEvidence:
    """The layer's gather: preflight, plan, run; the evidence of one run."""
    gp = settings(ctx.profile)
    k = ctx.target.connect()
    try:
        try:
            k.server_version()
        except KubeError as exc:
            raise TargetError(str(exc), exc.remediation) from None
        note("gpu: preflight of %s (nodes, RuntimeClass %s, GPU resources)", k.server,
             gp.runtime_class)
        cluster = preflight(k, gp)
        plans, notes = plan(cluster, gp)
        note("gpu: %d GPU pod(s) planned on %d node(s)%s", len(plans),
             len({p.node for p in plans}), "" if plans else f": {'; '.join(notes)[:300]}")
        pods = run_plan(k, ctx.profile.cluster, gp, cluster, plans) if plans else []
        return GpuRunEvidence(cluster, tuple(pods), tuple(notes))
    finally:
        k.close()
