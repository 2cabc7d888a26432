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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client import ResourceV1Api
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
            # lives, keep per claim the best reading (merge_readings), and read it at the
            # end only if that was missed
            seen: dict[str, dict[str, Any]] = {}

            read_at: set[tuple[str, str]] = set()  # (pod, moment) its claims were read
            slices_of: dict[str, list[dict[str, Any]]] = {}  # node -> its slices, listed once

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
                    # read its claims at each moment the watch loop sees, once: when they
                    # are first named (maybe not allocated yet), when the pod is bound (the
                    # scheduler allocated and reserved them before binding), when it runs,
                    # and when its fate is known. The loop sees the pod's latest state only:
                    # under load a read may reach the API after the pod finished and find
                    # its claim released or deleted, which must not erase what was seen
                    st = pod.get("status") or {}
                    named = any(pod_claim_refs(pod)[:2])
                    moment = ("settled" if done is not None else "running"
                              if st.get("phase") == "Running" else "scheduled"
                              if node and named else "named" if named else None)
                    if (moment is not None and (pname, moment) not in read_at
                            and not observed(seen.get(pname), pod_claim_refs(pod)[0], pname)):
                        read_at.add((pname, moment))
                        seen[pname] = merge_readings(seen.get(pname), dra_evidence(
                            k, run.namespace, pod, gp, slices_of), pname)
                return done

            outcomes = kube.run_pods(
                run, manifests, container=CONTAINER,
                schedule_timeout_s=gp.schedule_timeout_s,
                finish_timeout_s=finish_budget_s(gp),
                max_parallel=gp.max_parallel, settled=stop_early)
            dra = ([seen.get(p.name) or dra_evidence(k, run.namespace, o.pod, gp, slices_of)
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
    api = ResourceV1Api(k.api)
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
    lives (so the watch loop, which reads under load for every pod in turn, reads no more)."""
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
