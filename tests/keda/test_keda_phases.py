"""Phase computation: values per pod per phase, robust to missing, out-of-order, stalled
and never-created pods; the clock offset estimate; receipt lags; scale-downs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kedasynth import WALL0, pod, repetition, stamp, synth, uniform

from kgc.layers.keda.evidence import ClassRun, PodRecord, Repetition, ScaleMark, Stamp
from kgc.layers.keda.phases import (
    INVALID,
    MEASURES,
    MISSING,
    NOT_REACHED,
    OK,
    OUT_OF_ORDER,
    PHASES,
    STALLED,
    class_phases,
    estimate_clock_offset,
    receipt_lags,
    repetition_phases,
    requested_at,
    scale_downs,
)


def test_every_phase_of_a_complete_pod_is_measured_and_the_spans_add_up():
    durs = pod(decision=4.0, creation=0.05, scheduling=0.02, sandbox=2.5, start=0.4, ready=0.1)
    (row,) = repetition_phases(repetition(1, [durs]), "kata", "kata")
    for p in PHASES:
        assert row.values[p].status == OK
        assert row.seconds(p) == pytest.approx(durs[p])
    assert row.seconds("e2e") == pytest.approx(sum(durs[p] for p in PHASES))
    assert row.seconds("startup") == pytest.approx(0.02 + 2.5 + 0.4 + 0.1)
    assert row.requested_by == "deployment" and row.ready and row.rank == 1


@given(st.lists(st.floats(min_value=0, max_value=100), min_size=6, max_size=6))
def test_phases_partition_the_end_to_end_time(ds):
    durs = dict(zip(PHASES, ds, strict=True))
    (row,) = repetition_phases(repetition(1, [durs]))
    assert sum(row.seconds(p) for p in PHASES) == pytest.approx(row.seconds("e2e"), abs=1e-6)
    assert all(row.seconds(m) >= 0 for m in MEASURES)


def test_a_phase_never_observed_is_missing_never_zero():
    # no PodReadyToStartContainers (Kubernetes < 1.29 or the feature gate off)
    (row,) = repetition_phases(repetition(1, [pod(sandbox=None)]))
    assert row.values["sandbox"].status == MISSING
    assert row.values["sandbox"].seconds is None
    assert "PodReadyToStartContainers not observed" in row.values["sandbox"].note
    assert row.values["start"].status == MISSING  # starts at the unobserved milestone
    assert row.values["e2e"].status == OK and row.values["scheduling"].status == OK


def test_an_end_observed_before_its_start_is_out_of_order():
    rep = repetition(1, [pod()])
    p = rep.pods[0]
    obs = dict(p.observed)
    obs["sandbox_ready"] = Stamp(obs["scheduled"].mono - 0.4, obs["scheduled"].wall - 0.4)
    bad = Repetition(1, 1, rep.trigger, rep.active, rep.scale,
                     (PodRecord(p.name, obs, p.api, p.node),))
    (row,) = repetition_phases(bad)
    v = row.values["sandbox"]
    assert v.status == OUT_OF_ORDER and v.seconds is None
    # named: which pod, which milestones, when (seconds since the trigger)
    assert v.note == ("kata r1 #1 p1-1: out of order: PodReadyToStartContainers at +0.670 s "
                      "observed 0.400 s before pod scheduled at +1.070 s")
    # and never folded into a span that looks like a duration
    for span in ("startup", "e2e"):
        assert row.values[span].status == OUT_OF_ORDER
        assert row.values[span].note.endswith(v.note.split(": out of order: ")[1])
        assert "PodReadyToStartContainers at +0.670 s observed 0.380 s before pod created " \
            "at +1.050 s" in row.values[span].note  # every reversal inside it


def test_a_non_finite_timestamp_is_invalid_not_a_crash():
    rep = repetition(1, [pod()])
    p = rep.pods[0]
    obs = dict(p.observed)
    obs["started"] = Stamp(math.nan, math.nan)
    bad = Repetition(1, 1, rep.trigger, rep.active, rep.scale,
                     (PodRecord(p.name, obs, p.api, p.node),))
    (row,) = repetition_phases(bad)
    assert row.values["start"].status == INVALID
    assert row.values["ready"].status == INVALID
    assert "non-finite" in row.values["start"].note
    assert row.values["sandbox"].status == OK


def test_a_pod_stuck_in_sandbox_is_stalled_there_and_later_phases_not_reached():
    stuck = pod(sandbox=None, start=None, ready=None, stall=True)
    rep = repetition(1, [pod(), stuck], stall_wait=300.0)
    rows = repetition_phases(rep)
    row = rows[1]
    assert not row.ready
    assert row.values["scheduling"].status == OK
    assert row.values["sandbox"].status == STALLED
    assert row.values["sandbox"].seconds == pytest.approx(300.0)  # lower bound
    assert row.values["start"].status == NOT_REACHED
    assert row.values["e2e"].status == STALLED
    assert row.values["e2e"].seconds == pytest.approx(300.0 + 1.0 + 0.05 + 0.02)
    assert row.stall is not None and row.stall.phase == "sandbox"


def test_pods_the_deployment_never_created_appear_as_stalled_rows():
    # K = 3 but only one pod: desired replicas never passed 1 -> decision stalled
    rep = repetition(1, [pod()], k=3)
    rows = repetition_phases(rep)
    assert [r.rank for r in rows] == [1, 2, 3]
    assert rows[1].pod is None and rows[1].values["decision"].status == STALLED
    assert rows[1].values["e2e"].status == STALLED
    assert rows[1].values["startup"].status == NOT_REACHED
    # desired raised to 3 but the ReplicaSet made only one pod -> creation stalled
    rep2 = Repetition(2, 3, rep.trigger, rep.active,
                      rep.scale + (ScaleMark("deployment", 3, stamp(rep.trigger.mono + 2)),),
                      rep.pods)
    rows2 = repetition_phases(rep2)
    assert rows2[2].values["decision"].status == OK
    assert rows2[2].values["decision"].seconds == pytest.approx(2.0)
    assert rows2[2].values["creation"].status == STALLED


def test_requested_prefers_the_deployment_then_the_hpa_then_activation():
    t = stamp(10.0)
    rep = Repetition(1, 2, t, active=stamp(12.0), scale=(
        ScaleMark("hpa", 2, stamp(20.0)), ScaleMark("deployment", 1, stamp(13.0)),
        ScaleMark("deployment", 2, stamp(21.0))))
    assert requested_at(rep, 1) == (13.0, "deployment")
    assert requested_at(rep, 2) == (21.0, "deployment")
    assert requested_at(rep, 3) == (None, "deployment")
    hpa_only = Repetition(1, 2, t, active=stamp(12.0), scale=(ScaleMark("hpa", 2, stamp(20.0)),))
    assert requested_at(hpa_only, 2) == (20.0, "hpa")
    assert requested_at(hpa_only, 1) == (20.0, "hpa")
    bare = Repetition(1, 2, t, active=stamp(12.0))
    assert requested_at(bare, 1) == (12.0, "active")
    assert requested_at(bare, 2) == (None, "")


def test_pods_are_ranked_by_creation_not_by_name():
    rep = repetition(1, [pod(creation=0.05), pod(creation=0.5)])
    a, b = rep.pods
    renamed = Repetition(1, 2, rep.trigger, rep.active, rep.scale, (
        PodRecord("zzz", a.observed), PodRecord("aaa", b.observed)))
    rows = repetition_phases(renamed)
    assert [r.pod for r in rows] == ["zzz", "aaa"]


def test_without_a_trigger_time_nothing_from_the_trigger_is_measured():
    rep = repetition(1, [pod()])
    bare = Repetition(1, 1, None, rep.active, rep.scale, rep.pods)
    (row,) = repetition_phases(bare)
    assert row.values["e2e"].status == MISSING and "trigger" in row.values["e2e"].note
    assert row.values["decision"].status == MISSING
    assert row.values["sandbox"].status == OK


def test_class_phases_covers_every_repetition():
    ev = synth({"kata": uniform(3, 2)})
    rows = class_phases(ev.kata)
    assert len(rows) == 6 and {r.repetition for r in rows} == {1, 2, 3}
    assert class_phases(ClassRun("kata", "kata")) == ()


# ---------------------------------------------------------------------------------------
# clock offset


def test_clock_offset_hand_computed():
    # event 1: client sent at 10.2, got the answer at 10.4, the API stamped 1000 (whole s)
    #   -> offset in [1000 - 10.4, 1001 - 10.2] = [989.6, 990.8]
    # event 2: [1011 - 20.8, 1012 - 20.7] = [990.2, 991.3]
    off = estimate_clock_offset([(10.2, 1000.0, 10.4), (20.7, 1011.0, 20.8)])
    assert off is not None
    assert off.offset_s == pytest.approx(990.5)
    assert off.uncertainty_s == pytest.approx(0.3)
    assert off.samples == 2 and "intersection" in off.method


def test_clock_offset_ignores_unusable_samples_and_reports_disagreement():
    assert estimate_clock_offset([]) is None
    assert estimate_clock_offset([(1.0, math.nan, 2.0), (3.0, 5.0, 2.0)]) is None
    off = estimate_clock_offset([(0.0, 100.0, 0.1), (50.0, 200.0, 50.1)])  # clock stepped
    assert off is not None and "disagree" in off.method and off.uncertainty_s > 1


@given(true_offset=st.floats(min_value=-1e4, max_value=1e4),
       events=st.lists(st.tuples(st.floats(min_value=0, max_value=1e4),
                                 st.floats(min_value=0, max_value=0.5),
                                 st.floats(min_value=0, max_value=1)),
                       min_size=1, max_size=20))
def test_the_true_offset_lies_within_the_estimate(true_offset, events):
    samples = []
    for sent, rtt, frac in events:
        happened = sent + rtt * frac  # client time of the server's stamp
        samples.append((sent, math.floor(happened + true_offset), sent + rtt))
    off = estimate_clock_offset(samples)
    assert off is not None
    assert abs(off.offset_s - true_offset) <= off.uncertainty_s + 1e-6


def test_receipt_lags_use_the_offset():
    ev = synth({"kata": [[pod()]]}, api_offset=0.0)
    lags = receipt_lags(ev)
    assert len(lags) == 5
    assert all(0 <= lag.lag_s < 1 for lag in lags)  # API truncates to whole seconds
    assert receipt_lags(synth({"kata": [[pod()]]}, clock=None)) == ()
    assert WALL0 > 0


def test_scale_downs_are_measured_or_named():
    ev = synth({"kata": uniform(1, 1)})
    (sd,) = scale_downs(ev.kata)
    assert sd.status == OK and sd.seconds == pytest.approx(40.0)
    rep = ev.kata.repetitions[0]
    none = ClassRun("kata", "kata", (Repetition(1, 1, rep.trigger, lowered=rep.lowered),))
    assert scale_downs(none)[0].status == MISSING
    back = ClassRun("kata", "kata", (Repetition(1, 1, rep.trigger, lowered=rep.scaled_down,
                                                scaled_down=rep.lowered),))
    assert scale_downs(back)[0].status == OUT_OF_ORDER
