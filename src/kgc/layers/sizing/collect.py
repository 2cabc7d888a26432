"""The sizing layer's live gather: the I/O half of ``sizing.*`` (the checks stay pure).

What one cluster run does, in order:

1. **Cluster objects** (read only, before any pod of ours exists): every Pod (all
   namespaces), Node and RuntimeClass, projected to what the static checks read (a pod's
   ``nodeName``, ``runtimeClassName``, ``overhead``, containers' resources, ``phase``; a node's
   allocatable/capacity; a RuntimeClass's handler and overhead). kgc's own pods (labelled with
   the profile's run label) are left out: they are not the cluster's workload.
2. **Pods** in a run namespace (:class:`kgc.kube.Run`: labelled, torn down on every exit):
   one per shape of the profile's matrix (``cluster.sizing.shapes``) with the shape's Kata
   RuntimeClass, and — for a Kata RuntimeClass the profile does not describe — one limit-less
   *probe* pod that shows the default VM. Every pod carries ``kgc.io/collector=sizing`` and
   runs kgc's one in-guest collector (:mod:`kgc.guest`, mounted from a ConfigMap) in its LAST
   app container, so that every other container (and, in Go's dynamic mode, its hot-plug) is
   already there when the guest is read; the other containers wait for the collector to
   finish (a shared ``emptyDir``), so the pod ends. :func:`kgc.kube.pods.run_pods` creates,
   watches (bounded) and reads the logs.
3. **The Kata configuration** per RuntimeClass, in the documented order, each source named:
   the node's own files (not available to a cluster run: said in the verdict), the
   profile's ``cluster.sizing.kata.<runtime-class>`` entry, the default VM measured by the
   probe pod.

Nothing here judges: unreadable parts become ``None`` with the reason in
:class:`SizingEvidence` (``errors``), pods that did not report become observations with an
``error`` — the checks turn those into skip/error verdicts that name the cause.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kgc.core.hostfs import parse_output
from kgc.core.model import EvidenceError
from kgc.core.target import TargetError
from kgc.evidence.guest import find_boundary
from kgc.guest import build_script
from kgc.kube import KubeError, Run
from kgc.kube.origin import KWOK_ANNOTATION, pod_stand_in, reporter
from kgc.kube.pods import run_pods
from kgc.layers.sizing.evidence import (
    SOURCE_NONE,
    ClusterObjects,
    GuestSize,
    KataConfigSource,
    ShapeObservation,
    SizingEvidence,
    resolve_config,
)
from kgc.layers.sizing.profile import (
    PROBE_SHAPE,
    PodShapeSpec,
    SizingProfile,
    shape_manifest,
    sizing_profile,
)
from kgc.progress import note

COLLECTOR_LABEL = "kgc.io/collector"
COLLECTOR_KIND = "sizing"
SHAPE_LABEL = "kgc.io/sizing-shape"
LAYER_LABEL = "kgc.io/layer"
CONFIGMAP = "kgc-sizing-collector"
SCRIPT_KEY = "collect.sh"
MOUNT = "/kgc"
SYNC = "/kgc-sync"  # emptyDir: the collector marks "done" there, the other containers exit
MAX_PROBES = 8  # probe pods per run (one per Kata RuntimeClass the profile does not describe)

NODE_NOT_READ = ("node: not read (a cluster run cannot read the nodes' Kata files; "
                 "`pytest -m runtime` on a node judges them)")

# annotations the sizing model reads (Kata's hypervisor overrides, CRI sandbox sizing)
_KEEP_ANNOTATIONS = re.compile(r"^(io\.katacontainers\.|io\.kubernetes\.cri\.sandbox-)")
_PULL_STUCK = ("ImagePullBackOff", "ErrImagePull", "InvalidImageName", "ErrImageNeverPull")


def _dns(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:limit].strip("-") or "x"


# -- cluster objects (projected) ---------------------------------------------------------------
def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _container(c: Any, init: bool) -> dict[str, Any] | Any:
    if not isinstance(c, Mapping):
        return c  # kept as it is: the checks report it as unreadable, naming the pod
    out = {k: c[k] for k in ("name", "resources") if k in c}
    if init and "restartPolicy" in c:
        out["restartPolicy"] = c["restartPolicy"]
    return out


def project_pod(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a Pod the static checks read (and nothing else: no env, no secrets)."""
    md, spec, st = _m(obj.get("metadata")), _m(obj.get("spec")), _m(obj.get("status"))
    meta: dict[str, Any] = {k: md[k] for k in ("name", "namespace") if k in md}
    ann = {k: v for k, v in _m(md.get("annotations")).items()
           if isinstance(k, str) and _KEEP_ANNOTATIONS.match(k)}
    if ann:
        meta["annotations"] = ann
    sp: dict[str, Any] = {k: spec[k] for k in ("runtimeClassName", "nodeName", "overhead",
                                               "resources") if k in spec}
    for key, init in (("initContainers", True), ("containers", False)):
        if key in spec:
            v = spec[key]
            sp[key] = [_container(c, init) for c in v] if isinstance(v, list) else v
    out: dict[str, Any] = {"metadata": meta, "spec": sp}
    if "phase" in st:
        out["status"] = {"phase": st["phase"]}
    return out


def project_node(obj: Mapping[str, Any]) -> dict[str, Any]:
    md, st = _m(obj.get("metadata")), _m(obj.get("status"))
    meta: dict[str, Any] = {k: md[k] for k in ("name",) if k in md}
    ann = {k: v for k, v in _m(md.get("annotations")).items() if k == KWOK_ANNOTATION}
    if ann:
        meta["annotations"] = ann
    status: dict[str, Any] = {k: st[k] for k in ("allocatable", "capacity") if k in st}
    version = _m(st.get("nodeInfo")).get("kubeletVersion")
    if isinstance(version, str):  # what tells a real kubelet from a stand-in (kgc.kube.origin)
        status["nodeInfo"] = {"kubeletVersion": version}
    return {"metadata": meta, "status": status}


def project_runtime_class(obj: Mapping[str, Any]) -> dict[str, Any]:
    md = _m(obj.get("metadata"))
    out: dict[str, Any] = {"metadata": {k: md[k] for k in ("name",) if k in md}}
    for k in ("handler", "overhead"):
        if k in obj:
            out[k] = obj[k]
    return out


def _own(obj: Mapping[str, Any], run_label: str) -> bool:
    labels = _m(_m(obj.get("metadata")).get("labels"))
    return run_label in labels


def cluster_objects(pods: Iterable[Mapping[str, Any]], nodes: Iterable[Mapping[str, Any]],
                    runtime_classes: Iterable[Mapping[str, Any]],
                    run_label: str) -> tuple[ClusterObjects, int]:
    """Projected objects, and how many of kgc's own pods were left out."""
    mine = 0
    kept = []
    for p in pods:
        if _own(p, run_label):
            mine += 1
            continue
        kept.append(project_pod(p))
    return (ClusterObjects(pods=tuple(kept), nodes=tuple(project_node(n) for n in nodes),
                           runtime_classes=tuple(project_runtime_class(r)
                                                 for r in runtime_classes)), mine)


def _list_all(kube: Any, resource: str, fn: Callable[..., Any]) -> list[dict[str, Any]]:
    """Every object of a list call, page by page, as the API's JSON (no typed models)."""
    items: list[dict[str, Any]] = []
    token: str | None = None
    for _ in range(10_000):  # bounded: 5 million objects
        kw: dict[str, Any] = {"limit": 500, "_preload_content": False, "_request_timeout": 60}
        if token:
            kw["_continue"] = token
        resp = kube.call("list", resource, fn, **kw)
        try:
            doc = json.loads(resp.data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise EvidenceError(f"list {resource}: the API answered no JSON ({exc})") from None
        page = doc.get("items") if isinstance(doc, Mapping) else None
        if not isinstance(page, list):
            raise EvidenceError(f"list {resource}: the answer has no items list")
        items.extend(x for x in page if isinstance(x, dict))
        token = _m(doc.get("metadata")).get("continue") or None
        if not token:
            return items
    raise EvidenceError(f"list {resource}: more than 10000 pages")


def read_cluster(kube: Any, run_label: str) -> tuple[ClusterObjects | None, str, int]:
    """(objects, why they could not be read, how many own pods were left out)."""
    from kubernetes.client.rest import ApiException


    try:
        pods = _list_all(kube, "pods", kube.core.list_pod_for_all_namespaces)
        nodes = _list_all(kube, "nodes", kube.core.list_node)
        rcs = _list_all(kube, "runtimeclasses.node.k8s.io", kube.node.list_runtime_class)
    except KubeError as exc:
        rem = f" — {exc.remediation}" if exc.remediation else ""
        return None, f"{exc}{rem}", 0
    except ApiException as exc:
        return None, f"listing the cluster's objects failed ({exc.status} {exc.reason})", 0
    except EvidenceError as exc:
        return None, str(exc), 0
    objs, mine = cluster_objects(pods, nodes, rcs, run_label)
    return objs, "", mine


# -- what to run -------------------------------------------------------------------------------
def _node_has(node: Mapping[str, Any], resource: str) -> bool:
    alloc = _m(_m(node.get("status")).get("allocatable"))
    v = alloc.get(resource)
    return isinstance(v, (str, int)) and str(v).strip() not in ("", "0")


def gpu_resource(objects: ClusterObjects | None, resources: Sequence[str]) -> str | None:
    """The first GPU resource name a node advertises (None: no node does); without the
    node list, the profile's first name."""
    if objects is None:
        return resources[0] if resources else None
    for r in resources:
        if any(_node_has(n, r) for n in objects.nodes):
            return r
    return None


def shape_runtime_class(shape: PodShapeSpec, sp: SizingProfile, cluster_rc: str) -> str:
    """The shape's own class, else the platform's (GPU shapes too: the gpu layer's pods run
    under the same class)."""
    return shape.runtime_class or cluster_rc


def kata_runtime_classes(objects: ClusterObjects | None, sp: SizingProfile,
                         cluster_rc: str) -> list[str]:
    """The Kata RuntimeClasses whose configuration the run needs: those of the shapes, those
    the profile describes, and those of the cluster's pods whose handler is Kata's."""
    want = {shape_runtime_class(s, sp, cluster_rc) for s in sp.shapes} | set(sp.kata)
    if objects is not None:
        handlers = {}
        for obj in objects.runtime_classes:
            name = _m(obj.get("metadata")).get("name")
            if isinstance(name, str):
                handlers[name] = obj.get("handler")
        for p in objects.pods:
            rc = _m(p.get("spec")).get("runtimeClassName")
            h = handlers.get(rc) if isinstance(rc, str) else None
            if isinstance(rc, str) and (rc == cluster_rc or (isinstance(h, str)
                                                              and h.startswith("kata"))):
                want.add(rc)
    return sorted(want)


def runtime_class_exists(objects: ClusterObjects | None, name: str) -> bool | None:
    if objects is None:
        return None
    return any(_m(r.get("metadata")).get("name") == name for r in objects.runtime_classes)


WAIT_TEMPLATE = ("i=0; while [ ! -e {sync}/done ] && [ $i -lt {n} ]; do sleep 1; "
                 "i=$((i+1)); done")
COLLECT_COMMAND = f"sh {MOUNT}/{SCRIPT_KEY}; rc=$?; : > {SYNC}/done; exit $rc"


def collector_configmap(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The ConfigMap carrying kgc's in-guest collector (``kgc guest --script``)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": namespace, "labels": dict(labels)},
            "data": {SCRIPT_KEY: build_script()}}


def shape_pod_manifest(
    shape: PodShapeSpec,
    *,
    runtime_class: str,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    image: str,
    gpu_resource: str | None = None,
    deadline_s: int = 600,
    cmd_timeout_s: int = 60,
) -> dict[str, Any]:
    """One shape's pod: the shape's containers and limits exactly (requests as the shape
    says), the collector in the last app container, labelled ``kgc.io/collector=sizing``."""
    wait = WAIT_TEMPLATE.format(sync=SYNC, n=max(int(deadline_s), 1))
    m = shape_manifest(shape, runtime_class=runtime_class,
                       gpu_resource=gpu_resource or "nvidia.com/gpu", pod_name=name,
                       namespace=namespace, image=image, command=("sh", "-c", wait),
                       labels={**labels, COLLECTOR_LABEL: COLLECTOR_KIND,
                               LAYER_LABEL: "sizing", SHAPE_LABEL: shape.name})
    spec = m["spec"]
    sync_mount = {"name": "kgc-sync", "mountPath": SYNC}
    apps = spec["containers"]
    for c in apps + [c for c in spec.get("initContainers", [])
                     if c.get("restartPolicy") == "Always"]:
        c["volumeMounts"] = [sync_mount]
    col = apps[-1]
    col["command"] = ["sh", "-c", COLLECT_COMMAND]
    col["env"] = [{"name": "KGC_CMD_TIMEOUT", "value": str(cmd_timeout_s)}]
    col["volumeMounts"] = [sync_mount, {"name": "kgc-collector", "mountPath": MOUNT,
                                        "readOnly": True}]
    spec.update(
        automountServiceAccountToken=False,
        enableServiceLinks=False,
        terminationGracePeriodSeconds=5,
        activeDeadlineSeconds=int(deadline_s),
        volumes=[{"name": "kgc-collector", "configMap": {"name": CONFIGMAP,
                                                         "defaultMode": 0o444}},
                 {"name": "kgc-sync", "emptyDir": {}}],
    )
    if shape.gpus and gpu_resource:
        spec["tolerations"] = [{"key": gpu_resource, "operator": "Exists",
                                "effect": "NoSchedule"}]
    m["metadata"]["annotations"] = {"kgc.io/runtime-class": runtime_class}
    return m


def collector_container(manifest: Mapping[str, Any]) -> str:
    return str(manifest["spec"]["containers"][-1]["name"])


@dataclass(frozen=True)
class PodPlan:
    """One pod to run: a shape (or the probe of a RuntimeClass), or why it is not run."""

    shape: str
    runtime_class: str
    manifest: dict[str, Any]
    probe: bool = False
    not_applicable: str = ""


def plan(objects: ClusterObjects | None, sp: SizingProfile, cluster: Any, *,
         namespace: str, labels: Mapping[str, str],
         probe_classes: Sequence[str] = ()) -> tuple[list[PodPlan], list[str]]:
    """The pods of one run (pure): probes first, then every shape. Notes say what was left
    out and why."""
    notes: list[str] = []
    cluster_rc = sp.runtime_class
    resources = sp.gpu_resources
    gres = gpu_resource(objects, resources)
    if gres is None and sp.gpu_request_mode == "dra-extended" and resources:
        # allocatable 0 by design: the scheduler hands the name to DRA (KEP-5004)
        gres = resources[0]
    deadline = int(sp.schedule_timeout_s + sp.finish_timeout_s + 60)

    def manifest(shape: PodShapeSpec, rc: str, name: str, gres: str | None) -> dict[str, Any]:
        return shape_pod_manifest(shape, runtime_class=rc, name=name, namespace=namespace,
                                  labels=labels, image=sp.image, gpu_resource=gres,
                                  deadline_s=deadline, cmd_timeout_s=sp.collector_timeout_s)

    out: list[PodPlan] = []
    for rc in probe_classes[:MAX_PROBES]:
        out.append(PodPlan(PROBE_SHAPE.name, rc,
                           manifest(PROBE_SHAPE, rc, f"kgc-probe-{_dns(rc, 50)}", None),
                           probe=True))
    if len(probe_classes) > MAX_PROBES:
        notes.append(f"only {MAX_PROBES} probe pods per run: not measured "
                     + ", ".join(probe_classes[MAX_PROBES:]))
    for s in sp.shapes:
        rc = shape_runtime_class(s, sp, cluster_rc)
        m = manifest(s, rc, f"kgc-sizing-{s.name}", gres)
        why = ""
        if s.gpus and sp.gpu_request_mode == "claim":
            why = ("not applicable: platform.gpu.request.mode is claim: a GPU shape requests "
                   "the extended resource, which no node offers under claim mode; its VM "
                   "sizing is not measured (use mode dra-extended to measure it; the gpu "
                   "layer judges the claim)")
        elif s.gpus and gres is None:
            why = ("not applicable: no node advertises " + " or ".join(resources)
                   + " (a GPU shape needs one)")
        elif runtime_class_exists(objects, rc) is False:
            why = (f"not applicable: the cluster has no RuntimeClass {rc!r} (set "
                   "platform.kata.runtime_class or the shape's runtime_class)")
        out.append(PodPlan(s.name, rc, m, not_applicable=why))
    return out, notes


# -- reading one pod's outcome -----------------------------------------------------------------
def _trim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(pod)
    md = dict(_m(out.get("metadata")))
    md.pop("managedFields", None)
    out["metadata"] = md
    return out


def _event_text(e: Mapping[str, Any]) -> str:
    reason = e.get("reason") or ""
    msg = e.get("message") or e.get("note") or ""
    return f"{reason}: {msg}".strip(": ")


def _terminated(pod: Mapping[str, Any], container: str) -> Mapping[str, Any] | None:
    for cs in _m(pod.get("status")).get("containerStatuses") or []:
        if isinstance(cs, Mapping) and cs.get("name") == container:
            t = _m(_m(cs.get("state")).get("terminated"))
            return t or None
    return None


def _first_lines(text: str, n: int = 3, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()][:n]
    return " | ".join(lines)[:limit]


def guest_from_log(text: str) -> tuple[GuestSize | None, str]:
    """The guest the collector's output describes, or why there is none (pure, total)."""
    boundary = find_boundary(text)
    if boundary is None:
        return None, ("its log holds no kgc collector output"
                      + (f": {_first_lines(text)!r}" if text.strip() else " (empty log)"))
    snap = parse_output(text, boundary)
    g = GuestSize.from_snapshot(snap)
    if not snap.complete:
        g = replace(g, problems=(*g.problems, "the collector output ends before its END "
                                 "record (truncated or killed)"))
    return g, ""


def observe(p: PodPlan, outcome: Any,
            nodes: Mapping[str, Mapping[str, Any]]) -> ShapeObservation:
    """One pod's :class:`ShapeObservation` from its ``PodOutcome`` (pure). ``nodes``: the
    cluster's Node objects by name; the pod rests on a stand-in when its node is no real
    kubelet's (or was never seen) or its events show its containers were played
    (:func:`kgc.kube.origin.pod_stand_in`)."""
    pod = _trim_pod(outcome.pod) if isinstance(outcome.pod, Mapping) else dict(p.manifest)
    spec, st = _m(pod.get("spec")), _m(pod.get("status"))
    node = spec.get("nodeName") if isinstance(spec.get("nodeName"), str) else ""
    why = pod_stand_in(node, nodes.get(node) if node else None, (
        (e.get("reason"), reporter(e)) for e in outcome.events or () if isinstance(e, Mapping)))
    name = _m(p.manifest.get("metadata")).get("name", p.shape)
    container = collector_container(p.manifest)
    waited = outcome.waited_s if isinstance(outcome.waited_s, (int, float)) else None
    obs = ShapeObservation(p.shape, pod, p.runtime_class, node=node or "",
                           simulated=why is not None, waited_s=waited, stand_in_why=why or "")
    if outcome.create_error:
        return replace(obs, error=f"pod {name}: the API refused it: {outcome.create_error}")
    phase = st.get("phase") or "unknown"
    term = _terminated(pod, container)
    log = outcome.log
    if log is not None and log.strip():
        guest, why = guest_from_log(log)
        if guest is not None:
            return replace(obs, guest=guest)
        code = f", exit {term.get('exitCode')}" if term else ""
        return replace(obs, error=f"pod {name} ({phase}{code}) on {node or 'no node'}: {why}")
    events = [_event_text(e) for e in outcome.events or () if isinstance(e, Mapping)]
    warn = [t for t, e in zip(events, outcome.events or (), strict=False)
            if isinstance(e, Mapping) and e.get("type") == "Warning"]
    ev_txt = f"; events: {' | '.join((warn or events)[-3:])}" if events else ""
    if outcome.timed_out:
        return replace(obs, error=(f"pod {name} did not finish within {outcome.waited_s:.0f} s "
                                   f"(phase {phase}, node {node or 'none'}){ev_txt}"))
    why = outcome.settled or f"phase {phase}"
    reason = st.get("reason") or (term or {}).get("reason") or ""
    msg = st.get("message") or (term or {}).get("message") or ""
    detail = "; ".join(x for x in (reason, msg) if x)
    log_err = f"; its log could not be read: {outcome.log_error}" if outcome.log_error else \
        "; its log is empty"
    return replace(obs, error=(f"pod {name} stopped ({why}{', ' + detail if detail else ''})"
                               f" without collector output{log_err}{ev_txt}"))


def settled(pod: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> str | None:
    """Why waiting for a sizing pod can stop early (its fate is known), else None."""
    st = _m(pod.get("status"))
    for cs in st.get("containerStatuses") or []:
        w = _m(_m(_m(cs).get("state")).get("waiting"))
        if w.get("reason") in _PULL_STUCK:
            return f"image pull: {w.get('reason')}: {w.get('message') or ''}".strip(": ")
    sandbox = [e for e in events if isinstance(e, Mapping)
               and e.get("reason") == "FailedCreatePodSandBox"]
    count = sum(int(e.get("count") or 1) if isinstance(e.get("count"), int) else 1
                for e in sandbox)
    if count >= 3:
        return f"the sandbox failed {count} times: {_event_text(sandbox[-1])}"
    return None


# -- the gather --------------------------------------------------------------------------------
def _run_all(run: Any, plans: Sequence[PodPlan], sp: SizingProfile) -> list[Any]:
    """Run every applicable pod through ``run_pods`` (one call per collector container
    name, since ``run_pods`` reads one named container); outcomes in ``plans`` order."""
    by_container: dict[str, list[int]] = {}
    for i, p in enumerate(plans):
        by_container.setdefault(collector_container(p.manifest), []).append(i)
    results: list[Any] = [None] * len(plans)
    for container, idx in by_container.items():
        outs = run_pods(run, [plans[i].manifest for i in idx], container=container,
                        schedule_timeout_s=sp.schedule_timeout_s,
                        finish_timeout_s=sp.finish_timeout_s, max_parallel=sp.max_parallel,
                        settled=settled)
        for i, o in zip(idx, outs, strict=True):
            results[i] = o
    return results


def nodes_by_name(objects: ClusterObjects | None) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for n in objects.nodes if objects else ():
        name = _m(n.get("metadata")).get("name")
        if isinstance(name, str):
            out[name] = n
    return out


def gather(ctx: Any) -> SizingEvidence:
    """The layer's evidence from a live cluster (``ctx.target`` is a ClusterTarget)."""

    profile = ctx.profile
    cluster = profile.cluster
    sp = sizing_profile(profile)
    kube = ctx.target.connect()
    try:
        kube.server_version()
    except KubeError as exc:
        raise TargetError(str(exc), exc.remediation) from None
    notes: list[str] = []
    errors: dict[str, str] = {}
    objects, why, mine = read_cluster(kube, cluster.label)
    if objects is None:
        errors["cluster"] = why
    elif mine:
        notes.append(f"{mine} pod(s) of kgc runs (label {cluster.label}) left out of the "
                     "cluster's pods")
    rcs = kata_runtime_classes(objects, sp, sp.runtime_class)
    probe_rcs = [rc for rc in rcs if rc not in sp.kata and sp.measure_with_probe
                 and runtime_class_exists(objects, rc) is not False]
    observations: list[ShapeObservation] = []
    probes: dict[str, ShapeObservation] = {}
    pods_error = ""
    try:
        with Run.for_profile(kube, cluster) as run:
            plans, pnotes = plan(objects, sp, cluster, namespace=run.namespace,
                                 labels=run.labels, probe_classes=probe_rcs)
            notes.extend(pnotes)
            live = [p for p in plans if not p.not_applicable]
            note("sizing: %d shape pod(s) to measure (%d not applicable to this cluster)",
                 len(live), len(plans) - len(live))
            if live:
                run.create(collector_configmap(run.namespace, run.labels))
            outcomes = dict(zip((id(p) for p in live), _run_all(run, live, sp), strict=True))
            knodes = nodes_by_name(objects)
            for p in plans:
                if p.not_applicable:
                    observations.append(ShapeObservation(p.shape, p.manifest, p.runtime_class,
                                                         error=p.not_applicable))
                    continue
                o = observe(p, outcomes[id(p)], knodes)
                if p.probe:
                    probes[p.runtime_class] = o
                else:
                    observations.append(o)
    except KubeError as exc:
        pods_error = f"{exc}" + (f" — {exc.remediation}" if exc.remediation else "")
    if pods_error:
        errors["pods"] = pods_error
        done = {o.shape for o in observations}
        cluster_rc = sp.runtime_class
        for s in sp.shapes:
            if s.name not in done:
                rc = _shape_rc(s, sp, cluster_rc)
                observations.append(ShapeObservation(
                    s.name, shape_manifest(s, runtime_class=rc), rc,
                    error=f"the pods could not be run: {pods_error}"))
    configs: dict[str, KataConfigSource] = {}
    for rc in rcs:
        node = KataConfigSource(rc, SOURCE_NONE, "", tried=(NODE_NOT_READ,))
        probe = probes.get(rc)
        if probe is None and rc not in sp.kata and sp.measure_with_probe:
            why_not = ("the pods could not be run" if pods_error else
                       f"the cluster has no RuntimeClass {rc!r}"
                       if runtime_class_exists(objects, rc) is False else
                       f"more than {MAX_PROBES} RuntimeClasses to probe")
            src = resolve_config(rc, node=node, profile_entry=None, probe=None)
            configs[rc] = replace(src, tried=(*src.tried[:-1],
                                              f"measured: no probe pod was run ({why_not})"))
            continue
        configs[rc] = resolve_config(rc, node=node, profile_entry=sp.kata.get(rc), probe=probe)
    if not sp.measure_with_probe:
        notes.append("cluster.sizing.measure_with_probe is off: RuntimeClasses without a "
                     "profile entry are not measured")
    return SizingEvidence(configs=configs, shapes=tuple(observations), cluster=objects,
                          notes=tuple(notes), errors=errors)


def _shape_rc(s: PodShapeSpec, sp: SizingProfile, cluster_rc: str) -> str:
    return shape_runtime_class(s, sp, cluster_rc)


def record(ev: SizingEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


__all__ = [
    "COLLECTOR_KIND",
    "COLLECTOR_LABEL",
    "NODE_NOT_READ",
    "PodPlan",
    "cluster_objects",
    "collector_configmap",
    "gather",
    "guest_from_log",
    "kata_runtime_classes",
    "observe",
    "plan",
    "project_node",
    "project_pod",
    "project_runtime_class",
    "read_cluster",
    "settled",
    "shape_pod_manifest",
]
