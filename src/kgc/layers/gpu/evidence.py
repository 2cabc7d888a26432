"""Evidence of the GPU pod layer: plain, recorded, replayable.

Two levels:

- :class:`ClusterGpuEvidence` — the cluster-wide preflight facts: RuntimeClasses, nodes
  (capacity / allocatable / GPU labels / kernel), the device plugin's pods;
- :class:`GpuPodEvidence` — one GPU pod the run created: where it landed, what it asked for,
  how it ended (phase, conditions, container states, events, the API's refusal if any) and
  what its in-guest collector printed (:class:`kgc.evidence.guest.GuestEvidence`).

:class:`GpuRunEvidence` holds both for one run; it is what a bundle records.

The ``*_from_api`` functions turn Kubernetes objects (the JSON shape the API serves —
``ApiClient().sanitize_for_serialization(obj)`` of the official client's models) into these
records. They are total: a missing or mistyped field becomes ``None``/empty, never an
exception, and text is bounded. ``to_dict``/``from_dict`` are :mod:`kgc.evidence.record`'s:
``from_dict`` is the strict side, recorded evidence of the wrong shape raises
:class:`kgc.core.model.EvidenceError` naming the field path.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kgc.evidence.guest import GuestEvidence, clip
from kgc.evidence.present import BlankIsMissing, without_blanks
from kgc.evidence.record import OPTIONAL, Record, Rules, key
from kgc.kube.origin import played_by, stand_in_reason
from kgc.layers.gpu.dra import DraEvidence

MAX_EVENTS = 100  # per pod, the most recent kept
MAX_MESSAGE = 2048
FORMAT = "kgc-gpu/1"
CONTAINER_STATES = ("waiting", "running", "terminated", "unknown")

# Recorded by kgc.evidence.record: every key is written; on replay a key may be left out only
# where its field is optional (``X | None``), so a truncated record is refused, not defaulted.
RULES = Rules(keys=OPTIONAL)

# node labels worth keeping as evidence (GPU identity, placement); the rest is noise
_KEEP_LABEL = re.compile(
    r"^(nvidia\.com/|feature\.node\.kubernetes\.io/pci-10de|kubernetes\.io/hostname$|"
    r"node\.kubernetes\.io/instance-type$|katacontainers\.io/)"
)


def _s(v: Any, n: int = MAX_MESSAGE) -> str | None:
    """A string from an API field, bounded; anything else -> None."""
    return clip(v, n) if isinstance(v, str) else None


def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _l(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _str_map(v: Any, keep: re.Pattern[str] | None = None, limit: int = 256) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, x in _m(v).items():
        if len(out) >= limit:
            break
        if isinstance(k, str) and (keep is None or keep.match(k)):
            out[k[:256]] = (clip(str(x), 256) or "") if isinstance(x, str | int | float) else ""
    return out


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, str) and re.fullmatch(r"-?\d{1,12}", v.strip()):
        return int(v)
    return None


_SUFFIX = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20,
           "Gi": 2**30, "Ti": 2**40}


def quantity_count(q: str | None) -> int | None:
    """A Kubernetes quantity as a whole count ("4", "1k"); None when absent or fractional."""
    if q is None:
        return None
    m = re.fullmatch(r"\s*(\d{1,15})(k|M|G|T|Ki|Mi|Gi|Ti)?\s*", q)
    if not m:
        return None
    return int(m.group(1)) * _SUFFIX.get(m.group(2) or "", 1)


# --------------------------------------------------------------------------- cluster
@dataclass(frozen=True)
class RuntimeClassInfo(BlankIsMissing, Record):
    recorded_as = RULES

    name: str
    handler: str | None
    overhead: Mapping[str, str] = field(default_factory=dict)  # overhead.podFixed
    node_selector: Mapping[str, str] = field(default_factory=dict)  # scheduling.nodeSelector


def runtime_class_from_api(obj: Any) -> RuntimeClassInfo:
    o = _m(obj)
    return RuntimeClassInfo(
        name=_s(_m(o.get("metadata")).get("name"), 253) or "",
        handler=_s(o.get("handler"), 253),
        overhead=_str_map(_m(o.get("overhead")).get("podFixed")),
        node_selector=_str_map(_m(o.get("scheduling")).get("nodeSelector")),
    )


@dataclass(frozen=True)
class NodeInfo(BlankIsMissing, Record):
    recorded_as = RULES

    name: str
    kernel_version: str | None  # status.nodeInfo.kernelVersion
    labels: Mapping[str, str] = field(default_factory=dict)  # GPU-relevant labels only
    capacity: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, str] = field(default_factory=dict)
    ready: bool | None = None
    unschedulable: bool = False
    # whether a real kubelet runs the node (kgc.kube.origin): None when not recorded (older
    # bundles); True with the reason for a stand-in (a kwok node)
    stand_in: bool | None = field(default=None, metadata=key(omit_if_none="stand_in"))
    stand_in_why: str = field(default="", metadata=key(optional=True, omit_if_none="stand_in"))

    def count(self, resource: str, which: str = "allocatable") -> int | None:
        src = self.allocatable if which == "allocatable" else self.capacity
        return quantity_count(src.get(resource))

    def gpu_resources(self) -> dict[str, str]:
        """Every nvidia.com/* capacity the node advertises (names differ between stacks)."""
        return {k: v for k, v in self.capacity.items() if k.startswith("nvidia.com/")}


def node_from_api(obj: Any, selector_keys: Collection[str] = ()) -> NodeInfo:
    """A Node API object -> :class:`NodeInfo`; its labels are the GPU/placement ones of
    :data:`_KEEP_LABEL` plus those whose key ``cluster.gpu.node_selector`` names (the checks
    match the selector against the kept labels: a label dropped here would make a matching
    node look unselected)."""
    o = _m(obj)
    st = _m(o.get("status"))
    ready = None
    for c in _l(st.get("conditions")):
        if _m(c).get("type") == "Ready":
            ready = _m(c).get("status") == "True"
    return NodeInfo(
        name=_s(_m(o.get("metadata")).get("name"), 253) or "",
        kernel_version=_s(_m(st.get("nodeInfo")).get("kernelVersion"), 256),
        labels={**_str_map(_m(o.get("metadata")).get("labels"), _KEEP_LABEL),
                **{k: v for k, v in _str_map(_m(o.get("metadata")).get("labels")).items()
                   if k in selector_keys}},
        capacity=_str_map(st.get("capacity")),
        allocatable=_str_map(st.get("allocatable")),
        ready=ready,
        unschedulable=_m(o.get("spec")).get("unschedulable") is True,
        stand_in=stand_in_reason(o) is not None,
        stand_in_why=stand_in_reason(o) or "",
    )


@dataclass(frozen=True)
class PluginPod(BlankIsMissing, Record):
    """A device-plugin pod (matched by the profile's selector)."""

    recorded_as = RULES

    name: str
    namespace: str
    node: str | None
    phase: str | None
    ready: bool
    waiting: str | None = None  # a container's waiting reason (CrashLoopBackOff, ...)


def plugin_pod_from_api(obj: Any) -> PluginPod:
    o = _m(obj)
    meta, st = _m(o.get("metadata")), _m(o.get("status"))
    ready = any(_m(c).get("type") == "Ready" and _m(c).get("status") == "True"
                for c in _l(st.get("conditions")))
    waiting = None
    for cs in _l(st.get("containerStatuses")):
        w = _m(_m(_m(cs).get("state")).get("waiting"))
        if w.get("reason"):
            waiting = _s(w.get("reason"), 128)
    return PluginPod(
        name=_s(meta.get("name"), 253) or "",
        namespace=_s(meta.get("namespace"), 253) or "",
        node=_s(_m(o.get("spec")).get("nodeName"), 253),
        phase=_s(st.get("phase"), 32),
        ready=ready,
        waiting=waiting,
    )


@dataclass(frozen=True)
class ClusterGpuEvidence(Record):
    """Cluster-wide preflight evidence. A ``None`` list means it could not be read; the
    reason is in ``errors`` under the same name."""

    recorded_as = RULES

    runtime_classes: tuple[RuntimeClassInfo, ...] | None
    nodes: tuple[NodeInfo, ...] | None
    plugin_pods: tuple[PluginPod, ...] | None = None  # None also when no selector is set
    plugin_selector: str | None = None
    plugin_namespace: str | None = None
    errors: Mapping[str, str] = field(default_factory=dict)
    # DRA (resource.k8s.io): API versions, DeviceClasses, ResourceSlices (kgc.layers.gpu.dra);
    # None when not read (older bundles): left out of the dump, so they load unchanged
    dra: DraEvidence | None = field(default=None, metadata=key(omit_if_none="dra"))

    def runtime_class(self, name: str) -> RuntimeClassInfo | None:
        return next((r for r in self.runtime_classes or () if r.name == name), None)

    def node(self, name: str | None) -> NodeInfo | None:
        return next((n for n in self.nodes or () if n.name == name), None)


# --------------------------------------------------------------------------- one pod
@dataclass(frozen=True)
class PodCondition(BlankIsMissing, Record):
    recorded_as = RULES

    type: str
    status: str
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class ContainerState(BlankIsMissing, Record):
    recorded_as = RULES

    name: str
    state: str = field(metadata=key(one_of=CONTAINER_STATES))
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    restart_count: int = 0
    # the previous run's end (lastState.terminated), when the container restarted
    last_reason: str | None = None
    last_exit_code: int | None = None

    def describe(self) -> str:
        bits = [f"{self.name}: {self.state}"]
        if self.reason:
            bits.append(self.reason)
        if self.exit_code is not None:
            bits.append(f"exit {self.exit_code}")
        if self.message:
            bits.append(clip(self.message, 200) or "")
        return " ".join(bits)


def container_from_api(obj: Any) -> ContainerState:
    o = _m(obj)
    st = _m(o.get("state"))
    state: str = "unknown"
    detail: Mapping[str, Any] = {}
    for k in ("terminated", "waiting", "running"):
        if isinstance(st.get(k), Mapping):
            state, detail = k, _m(st.get(k))
            break
    last = _m(_m(o.get("lastState")).get("terminated"))
    return ContainerState(
        name=_s(o.get("name"), 253) or "",
        state=state,
        reason=_s(detail.get("reason"), 128),
        message=_s(detail.get("message")),
        exit_code=_int(detail.get("exitCode")),
        restart_count=_int(o.get("restartCount")) or 0,
        last_reason=_s(last.get("reason"), 128),
        last_exit_code=_int(last.get("exitCode")),
    )


@dataclass(frozen=True)
class PodEvent(BlankIsMissing, Record):
    recorded_as = RULES

    type: str | None  # Normal | Warning
    reason: str | None  # FailedScheduling, FailedCreatePodSandBox, Failed, BackOff, ...
    message: str | None
    count: int = 1
    source: str | None = None  # default-scheduler, kubelet, ...
    last_seen: str | None = None  # RFC 3339, as the API printed it

    def describe(self) -> str:
        n = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.type or '?'} {self.reason or '?'}{n}: {self.message or ''}".strip()


def event_from_api(obj: Any) -> PodEvent:
    """A ``core/v1`` Event or an ``events.k8s.io/v1`` Event -> :class:`PodEvent`."""
    o = _m(obj)
    series = _m(o.get("series"))
    count = _int(o.get("count")) or _int(series.get("count")) or _int(o.get("deprecatedCount"))
    source = (_s(_m(o.get("source")).get("component"), 128)
              or _s(o.get("reportingComponent"), 128) or _s(o.get("reportingController"), 128))
    last = (_s(o.get("lastTimestamp"), 64) or _s(series.get("lastObservedTime"), 64)
            or _s(o.get("eventTime"), 64) or _s(o.get("deprecatedLastTimestamp"), 64))
    return PodEvent(
        type=_s(o.get("type"), 32),
        reason=_s(o.get("reason"), 128),
        message=_s(o.get("message")) or _s(o.get("note")),
        count=max(1, min(count or 1, 10**9)),
        source=source,
        last_seen=last,
    )


# a field added later: absent from older bundles, left out of the dump at its default
_LATER = key(omit_if_default=True, optional=True)


@dataclass(frozen=True)
class ClaimResult(Record):
    """One entry of a ResourceClaim's ``status.allocation.devices.results[]``
    (k8s.io/api resource/v1 ``DeviceRequestAllocationResult``)."""

    recorded_as = RULES

    request: str | None = None
    driver: str | None = None
    pool: str | None = None
    device: str | None = None


@dataclass(frozen=True)
class ClaimEvidence(Record):
    """One ResourceClaim of a GPU pod, as the run read it back (issue 20), with the
    allocated devices' attributes from the node's ResourceSlice (``spec.devices[].
    attributes``: uuid, pciBusID, productName, ...; values as strings)."""

    recorded_as = RULES

    name: str | None = None
    allocated: bool = False  # status.allocation is set
    node: str | None = None  # the allocation's node (nodeSelector's hostname), if named
    results: tuple[ClaimResult, ...] = ()
    reserved_for: tuple[str, ...] = ()  # status.reservedFor[].name
    device_attributes: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    error: str | None = None  # the claim (or its slice) could not be read/parsed: why


@dataclass(frozen=True)
class GpuPodEvidence(BlankIsMissing, Record):
    """One GPU pod of the run, from creation to its final state and its collector output."""

    recorded_as = RULES
    record_name = "pod"

    name: str
    namespace: str
    target_node: str | None  # the node the run aimed the pod at
    node: str | None  # spec.nodeName: where it landed (None: never scheduled)
    node_kernel: str | None  # that node's status.nodeInfo.kernelVersion
    node_labels: Mapping[str, str]  # that node's GPU labels (nvidia.com/gpu.product, ...)
    runtime_class: str
    image: str
    resource: str
    count: int = field(metadata=key(minimum=1))
    create_error: str | None = None  # the API refused to create the pod (admission)
    phase: str | None = None
    reason: str | None = None  # status.reason (UnexpectedAdmissionError, OutOf..., ...)
    message: str | None = None  # status.message
    conditions: tuple[PodCondition, ...] = ()
    containers: tuple[ContainerState, ...] = ()
    events: tuple[PodEvent, ...] = ()
    waited_s: float | None = None  # how long the run waited for the pod to finish
    budget_s: float | None = None  # the budget it waited within
    timed_out: bool = False  # the wait ended by the budget, not by the pod finishing
    log_error: str | None = None  # the log (collector output) could not be read: why
    guest: GuestEvidence | None = field(
        default=None, metadata=key(load=GuestEvidence.from_dict, dump=GuestEvidence.to_dict))
    # issue 20 (DRA): how the pod asked for its GPU, its claims, and the pod's
    # status.extendedResourceClaimStatus (core/v1 PodExtendedResourceClaimStatus:
    # resourceClaimName + requestMappings[{containerName, resourceName, requestName}])
    request_mode: str = field(default="device-plugin", metadata=_LATER)
    claims: tuple[ClaimEvidence, ...] = field(default=(), metadata=_LATER)
    extended_claim: str | None = field(default=None, metadata=_LATER)
    extended_mappings: tuple[Mapping[str, str], ...] = field(default=(), metadata=_LATER)

    # an API refusal or an unreadable log is evidence even when its text is blank
    keep_blank: ClassVar[tuple[str, ...]] = ("create_error", "log_error")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.guest is not None:  # the guest's record is the collector's: cleared here
            object.__setattr__(self, "guest", without_blanks(self.guest))

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition(self, type_: str) -> PodCondition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def scheduled(self) -> bool:
        c = self.condition("PodScheduled")
        return bool(self.node) or (c is not None and c.status == "True")


def pod_from_api(
    obj: Any,
    *,
    events: Iterable[Any] = (),
    node: NodeInfo | None = None,
    target_node: str | None = None,
    resource: str,
    count: int,
    guest: GuestEvidence | None = None,
    log_error: str | None = None,
    create_error: str | None = None,
    waited_s: float | None = None,
    budget_s: float | None = None,
    timed_out: bool = False,
) -> GpuPodEvidence:
    """A pod object as the API served it (plus its events, its node, its log's parse) ->
    :class:`GpuPodEvidence`. Total; ``obj`` may be ``{}`` when the API refused the pod."""
    o = _m(obj)
    meta, spec, st = _m(o.get("metadata")), _m(o.get("spec")), _m(o.get("status"))
    containers = _l(spec.get("containers"))
    image = _s(_m(containers[0]).get("image"), 512) if containers else None
    evs = [event_from_api(e) for e in list(events)[-MAX_EVENTS:]]
    node_name = _s(spec.get("nodeName"), 253)
    return GpuPodEvidence(
        name=_s(meta.get("name"), 253) or "",
        namespace=_s(meta.get("namespace"), 253) or "",
        target_node=target_node,
        node=node_name,
        node_kernel=node.kernel_version if node is not None else None,
        node_labels=dict(node.labels) if node is not None else {},
        runtime_class=_s(spec.get("runtimeClassName"), 253) or "",
        image=image or "",
        resource=resource,
        count=count,
        create_error=clip(create_error, MAX_MESSAGE),
        phase=_s(st.get("phase"), 32),
        reason=_s(st.get("reason"), 128),
        message=_s(st.get("message")),
        conditions=tuple(
            PodCondition(_s(_m(c).get("type"), 64) or "", _s(_m(c).get("status"), 16) or "",
                         _s(_m(c).get("reason"), 128), _s(_m(c).get("message")))
            for c in _l(st.get("conditions"))[:32]
        ),
        containers=tuple(
            container_from_api(c)
            for c in (_l(st.get("initContainerStatuses")) + _l(st.get("containerStatuses")))[:32]
        ),
        events=tuple(evs),
        waited_s=waited_s,
        budget_s=budget_s,
        timed_out=timed_out,
        log_error=clip(log_error, MAX_MESSAGE),
        guest=guest,
    )


# --------------------------------------------------------------------------- one run
@dataclass(frozen=True)
class GpuRunEvidence(Record):
    """Everything one run of the gpu layer observed: what a bundle records under ``gpu``."""

    recorded_as = Rules(keys=OPTIONAL, tag=("format", FORMAT))
    record_name = "gpu"

    cluster: ClusterGpuEvidence
    pods: tuple[GpuPodEvidence, ...] = ()
    # why no (or fewer) pods were created: "no node advertises nvidia.com/gpu", sample bound
    plan_notes: tuple[str, ...] = ()

    def stand_ins_for(self, check_id: str) -> list[str] | None:
        """For the engine's simulated mark (``Context.simulated``), per check: the stand-ins
        the check's verdict rests on, [] when it rests on none, None when this cannot tell
        (node origins not recorded: older bundles). The RuntimeClass checks read API
        objects only; ``gpu.nodes-advertise``/``gpu.device-plugin`` (and the per-pod checks
        of a run without a pod) rest on the GPU nodes; every per-pod check on its pods
        (:meth:`pod_stand_ins`), and on the GPU nodes too where a pod was left unscheduled
        (the API's refusal of a pod rests on the API alone)."""
        if check_id in API_ONLY_CHECKS:
            return []
        if check_id in NODE_CHECKS or not self.pods:
            return self.node_stand_ins()
        pods = self.pod_stand_ins()
        if pods is None or all(p.node or p.create_error is not None for p in self.pods):
            return pods
        # a pod left unscheduled: the scheduler judged it against the GPU nodes
        nodes = self.node_stand_ins()
        return None if nodes is None else list(dict.fromkeys(pods + nodes))

    def stand_ins(self) -> list[str] | None:
        """The same over the run's pods (None without a pod: nothing to tell by)."""
        return self.pod_stand_ins() if self.pods else None

    def node_stand_ins(self) -> list[str] | None:
        """The stand-ins among the GPU nodes (under DRA those publishing devices; else a GPU
        label or an nvidia.com/* resource; every node when none is one: a "no GPU node"
        verdict rests on them all)."""
        nodes = list(self.cluster.nodes or ())
        d = self.cluster.dra
        # under DRA the GPU nodes are those publishing devices (a real node's kubelet plugin
        # beside simulated GPU nodes: only it counts)
        publishing = {s.node for s in (d.slices or ()) if s.node and s.device_count and (
            d.driver is None or s.driver == d.driver)} if d is not None else set()
        gpu = [n for n in nodes if n.name in publishing] or [
            n for n in nodes if n.gpu_resources() or any(
                k.startswith(("nvidia.com/", "feature.node.kubernetes.io/pci-10de"))
                for k in n.labels)] or nodes
        if any(n.stand_in is None for n in gpu):
            return None
        return [f"node {n.name}: {n.stand_in_why}" for n in gpu if n.stand_in]

    def pod_stand_ins(self) -> list[str] | None:
        """The pods that rest on a stand-in: on a node no real kubelet runs (or a node the
        run never saw), or whose own events show their containers were played
        (:func:`kgc.kube.origin.played_by`). A pod that never got a node rests on the API
        and the scheduler: real, unless its events say otherwise."""
        nodes = {n.name: n for n in self.cluster.nodes or ()}
        out: list[str] = []
        for p in self.pods:
            why = None
            if p.node:
                n = nodes.get(p.node)
                if n is not None and n.stand_in is None:
                    return None
                why = (f"on {p.node}: {stand_in_reason(None)}" if n is None else
                       f"on {p.node}: {n.stand_in_why}" if n.stand_in else None)
            if why is None:
                played = played_by((e.reason, e.source) for e in p.events)
                why = played and f"on {p.node or 'no node'}: {played}"
            if why:
                out.append(f"pod {p.ref} {why}")
        return out


# the checks whose evaluators read RuntimeClass objects only; those that read the nodes
API_ONLY_CHECKS = ("gpu.runtimeclass", "gpu.runtimeclass-overhead", "gpu.dra-api",
                   "gpu.dra-device-class")
NODE_CHECKS = ("gpu.nodes-advertise", "gpu.device-plugin", "gpu.dra-slices", "gpu.dra-both-ways")
