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

``from_dict`` is strict: a missing key, a null where a value is required, a wrong type, a
non-finite number or an unknown milestone name raises :class:`EvidenceError` naming the
field path (``kata.repetitions[0].pods[2].observed.ready.mono: expected a number, got
'x'``). Optional fields may be absent or null.

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

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kgc.core.model import EvidenceError
from kgc.evidence.present import BlankIsMissing
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

T = TypeVar("T")


# ---------------------------------------------------------------------------------------
# strict readers: every failure is an EvidenceError naming the field path


def _type_name(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:37] + "..."


def _mapping(v: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise EvidenceError(f"{path}: expected an object, got {_type_name(v)}")
    return v


def _get(d: Mapping[str, Any], key: str, path: str) -> Any:
    if key not in d:
        raise EvidenceError(f"{_join(path, key)}: missing")
    return d[key]


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _num(v: Any, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise EvidenceError(f"{path}: expected a number, got {_short(v)}")
    f = float(v)
    if not math.isfinite(f):
        raise EvidenceError(f"{path}: expected a finite number, got {v!r}")
    return f


def _opt_num(v: Any, path: str) -> float | None:
    return None if v is None else _num(v, path)


def _int(v: Any, path: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise EvidenceError(f"{path}: expected an integer, got {_short(v)}")
    return v


def _opt_int(v: Any, path: str) -> int | None:
    return None if v is None else _int(v, path)


def _str(v: Any, path: str) -> str:
    if not isinstance(v, str):
        raise EvidenceError(f"{path}: expected a string, got {_type_name(v)}")
    return v


def _opt_str(v: Any, path: str) -> str | None:
    return None if v is None else _str(v, path)


def _bool(v: Any, path: str) -> bool:
    if not isinstance(v, bool):
        raise EvidenceError(f"{path}: expected true/false, got {_short(v)}")
    return v


def _opt_bool(v: Any, path: str) -> bool | None:
    return None if v is None else _bool(v, path)


def _choice(v: Any, path: str, allowed: Sequence[str]) -> str:
    s = _str(v, path)
    if s not in allowed:
        raise EvidenceError(f"{path}: {s!r} is not one of {', '.join(allowed)}")
    return s


def _list(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list | tuple):
        raise EvidenceError(f"{path}: expected a list, got {_type_name(v)}")
    return list(v)


def _strs(v: Any, path: str) -> tuple[str, ...]:
    return tuple(_str(x, f"{path}[{i}]") for i, x in enumerate(_list(v, path)))


def _opt(d: Mapping[str, Any], key: str) -> Any:
    return d.get(key)


def _json_value(v: Any, path: str, depth: int = 0) -> Any:
    """A JSON-shaped value (for recorded raw objects such as the HPA behavior)."""
    if depth > 32:
        raise EvidenceError(f"{path}: nested too deeply")
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        if not math.isfinite(v):
            raise EvidenceError(f"{path}: expected a finite number, got {v!r}")
        return v
    if isinstance(v, list | tuple):
        return [_json_value(x, f"{path}[{i}]", depth + 1) for i, x in enumerate(v)]
    if isinstance(v, Mapping):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise EvidenceError(f"{path}: object key {k!r} is not a string")
            out[k] = _json_value(x, _join(path, k), depth + 1)
        return out
    raise EvidenceError(f"{path}: not a JSON value ({_type_name(v)})")


# ---------------------------------------------------------------------------------------
# the model


@dataclass(frozen=True)
class Stamp:
    """When kgc received the watch event (or took the action): two client clocks."""

    mono: float  # time.monotonic(), seconds
    wall: float  # time.time(), epoch seconds

    def to_dict(self) -> dict[str, Any]:
        return {"mono": self.mono, "wall": self.wall}

    @classmethod
    def from_dict(cls, d: Any, path: str = "stamp") -> Stamp:
        m = _mapping(d, path)
        return cls(
            mono=_num(_get(m, "mono", path), _join(path, "mono")),
            wall=_num(_get(m, "wall", path), _join(path, "wall")),
        )

    @classmethod
    def opt(cls, d: Any, path: str) -> Stamp | None:
        return None if d is None else cls.from_dict(d, path)


def _opt_stamp(s: Stamp | None) -> dict[str, Any] | None:
    return None if s is None else s.to_dict()


@dataclass(frozen=True)
class ClockOffset:
    """API server clock − client wall clock, in seconds: ``api ≈ client_wall + offset_s``.

    ``uncertainty_s`` is the half-width of the interval the estimate is known to lie in
    (the API's whole-second timestamps make it at least ~0.5 s unless many samples are
    combined). See :func:`kgc.layers.keda.phases.estimate_clock_offset`."""

    offset_s: float
    uncertainty_s: float
    samples: int
    method: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "offset_s": self.offset_s,
            "uncertainty_s": self.uncertainty_s,
            "samples": self.samples,
            "method": self.method,
        }

    @classmethod
    def from_dict(cls, d: Any, path: str = "clock") -> ClockOffset:
        m = _mapping(d, path)
        unc = _num(_get(m, "uncertainty_s", path), _join(path, "uncertainty_s"))
        if unc < 0:
            raise EvidenceError(f"{_join(path, 'uncertainty_s')}: negative ({unc})")
        return cls(
            offset_s=_num(_get(m, "offset_s", path), _join(path, "offset_s")),
            uncertainty_s=unc,
            samples=_int(_get(m, "samples", path), _join(path, "samples")),
            method=_str(m.get("method", ""), _join(path, "method")),
        )


@dataclass(frozen=True)
class PodRecord(BlankIsMissing):
    """One pod of a scale-up, as the watch saw it.

    ``observed[m]`` is the client receipt time of the first watch event showing milestone
    ``m``; ``api[m]`` the API's own (whole-second) timestamp of it, epoch seconds. A
    milestone never observed is simply absent -- never 0. ``detail`` is the pod's last
    status in words when it did not become Ready (e.g. ``Pending: 0/3 nodes are available:
    3 Insufficient nvidia.com/gpu``)."""

    name: str
    observed: Mapping[str, Stamp] = field(default_factory=dict)
    api: Mapping[str, float] = field(default_factory=dict)
    node: str | None = None
    uid: str | None = None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "uid": self.uid,
            "node": self.node,
            "observed": {k: v.to_dict() for k, v in self.observed.items()},
            "api": dict(self.api),
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: Any, path: str = "pod") -> PodRecord:
        m = _mapping(d, path)
        obs_path, api_path = _join(path, "observed"), _join(path, "api")
        obs = _mapping(m.get("observed") or {}, obs_path)
        api = _mapping(m.get("api") or {}, api_path)
        observed: dict[str, Stamp] = {}
        for k, v in obs.items():
            _choice(k, obs_path + f"[{k!r}]", POD_MILESTONES)
            observed[k] = Stamp.from_dict(v, _join(obs_path, k))
        api_times: dict[str, float] = {}
        for k, v in api.items():
            _choice(k, api_path + f"[{k!r}]", POD_MILESTONES)
            api_times[k] = _num(v, _join(api_path, k))
        return cls(
            name=_str(_get(m, "name", path), _join(path, "name")),
            uid=_opt_str(_opt(m, "uid"), _join(path, "uid")),
            node=_opt_str(_opt(m, "node"), _join(path, "node")),
            observed=observed,
            api=api_times,
            detail=_str(m.get("detail", ""), _join(path, "detail")),
        )


@dataclass(frozen=True)
class ScaleMark:
    """A change of the desired replica count, first observed at ``at``.

    ``source``: ``deployment`` (``spec.replicas`` -- what KEDA's 0→1 and the HPA's 1→N
    both write), ``hpa`` (``status.desiredReplicas``) or ``scaledobject``."""

    source: str
    replicas: int
    at: Stamp

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "replicas": self.replicas, "at": self.at.to_dict()}

    @classmethod
    def from_dict(cls, d: Any, path: str = "scale") -> ScaleMark:
        m = _mapping(d, path)
        n = _int(_get(m, "replicas", path), _join(path, "replicas"))
        if n < 0:
            raise EvidenceError(f"{_join(path, 'replicas')}: negative ({n})")
        return cls(
            source=_choice(_get(m, "source", path), _join(path, "source"), SCALE_SOURCES),
            replicas=n,
            at=Stamp.from_dict(_get(m, "at", path), _join(path, "at")),
        )


@dataclass(frozen=True)
class Stall(BlankIsMissing):
    """A bounded wait that gave up: which phase never completed, how long kgc waited."""

    phase: str
    timeout_s: float
    waited_s: float
    detail: str = ""
    pod: str | None = None
    at: Stamp | None = None  # when the wait gave up

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "timeout_s": self.timeout_s,
            "waited_s": self.waited_s,
            "detail": self.detail,
            "pod": self.pod,
            "at": _opt_stamp(self.at),
        }

    @classmethod
    def from_dict(cls, d: Any, path: str = "stall") -> Stall:
        m = _mapping(d, path)
        return cls(
            phase=_choice(_get(m, "phase", path), _join(path, "phase"), STALL_PHASES),
            timeout_s=_num(_get(m, "timeout_s", path), _join(path, "timeout_s")),
            waited_s=_num(_get(m, "waited_s", path), _join(path, "waited_s")),
            detail=_str(m.get("detail", ""), _join(path, "detail")),
            pod=_opt_str(_opt(m, "pod"), _join(path, "pod")),
            at=Stamp.opt(_opt(m, "at"), _join(path, "at")),
        )


@dataclass(frozen=True)
class Repetition:
    """One scale-up 0→K (and back to 0) of one runtime class.

    ``trigger``: when kgc raised the trigger (None: it could not -- then a ``trigger``
    stall says why). ``active``: ScaledObject condition Active=True first observed.
    ``scale``: every observed change of the desired replicas. ``lowered``: when kgc
    lowered the trigger again; ``scaled_down``: when no pod of the Deployment was left."""

    index: int
    target_replicas: int
    trigger: Stamp | None
    active: Stamp | None = None
    scale: tuple[ScaleMark, ...] = ()
    pods: tuple[PodRecord, ...] = ()
    lowered: Stamp | None = None
    scaled_down: Stamp | None = None
    stalls: tuple[Stall, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "target_replicas": self.target_replicas,
            "trigger": _opt_stamp(self.trigger),
            "active": _opt_stamp(self.active),
            "scale": [s.to_dict() for s in self.scale],
            "pods": [p.to_dict() for p in self.pods],
            "lowered": _opt_stamp(self.lowered),
            "scaled_down": _opt_stamp(self.scaled_down),
            "stalls": [s.to_dict() for s in self.stalls],
        }

    @classmethod
    def from_dict(cls, d: Any, path: str = "repetition") -> Repetition:
        m = _mapping(d, path)
        k = _int(_get(m, "target_replicas", path), _join(path, "target_replicas"))
        if k < 1:
            raise EvidenceError(f"{_join(path, 'target_replicas')}: must be >= 1, got {k}")

        def items(key: str) -> list[Any]:
            return _list(m.get(key) or [], _join(path, key))

        return cls(
            index=_int(_get(m, "index", path), _join(path, "index")),
            target_replicas=k,
            trigger=Stamp.opt(_get(m, "trigger", path), _join(path, "trigger")),
            active=Stamp.opt(_opt(m, "active"), _join(path, "active")),
            scale=tuple(
                ScaleMark.from_dict(x, f"{path}.scale[{i}]") for i, x in enumerate(items("scale"))
            ),
            pods=tuple(
                PodRecord.from_dict(x, f"{path}.pods[{i}]") for i, x in enumerate(items("pods"))
            ),
            lowered=Stamp.opt(_opt(m, "lowered"), _join(path, "lowered")),
            scaled_down=Stamp.opt(_opt(m, "scaled_down"), _join(path, "scaled_down")),
            stalls=tuple(
                Stall.from_dict(x, f"{path}.stalls[{i}]") for i, x in enumerate(items("stalls"))
            ),
        )


@dataclass(frozen=True)
class ScalingConfig:
    """KEDA's and the HPA's configuration that bounds the latency, as observed on the
    objects (None: not visible). ``hpa_sync_period_s`` is the controller-manager's
    ``--horizontal-pod-autoscaler-sync-period`` when kgc could see it (``hpa_sync_source``
    says where from); ``hpa_behavior`` the HPA's ``spec.behavior`` as recorded."""

    polling_interval_s: float | None = None
    cooldown_period_s: float | None = None
    min_replica_count: int | None = None
    max_replica_count: int | None = None
    hpa_sync_period_s: float | None = None
    hpa_sync_source: str = ""
    hpa_behavior: Mapping[str, Any] | None = None
    trigger_kind: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "polling_interval_s": self.polling_interval_s,
            "cooldown_period_s": self.cooldown_period_s,
            "min_replica_count": self.min_replica_count,
            "max_replica_count": self.max_replica_count,
            "hpa_sync_period_s": self.hpa_sync_period_s,
            "hpa_sync_source": self.hpa_sync_source,
            "hpa_behavior": None if self.hpa_behavior is None else dict(self.hpa_behavior),
            "trigger_kind": self.trigger_kind,
        }

    @classmethod
    def from_dict(cls, d: Any, path: str = "config") -> ScalingConfig:
        m = _mapping(d, path)
        beh = _opt(m, "hpa_behavior")
        if beh is not None:
            beh = _json_value(_mapping(beh, _join(path, "hpa_behavior")),
                              _join(path, "hpa_behavior"))
        return cls(
            polling_interval_s=_opt_num(_opt(m, "polling_interval_s"),
                                        _join(path, "polling_interval_s")),
            cooldown_period_s=_opt_num(_opt(m, "cooldown_period_s"),
                                       _join(path, "cooldown_period_s")),
            min_replica_count=_opt_int(_opt(m, "min_replica_count"),
                                       _join(path, "min_replica_count")),
            max_replica_count=_opt_int(_opt(m, "max_replica_count"),
                                       _join(path, "max_replica_count")),
            hpa_sync_period_s=_opt_num(_opt(m, "hpa_sync_period_s"),
                                       _join(path, "hpa_sync_period_s")),
            hpa_sync_source=_str(m.get("hpa_sync_source", ""), _join(path, "hpa_sync_source")),
            hpa_behavior=beh,
            trigger_kind=_str(m.get("trigger_kind", ""), _join(path, "trigger_kind")),
        )


@dataclass(frozen=True)
class ClassRun(BlankIsMissing):
    """All repetitions of one runtime class (``role`` kata or baseline).
    ``runtime_class`` None: the pods named no runtimeClassName (the cluster default)."""

    role: str
    runtime_class: str | None
    repetitions: tuple[Repetition, ...] = ()
    config: ScalingConfig = ScalingConfig()
    deployment: str = ""
    scaled_object: str = ""

    @property
    def label(self) -> str:
        return self.runtime_class or "default runtime"

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "runtime_class": self.runtime_class,
            "deployment": self.deployment,
            "scaled_object": self.scaled_object,
            "config": self.config.to_dict(),
            "repetitions": [r.to_dict() for r in self.repetitions],
        }

    @classmethod
    def from_dict(cls, d: Any, path: str = "run") -> ClassRun:
        m = _mapping(d, path)
        reps = _list(m.get("repetitions") or [], _join(path, "repetitions"))
        return cls(
            role=_choice(_get(m, "role", path), _join(path, "role"), ROLES),
            runtime_class=_opt_str(_get(m, "runtime_class", path), _join(path, "runtime_class")),
            deployment=_str(m.get("deployment", ""), _join(path, "deployment")),
            scaled_object=_str(m.get("scaled_object", ""), _join(path, "scaled_object")),
            config=ScalingConfig.from_dict(m.get("config") or {}, _join(path, "config")),
            repetitions=tuple(
                Repetition.from_dict(x, f"{path}.repetitions[{i}]") for i, x in enumerate(reps)
            ),
        )


@dataclass(frozen=True)
class Preflight(BlankIsMissing):
    """What the run needs from the cluster before it can measure anything.
    ``keda_installed`` None: not looked at."""

    keda_installed: bool | None = None
    keda_version: str | None = None
    missing: tuple[str, ...] = ()  # e.g. "CRD scaledobjects.keda.sh", "RuntimeClass kata"
    operator_ready: bool | None = None
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "keda_installed": self.keda_installed,
            "keda_version": self.keda_version,
            "missing": list(self.missing),
            "operator_ready": self.operator_ready,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, d: Any, path: str = "preflight") -> Preflight:
        m = _mapping(d, path)
        return cls(
            keda_installed=_opt_bool(_opt(m, "keda_installed"), _join(path, "keda_installed")),
            keda_version=_opt_str(_opt(m, "keda_version"), _join(path, "keda_version")),
            missing=_strs(m.get("missing") or [], _join(path, "missing")),
            operator_ready=_opt_bool(_opt(m, "operator_ready"), _join(path, "operator_ready")),
            message=_str(m.get("message", ""), _join(path, "message")),
        )


@dataclass(frozen=True)
class KedaEvidence:
    """The layer's whole record.

    ``status``: ``done`` (measured; stalls are inside), ``not-run`` (not attempted -- e.g.
    an offline bundle recorded without the cluster layers; ``message`` says why),
    ``preflight-failed`` (see ``preflight``), ``error`` (the driver itself failed:
    ``message``)."""

    status: str
    message: str = ""
    preflight: Preflight = Preflight()
    kata: ClassRun | None = None
    baseline: ClassRun | None = None
    clock: ClockOffset | None = None
    # the origin of every node a measured pod ran on (kgc.kube.origin: a real kubelet or a
    # stand-in such as a kwok node); None: not recorded (older bundles, or the nodes could
    # not be read) -- then nothing tells real from simulated
    nodes: tuple[NodeOrigin, ...] | None = None

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

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "status": self.status,
            "message": self.message,
            "preflight": self.preflight.to_dict(),
            "kata": None if self.kata is None else self.kata.to_dict(),
            "baseline": None if self.baseline is None else self.baseline.to_dict(),
            "clock": None if self.clock is None else self.clock.to_dict(),
        }
        if self.nodes is not None:  # recorded: older bundles stay byte-identical
            d["nodes"] = [n.to_dict() for n in self.nodes]
        return d

    @classmethod
    def from_dict(cls, d: Any) -> KedaEvidence:
        m = _mapping(d, "keda")
        runs: dict[str, ClassRun | None] = {}
        for role in ROLES:
            raw = _opt(m, role)
            run = None if raw is None else ClassRun.from_dict(raw, role)
            if run is not None and run.role != role:
                raise EvidenceError(f"{role}.role: {run.role!r} recorded under {role!r}")
            runs[role] = run
        clock = _opt(m, "clock")
        return cls(
            status=_choice(_get(m, "status", ""), "status", STATUSES),
            message=_str(m.get("message", ""), "message"),
            preflight=Preflight.from_dict(m.get("preflight") or {}, "preflight"),
            kata=runs["kata"],
            baseline=runs["baseline"],
            clock=None if clock is None else ClockOffset.from_dict(clock, "clock"),
            nodes=_nodes(_opt(m, "nodes")),
        )


def _nodes(v: Any) -> tuple[NodeOrigin, ...] | None:
    if v is None:
        return None
    out = []
    for i, x in enumerate(_list(v, "nodes")):
        try:
            out.append(NodeOrigin.from_dict(x))
        except EvidenceError as exc:
            raise EvidenceError(f"nodes[{i}]: {exc}") from None
    names = [n.node for n in out]
    if len(set(names)) != len(names):
        raise EvidenceError(f"nodes: a node is recorded twice ({', '.join(names)})")
    return tuple(out)


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
    groups: dict[tuple[str, str | None], int] = {}
    for run in ev.runs():
        if run.role not in roles:
            continue
        for rep in run.repetitions:
            for pod in rep.pods:
                key = (run.label, pod.node)
                groups[key] = groups.get(key, 0) + 1
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
