"""One repetition: every class 0 -> K -> 0 under the watch, each bounded wait that gives up
turned into a :class:`~kgc.layers.keda.evidence.Stall` naming its phase.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from kgc import kube
from kgc.kube.watch import EventWatcher
from kgc.layers.keda.evidence import Repetition, Stall, Stamp
from kgc.layers.keda.profile import KedaProfile
from kgc.layers.keda.stalls import conditions_text, event_hint, ready_stalls
from kgc.layers.keda.trigger import Setup, TriggerError, now, set_value
from kgc.layers.keda.watches import RoleState, ScaleWatcher, assemble
from kgc.progress import note


def _live_pods_words(st: RoleState, limit: int = 3) -> str:
    left = [r for uid, r in st.pods.items() if uid in st.live]
    words = [f"{r.name} ({r.detail or 'Ready'})" for r in left[:limit]]
    more = f" and {len(left) - limit} more" if len(left) > limit else ""
    return f"{len(left)} pod(s) left: {', '.join(words)}{more}" if left else "no pod left"


def repetition(k: kube.Kube, run: kube.Run, kp: KedaProfile, su: Setup, index: int,
               roles: Sequence[str]) -> tuple[dict[str, Repetition], bool]:
    """One 0 → K → 0 of every role; (repetitions by role, whether to go on)."""
    t = kp.timeouts
    K = kp.replicas  # noqa: N806 - K as in the issue
    stalls: dict[str, list[Stall]] = {r: [] for r in roles}
    trig: Stamp | None = None
    lowered: Stamp | None = None
    go_on = True
    events = EventWatcher(k, run.namespace).start()
    w = ScaleWatcher(k, run.namespace, roles).start()  # lists now: before the trigger
    try:
        try:
            trig = set_value(su.trigger, K, t.endpoint_s)
        except TriggerError as exc:
            at = now()
            for r in roles:
                stalls[r].append(Stall("trigger", t.endpoint_s, t.endpoint_s, str(exc), None,
                                       at))
            return assemble(w, index, K, None, None, stalls), False
        note("keda repetition %d of %d: trigger raised to %d (%s)", index, kp.repetitions, K,
             ", ".join(roles))

        pending = set(roles)
        try:
            w.wait(f"the ScaledObjects of {', '.join(roles)} to activate",
                   lambda s: all(s[r].activated() for r in roles) or kube.NotYet(
                       ", ".join(f"{r}: replicas {s[r].replicas}, Active={s[r].active_now}"
                                 for r in roles)),
                   t.activation_s - (time.monotonic() - trig.mono))
        except kube.WaitTimeout:
            at = now()
            for r in roles:
                st = w.states[r]
                if st.activated():
                    continue
                hint = event_hint(events.events, st.deployment) or event_hint(
                    events.events, kinds=("ScaledObject", "HorizontalPodAutoscaler"))
                stalls[r].append(Stall(
                    "decision", t.activation_s, at.mono - trig.mono,
                    f"ScaledObject {st.deployment} never became active "
                    f"({conditions_text(st.so)}); Deployment replicas {st.replicas}"
                    + (f"; {hint}" if hint else ""), None, at))
                pending.discard(r)
                go_on = False

        def done(s: dict[str, RoleState]) -> Any:
            short = {r: s[r].ready_count() for r in pending if s[r].ready_count() < K}
            return not short or kube.NotYet(f"Ready pods {short} of {K}")

        try:
            w.wait(f"{K} Ready pods of each of {', '.join(sorted(pending))}", done,
                   t.ready_s - (time.monotonic() - trig.mono))
        except kube.WaitTimeout:
            at = now()
            for r in sorted(pending):
                st = w.states[r]
                if st.ready_count() >= K:
                    continue
                hints = {p.name: event_hint(events.events, p.name) for p in st.new_pods()}
                hints["decision"] = event_hint(events.events, kinds=(
                    "ScaledObject", "HorizontalPodAutoscaler"))
                hints["creation"] = event_hint(events.events, kinds=("ReplicaSet",))
                stalls[r].extend(ready_stalls(st.new_pods(), st.marks, K,
                                              timeout_s=t.ready_s,
                                              waited_s=at.mono - trig.mono, at=at,
                                              hints=hints))
                go_on = False
        note("keda repetition %d of %d: scale-up %s; lowering the trigger to 0", index,
             kp.repetitions, "complete" if go_on else "stalled")

        try:
            lowered = set_value(su.trigger, 0, t.endpoint_s)
        except TriggerError as exc:
            at = now()
            for r in roles:
                stalls[r].append(Stall("scale-down", t.scale_down_s, 0.0,
                                       f"the run could not lower its trigger: {exc}", None, at))
            return assemble(w, index, K, trig, None, stalls), False
        w.lower(lowered)
        try:
            w.wait("no pod left of " + ", ".join(roles),
                   lambda s: all(s[r].scaled_down is not None for r in roles) or kube.NotYet(
                       "; ".join(f"{r}: {_live_pods_words(s[r])}, replicas {s[r].replicas}"
                                 for r in roles)),
                   t.scale_down_s)
        except kube.WaitTimeout:
            at = now()
            for r in roles:
                st = w.states[r]
                if st.scaled_down is not None:
                    continue
                stalls[r].append(Stall(
                    "scale-down", t.scale_down_s, at.mono - lowered.mono,
                    f"{_live_pods_words(st)}; Deployment replicas {st.replicas}; "
                    f"ScaledObject {conditions_text(st.so)}", None, at))
            go_on = False
        note("keda repetition %d of %d done%s", index, kp.repetitions,
             "" if go_on else " (stalled: the run ends here)")
        return assemble(w, index, K, trig, lowered, stalls), go_on
    finally:
        w.stop()
        events.stop()
