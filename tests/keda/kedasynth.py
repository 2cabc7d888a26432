"""Builds KEDA latency evidence from phase durations (for the pure self-tests).

``synth({"kata": [[pod, pod, ...], ...], "baseline": [...]})``: per role, per repetition,
per pod a dict of phase durations in seconds (``decision``, ``creation``, ``scheduling``,
``sandbox``, ``start``, ``ready``). A phase left out (or None) means its end milestone was
never observed; ``stall=True`` on a pod (key ``"stall"``) marks it never Ready with the
stall recorded at the end of its last observed milestone + ``stall_wait`` seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from kgc.layers.keda.evidence import (
    ClassRun,
    ClockOffset,
    KedaEvidence,
    PodRecord,
    Preflight,
    Repetition,
    ScaleMark,
    ScalingConfig,
    Stall,
    Stamp,
)

WALL0 = 1_780_000_000.0  # client wall clock at monotonic 0
MILESTONES = ("created", "scheduled", "sandbox_ready", "started", "ready")
ORDER = ("decision", "creation", "scheduling", "sandbox", "start", "ready")
ENDS = ("requested",) + MILESTONES  # end milestone of each phase in ORDER


def stamp(mono: float) -> Stamp:
    return Stamp(mono, WALL0 + mono)


def pod_times(t0: float, durations: Mapping[str, Any]) -> dict[str, float | None]:
    """Chain milestone -> mono; a phase missing from ``durations`` leaves its end unknown
    and every later milestone is placed from the last known one."""
    out: dict[str, float | None] = {"trigger": t0}
    t = t0
    for phase, end in zip(ORDER, ENDS, strict=True):
        d = durations.get(phase)
        if d is None:
            out[end] = None
            continue
        t = t + d
        out[end] = t
    return out


def repetition(index: int, pods: Sequence[Mapping[str, Any]], *, k: int | None = None,
               t0: float | None = None, api_offset: float = 0.0, prefix: str = "p",
               stall_wait: float = 300.0, active: bool = True,
               extra_stalls: Sequence[Stall] = ()) -> Repetition:
    t0 = 1000.0 * index if t0 is None else t0
    records, marks, stalls = [], [], list(extra_stalls)
    for rank, spec in enumerate(pods, start=1):
        times = pod_times(t0, spec)
        req = times["requested"]
        if req is not None:
            marks.append(ScaleMark("deployment", rank, stamp(req)))
        obs = {m: stamp(t) for m in MILESTONES if (t := times[m]) is not None}
        if spec.get("stall"):
            obs.pop("ready", None)
        api = {m: float(math.floor(s.wall + api_offset)) for m, s in obs.items()}
        name = f"{prefix}{index}-{rank}"
        if obs:
            records.append(PodRecord(name, obs, api, node="node-a", uid=f"uid-{name}",
                                     detail="Pending" if spec.get("stall") else ""))
        if spec.get("stall"):
            last = max([t for t in times.values() if t is not None])
            stalls.append(Stall(spec.get("stall_phase", "sandbox"), stall_wait, stall_wait,
                                "never ready", name if obs else None,
                                stamp(last + stall_wait)))
    first = min((m.at.mono for m in marks), default=None)
    return Repetition(
        index=index, target_replicas=k if k is not None else len(pods),
        trigger=stamp(t0),
        active=stamp(first) if (first is not None and active) else None,
        scale=tuple(sorted(marks, key=lambda m: m.at.mono)),
        pods=tuple(records),
        lowered=stamp(t0 + 500.0), scaled_down=stamp(t0 + 540.0),
        stalls=tuple(stalls),
    )


def class_run(role: str, reps: Sequence[Sequence[Mapping[str, Any]]], *,
              runtime_class: str | None = None, config: ScalingConfig | None = None,
              **kw: Any) -> ClassRun:
    rc = runtime_class if runtime_class is not None else ("kata" if role == "kata" else "runc")
    return ClassRun(
        role=role, runtime_class=rc,
        repetitions=tuple(repetition(i, pods, prefix=f"{rc}-", **kw)
                          for i, pods in enumerate(reps, start=1)),
        config=config or ScalingConfig(polling_interval_s=5, cooldown_period_s=10,
                                       min_replica_count=0, max_replica_count=3,
                                       hpa_sync_period_s=5, hpa_sync_source="lab",
                                       trigger_kind="metrics-api"),
        deployment=f"kgc-{rc}", scaled_object=f"kgc-{rc}",
    )


TEST_CLOCK = ClockOffset(0.0, 0.05, 20, "test")


def synth(spec: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]], *,
          clock: ClockOffset | None = TEST_CLOCK,
          **kw: Any) -> KedaEvidence:
    return KedaEvidence(
        status="done",
        preflight=Preflight(True, "2.21.0", (), True),
        kata=class_run("kata", spec["kata"], **kw) if "kata" in spec else None,
        baseline=class_run("baseline", spec["baseline"], **kw) if "baseline" in spec else None,
        clock=clock,
    )


def pod(decision: float = 1.0, creation: float = 0.05, scheduling: float = 0.02,
        sandbox: float = 0.3, start: float = 0.2, ready: float = 0.1, **kw: Any) -> dict:
    return {"decision": decision, "creation": creation, "scheduling": scheduling,
            "sandbox": sandbox, "start": start, "ready": ready, **kw}


def uniform(reps: int, k: int, **phases: Any) -> list[list[dict]]:
    return [[pod(**phases) for _ in range(k)] for _ in range(reps)]
