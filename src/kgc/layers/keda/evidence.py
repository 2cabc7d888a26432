"""KEDA scale-up latency evidence: what the live driver observed, as plain data.

Everything here is recorded into the JSON bundle and replayed offline to identical
verdicts. Two clocks are kept for every observation:

* the **client receipt time** of the watch event in which kgc first saw a milestone —
  ``mono`` (``time.monotonic()``, the one clock every duration is computed from) and
  ``wall`` (``time.time()``, epoch seconds, to line the run up with the API server);
* the **API's own timestamp** of the same milestone (``creationTimestamp``, a condition's
  ``lastTransitionTime``, a container's ``startedAt``), epoch seconds. The API marshals
  ``metav1.Time`` as RFC 3339 *without* fractions, so these are whole seconds, truncated.

``ClockOffset`` relates the two (API server clock − client wall clock).

``to_dict``/``from_dict`` are :mod:`kgc.evidence.record`'s. ``from_dict`` is strict: a
missing key, a null where a value is required, a wrong type, a non-finite number or an
unknown milestone name raises :class:`EvidenceError` naming the field path
(``keda.kata.repetitions[0].pods[2].observed.ready.mono: expected a number, got 'x'``). A
field with a default may be absent; a list or object recorded as null reads as empty.

Recording contract (what the live driver must fill in)
------------------------------------------------------
* ``KedaEvidence.status``: ``done`` once measuring started (stalls live inside);
  ``preflight-failed`` with ``preflight`` filled; ``not-run`` with the reason (e.g. an
  offline bundle without the layer); ``error`` with the exception's one-line message.
* ``preflight``: ``keda_installed`` (CRD ``scaledobjects.keda.sh`` served),
  ``keda_version``, ``operator_ready`` (keda-operator and its metrics API server Ready),
  ``missing`` in words (``"CRD scaledobjects.keda.sh"``, ``"RuntimeClass kata"``).
* ``clock``: :func:`kgc.layers.keda.phases.estimate_clock_offset` over ``(wall before
  the request, the object's creationTimestamp, wall after the answer)`` of every object
  the run creates.
* one ``ClassRun`` per role (``kata``: the profile's Kata RuntimeClass; ``baseline``),
  with ``config`` from :func:`kgc.layers.keda.observe.scaling_config` (HPA sync period
  from :func:`~kgc.layers.keda.observe.controller_manager_sync_period` when the
  controller-manager's command line is readable, else the lab's value, else None).
* per repetition (0 → K → 0), watches on pods (the Deployment's selector), the
  Deployment, its HPA and the ScaledObject, all opened at a resourceVersion listed
  BEFORE the trigger; every receipt stamped ``Stamp(time.monotonic(), time.time())``
  first thing in the watch loop (not after a queue):
  ``trigger`` right after the trigger endpoint acknowledged the raised value;
  ``active`` the first event with the ScaledObject's Active=True;
  ``scale`` a ``ScaleMark`` for every change of the Deployment's ``spec.replicas``
  (``deployment``) and the HPA's ``status.desiredReplicas`` (``hpa``);
  ``pods`` every pod ADDED after the trigger, folded with
  :func:`kgc.layers.keda.observe.merge_observation` (first-observed stamps, the API's
  timestamps, node, last status); ``lowered`` when the trigger was lowered again;
  ``scaled_down`` the first moment no pod of the Deployment is left;
  ``stalls`` a ``Stall`` for every bounded wait that gave up (``at`` = when it gave
  up): ``trigger`` (endpoint_s), ``decision`` (activation_s or desired replicas never K),
  the pod phase when pods stayed short of Ready (ready_s), ``scale-down``
  (scale_down_s). A repetition that stalled still records what it saw.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgc.core.model import EvidenceError
from kgc.evidence.present import BlankIsMissing
from kgc.evidence.record import Record, array, key
from kgc.kube.origin import NodeOrigin

# Pod milestones, in lifecycle order (each is "first observed in a watch event"):
#   created        the pod object exists (ADDED event; API: metadata.creationTimestamp)
#   scheduled      spec.nodeName set / PodScheduled=True (API: PodScheduled.lastTransitionTime)
#   sandbox_ready  PodReadyToStartContainers=True: the sandbox -- for Kata the microVM -- and
#                  its network are up (API: that condition's lastTransitionTime)
#   started        every container has state.running (API: the latest running.startedAt)
#   ready          Ready=True (API: Ready.lastTransitionTime)
POD_MILESTONES = ("created", "scheduled", "sandbox_ready", "started", "ready")

ROLES = ("kata", "baseline")

# Where a bounded wait gave up. "trigger" is the run's own fault (it could not raise its
# trigger); the others are the platform not delivering within the wait.
STALL_PHASES = (
    "trigger",  # the run could not raise the metric / marker it controls
    "decision",  # the ScaledObject never became active / the Deployment never scaled to K
    "creation",  # replicas raised but the ReplicaSet did not create the pods
    "scheduling",
    "sandbox",
    "start",
    "ready",
    "scale-down",  # after the trigger was lowered the Deployment never returned to 0 pods
)

SCALE_SOURCES = ("deployment", "hpa", "scaledobject")

STATUSES = ("done", "not-run", "preflight-failed", "error")

# how the records are read back (kgc.evidence.record): a list or an object recorded as null
# reads as empty, as the converters before it did; a milestone map names milestones only
_NULL_IS_EMPTY = key(optional=True)
_MILESTONE_MAP = key(optional=True, keys_one_of=POD_MILESTONES)


def _recorded_under(role: str) -> Any:
    def check(run: Any, path: str) -> None:
        if run is not None and run.role != role:
            raise EvidenceError(f"{path}.role: {run.role!r} recorded under {role!r}")

    return check


def _nodes(v: Any, path: str) -> tuple[NodeOrigin, ...]:
    out = []
    for i, x in enumerate(array(v, path)):
        try:
            out.append(NodeOrigin.from_dict(x))
        except EvidenceError as exc:
            raise EvidenceError(f"{path}[{i}]: {exc}") from None
    names = [n.node for n in out]
    if len(set(names)) != len(names):
        raise EvidenceError(f"{path}: a node is recorded twice ({', '.join(names)})")
    return tuple(out)


# ---------------------------------------------------------------------------------------
# the model


@dataclass(frozen=True)
class Stamp(Record):
    """When kgc received the watch event (or took the action): two client clocks."""

    mono: float  # time.monotonic(), seconds
    wall: float  # time.time(), epoch seconds


@dataclass(frozen=True)
class ClockOffset(Record):
    """API server clock − client wall clock, in seconds: ``api ≈ client_wall + offset_s``.

    ``uncertainty_s`` is the half-width of the interval the estimate is known to lie in
    (the API's whole-second timestamps make it at least ~0.5 s unless many samples are
    combined). See :func:`kgc.layers.keda.phases.estimate_clock_offset`."""

    offset_s: float
    uncertainty_s: float = field(metadata=key(minimum=0))
    samples: int
    method: str = ""


@dataclass(frozen=True)
class PodRecord(BlankIsMissing, Record):
    """One pod of a scale-up, as the watch saw it.

    ``observed[m]`` is the client receipt time of the first watch event showing milestone
    ``m``; ``api[m]`` the API's own (whole-second) timestamp of it, epoch seconds. A
    milestone never observed is simply absent -- never 0. ``detail`` is the pod's last
    status in words when it did not become Ready (e.g. ``Pending: 0/3 nodes are available:
    3 Insufficient nvidia.com/gpu``)."""

    name: str
    observed: Mapping[str, Stamp] = field(default_factory=dict, metadata=_MILESTONE_MAP)
    api: Mapping[str, float] = field(default_factory=dict, metadata=_MILESTONE_MAP)
    node: str | None = None
    uid: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class ScaleMark(Record):
    """A change of the desired replica count, first observed at ``at``.

    ``source``: ``deployment`` (``spec.replicas`` -- what KEDA's 0→1 and the HPA's 1→N
    both write), ``hpa`` (``status.desiredReplicas``) or ``scaledobject``."""

    source: str = field(metadata=key(one_of=SCALE_SOURCES))
    replicas: int = field(metadata=key(minimum=0))
    at: Stamp


@dataclass(frozen=True)
class Stall(BlankIsMissing, Record):
    """A bounded wait that gave up: which phase never completed, how long kgc waited."""

    phase: str = field(metadata=key(one_of=STALL_PHASES))
    timeout_s: float
    waited_s: float
    detail: str = ""
    pod: str | None = None
    at: Stamp | None = None  # when the wait gave up


@dataclass(frozen=True)
class Repetition(Record):
    """One scale-up 0→K (and back to 0) of one runtime class.

    ``trigger``: when kgc raised the trigger (None: it could not -- then a ``trigger``
    stall says why). ``active``: ScaledObject condition Active=True first observed.
    ``scale``: every observed change of the desired replicas. ``lowered``: when kgc
    lowered the trigger again; ``scaled_down``: when no pod of the Deployment was left."""

    index: int
    target_replicas: int = field(metadata=key(minimum=1))
    trigger: Stamp | None
    active: Stamp | None = None
    scale: tuple[ScaleMark, ...] = field(default=(), metadata=_NULL_IS_EMPTY)
    pods: tuple[PodRecord, ...] = field(default=(), metadata=_NULL_IS_EMPTY)
    lowered: Stamp | None = None
    scaled_down: Stamp | None = None
    stalls: tuple[Stall, ...] = field(default=(), metadata=_NULL_IS_EMPTY)


@dataclass(frozen=True)
class ScalingConfig(Record):
    """KEDA's and the HPA's configuration that bounds the latency, as observed on the
    objects (None: not visible). ``hpa_sync_period_s`` is the controller-manager's
    ``--horizontal-pod-autoscaler-sync-period`` when kgc could see it (``hpa_sync_source``
    says where from); ``hpa_behavior`` the HPA's ``spec.behavior`` as recorded."""

    record_name = "config"

    polling_interval_s: float | None = None
    cooldown_period_s: float | None = None
    min_replica_count: int | None = None
    max_replica_count: int | None = None
    hpa_sync_period_s: float | None = None
    hpa_sync_source: str = ""
    hpa_behavior: Mapping[str, Any] | None = None
    trigger_kind: str = ""


@dataclass(frozen=True)
class ClassRun(BlankIsMissing, Record):
    """All repetitions of one runtime class (``role`` kata or baseline).
    ``runtime_class`` None: the pods named no runtimeClassName (the cluster default)."""

    role: str = field(metadata=key(one_of=ROLES))
    runtime_class: str | None
    repetitions: tuple[Repetition, ...] = field(default=(), metadata=_NULL_IS_EMPTY)
    config: ScalingConfig = field(default=ScalingConfig(), metadata=_NULL_IS_EMPTY)
    deployment: str = ""
    scaled_object: str = ""

    @property
    def label(self) -> str:
        return self.runtime_class or "default runtime"


@dataclass(frozen=True)
class Preflight(BlankIsMissing, Record):
    """What the run needs from the cluster before it can measure anything.
    ``keda_installed`` None: not looked at."""

    keda_installed: bool | None = None
    keda_version: str | None = None
    # e.g. "CRD scaledobjects.keda.sh", "RuntimeClass kata"
    missing: tuple[str, ...] = field(default=(), metadata=_NULL_IS_EMPTY)
    operator_ready: bool | None = None
    message: str = ""


@dataclass(frozen=True)
class KedaEvidence(Record):
    """The layer's whole record.

    ``status``: ``done`` (measured; stalls are inside), ``not-run`` (not attempted -- e.g.
    an offline bundle recorded without the cluster layers; ``message`` says why),
    ``preflight-failed`` (see ``preflight``), ``error`` (the driver itself failed:
    ``message``)."""

    record_name = "keda"

    status: str = field(metadata=key(one_of=STATUSES))
    message: str = ""
    preflight: Preflight = field(default=Preflight(), metadata=_NULL_IS_EMPTY)
    kata: ClassRun | None = field(default=None, metadata=key(check=_recorded_under("kata")))
    baseline: ClassRun | None = field(default=None,
                                      metadata=key(check=_recorded_under("baseline")))
    clock: ClockOffset | None = None
    # the origin of every node a measured pod ran on (kgc.kube.origin: a real kubelet or a
    # stand-in such as a kwok node); None: not recorded (older bundles, or the nodes could
    # not be read) -- then nothing tells real from simulated
    nodes: tuple[NodeOrigin, ...] | None = field(default=None, metadata=key(
        load=_nodes, dump=lambda ns: [n.to_dict() for n in ns], omit_if_none="nodes"))

    def runs(self) -> tuple[ClassRun, ...]:
        return tuple(r for r in (self.kata, self.baseline) if r is not None)

    def stand_ins_for(self, check_id: str) -> list[str] | None:
        """For the engine's simulated mark, per check: the stand-ins among the nodes of
        the pods the check judges (:data:`CHECK_ROLES`), grouped per class and node,
        ``[]`` when every one of them ran on a real kubelet, None when this cannot tell
        (no pod measured, or node origins not recorded)."""
        return stand_ins_of(self, CHECK_ROLES.get(check_id, ROLES))

    def stand_ins(self) -> list[str] | None:
        """The same over every measured pod (both classes)."""
        return stand_ins_of(self, ROLES)


# Which classes' pods each check's evaluator reads: its verdict rests on those pods only.
# keda.baseline-budgets judges the baseline class alone (so on a cluster whose baseline
# pods ran on real kubelets and whose Kata pods on stand-ins it is the one real verdict);
# every other check reads the Kata class (the ratio, the end-to-end reason's comparison,
# the preflight's RuntimeClasses and the watch precision read both).
CHECK_ROLES: Mapping[str, tuple[str, ...]] = {
    "keda.baseline-budgets": ("baseline",),
    "keda.phase-budgets": ("kata",),
    "keda.scaling-config": ("kata",),
}


def stand_ins_of(ev: KedaEvidence, roles: Sequence[str]) -> list[str] | None:
    """The stand-ins the pods of ``roles`` rest on, as ``"3 kata pods on kgc-gpu-0: kwok
    node (...)"``; [] when every such pod ran on a real node; None when there is no such
    pod or the node origins were not recorded."""
    if ev.nodes is None:
        return None
    origins = {n.node: n for n in ev.nodes}
    groups = Counter((run.label, pod.node) for run in ev.runs() if run.role in roles
                     for rep in run.repetitions for pod in rep.pods)  # first seen, first named
    if not groups:
        return None
    out = []
    for (label, node), n in groups.items():
        pods = f"{n} {label} pod{'s' if n != 1 else ''}"
        if node is None:
            out.append(f"{pods} never ran on a node")
            continue
        o = origins.get(node)
        if o is None:
            out.append(f"{pods} on {node}: node origin not recorded")
        elif o.stand_in:
            out.append(f"{pods} on {node}: {o.why}")
    return out
