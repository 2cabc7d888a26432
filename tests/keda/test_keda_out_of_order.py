"""Out-of-order phase records are named in the verdict, never folded (issue 18, "Also").

A pod's record holds, per milestone, the receipt time of the first watch event that showed
it. A record whose milestones are reversed (pod Ready received before its containers were
running; PodReadyToStartContainers before the pod was scheduled) -- what a record merged from
two watch connections, or written by another driver, can carry -- has no duration for the
phases it touches. The spans over it (pod startup, end to end) must not fold the reversal into
a plausible number: they are out of order too, and the verdict names the pod, the milestones
and their times.

The records here are built the way the live driver builds them: the milestones and API
timestamps are read by :func:`kgc.layers.keda.observe.pod_observation` from pod objects in
the shape the kubelet writes them (status conditions with ``lastTransitionTime``,
``containerStatuses[].state.running.startedAt``: Kubernetes ``core/v1`` PodStatus,
PodReadyToStartContainers since 1.29), the receipt stamps are the record's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kedasynth import synth, uniform

from kgc.core.profile import load_profile
from kgc.layers.keda.checks import CHECKS
from kgc.layers.keda.evidence import PodRecord, Stamp
from kgc.layers.keda.observe import pod_observation
from kgc.layers.keda.phases import OK, OUT_OF_ORDER, out_of_order, repetition_phases

WALL = 1_780_000_000.0


def kubelet_pod(name: str, node: str = "gpu-a") -> dict[str, Any]:
    """A Kata pod Ready, as the API serves it once the kubelet has written its status."""
    t = "2026-05-28T20:43:2{}Z".format
    cond = [("PodScheduled", 0), ("PodReadyToStartContainers", 3), ("Initialized", 3),
            ("ContainersReady", 4), ("Ready", 4)]
    return {
        "metadata": {"name": name, "namespace": "kgc-run", "uid": f"uid-{name}",
                     "creationTimestamp": t(0)},
        "spec": {"nodeName": node, "runtimeClassName": "kata",
                 "containers": [{"name": "app", "image": "kgc.local/pause:1"}]},
        "status": {"phase": "Running",
                   "conditions": [{"type": c, "status": "True", "lastTransitionTime": t(s)}
                                  for c, s in cond],
                   "containerStatuses": [{"name": "app", "ready": True, "started": True,
                                          "restartCount": 0,
                                          "state": {"running": {"startedAt": t(4)}}}]},
    }


def record(name: str, received: dict[str, float]) -> PodRecord:
    """The pod's record: what the pod object shows, received at ``received`` (seconds)."""
    obs = pod_observation(kubelet_pod(name))
    assert set(received) <= obs.reached
    return PodRecord(name, {m: Stamp(t, WALL + t) for m, t in received.items()}, obs.api,
                     obs.node, obs.uid)


def evidence(pods: dict[str, dict[str, float]]) -> Any:
    """One Kata repetition of len(pods) pods (the synth's trigger and replica marks), whose
    pods' records are replaced by ``pods`` (name -> milestone -> receipt seconds)."""
    ev = synth({"kata": uniform(1, len(pods), sandbox=3.0)})
    rep = ev.kata.repetitions[0]
    t0 = rep.trigger.mono
    recs = tuple(record(n, {m: t0 + t for m, t in r.items()}) for n, r in pods.items())
    reps = (dataclasses.replace(rep, pods=recs),)
    return dataclasses.replace(ev, kata=dataclasses.replace(ev.kata, repetitions=reps))


GOOD = {"created": 1.0, "scheduled": 1.02, "sandbox_ready": 4.0, "started": 4.2, "ready": 4.3}


def test_ready_before_started_is_named_and_no_span_folds_it():
    bad = dict(GOOD, ready=4.1, started=4.6)  # Ready received 0.5 s before running
    ev = evidence({"kata-good": GOOD, "kata-bad": bad})
    rows = {r.pod: r for r in repetition_phases(ev.kata.repetitions[0], "kata", "kata")}
    assert all(v.status == OK for v in rows["kata-good"].values.values())
    r = rows["kata-bad"]
    want = ("kata r1 #1 kata-bad: out of order: pod Ready at +4.100 s observed 0.500 s "
            "before containers running at +4.600 s")
    assert r.values["ready"].status == OUT_OF_ORDER and r.values["ready"].note == want
    assert r.values["start"].status == OK  # sandbox ready -> running: in order
    for span in ("startup", "e2e"):  # before: OK, 3.1 s / 4.1 s, the reversal folded away
        assert r.values[span].status == OUT_OF_ORDER and r.values[span].note == want

    v = CHECKS.get("keda.e2e-p95").evaluate(ev, load_profile("lab"))
    assert v.status == "error", v.reason
    assert "1 of 2 end-to-end samples of kata are unusable" in v.reason
    assert want in v.reason  # which pod, which milestones, when


def test_sandbox_before_scheduled_is_named_in_the_phase_budget_verdict():
    bad = dict(GOOD, scheduled=4.5)  # PodReadyToStartContainers 0.5 s before scheduled
    ev = evidence({"kata-a": GOOD, "kata-b": bad})
    v = CHECKS.get("keda.phase-budgets").evaluate(ev, load_profile("lab"))
    assert v.status == "skip", v.reason
    assert ("sandbox ready: 1 of 2 pods lack it (kata r1 #2 kata-b: out of order: "
            "PodReadyToStartContainers at +4.000 s observed 0.500 s before pod scheduled at "
            "+4.500 s)") in v.reason, v.reason


def test_a_span_names_every_reversal_inside_it_even_with_its_ends_in_order():
    # scheduled after started, the sandbox milestone not observed: no link of the chain
    # has both ends, only the spans can tell -- and they must not report 3.3 s
    bad = {k: v for k, v in GOOD.items() if k != "sandbox_ready"} | {"scheduled": 4.25}
    (row,) = repetition_phases(evidence({"kata-c": bad}).kata.repetitions[0], "kata", "kata")
    assert row.values["scheduling"].status == OK and row.values["start"].status != OK
    note = row.values["startup"].note
    assert row.values["startup"].status == OUT_OF_ORDER
    assert note == ("kata r1 #1 kata-c: out of order: containers running at +4.200 s observed "
                    "0.050 s before pod scheduled at +4.250 s")
    assert row.values["e2e"].status == OUT_OF_ORDER and row.values["e2e"].note == note


def test_out_of_order_lists_reversed_pairs_of_observed_milestones_only():
    marks = {"created": 1.0, "scheduled": 3.0, "started": 2.0, "ready": 2.5}
    assert out_of_order(marks) == [("scheduled", "started"), ("scheduled", "ready")]
    assert out_of_order(marks, "started", "ready") == []
    assert out_of_order({"created": 1.0}) == []
    # without a trigger the times are the client's monotonic clock, said so
    (row,) = repetition_phases(dataclasses.replace(
        evidence({"p": dict(GOOD, ready=4.1, started=4.6)}).kata.repetitions[0],
        trigger=None), "kata", "kata")
    assert row.values["ready"].status == OUT_OF_ORDER
    assert "(client monotonic)" in row.values["ready"].note
    assert "trigger raised" not in row.values["ready"].note


def test_the_timeline_marks_an_out_of_order_phase_instead_of_a_gap():
    from kgc.layers.keda.timeline import phases_csv, timeline_svg

    ev = evidence({"kata-bad": dict(GOOD, ready=4.1, started=4.6)})
    svg = timeline_svg(ev)
    assert '<text class="out-of-order" data-phase="ready"' in svg
    assert "pod Ready at +4.100 s observed 0.500 s before containers running" in svg
    assert "out-of-order,,kata r1 #1 kata-bad: out of order: pod Ready" in phases_csv(ev)
