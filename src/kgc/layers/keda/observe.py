"""Pure readers of the API objects the live driver watches (pods, Deployments, HPAs,
ScaledObjects), in the API's own JSON shape (camelCase -- the ``raw_object`` of a
``kubernetes.watch`` event, or ``ApiClient().sanitize_for_serialization(obj)``).

They are total: any input (a wrong type, a missing field, garbage) gives "not reached" /
None, never an exception. The watcher calls, on every event, at receipt::

    at = Stamp(time.monotonic(), time.time())          # first thing in the event loop
    rec = merge_observation(rec, pod_observation(event["raw_object"]), at)

and keeps ``rec`` per pod uid; first-observed receipt times are never overwritten.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from kgc.layers.keda.evidence import POD_MILESTONES, PodRecord, ScalingConfig, Stamp


def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _l(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else []


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def parse_time(v: Any) -> float | None:
    """RFC 3339 (``2026-05-28T20:43:21Z``, fractions allowed) → epoch seconds; else None."""
    if not isinstance(v, str) or not v or len(v) > 64:
        return None
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    try:
        return dt.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for c in _l(status.get("conditions")):
        c = _m(c)
        t = _s(c.get("type"))
        if t is not None and t not in out:
            out[t] = c
    return out


def _true(c: Mapping[str, Any] | None) -> bool:
    return c is not None and c.get("status") == "True"


@dataclass(frozen=True)
class PodObservation:
    """What one pod object shows: the milestones it has reached, the API's timestamps of
    them (epoch seconds), its node, and a one-line status for a pod that is not Ready."""

    name: str | None
    uid: str | None = None
    node: str | None = None
    reached: frozenset[str] = frozenset()
    api: Mapping[str, float] = field(default_factory=dict)
    detail: str = ""


def pod_observation(pod: Any) -> PodObservation:
    """Milestones (see :data:`~kgc.layers.keda.evidence.POD_MILESTONES`): ``created`` (the
    object exists), ``scheduled`` (``spec.nodeName`` set or PodScheduled=True),
    ``sandbox_ready`` (PodReadyToStartContainers=True), ``started`` (every container of
    the spec has ``state.running``), ``ready`` (Ready=True)."""
    p = _m(pod)
    meta, spec, status = _m(p.get("metadata")), _m(p.get("spec")), _m(p.get("status"))
    name = _s(meta.get("name"))
    if not meta:
        return PodObservation(None)
    cond = _conditions(status)
    reached = {"created"}
    api: dict[str, float] = {}
    if (t := parse_time(meta.get("creationTimestamp"))) is not None:
        api["created"] = t
    node = _s(spec.get("nodeName"))
    if node is not None or _true(cond.get("PodScheduled")):
        reached.add("scheduled")
        if (t := parse_time(_m(cond.get("PodScheduled")).get("lastTransitionTime"))) is not None:
            api["scheduled"] = t
    for ctype, m in (("PodReadyToStartContainers", "sandbox_ready"), ("Ready", "ready")):
        if _true(cond.get(ctype)):
            reached.add(m)
            if (t := parse_time(_m(cond.get(ctype)).get("lastTransitionTime"))) is not None:
                api[m] = t
    statuses = [_m(c) for c in _l(status.get("containerStatuses"))]
    wanted = len(_l(spec.get("containers"))) or len(statuses)
    running = [_m(c.get("state")).get("running") for c in statuses]
    if statuses and len(statuses) >= wanted and all(isinstance(r, Mapping) for r in running):
        reached.add("started")
        times = [t for r in running if (t := parse_time(_m(r).get("startedAt"))) is not None]
        if times:
            api["started"] = max(times)
    detail = ""
    if "ready" not in reached:
        words = [_s(status.get("phase")) or "Unknown"]
        for ctype in ("PodScheduled", "PodReadyToStartContainers", "ContainersReady", "Ready"):
            c = cond.get(ctype)
            if c is not None and c.get("status") == "False" and (c.get("reason")
                                                                 or c.get("message")):
                words.append(f"{ctype}=False {_s(c.get('reason')) or ''}: "
                             f"{_s(c.get('message')) or ''}".strip())
                break
        for c in statuses:
            w = _m(_m(c.get("state")).get("waiting"))
            if _s(w.get("reason")):
                words.append(f"container {_s(c.get('name')) or '?'} waiting: {w.get('reason')}"
                             + (f" ({_s(w.get('message'))})" if _s(w.get("message")) else ""))
        detail = "; ".join(words)[:300]
    return PodObservation(name, _s(meta.get("uid")), node, frozenset(reached), api, detail)


def merge_observation(prev: PodRecord | None, obs: PodObservation, at: Stamp) -> PodRecord:
    """The pod's record after one more event received at ``at``: each milestone keeps the
    receipt time of the FIRST event that showed it (and the API timestamp seen then)."""
    name = obs.name or (prev.name if prev is not None else "?")
    observed = dict(prev.observed) if prev is not None else {}
    api = dict(prev.api) if prev is not None else {}
    for m in POD_MILESTONES:
        if m in obs.reached and m not in observed:
            observed[m] = at
        if m in obs.api and m not in api:
            api[m] = obs.api[m]
    if prev is None:
        return PodRecord(name, observed, api, obs.node, obs.uid, obs.detail)
    return replace(prev, observed=observed, api=api, node=obs.node or prev.node,
                   uid=obs.uid or prev.uid, detail=obs.detail)


def deployment_replicas(dep: Any) -> int | None:
    """``spec.replicas`` of a Deployment (what KEDA's 0→1 and the HPA's 1→N write)."""
    return _int(_m(_m(dep).get("spec")).get("replicas"))


def hpa_desired(hpa: Any) -> int | None:
    """``status.desiredReplicas`` of a HorizontalPodAutoscaler."""
    return _int(_m(_m(hpa).get("status")).get("desiredReplicas"))


def scaled_object_active(so: Any) -> bool | None:
    """The ScaledObject's ``Active`` condition (None: not reported yet)."""
    for c in _l(_m(_m(so).get("status")).get("conditions")):
        c = _m(c)
        if c.get("type") == "Active":
            s = c.get("status")
            return True if s == "True" else False if s == "False" else None
    return None


def scaling_config(so: Any, hpa: Any = None, *, hpa_sync_period_s: float | None = None,
                   hpa_sync_source: str = "") -> ScalingConfig:
    """KEDA's and the HPA's settings as written on the objects; a field the ScaledObject
    leaves out is None (KEDA then applies its default, which the checks name)."""
    spec = _m(_m(so).get("spec"))
    triggers = [_m(t) for t in _l(spec.get("triggers"))]
    beh = _m(_m(_m(hpa).get("spec")).get("behavior")) or _m(
        _m(_m(spec.get("advanced")).get("horizontalPodAutoscalerConfig")).get("behavior"))
    return ScalingConfig(
        polling_interval_s=_num(spec.get("pollingInterval")),
        cooldown_period_s=_num(spec.get("cooldownPeriod")),
        min_replica_count=_int(spec.get("minReplicaCount")),
        max_replica_count=_int(spec.get("maxReplicaCount")),
        hpa_sync_period_s=hpa_sync_period_s,
        hpa_sync_source=hpa_sync_source,
        hpa_behavior=_json(beh) if beh else None,
        trigger_kind=", ".join(t for tr in triggers if (t := _s(tr.get("type")))),
    )


def _json(v: Any, depth: int = 0) -> Any:
    """A JSON-clean copy (non-finite floats and exotic values dropped)."""
    if depth > 16:
        return None
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, Mapping):
        return {str(k): _json(x, depth + 1) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_json(x, depth + 1) for x in v]
    return None


def controller_manager_sync_period(command: Any) -> float | None:
    """``--horizontal-pod-autoscaler-sync-period`` from kube-controller-manager's command
    line (a list of arguments, e.g. of its static pod); Go durations ``15s``, ``1m30s``,
    ``500ms``. None when the flag is absent or unreadable (the default is 15 s)."""
    args = [a for a in _l(command) if isinstance(a, str)]
    flag = "--horizontal-pod-autoscaler-sync-period"
    for i, a in enumerate(args):
        if a.startswith(flag + "="):
            return go_duration(a.split("=", 1)[1])
        if a == flag and i + 1 < len(args):
            return go_duration(args[i + 1])
    return None


_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def go_duration(v: Any) -> float | None:
    """A Go ``time.Duration`` string (``1m30s``, ``250ms``, ``15s``) in seconds, or None."""
    if not isinstance(v, str) or not v or len(v) > 64:
        return None
    s, total, i = v.strip(), 0.0, 0
    if s == "0":
        return 0.0
    while i < len(s):
        j = i
        while j < len(s) and (s[j].isdigit() or s[j] == "."):
            j += 1
        if j == i:
            return None
        try:
            num = float(s[i:j])
        except ValueError:
            return None
        k = j
        while k < len(s) and not (s[k].isdigit() or s[k] == "."):
            k += 1
        unit = s[j:k]
        if unit not in _UNITS:
            return None
        total += num * _UNITS[unit]
        i = k
    return total if math.isfinite(total) else None
