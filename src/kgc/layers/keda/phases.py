"""Phase computation (pure): per pod, how long each step of a scale-up took.

A scale-up is the chain of milestones

    trigger → requested → created → scheduled → sandbox_ready → started → ready

where ``requested`` is, for the pod of rank *r* (1-based, in creation order), the first
time the Deployment's desired replicas reached *r* (KEDA writes 0→1, the HPA 1→N). The
phases are the links of that chain, plus two spans:

==============  ===============================  =========================================
phase           from → to                        what it measures
==============  ===============================  =========================================
decision        trigger → requested              KEDA polling / HPA sync (configuration)
creation        requested → created              ReplicaSet controller
scheduling      created → scheduled              kube-scheduler
sandbox         scheduled → sandbox_ready        sandbox + network; for Kata the microVM boot
start           sandbox_ready → started          image + container start
ready           started → ready                  readiness (probes)
startup (span)  created → ready                  the part the node and runtime own
e2e (span)      trigger → ready                  everything the user waits for
==============  ===============================  =========================================

Durations come from the client's monotonic receipt times only (one clock). A phase whose
endpoint was never observed is ``missing`` -- never 0; one whose end precedes its start is
``out-of-order``, and so is a span over any two reversed milestones (Ready before started,
sandbox ready before scheduled: the span would fold the reversal into a plausible duration),
its note naming the pod, both milestones and their times; on a pod that never became Ready
the phase it was stuck in is ``stalled`` (censored: known only to exceed a lower bound) and
the later ones ``not-reached``. Pods the Deployment never created (fewer than K) appear as
phantom rows (``pod`` None) stalled in ``decision`` or ``creation``, so a scale-up that fell
short can never look fast.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kgc.layers.keda.evidence import (
    ClassRun,
    ClockOffset,
    KedaEvidence,
    PodRecord,
    Repetition,
    Stall,
)

PHASES = ("decision", "creation", "scheduling", "sandbox", "start", "ready")
SPANS = ("startup", "e2e")
MEASURES = PHASES + SPANS

CHAIN = ("trigger", "requested", "created", "scheduled", "sandbox_ready", "started", "ready")

BOUNDS: Mapping[str, tuple[str, str]] = {
    **{p: (CHAIN[i], CHAIN[i + 1]) for i, p in enumerate(PHASES)},
    "startup": ("created", "ready"),
    "e2e": ("trigger", "ready"),
}

TITLES: Mapping[str, str] = {
    "decision": "decision",
    "creation": "pod creation",
    "scheduling": "scheduling",
    "sandbox": "sandbox ready",
    "start": "containers started",
    "ready": "Ready",
    "startup": "pod startup",
    "e2e": "end to end",
}

MILESTONE_TITLES: Mapping[str, str] = {
    "trigger": "trigger raised",
    "requested": "replicas raised",
    "created": "pod created",
    "scheduled": "pod scheduled",
    "sandbox_ready": "PodReadyToStartContainers",
    "started": "containers running",
    "ready": "pod Ready",
}

OK = "ok"
MISSING = "missing"
OUT_OF_ORDER = "out-of-order"
INVALID = "invalid"
STALLED = "stalled"
NOT_REACHED = "not-reached"


@dataclass(frozen=True)
class PhaseValue:
    """One pod's value for one measure. ``seconds`` is set for ``ok``; for ``stalled`` it
    is the known lower bound (or None when kgc does not know when the wait gave up)."""

    measure: str
    status: str
    seconds: float | None = None
    note: str = ""


@dataclass(frozen=True)
class PodPhases:
    role: str
    runtime_class: str | None
    repetition: int
    rank: int
    pod: str | None  # None: a pod the Deployment never created
    node: str | None
    marks: Mapping[str, float]  # chain milestone -> client monotonic seconds
    values: Mapping[str, PhaseValue]
    stall: Stall | None = None
    requested_by: str = ""  # which signal gave "requested": deployment/hpa/scaledobject/active

    def seconds(self, measure: str) -> float | None:
        v = self.values.get(measure)
        return v.seconds if v is not None and v.status == OK else None

    @property
    def ready(self) -> bool:
        return "ready" in self.marks

    def rel(self, milestone: str) -> float | None:
        """A milestone in seconds since the trigger (None if either is unknown)."""
        t0, t = self.marks.get("trigger"), self.marks.get(milestone)
        return None if t0 is None or t is None else t - t0

    @property
    def label(self) -> str:
        return f"r{self.repetition} #{self.rank} {self.pod or '(never created)'}"


def _finite(x: float | None) -> bool:
    return x is not None and isinstance(x, int | float) and math.isfinite(x)


def requested_at(rep: Repetition, rank: int) -> tuple[float | None, str]:
    """When the desired replicas first reached ``rank`` (client monotonic), and from which
    signal: the Deployment's ``spec.replicas`` if recorded, else the HPA's desired
    replicas, else the ScaledObject; for rank 1 with no replica signal at all, the
    ScaledObject's Active condition."""
    for source in ("deployment", "hpa", "scaledobject"):
        marks = [m for m in rep.scale if m.source == source]
        if not marks:
            continue
        hits = [m.at.mono for m in marks if m.replicas >= rank and _finite(m.at.mono)]
        return (min(hits), source) if hits else (None, source)
    if rank == 1 and rep.active is not None and _finite(rep.active.mono):
        return rep.active.mono, "active"
    return None, ""


def _order_key(p: PodRecord) -> tuple[int, float, str]:
    c = p.observed.get("created")
    if c is not None and _finite(c.mono):
        return (0, c.mono, p.name)
    monos = [s.mono for s in p.observed.values() if _finite(s.mono)]
    return (1, min(monos), p.name) if monos else (2, 0.0, p.name)


def _stall_for(rep: Repetition, pod: str | None) -> Stall | None:
    own = [s for s in rep.stalls if pod is not None and s.pod == pod]
    if own:
        return own[0]
    general = [s for s in rep.stalls if s.pod is None and s.phase not in ("trigger", "scale-down")]
    return general[0] if general else None


POD_FIRST = "created"  # the first milestone of the pod's own record


def out_of_order(marks: Mapping[str, float], first: str = CHAIN[0],
                 last: str = CHAIN[-1]) -> list[tuple[str, str]]:
    """Every pair of observed milestones between ``first`` and ``last`` (chain order) whose
    times are reversed: ``(earlier in the chain, later in the chain)``, the later one seen
    first. A span over such a record is no duration: it would fold the reversal away."""
    seen = [m for m in CHAIN[CHAIN.index(first):CHAIN.index(last) + 1] if m in marks]
    return [(a, b) for i, a in enumerate(seen) for b in seen[i + 1:] if marks[b] < marks[a]]


def _when(marks: Mapping[str, float], m: str) -> str:
    t0 = marks.get("trigger")
    if t0 is not None and m != "trigger":
        return f"{MILESTONE_TITLES[m]} at {marks[m] - t0:+.3f} s"  # -x.xxx s: before it
    return f"{MILESTONE_TITLES[m]} at {marks[m]:.3f} s (client monotonic)"


def _reversed(who: str, marks: Mapping[str, float], pairs: list[tuple[str, str]]) -> str:
    """The reversal(s) in words: the pod, both milestones and their times (seconds since the
    trigger, else the client's monotonic clock)."""
    return f"{who}: out of order: " + "; ".join(
        f"{_when(marks, b)} observed {marks[a] - marks[b]:.3f} s before {_when(marks, a)}"
        for a, b in pairs)


def _values(marks: Mapping[str, float], bad: Mapping[str, str],
            stall: Stall | None, who: str) -> dict[str, PhaseValue]:
    """All measures of one pod from its chain marks (``who`` names the pod in notes)."""
    out: dict[str, PhaseValue] = {}
    stall_at = stall.at.mono if stall is not None and stall.at is not None else None

    def pair(measure: str) -> PhaseValue:
        a, b = BOUNDS[measure]
        for m in (a, b):
            if m in bad:
                return PhaseValue(measure, INVALID, None, f"{MILESTONE_TITLES[m]}: {bad[m]}")
        if a not in marks or b not in marks:
            gone = [m for m in (a, b) if m not in marks]
            return PhaseValue(measure, MISSING, None,
                              " and ".join(MILESTONE_TITLES[m] for m in gone) + " not observed")
        if measure in PHASES:  # a link of the chain: its own two ends
            rev = [(a, b)] if marks[b] < marks[a] else []
        else:  # a span: its ends, and any two of the pod's own milestones inside it (one
            # pod stream; trigger and requested come from other watches, whose receipt
            # order against the pod's is judged by their own links)
            rev = out_of_order(marks, max(a, POD_FIRST, key=CHAIN.index), b)
            if marks[b] < marks[a]:
                rev.insert(0, (a, b))
        if rev:
            return PhaseValue(measure, OUT_OF_ORDER, None, _reversed(who, marks, rev))
        return PhaseValue(measure, OK, marks[b] - marks[a])

    if "trigger" not in marks:
        note = (f"trigger time {bad['trigger']}" if "trigger" in bad else
                "the trigger time was not recorded (the run could not raise its trigger)")
        for measure in MEASURES:
            if "trigger" in BOUNDS[measure]:
                out[measure] = PhaseValue(measure, MISSING, None, note)
            else:
                out[measure] = pair(measure)
        return out

    if "ready" in marks or "ready" in bad:
        return {m: pair(m) for m in MEASURES}

    # never Ready: stuck in the phase that starts at the last milestone observed
    j = max(i for i, m in enumerate(CHAIN) if m in marks)
    why = stall.detail if stall is not None and stall.detail else "never observed Ready"
    for i, phase in enumerate(PHASES):
        if i < j:
            out[phase] = pair(phase)
        elif i == j:
            lb = None if stall_at is None else max(0.0, stall_at - marks[CHAIN[j]])
            out[phase] = PhaseValue(phase, STALLED, lb, why)
        else:
            out[phase] = PhaseValue(phase, NOT_REACHED, None, f"stalled in {PHASES[j]}")
    for span in SPANS:
        start = BOUNDS[span][0]
        if start in marks:
            lb = None if stall_at is None else max(0.0, stall_at - marks[start])
            out[span] = PhaseValue(span, STALLED, lb, f"stalled in {PHASES[j]}: {why}")
        else:
            out[span] = PhaseValue(span, NOT_REACHED, None, f"stalled in {PHASES[j]}")
    return out


def repetition_phases(rep: Repetition, role: str = "kata",
                      runtime_class: str | None = None) -> tuple[PodPhases, ...]:
    """Every pod of one repetition (plus phantom rows up to ``target_replicas``)."""
    pods = sorted(rep.pods, key=_order_key)
    trig = rep.trigger.mono if rep.trigger is not None else None
    out: list[PodPhases] = []
    for rank in range(1, max(len(pods), rep.target_replicas) + 1):
        pod = pods[rank - 1] if rank <= len(pods) else None
        marks: dict[str, float] = {}
        bad: dict[str, str] = {}
        if trig is not None:
            if _finite(trig):
                marks["trigger"] = trig
            else:
                bad["trigger"] = "non-finite timestamp"
        req, source = requested_at(rep, rank)
        if req is not None:
            marks["requested"] = req
        if pod is not None:
            for m, s in pod.observed.items():
                if _finite(s.mono):
                    marks[m] = s.mono
                else:
                    bad[m] = "non-finite timestamp"
        stall = _stall_for(rep, pod.name if pod is not None else None)
        who = (f"{role} r{rep.index} #{rank} "
               f"{pod.name if pod is not None else '(never created)'}")
        values = _values(marks, bad, stall, who)
        out.append(PodPhases(
            role=role, runtime_class=runtime_class, repetition=rep.index, rank=rank,
            pod=pod.name if pod is not None else None,
            node=pod.node if pod is not None else None,
            marks=marks, values=values, stall=stall, requested_by=source,
        ))
    return tuple(out)


def class_phases(run: ClassRun) -> tuple[PodPhases, ...]:
    """Every pod of every repetition of one runtime class."""
    return tuple(
        pp for rep in run.repetitions
        for pp in repetition_phases(rep, run.role, run.runtime_class)
    )


# ---------------------------------------------------------------------------------------
# clocks


def estimate_clock_offset(samples: Iterable[tuple[float, float, float]]) -> ClockOffset | None:
    """API server clock − client wall clock, from whole-second API timestamps.

    Each sample is ``(client_wall_before, api_seconds, client_wall_after)``: kgc sent a
    request at ``before``, the server stamped the object (``metav1.Time``, serialised
    truncated to the whole second ``api_seconds``), kgc had the answer at ``after``. The
    server's true time ``s`` lies in ``[api, api + 1)`` and the event happened at client
    time ``c`` in ``[before, after]``, so ``offset = s − c`` lies in
    ``[api − after, api + 1 − before]``. Intersecting the intervals of all samples narrows
    it; the estimate is the midpoint and ``uncertainty_s`` the half-width. If the
    intervals disagree (a clock stepped) the median of the midpoints is returned with the
    spread as uncertainty and the method says so. None when no sample is usable."""
    ivs = []
    for before, api, after in samples:
        if not all(_finite(x) for x in (before, api, after)) or after < before:
            continue
        ivs.append((api - after, api + 1.0 - before))
    if not ivs:
        return None
    lo, hi = max(a for a, _ in ivs), min(b for _, b in ivs)
    if lo <= hi:
        return ClockOffset((lo + hi) / 2, (hi - lo) / 2, len(ivs),
                           "interval intersection of whole-second API timestamps")
    mids = sorted((a + b) / 2 for a, b in ivs)
    med = mids[len(mids) // 2]
    spread = max(abs(m - med) for m in mids) + max((b - a) / 2 for a, b in ivs)
    return ClockOffset(med, spread, len(ivs),
                       "median of per-sample midpoints (intervals disagree: clock stepped?)")


@dataclass(frozen=True)
class Lag:
    """How long after the API's own (truncated) timestamp kgc received a milestone, in
    the API server's clock: ``observed.wall + offset − api``. With a prompt watch it lies
    in ``[0, 1)`` s (the API drops fractions) give or take the offset's uncertainty."""

    role: str
    repetition: int
    pod: str
    milestone: str
    lag_s: float


def receipt_lags(ev: KedaEvidence) -> tuple[Lag, ...]:
    """Every milestone that has both a client stamp and an API timestamp."""
    if ev.clock is None:
        return ()
    off = ev.clock.offset_s
    out = []
    for run in ev.runs():
        for rep in run.repetitions:
            for pod in rep.pods:
                for m, t_api in pod.api.items():
                    s = pod.observed.get(m)
                    if s is None or not _finite(s.wall) or not _finite(t_api):
                        continue
                    out.append(Lag(run.role, rep.index, pod.name, m, s.wall + off - t_api))
    return tuple(out)


@dataclass(frozen=True)
class ScaleDown:
    role: str
    repetition: int
    seconds: float | None
    status: str  # ok | stalled | missing
    note: str = ""


def scale_downs(run: ClassRun) -> tuple[ScaleDown, ...]:
    """Trigger lowered → no pod left, per repetition (reported, not budgeted)."""
    out = []
    for rep in run.repetitions:
        st = next((s for s in rep.stalls if s.phase == "scale-down"), None)
        if st is not None:
            out.append(ScaleDown(run.role, rep.index, st.waited_s, STALLED,
                                 st.detail or f"not back to 0 within {st.timeout_s:g} s"))
        elif rep.lowered is None or rep.scaled_down is None:
            gone = "trigger lowering" if rep.lowered is None else "scale-down to 0"
            out.append(ScaleDown(run.role, rep.index, None, MISSING, f"{gone} not recorded"))
        else:
            d = rep.scaled_down.mono - rep.lowered.mono
            if d < 0:
                out.append(ScaleDown(run.role, rep.index, None, OUT_OF_ORDER,
                                     "scale-down observed before the trigger was lowered"))
            else:
                out.append(ScaleDown(run.role, rep.index, d, OK))
    return tuple(out)


__all__ = [
    "BOUNDS", "CHAIN", "MEASURES", "PHASES", "SPANS", "TITLES", "MILESTONE_TITLES",
    "OK", "MISSING", "OUT_OF_ORDER", "INVALID", "STALLED", "NOT_REACHED",
    "PhaseValue", "PodPhases", "Lag", "ScaleDown",
    "out_of_order", "requested_at", "repetition_phases", "class_phases",
    "estimate_clock_offset",
    "receipt_lags", "scale_downs",
]
