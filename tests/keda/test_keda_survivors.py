"""Kill the keda mutants the issue-21 audit found alive (hand-made, verdict-flipping).

* A Kata class whose scale-ups stalled must fail the ratio check (keda.kata-overhead), not
  be skipped as "ratio undefined": a censored sample counts as +∞ (stats.py's contract,
  nearest-rank percentiles), so Kata's statistic is +∞ and so is its ratio to a finite
  baseline — slower than any budget.
* A record marked ``done`` that holds no Kata repetition measured nothing: every check
  that judges a measurement is an ``error`` (a defect of the driver), never a pass.
"""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from kedasynth import pod, synth, uniform
from kedavectors import prof

from kgc.core.model import Status
from kgc.layers.keda.checks import CHECKS
from kgc.layers.keda.evidence import ClassRun, KedaEvidence, Preflight
from kgc.layers.keda.phases import MEASURES, class_phases
from kgc.layers.keda.stats import (
    ClassStats,
    Summary,
    class_stats,
    fmt_num,
    fmt_s,
    format_table,
    ratio,
    ratios,
    stats_of,
)

STALLED = pod(sandbox=None, start=None, ready=None, stall=True)


def judge(cid: str, ev: KedaEvidence, profile: object = None):  # type: ignore[no-untyped-def]
    return CHECKS.get(cid).judge(ev, profile, "cluster")


@pytest.mark.parametrize(("kata", "stat"), [
    ([[STALLED] * 3], "p50"),  # every Kata pod stalled: p50 is censored
    ([[pod(), pod(), STALLED]], "p95"),  # one of three: p95 (nearest rank 3 of 3) is
])
def test_a_stalled_kata_class_fails_the_ratio_check(kata: list, stat: str) -> None:
    ev = synth({"kata": kata, "baseline": uniform(1, 3)})
    s = class_stats(ev.kata)["e2e"]  # type: ignore[arg-type]
    assert math.isinf(s.get(stat) or 0.0)
    r = ratio(s, class_stats(ev.baseline)["e2e"], stat)  # type: ignore[arg-type]
    assert r.value is not None and math.isinf(r.value), r
    v = judge("keda.kata-overhead", ev, prof(ratio_stat=stat, ratio_max=1.5))
    assert v.status is Status.FAIL, v.reason
    assert "inf (stalled)" in v.reason and "> 1.5x budget" in v.reason


def test_a_stalled_kata_phase_ratio_fails_too() -> None:
    """The same through a per-phase ratio budget (the sandbox phase, where the stall is)."""
    ev = synth({"kata": [[STALLED] * 2], "baseline": uniform(1, 2)})
    v = judge("keda.kata-overhead", ev, prof(ratio_max=None, phase_ratio_max={"sandbox": 3.0}))
    assert v.status is Status.FAIL, v.reason
    assert "sandbox ready" in v.reason and "inf (stalled)" in v.reason


def test_a_stalled_baseline_is_undefined_not_a_pass() -> None:
    """The mirror: the baseline stalled, Kata did not -> ratio undefined -> skip."""
    ev = synth({"kata": uniform(1, 2), "baseline": [[STALLED] * 2]})
    v = judge("keda.kata-overhead", ev, prof(ratio_max=1.5))
    assert v.status is Status.SKIP, v.reason
    assert "the baseline stalled" in v.reason


def _no_kata_repetition(kata: ClassRun | None) -> KedaEvidence:
    good = synth({"kata": uniform(2, 2), "baseline": uniform(2, 2)})
    return dataclasses.replace(good, kata=kata)


MEASURING = [c.id for c in CHECKS if c.id != "keda.preflight"]


@pytest.mark.parametrize("kata", [
    ClassRun("kata", "kata"),  # a class run with zero repetitions
    None,  # no Kata class run at all
], ids=["zero-repetitions", "no-kata-run"])
@pytest.mark.parametrize("cid", MEASURING)
def test_a_done_record_without_kata_repetitions_is_an_error(kata: ClassRun | None,
                                                              cid: str) -> None:
    ev = _no_kata_repetition(kata)
    replayed = KedaEvidence.from_dict(json.loads(json.dumps(ev.to_dict())))
    for e in (ev, replayed):
        v = judge(cid, e, prof(phase_p95_s={"sandbox": 5.0}, baseline_p95_s={"e2e": 5.0}))
        assert v.status is Status.ERROR, (cid, v.reason)
        assert "holds no Kata repetition" in v.reason
        assert "defect in the live driver" in v.remediation


def test_the_preflight_still_judges_a_done_record_without_repetitions() -> None:
    """keda.preflight looks at KEDA's presence only; the record's emptiness is the other
    checks' error, so the preflight's own verdict stays what the preflight found."""
    v = judge("keda.preflight", _no_kata_repetition(ClassRun("kata", "kata")))
    assert v.status is Status.PASS, v.reason


# -- what mutmut's sampled run of keda/checks.py found alive (issue 21) ------------------------
@pytest.mark.parametrize(("ev", "status", "reason", "fix"), [
    (KedaEvidence("not-run"), Status.SKIP, "the KEDA latency run was not made", ""),
    (KedaEvidence("not-run", "offline bundle"), Status.SKIP, "offline bundle", ""),
    (KedaEvidence("error"), Status.ERROR, "the KEDA latency run failed: no message recorded",
     "Fix what the message names and rerun; nothing was measured."),
    (KedaEvidence("preflight-failed", "", Preflight(False)), Status.SKIP,
     "not measured: the preflight failed (see keda.preflight): no detail", ""),
    (KedaEvidence("preflight-failed", "", Preflight(False, None, ("CRD a", "CRD b"))),
     Status.SKIP, "not measured: the preflight failed (see keda.preflight): CRD a, CRD b", ""),
])
def test_the_common_gate_answers_exactly(ev: KedaEvidence, status: Status, reason: str,
                                         fix: str) -> None:
    v = judge("keda.e2e-p95", ev)
    assert (v.status, v.reason) == (status, reason)
    if fix:
        assert v.remediation == fix


def test_the_no_repetition_error_names_its_remedy_exactly() -> None:
    v = judge("keda.e2e-p95", _no_kata_repetition(None))
    assert v.remediation == "This is a defect in the live driver; rerun and report the bundle."


def test_stall_lists_name_three_then_count_the_rest_and_the_wait_range() -> None:
    """_list shows up to three items whole; the waits recorded with the stalls give the
    range the reason quotes (the recording profile's, not the judging one's)."""
    ev = synth({"kata": [[pod(), STALLED, STALLED, STALLED]]}, stall_wait=20.0)
    v = judge("keda.scale-up-completes", ev, prof(compare_baseline=False))
    assert v.status is Status.FAIL
    assert "3 of 4 pods never became Ready within the 20 s wait" in v.reason
    reps = [ev.kata.repetitions[0]]  # type: ignore[union-attr]
    st = reps[0].stalls
    mixed = dataclasses.replace(reps[0], stalls=(st[0], dataclasses.replace(st[1], timeout_s=40.0),
                                                 *st[2:]))
    ev2 = dataclasses.replace(ev, kata=dataclasses.replace(ev.kata, repetitions=(mixed,)))
    v = judge("keda.scale-up-completes", ev2, prof(compare_baseline=False))
    assert "within the 20-40 s waits" in v.reason


def test_a_stall_list_of_exactly_its_length_has_no_tail() -> None:
    ev = synth({"kata": [[pod(), STALLED, STALLED]]})
    v = judge("keda.scale-up-completes", ev, prof(compare_baseline=False))
    assert "stalled in sandbox ready (2): " in v.reason and "more" not in v.reason
    ev = synth({"kata": [[pod(), STALLED, STALLED, STALLED]]})
    v = judge("keda.scale-up-completes", ev, prof(compare_baseline=False))
    assert v.reason.endswith("; and 1 more")


# -- what mutmut's sampled run of keda/stats.py found alive (66 of 100) ------------------------
TABLE = """\
phase               kata p50  kata p95  kata max       kata n  runc p50  runc p95  runc max  runc n  ratio (p50)
------------------  --------  --------  --------  -----------  --------  --------  --------  ------  -----------
decision                   1         1         1            2         1         1         1       2           1x
pod creation            0.05      0.05      0.05            2      0.05      0.05      0.05       2           1x
scheduling              0.02      0.02      0.02            2      0.02      0.02      0.02       2           1x
sandbox ready              2       inf       inf  1+1 stalled       0.3       0.3       0.3       2        6.67x
containers started       0.2       0.2       0.2            1       0.2       0.2       0.2       2           1x
Ready                    0.1       0.1       0.1            1       0.1       0.1       0.1       2           1x
pod startup             2.32       inf       inf  1+1 stalled      0.62      0.62      0.62       2        3.74x
end to end              3.37       inf       inf  1+1 stalled      1.67      1.67      1.67       2        2.02x
(seconds; percentiles by nearest rank)
"""  # noqa: E501


def test_the_console_table_and_the_recorded_statistics_exactly() -> None:
    """One Kata pod with a 2 s sandbox and one stalled in it, two baseline pods. By hand:
    Kata sandbox p50 = nearest rank ceil(0.5 * 2) = 1st of [2, inf] = 2, p95 = 2nd = inf;
    Kata e2e = 1 + 0.05 + 0.02 + 2 + 0.2 + 0.1 = 3.37 s, baseline 1.67 s, ratio 2.02x; the
    stalled pod's later phases are not reached (counted apart, not as n/a)."""
    ev = synth({"kata": [[pod(sandbox=2.0), STALLED]], "baseline": [[pod(), pod()]]})
    k, b = class_stats(ev.kata), class_stats(ev.baseline)  # type: ignore[arg-type]
    rats = ratios(k, b)
    assert format_table({"kata": k, "baseline": b}, rats) == TABLE
    assert rats["e2e"].to_dict() == {"stat": "p50", "value": 2.017964, "kata": 3.37,
                                     "baseline": 1.67, "note": ""}
    assert k["sandbox"].to_dict() == {
        "n": 1, "censored": 1, "missing": 0, "invalid": 0, "not_reached": 0, "p50": 2.0,
        "p95": "inf", "max": "inf", "lower_bound": 300.0, "notes": ["never ready"]}
    assert (k["start"].not_reached, k["ready"].not_reached) == (1, 1)
    assert k.to_dict()["role"] == "kata" and k.repetitions == 1
    assert stats_of(class_phases(ev.kata)).repetitions == 1  # type: ignore[arg-type]
    stalled = ratio(k["e2e"], b["e2e"], "p95")
    assert stalled.to_dict() == {"stat": "p95", "value": "inf", "kata": "inf",
                                 "baseline": 1.67, "note": "Kata stalled (its value is censored)"}
    assert stalled.measure == "e2e"
    base_stalled = ratio(b["e2e"], k["e2e"], "p95")
    assert (base_stalled.measure, base_stalled.note) == (
        "e2e", "the baseline stalled (its value is censored)")


def test_fmt_num_switches_to_whole_seconds_at_100() -> None:
    assert (fmt_num(100.0), fmt_num(99.94), fmt_num(123.4)) == ("100", "99.9", "123")
    assert (fmt_s(None), fmt_s(math.inf), fmt_s(math.inf, 300.0)) == (
        "n/a", "stalled", "> 300 s (stalled)")


def test_not_reached_and_unusable_samples_are_counted() -> None:
    ev = synth({"kata": [[pod(), STALLED, STALLED]]})
    k = class_stats(ev.kata)  # type: ignore[arg-type]
    assert (k["start"].not_reached, k["ready"].not_reached, k["sandbox"].censored) == (2, 2, 2)
    gap = ClassStats("kata", "kata", 1, 2, {m: Summary(m, n=1, missing=1) for m in MEASURES})
    assert "1 (1 n/a)" in format_table({"kata": gap})
