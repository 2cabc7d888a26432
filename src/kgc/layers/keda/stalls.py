"""Stall classification (pure): what a scale-up or scale-down that gave up was stuck in, in
words -- the phase of each pod that is not Ready, the Deployment's or the ReplicaSet's part
when pods were never created, and the latest Warning event as a hint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kgc.kube.watch import ObservedEvent
from kgc.layers.keda.evidence import PodRecord, ScaleMark, Stall, Stamp

NEXT_PHASE = {"created": "scheduling", "scheduled": "sandbox", "sandbox_ready": "start",
              "started": "ready"}
_ORDER = ("created", "scheduled", "sandbox_ready", "started", "ready")


def stuck_phase(rec: PodRecord) -> str:
    """The phase a pod that is not Ready is in: the one after its last milestone."""
    last = "created"
    for m in _ORDER[:-1]:
        if m in rec.observed:
            last = m
    return NEXT_PHASE[last]


def ready_stalls(pods: Sequence[PodRecord], marks: Sequence[ScaleMark], k: int, *,
                 timeout_s: float, waited_s: float, at: Stamp,
                 hints: Mapping[str, str] | None = None) -> list[Stall]:
    """What a scale-up that did not reach K Ready pods within the wait was stuck in: one
    stall per pod that is not Ready (its phase, its last status), and one general stall
    for pods never created -- ``decision`` when the Deployment's desired replicas never
    reached K, ``creation`` when they did but the ReplicaSet made fewer pods.
    ``hints``: extra words per phase (e.g. the latest Warning event)."""
    hints = hints or {}
    out: list[Stall] = []
    for rec in pods:
        if "ready" in rec.observed:
            continue
        phase = stuck_phase(rec)
        detail = _with_hint(rec.detail, hints.get(rec.name, ""))
        out.append(Stall(phase, timeout_s, waited_s, detail or "not Ready", rec.name, at))
    short = k - len(pods)
    if short > 0:
        dep = [m.replicas for m in marks if m.source == "deployment"]
        hpa = [m.replicas for m in marks if m.source == "hpa"]
        top = max(dep, default=0)
        if top < k:
            words = (f"the Deployment's desired replicas reached {top} of {k}"
                     + (f" (HPA desiredReplicas at most {max(hpa)})" if hpa else ""))
            phase = "decision"
        else:
            words = (f"the Deployment was scaled to {top} but only {len(pods)} of {k} pods "
                     "were created")
            phase = "creation"
        out.append(Stall(phase, timeout_s, waited_s, _with_hint(words, hints.get(phase, "")),
                         None, at))
    return out


def _with_hint(detail: str, hint: str) -> str:
    """``detail; hint`` unless the hint's message already is in the detail."""
    msg = hint.partition(": ")[2].strip()
    if not hint or (msg and msg in detail):
        return detail
    return f"{detail}; {hint}" if detail else hint


def event_hint(events: Iterable[ObservedEvent], name: str | None = None,
               kinds: Sequence[str] = ()) -> str:
    """The latest Warning event about ``name`` (or any object of ``kinds``), in words."""
    hits = [e for e in events if e.type == "Warning"
            and (name is None or e.name == name) and (not kinds or e.kind in kinds)]
    if not hits:
        return ""
    e = max(hits, key=lambda e: e.received.mono)
    return f"{e.kind} {e.name} {e.reason}: {e.message}"[:300]


def conditions_text(obj: Any) -> str:
    """``Ready=False Reason: message, Active=...`` of an object's status conditions."""
    conds = ((obj or {}).get("status") or {}).get("conditions") if isinstance(obj, dict) else None
    parts = []
    for c in conds or []:
        if not isinstance(c, dict):
            continue
        s = f"{c.get('type')}={c.get('status')}"
        if c.get("status") != "True" and (c.get("reason") or c.get("message")):
            s += f" {c.get('reason') or ''}: {c.get('message') or ''}".rstrip(": ")
        parts.append(s)
    return ", ".join(parts) or "no conditions"
