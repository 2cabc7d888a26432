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
from kedavectors import exact, prof

from kgc.core.model import Status
from kgc.layers.keda.checks import CHECKS
from kgc.layers.keda.evidence import ClassRun, ClockOffset, KedaEvidence, Preflight, ScalingConfig
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
    summarize,
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


# -- the sampled run of keda/checks.py with the evaluators included (issue 21 item 8) ------
# Each test pins what one branch tells the user: the whole reason, the remedy, the
# expected/found pair the report prints, and the evidence the bundle keeps for it.

def test_a_passing_baseline_budget_names_its_nodes_and_keeps_its_statistics() -> None:
    ev = synth({"kata": [[exact()]], "baseline": [[exact()]]})
    v = judge("keda.baseline-budgets", ev, prof(baseline_p95_s={"startup": 0.75,
                                                                "sandbox": 0.25}))
    assert v.status is Status.PASS
    found = "pod startup p95 0.75 s (p50 0.75 s, n=1), sandbox ready p95 0.25 s (p50 0.25 s, n=1)"
    assert v.reason == f"runc on node-a: every budgeted measure within budget ({found})"
    assert (v.expected, v.found) == ("pod startup p95 <= 0.75 s, sandbox ready p95 <= 0.25 s",
                                     found)
    assert v.evidence["nodes"] == ["node-a"]
    assert v.evidence["budgets_s"] == {"startup": 0.75, "sandbox": 0.25}
    assert v.evidence["baseline"]["startup"]["p95"] == 0.75  # the baseline's, not Kata's
    assert v.evidence["percentile"] == "nearest rank"


def test_e2e_over_budget_names_the_unjudged_phase_instead_of_claiming_the_rest_is_fine() -> None:
    """End to end and decision are past their budgets, the sandbox phase could not be judged
    on one pod: the reason must say so, not "everything else within budget"."""
    ev = synth({"kata": [[pod(sandbox=None, decision=9.0), pod(sandbox=2.0, decision=9.0)]]})
    v = judge("keda.e2e-p95", ev, prof(compare_baseline=False, e2e_p95_s=5.0,
                                       phase_p95_s={"sandbox": 10.0, "decision": 5.0}))
    assert v.status is Status.FAIL
    assert v.reason == ("kata end-to-end p95 11.4 s > 5 s budget; decision p95 9 s > 5 s "
                        "budget; sandbox ready: 1 of 2 pods lack it "
                        "(PodReadyToStartContainers not observed)")
    assert "everything else within budget" not in v.reason
    assert v.remediation.startswith("The time goes to KEDA/HPA deciding to scale")
    assert (v.expected, v.found) == ("p95 <= 5 s", "p95 11.4 s (p50 9.37 s, max 11.4 s, n=2)")


def test_e2e_without_a_baseline_compares_with_nothing() -> None:
    v = judge("keda.e2e-p95", synth({"kata": [[exact(), exact()]]}), prof(compare_baseline=False))
    assert v.status is Status.PASS
    assert v.reason == "kata end-to-end p95 2 s <= 60 s budget over 2 pods"
    assert v.evidence["budget_s"] == 60.0 and list(v.evidence["stats"]) == ["kata"]


def test_a_failed_ratio_states_the_budget_it_was_held_to() -> None:
    ev = synth({"kata": [[exact()]], "baseline": [[exact(decision=0.75)]]})
    v = judge("keda.kata-overhead", ev, prof(ratio_max=1.125))
    assert v.status is Status.FAIL
    assert v.expected == "end to end <= 1.12x"
    assert v.found == "end to end p50 kata 2 s / runc 1.75 s = 1.14x > 1.12x budget"
    assert v.evidence["ratios"]["decision"]["value"] == 1.333333  # 1.0 / 0.75
    assert v.evidence["differences_s"]["decision"] == 0.25


def test_a_stalled_phase_budget_quotes_the_known_wait_and_a_pass_its_budget() -> None:
    v = judge("keda.phase-budgets", synth({"kata": [[pod(), STALLED]]}),
              prof(compare_baseline=False, phase_p95_s={"sandbox": 5.0}))
    assert v.status is Status.FAIL
    assert v.reason == ("kata: sandbox ready p95 > 300 s (stalled) > 5 s budget; everything "
                        "else within budget")
    assert (v.expected, v.found) == ("sandbox ready p95 <= 5 s",
                                     "sandbox ready p95 > 300 s (stalled)")
    ev = synth({"kata": [[exact(), exact()]], "baseline": [[exact()] * 2]})
    v = judge("keda.phase-budgets", ev, prof(phase_p95_s={"sandbox": 0.25}))
    assert v.status is Status.PASS
    assert v.reason == "kata: every budgeted phase within budget (sandbox ready p95 0.25 s)"
    assert (v.expected, v.found) == ("sandbox ready p95 <= 0.25 s", "sandbox ready p95 0.25 s")


def test_a_failed_preflight_names_what_to_do_for_the_operator_and_what_was_expected() -> None:
    v = judge("keda.preflight", KedaEvidence("preflight-failed", "",
                                             Preflight(True, "2.21.0", (), False)))
    assert v.status is Status.FAIL
    assert v.reason == "the KEDA operator is not Ready"
    assert v.remediation == ("Read `kubectl -n keda get pods` and the keda-operator log; the "
                             "operator and its metrics API server must both be Ready.")
    assert (v.expected, v.found) == ("KEDA installed and Ready", "the KEDA operator is not Ready")
    assert v.evidence == {"missing": [], "keda_version": "2.21.0"}


def test_an_unrecorded_preflight_is_a_skip_saying_so() -> None:
    ev = dataclasses.replace(synth({"kata": uniform(1, 1)}), preflight=Preflight())
    v = judge("keda.preflight", ev)
    assert (v.status, v.reason) == (
        Status.SKIP, "the preflight was not recorded (KEDA's presence not looked at)")


def test_an_unrecorded_scale_down_is_named_in_the_evidence() -> None:
    ev = synth({"kata": uniform(2, 1)})
    reps = ev.kata.repetitions  # type: ignore[union-attr]
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(reps[0], dataclasses.replace(reps[1], scaled_down=None))))
    v = judge("keda.scale-down-completes", ev, prof(compare_baseline=False))
    assert v.status is Status.SKIP
    assert v.reason == ("scale-down not recorded for 1 repetition(s): kata r2: scale-down to 0 "
                        "not recorded")
    assert v.evidence == {"stalled": [], "not_recorded": ["kata r2: scale-down to 0 not recorded"],
                          "durations_s": [40.0]}  # lowered at +500 s, gone at +540 s


def _hpa_heavy_config(cfg: ScalingConfig) -> KedaEvidence:
    ev = synth({"kata": [[exact(), exact(decision=9.0), exact(decision=9.0)]]})
    return dataclasses.replace(ev, kata=dataclasses.replace(ev.kata, config=cfg))  # type: ignore


def test_an_hpa_dominated_decision_with_an_unknown_sync_period_says_the_default_is_assumed(
) -> None:
    v = judge("keda.scaling-config", _hpa_heavy_config(ScalingConfig(polling_interval_s=5)),
              prof(compare_baseline=False))
    assert v.status is Status.WARN
    assert v.remediation == (
        "Most of the decision is the HPA's 1->N step: lower the controller-manager's "
        "--horizontal-pod-autoscaler-sync-period (now not visible, 15 s by default assumed) "
        "and allow a larger scaleUp step in the ScaledObject's "
        "advanced.horizontalPodAutoscalerConfig.behavior.")
    assert (v.expected, v.found) == ("decision < 50% of end to end", "90%")
    assert "HPA scale-up (pods 2..K) p50 9 s" in v.reason


def test_an_hpa_that_never_scaled_past_one_pod_is_blamed_not_the_polling_interval() -> None:
    """Product fix (issue 21 item 8): KEDA activated every repetition within 1 s but the
    HPA never asked for pod 2 (the Deployment stayed at 1 of 2). Those pods' decision is
    censored (+∞), not absent; the check used to count only finished samples (``n``), so it
    left the HPA out of the reason and told the user to lower pollingInterval."""
    ev = synth({"kata": [[exact()], [exact()], [exact()]]}, k=2)
    v = judge("keda.scaling-config", ev, prof(compare_baseline=False))
    assert v.status is Status.WARN
    assert "HPA scale-up (pods 2..K) p50 stalled" in v.reason
    assert v.remediation.startswith("Most of the decision is the HPA's 1->N step")
    assert "pollingInterval" not in v.remediation


def test_watch_precision_words_and_evidence() -> None:
    from kedavectors import _lag_evidence

    v = judge("keda.watch-precision", synth({"kata": [[pod()]]}, clock=None),
              prof(compare_baseline=False))
    assert (v.status, v.reason) == (Status.SKIP, "no client/API clock offset was estimated; "
                                    "receipt times cannot be compared with the API's timestamps")
    v = judge("keda.watch-precision", _lag_evidence(-0.625), prof(watch_lag_tolerance_s=0.25))
    assert v.status is Status.WARN
    assert v.reason == ("1 received before the API's timestamp by more than 0.50 s (worst: kata "
                        "r1 kata-1-1 ready -0.62 s): a node's clock is skewed against the API "
                        "server (the kubelet stamps conditions)")
    assert (v.expected, v.found) == ("lag in [-0.50, 1.50] s", "[-0.625, 0.875] s")
    assert v.evidence == {"clock": {"offset_s": 0.0, "uncertainty_s": 0.25, "samples": 10,
                                    "method": "test"},
                          "lags": 10, "max_lag_s": 0.875, "min_lag_s": -0.625,
                          "allowed_s": [-0.5, 1.5]}


# -- the sampled run of keda/stats.py after 83059d7 (issue 21 item 8) ------------------------

def test_every_unusable_plain_number_is_counted_and_each_reason_noted_once() -> None:
    """A NaN, an infinity and two negative durations are four unusable samples, not one;
    the notes say why, each once, at most five."""
    s = summarize([math.nan, math.inf, -1.0, -2.0, 2.0], "e2e")
    assert (s.n, s.invalid, s.p95) == (1, 4, 2.0)
    assert s.notes == ("non-finite duration nan", "non-finite duration inf",
                       "negative duration -1.0 s", "negative duration -2.0 s")
    assert summarize(["a", "a"]).notes == ("not a number: 'a'",)
    six = summarize(list("abcdef"))
    assert six.invalid == 6 and len(six.notes) == 5 and "'f'" not in "".join(six.notes)


def test_the_table_counts_missing_and_invalid_samples_together_and_marks_undefined_ratios(
) -> None:
    gap = ClassStats("kata", "kata", 1, 4,
                     {m: Summary(m, n=1, missing=1, invalid=2, p50=1.0, p95=1.0, max=1.0)
                      for m in MEASURES})
    assert "1 (3 n/a)" in format_table({"kata": gap})
    # a baseline whose sandbox took 0 s: that ratio is undefined, shown as n/a, not "n/ax"
    ev = synth({"kata": [[exact()]], "baseline": [[exact(sandbox=0.0)]]})
    k, b = class_stats(ev.kata), class_stats(ev.baseline)  # type: ignore[arg-type]
    rats = ratios(k, b)
    row = next(x for x in format_table({"kata": k, "baseline": b}, rats).splitlines()
               if x.startswith("sandbox ready"))
    assert row.endswith("  n/a") and "n/ax" not in row
    assert rats["sandbox"].to_dict() == {
        "stat": "p50", "value": None, "kata": 0.25, "baseline": 0.0,
        "note": "the baseline's p50 is 0 s (below the watch resolution)"}
    assert (rats["startup"].measure, rats["startup"].value) == ("startup", 1.5)  # 0.75 / 0.5


def test_a_table_without_any_measured_class_lists_the_phases_only() -> None:
    assert format_table({}) == (
        "phase\n------------------\ndecision\npod creation\nscheduling\nsandbox ready\n"
        "containers started\nReady\npod startup\nend to end\n"
        "(seconds; percentiles by nearest rank)\n")


def test_a_ratio_of_a_measure_without_a_title_names_the_measure() -> None:
    r = ratio(Summary("gpu-attach"), Summary("gpu-attach", n=1, p50=1.0))
    assert (r.value, r.note) == (None, "Kata has no gpu-attach sample")


def test_class_statistics_record_every_pod_row_and_no_role_unless_given() -> None:
    """Pods the Deployment never created are rows too (phantoms): ``pods`` counts them, so
    the bundle shows 2 rows for K=2 with one pod created; an ad-hoc sample (the scaling
    check's rank-1 / rank 2..K split) carries no role label."""
    ev = synth({"kata": [[exact()]]}, k=2)
    k = class_stats(ev.kata)  # type: ignore[arg-type]
    assert k.to_dict()["pods"] == 2 and k["e2e"].censored == 1
    rows = class_phases(ev.kata)  # type: ignore[arg-type]
    assert stats_of([r for r in rows if r.rank == 1]).to_dict()["role"] == ""


def test_a_polling_interval_as_long_as_the_budget_warns_without_claiming_it_dominates() -> None:
    """Product fix (issue 21 item 8): the sandbox took 7.9 s and the decision 11 % of end to
    end, yet the warning of the polling cap (pollingInterval 5 s >= the 5 s budget) opened
    with "the configuration, not the runtime, dominates scale-up latency" and expected
    "decision < 50 %" while finding 11 %: a reason contradicting its own numbers."""
    ev = synth({"kata": uniform(2, 2, sandbox=7.9), "baseline": uniform(2, 2)})
    v = judge("keda.scaling-config", ev, prof(e2e_p95_s=5.0))
    assert v.status is Status.WARN
    assert v.reason.startswith("the configuration alone can use up the end-to-end budget: "
                               "decision p50 1 s is 11% of end-to-end p50 9.27 s")
    assert "pollingInterval alone (5 s) can use up the 5 s end-to-end budget" in v.reason
    assert "dominates" not in v.reason
    assert (v.expected, v.found) == ("pollingInterval < the 5 s end-to-end budget",
                                     "pollingInterval 5 s")
    assert v.remediation.startswith("Lower the ScaledObject's pollingInterval (now 5 s;")


def test_the_watch_window_is_kept_to_the_millisecond() -> None:
    from kgc.layers.keda.evidence import ClockOffset

    ev = synth({"kata": [[exact()]]}, clock=ClockOffset(0.0, 0.0625, 10, "test"))
    v = judge("keda.watch-precision", ev, prof(compare_baseline=False,
                                               watch_lag_tolerance_s=0.25))
    assert v.status is Status.PASS
    lo, hi = v.evidence["allowed_s"]  # -(0.0625 + 0.25), 1 + 0.0625 + 0.25
    assert (lo, hi) == (round(-0.3125, 3), round(1.3125, 3))


# -- a fresh sample (100, seed `fresh`) of keda/checks.py after the tests above ---------------

def test_a_kata_class_without_its_runtime_class_name_is_an_error_with_its_remedy() -> None:
    ev = _no_kata_repetition(dataclasses.replace(
        synth({"kata": uniform(1, 1)}).kata, runtime_class=""))  # type: ignore[arg-type]
    v = judge("keda.e2e-p95", ev)
    assert (v.status, v.reason) == (Status.ERROR, "the Kata class's RuntimeClass is not "
                                    "recorded: nothing says which runtime the measured pods "
                                    "ran with")
    assert v.remediation == ("Rerun the layer (platform.kata.runtime_class names the Kata "
                             "RuntimeClass) and report the bundle: the live driver always "
                             "records it.")


def test_keda_absent_and_its_operator_down_gives_both_remedies() -> None:
    """No CRD is named missing (the preflight only saw keda_installed False): the reason
    says KEDA is not installed, without an empty "( missing)", and both fixes are given."""
    v = judge("keda.preflight", KedaEvidence("preflight-failed", "",
                                             Preflight(False, None, (), False)))
    assert v.status is Status.FAIL
    assert v.reason == "KEDA is not installed; the KEDA operator is not Ready"
    assert v.remediation == (
        "Install KEDA: `helm repo add kedacore https://kedacore.github.io/charts && helm "
        "install keda kedacore/keda --namespace keda --create-namespace`; the CRDs "
        "scaledobjects.keda.sh and triggerauthentications.keda.sh must exist. Read `kubectl "
        "-n keda get pods` and the keda-operator log; the operator and its metrics API server "
        "must both be Ready.")


def test_stalls_are_listed_in_chain_order_and_the_judging_wait_only_when_none_recorded(
) -> None:
    """The pod that stalled in its sandbox comes first in the record, the one never created
    second; the reason lists the decision stall first (chain order). A phantom pod carries
    no recorded wait, so the judging profile's ready_s is quoted."""
    v = judge("keda.scale-up-completes", synth({"kata": [[STALLED]]}, k=2),
              prof(compare_baseline=False))
    assert v.reason == ("2 of 2 pods never became Ready within the 300 s wait -- stalled in "
                        "decision (1): kata r1 #2 (never created) | stalled in sandbox ready "
                        "(1): kata r1 #1 kata-1-1 on node-a, waited 300 s: never ready")
    assert v.found == "2 pods stalled, first in decision"
    from kgc.layers.keda.profile import KedaProfile

    v = judge("keda.scale-up-completes", synth({"kata": [[pod()]]}, k=2),
              KedaProfile(compare_baseline=False, timeouts={"ready_s": 120}))
    assert v.reason == ("1 of 2 pods never became Ready within the 120 s wait -- stalled in "
                        "decision (1): kata r1 #2 (never created)")


def _out_of_order_second_repetition(rep):  # type: ignore[no-untyped-def]
    from kgc.layers.keda.evidence import PodRecord, Stamp

    if rep.index == 1:
        return dataclasses.replace(rep, trigger=None)
    p = rep.pods[0]
    obs = dict(p.observed)
    obs["ready"] = Stamp(rep.trigger.mono - 1.0, rep.trigger.wall - 1.0)
    return dataclasses.replace(rep, pods=(PodRecord(p.name, obs),))


def test_no_usable_end_to_end_sample_names_every_reason() -> None:
    ev = synth({"kata": uniform(2, 1)})
    ev = dataclasses.replace(ev, kata=dataclasses.replace(ev.kata, repetitions=tuple(  # type: ignore
        _out_of_order_second_repetition(r) for r in ev.kata.repetitions)))  # type: ignore
    v = judge("keda.e2e-p95", ev, prof(compare_baseline=False))
    assert v.status is Status.ERROR
    assert v.reason.startswith("no end-to-end sample for kata: the trigger time was not "
                               "recorded (the run could not raise its trigger); kata r2 #1 "
                               "kata-2-1: out of order: pod Ready ")
    assert v.remediation == "The record holds no complete trigger -> Ready measurement; rerun."


def test_a_decision_known_only_as_stalled_is_not_measured() -> None:
    """No replica signal was recorded, so the created pods' decision is missing, and the
    third pod of each repetition was never created (its decision censored): nothing finished
    to compare with end to end, so the share is not judged (skip), never a warning built on
    an infinite share."""
    ev = synth({"kata": uniform(3, 2)}, k=3)
    ev = dataclasses.replace(ev, kata=dataclasses.replace(ev.kata, repetitions=tuple(  # type: ignore
        dataclasses.replace(r, scale=(), active=None) for r in ev.kata.repetitions)))  # type: ignore
    v = judge("keda.scaling-config", ev, prof(compare_baseline=False))
    assert v.status is Status.SKIP, v.reason
    assert v.reason.startswith("the decision phase was not measured (replicas raised not "
                               "observed; never observed Ready)")


def test_a_baseline_over_budget_names_what_it_could_not_judge() -> None:
    ev = synth({"kata": [[exact()]],
                "baseline": [[exact(sandbox=None, start=0.5), exact(sandbox=0.5)]]})
    v = judge("keda.baseline-budgets", ev, prof(baseline_p95_s={"startup": 0.875,
                                                                "sandbox": 5.0}))
    assert v.status is Status.FAIL
    assert v.reason == ("runc on node-a: pod startup p95 1 s > 0.875 s budget; sandbox ready: 1 "
                        "of 2 pods lack it (PodReadyToStartContainers not observed)")


def test_a_baseline_over_in_two_phases_gets_each_remedy_once() -> None:
    """Product fix (issue 21 item 8): sandbox, start and the startup span are all over;
    the span's dominant phase is the sandbox, whose remedy is already given: it used to be
    repeated whole after "Most of pod startup is sandbox ready"."""
    from kgc.layers.keda.checks import PHASE_REMEDIATION

    ev = synth({"kata": [[exact()]], "baseline": [[exact(sandbox=0.5, start=0.5)]]})
    v = judge("keda.baseline-budgets", ev, prof(baseline_p95_s={"sandbox": 0.25, "start": 0.25,
                                                                "startup": 0.5}))
    assert v.status is Status.FAIL
    assert v.remediation == PHASE_REMEDIATION["sandbox"] + " " + PHASE_REMEDIATION["start"]


def test_a_baseline_without_node_names_says_no_node() -> None:
    ev = synth({"kata": [[exact()]], "baseline": [[exact(sandbox=0.5)]]})
    b = ev.baseline
    ev = dataclasses.replace(ev, baseline=dataclasses.replace(b, repetitions=tuple(  # type: ignore
        dataclasses.replace(r, pods=tuple(dataclasses.replace(p, node=None) for p in r.pods))
        for r in b.repetitions)))  # type: ignore[union-attr]
    v = judge("keda.baseline-budgets", ev, prof(baseline_p95_s={"sandbox": 0.25}))
    assert v.reason == ("runc: sandbox ready p95 0.5 s > 0.25 s budget; everything else within "
                        "budget")
    assert v.evidence["nodes"] == []


def test_kata_minus_baseline_is_kept_to_the_microsecond() -> None:
    ev = synth({"kata": [[exact(sandbox=0.2500016)]], "baseline": [[exact()]]})
    v = judge("keda.kata-overhead", ev)
    assert v.evidence["differences_s"]["sandbox"] == 2e-06  # 1.6 µs, rounded to the µs


# -- a fresh sample (100, seed `fresh`) of keda/stats.py after the tests above ----------------

def test_an_ok_value_with_an_unusable_duration_is_invalid_and_says_which() -> None:
    from kgc.layers.keda.phases import OK, PhaseValue

    s = summarize([PhaseValue("e2e", OK, -1.0), PhaseValue("e2e", OK, None),
                   PhaseValue("e2e", OK, 2.0)], "e2e")
    assert (s.n, s.invalid, s.p50) == (1, 2, 2.0)
    assert s.notes == ("invalid duration -1.0", "invalid duration None")


def test_a_ratio_keeps_the_measure_it_compares() -> None:
    ev = synth({"kata": [[exact()], [exact()]], "baseline": [[exact(sandbox=0.0)]]})
    k, b = class_stats(ev.kata), class_stats(ev.baseline)  # type: ignore[arg-type]
    rats = ratios(k, b)
    assert {m: r.measure for m, r in rats.items()} == {m: m for m in MEASURES}
    assert rats["sandbox"].value is None  # the baseline's 0 s sandbox: undefined, still named
    # a plain-seconds sample has no measure: the named side names the ratio
    r = ratio(summarize([2.0]), Summary("sandbox", n=1, p50=1.0))
    assert (r.measure, r.value) == ("sandbox", 2.0)
    assert k.to_dict()["repetitions"] == 2 and b.to_dict()["repetitions"] == 1


# -- a third sample (100, seed `final`) of keda/checks.py ------------------------------------

def _unobserved_sandbox_and_start() -> KedaEvidence:
    return synth({"kata": [[exact(sandbox=None, start=None)]],
                  "baseline": [[exact(sandbox=None, start=None)]]})


def test_two_unjudged_measures_are_each_named() -> None:
    ev = _unobserved_sandbox_and_start()
    v = judge("keda.baseline-budgets", ev, prof(baseline_p95_s={"sandbox": 5.0, "start": 5.0}))
    assert (v.status, v.reason) == (Status.SKIP, (
        "runc: cannot judge sandbox ready: not measured on any pod (PodReadyToStartContainers "
        "not observed); containers started: not measured on any pod (PodReadyToStartContainers "
        "and containers running not observed)"))
    v = judge("keda.kata-overhead", ev, prof(ratio_max=None,
                                             phase_ratio_max={"sandbox": 2.0, "start": 2.0}))
    assert (v.status, v.reason) == (Status.SKIP, (
        "cannot judge sandbox ready: ratio undefined (Kata has no sandbox ready sample); "
        "containers started: ratio undefined (Kata has no containers started sample)"))
    ev = synth({"kata": [[exact(sandbox=None, start=None, decision=9.0)]]})
    v = judge("keda.e2e-p95", ev, prof(compare_baseline=False, e2e_p95_s=5.0,
                                       phase_p95_s={"decision": 5.0, "sandbox": 5.0,
                                                    "start": 5.0}))
    assert v.status is Status.FAIL
    assert v.reason.endswith(
        "decision p95 9 s > 5 s budget; sandbox ready: not measured on any pod "
        "(PodReadyToStartContainers not observed); containers started: not measured on any pod "
        "(PodReadyToStartContainers and containers running not observed)")


def test_two_phases_over_budget_get_both_remedies() -> None:
    from kgc.layers.keda.checks import PHASE_REMEDIATION

    v = judge("keda.phase-budgets", synth({"kata": [[exact(sandbox=8.0, start=8.0)]]}),
              prof(compare_baseline=False, phase_p95_s={"sandbox": 5.0, "start": 5.0}))
    assert v.status is Status.FAIL
    assert v.reason == ("kata: sandbox ready p95 8 s > 5 s budget; containers started p95 8 s > "
                        "5 s budget; everything else within budget")
    assert v.remediation == PHASE_REMEDIATION["sandbox"] + " " + PHASE_REMEDIATION["start"]


def test_the_preflight_message_is_quoted_after_what_is_missing() -> None:
    v = judge("keda.preflight", KedaEvidence("preflight-failed", "", Preflight(
        True, "2.21.0", ("RuntimeClass kata",), True, "looked at 2 classes")))
    assert (v.status, v.reason) == (Status.FAIL,
                                    "RuntimeClass kata missing (looked at 2 classes)")


def test_a_pod_whose_ready_time_is_unusable_is_not_ready() -> None:
    """A NaN Ready stamp (a live driver's defect; a replayed bundle refuses it) leaves the
    pod short of Ready with no phase stalled: it is still named, under Ready, and the
    scale-up is not a pass."""
    from kgc.layers.keda.evidence import Stamp

    ev = synth({"kata": [[exact()]]})
    rep = ev.kata.repetitions[0]  # type: ignore[union-attr]
    p = rep.pods[0]
    bad = dataclasses.replace(p, observed={**p.observed, "ready": Stamp(math.nan, math.nan)})
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(dataclasses.replace(rep, pods=(bad,)),)))
    v = judge("keda.scale-up-completes", ev, prof(compare_baseline=False))
    assert v.status is Status.FAIL
    assert v.reason == ("1 of 1 pods never became Ready within the 300 s wait -- stalled in "
                        "Ready (1): kata r1 #1 kata-1-1 on node-a")
    assert v.remediation == "The containers run but never became Ready: check the readiness probe."


def test_a_zero_second_end_to_end_leaves_the_decision_share_undefined() -> None:
    """Product fix (issue 21 item 8): every milestone at the same receipt time gives an
    end-to-end p50 of 0 s; the share is undefined (skip), and the reason says why instead
    of "the decision phase was not measured (no replica signal recorded)"."""
    zero = {p: 0.0 for p in ("decision", "creation", "scheduling", "sandbox", "start", "ready")}
    v = judge("keda.scaling-config", synth({"kata": [[zero]]}), prof(compare_baseline=False))
    assert v.status is Status.SKIP
    assert v.reason.startswith("the decision share cannot be judged: end-to-end p50 is 0 s "
                               "(below the watch resolution); configuration: pollingInterval 5 s")


def test_late_and_early_receipts_are_both_reported() -> None:
    from kgc.layers.keda.evidence import ClockOffset

    ev = synth({"kata": [[exact()]]}, clock=ClockOffset(0.0, 0.25, 10, "test"))
    rep = ev.kata.repetitions[0]  # type: ignore[union-attr]
    p = rep.pods[0]
    api = {m: float(int(s.wall)) for m, s in p.observed.items()}
    api["ready"] = p.observed["ready"].wall - 2.0  # received 2 s after the API's stamp
    api["created"] = p.observed["created"].wall + 1.0  # received 1 s before it
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(dataclasses.replace(
            rep, pods=(dataclasses.replace(p, api=api),)),)))
    v = judge("keda.watch-precision", ev, prof(compare_baseline=False,
                                               watch_lag_tolerance_s=0.25))
    assert v.status is Status.WARN
    assert v.reason == (
        "1 of 5 milestones received more than 1.50 s after the API's timestamp (worst: kata r1 "
        "kata-1-1 ready +2.00 s): the watch delivered late and the measured phases are "
        "inflated; 1 received before the API's timestamp by more than 0.50 s (worst: kata r1 "
        "kata-1-1 created -1.00 s): a node's clock is skewed against the API server (the "
        "kubelet stamps conditions)")


# -- a fourth sample (100, seed `last`) of keda/checks.py -------------------------------------

def test_a_ready_before_the_trigger_on_every_pod_leaves_end_to_end_unmeasured() -> None:
    """Product fix (issue 21 item 8): KEDA's decision was measured on every pod but every
    Ready stamp precedes the trigger (out of order): the skip used to say "the decision
    phase was not measured (no replica signal recorded)"; it names the end-to-end time."""
    from kgc.layers.keda.evidence import Stamp

    ev = synth({"kata": uniform(2, 1)})

    def early_ready(rep):  # type: ignore[no-untyped-def]
        p = rep.pods[0]
        obs = {**p.observed, "ready": Stamp(rep.trigger.mono - 1.0, rep.trigger.wall - 1.0)}
        return dataclasses.replace(rep, pods=(dataclasses.replace(p, observed=obs),))

    ev = dataclasses.replace(ev, kata=dataclasses.replace(ev.kata, repetitions=tuple(  # type: ignore
        early_ready(r) for r in ev.kata.repetitions)))  # type: ignore[union-attr]
    v = judge("keda.scaling-config", ev, prof(compare_baseline=False))
    assert v.status is Status.SKIP
    assert v.reason.startswith("the end-to-end time was not measured (kata r1 #1 kata-1-1: out "
                               "of order: pod Ready ")
    assert v.evidence["decision"]["n"] == 2


def test_a_repetition_that_asked_for_no_pod_is_an_error_not_a_vacuous_pass() -> None:
    """Product fix (issue 21 item 8): an in-memory record (a bundle refuses
    target_replicas 0) whose only repetition asked for no pod made keda.scale-up-completes
    pass with "0 pods"; nothing was measured, so every measuring check is an error."""
    ev = synth({"kata": [[]], "baseline": [[]]})
    for cid in MEASURING:
        v = judge(cid, ev)
        assert v.status is Status.ERROR, (cid, v.reason)
        assert v.reason == "the run is recorded as done but no Kata repetition asked for a pod"
        assert v.remediation == ("This is a defect in the live driver; rerun and report the "
                                 "bundle.")


def test_a_long_list_names_three_and_counts_the_rest() -> None:
    """Four stalled scale-downs: three named, "and 1 more"."""
    from kgc.layers.keda.evidence import Stall

    ev = synth({"kata": uniform(4, 1)})
    left = (Stall("scale-down", 45, 45, "1 pod left"),)
    ev = dataclasses.replace(ev, kata=dataclasses.replace(ev.kata, repetitions=tuple(  # type: ignore
        dataclasses.replace(r, scaled_down=None, stalls=left)
        for r in ev.kata.repetitions)))  # type: ignore[union-attr]
    v = judge("keda.scale-down-completes", ev, prof(compare_baseline=False))
    assert v.status is Status.FAIL
    assert v.reason == ("4 scale-down(s) never completed within the 45 s wait: kata r1: 1 pod "
                        "left (cooldownPeriod 10 s); kata r2: 1 pod left (cooldownPeriod 10 s); "
                        "kata r3: 1 pod left (cooldownPeriod 10 s); and 1 more")


def test_a_stalled_kata_ratio_is_written_infinite() -> None:
    ev = synth({"kata": [[STALLED] * 2], "baseline": uniform(1, 2)})
    v = judge("keda.kata-overhead", ev, prof(ratio_max=1.5))
    assert " = inf (stalled) > 1.5x budget" in v.reason


def test_stalls_in_scheduling_and_sandbox_are_listed_in_chain_order() -> None:
    """The first pod stalled in its sandbox, the second was never scheduled: scheduling
    comes first in the reason (chain order, not the record's or the alphabet's)."""
    unscheduled = pod(scheduling=None, sandbox=None, start=None, ready=None, stall=True,
                      stall_phase="scheduling")
    v = judge("keda.scale-up-completes", synth({"kata": [[STALLED, unscheduled]]}),
              prof(compare_baseline=False))
    assert v.status is Status.FAIL
    assert v.reason.split(" -- ")[1].startswith("stalled in scheduling (1): kata r1 #2 ")
    assert " | stalled in sandbox ready (1): kata r1 #1 " in v.reason
    assert v.found == "2 pods stalled, first in scheduling"


def test_the_largest_watch_lag_is_kept_to_the_millisecond() -> None:
    ev = synth({"kata": [[exact()]]})
    rep = ev.kata.repetitions[0]  # type: ignore[union-attr]
    p = rep.pods[0]
    api = {m: s.wall for m, s in p.observed.items()}  # every lag 0 ...
    api["ready"] = p.observed["ready"].wall - 0.3125  # ... but Ready's, 312.5 ms
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(dataclasses.replace(
            rep, pods=(dataclasses.replace(p, api=api),)),)))
    v = judge("keda.watch-precision", ev, prof(compare_baseline=False))
    assert v.status is Status.PASS
    assert (v.evidence["min_lag_s"], v.evidence["max_lag_s"]) == (0.0, round(0.3125, 3))


# -- a fifth sample (100, seed `end`) of keda/checks.py ---------------------------------------

def test_e2e_over_with_two_phases_over_gives_both_remedies() -> None:
    from kgc.layers.keda.checks import PHASE_REMEDIATION

    v = judge("keda.e2e-p95", synth({"kata": [[exact(sandbox=8.0, start=8.0)]]}),
              prof(compare_baseline=False, e2e_p95_s=10.0,
                   phase_p95_s={"sandbox": 5.0, "start": 5.0}))
    assert v.status is Status.FAIL
    assert v.reason.endswith("sandbox ready p95 8 s > 5 s budget; containers started p95 8 s > "
                             "5 s budget; everything else within budget")
    assert v.remediation == PHASE_REMEDIATION["sandbox"] + " " + PHASE_REMEDIATION["start"]


def test_two_unjudged_phase_budgets_are_each_named() -> None:
    v = judge("keda.phase-budgets", _unobserved_sandbox_and_start(),
              prof(phase_p95_s={"sandbox": 5.0, "start": 5.0}))
    assert (v.status, v.reason) == (Status.SKIP, (
        "kata: cannot judge sandbox ready: not measured on any pod (PodReadyToStartContainers "
        "not observed); containers started: not measured on any pod (PodReadyToStartContainers "
        "and containers running not observed)"))


def test_class_statistics_count_every_repetition_run_even_one_without_rows() -> None:
    """Seed `last` of keda/stats.py: the repetitions of a class are the ones it ran, not
    the ones that left a pod row (an in-memory repetition that asked for no pod has none)."""
    ev = synth({"kata": [[exact()], []]})
    k = class_stats(ev.kata)  # type: ignore[arg-type]
    assert (k.repetitions, k.pods) == (2, 1)


# -- a sixth sample (100, seed `close`) of keda/checks.py -------------------------------------

def test_pod_startup_is_blamed_on_a_phase_inside_it_never_on_pod_creation() -> None:
    """Pod startup is created -> Ready: pod creation (requested -> created) ends where it
    starts, so however slow, it is not where pod startup's time goes."""
    ev = synth({"kata": [[exact()]], "baseline": [[exact(creation=5.0, sandbox=0.5)]]})
    v = judge("keda.baseline-budgets", ev, prof(baseline_p95_s={"startup": 0.875}))
    assert v.status is Status.FAIL
    assert v.remediation.startswith("Most of pod startup is sandbox ready (p50 0.5 s): ")


def test_a_sub_second_end_to_end_is_judged() -> None:
    """Only a 0 s end-to-end p50 leaves the share undefined; 0.5 s is a measurement."""
    ev = synth({"kata": [[pod(0.25, 0.05, 0.05, 0.05, 0.05, 0.05)]]})
    v = judge("keda.scaling-config", ev, prof(compare_baseline=False))
    assert v.status is Status.WARN, v.reason
    assert "decision p50 0.25 s is 50% of end-to-end p50 0.5 s" in v.reason


def test_the_worst_late_receipt_is_the_latest() -> None:
    ev = synth({"kata": [[exact()]]}, clock=ClockOffset(0.0, 0.25, 10, "test"))
    rep = ev.kata.repetitions[0]  # type: ignore[union-attr]
    p = rep.pods[0]
    api = {m: s.wall for m, s in p.observed.items()}
    api["started"] = p.observed["started"].wall - 2.0
    api["ready"] = p.observed["ready"].wall - 3.0
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(dataclasses.replace(
            rep, pods=(dataclasses.replace(p, api=api),)),)))
    v = judge("keda.watch-precision", ev, prof(compare_baseline=False,
                                               watch_lag_tolerance_s=0.25))
    assert v.status is Status.WARN
    assert "2 of 5 milestones received more than 1.50 s after the API's timestamp (worst: kata " \
           "r1 kata-1-1 ready +3.00 s)" in v.reason


# -- a seventh sample (100, seed `shut`) of keda/checks.py ------------------------------------

def test_analyse_labels_each_class_with_its_role_and_repetitions() -> None:
    """`analyse` is the layer's API for the console table, the lab scenarios and the
    real-node test: each class's statistics carry its role and the repetitions it ran."""
    from kgc.layers.keda.checks import analyse

    a = analyse(synth({"kata": uniform(3, 1), "baseline": uniform(2, 1)}), None)
    assert {r: (s.role, s.repetitions, s.pods) for r, s in a.stats.items()} == {
        "kata": ("kata", 3, 3), "baseline": ("baseline", 2, 2)}


def test_reported_ratios_write_an_undefined_one_as_n_a() -> None:
    ev = synth({"kata": [[exact()]], "baseline": [[exact(sandbox=0.0)]]})
    v = judge("keda.kata-overhead", ev, prof(ratio_max=None))
    assert v.status is Status.SKIP
    assert "scheduling 1.00x, sandbox ready n/a, containers started 1.00x" in v.reason


def test_two_measures_over_are_each_named_in_reason_and_found() -> None:
    ev = synth({"kata": [[exact()]], "baseline": [[exact(sandbox=0.5, start=0.5)]]})
    v = judge("keda.baseline-budgets", ev, prof(baseline_p95_s={"sandbox": 0.25,
                                                                "start": 0.25}))
    assert v.reason == ("runc on node-a: sandbox ready p95 0.5 s > 0.25 s budget; containers "
                        "started p95 0.5 s > 0.25 s budget; everything else within budget")
    ev = synth({"kata": [[exact(sandbox=1.0, start=0.5)]], "baseline": [[exact()]]})
    v = judge("keda.kata-overhead", ev, prof(ratio_max=None,
                                             phase_ratio_max={"sandbox": 2.0, "start": 2.0}))
    assert v.status is Status.FAIL
    assert v.found == ("sandbox ready p50 kata 1 s / runc 0.25 s = 4.00x > 2x budget; "
                       "containers started p50 kata 0.5 s / runc 0.125 s = 4.00x > 2x budget")


def test_a_preflight_without_a_version_does_not_print_none() -> None:
    ev = dataclasses.replace(synth({"kata": uniform(1, 1)}),
                             preflight=Preflight(True, None, (), True))
    v = judge("keda.preflight", ev)
    assert (v.status, v.reason) == (Status.PASS, "KEDA is installed and its operator is Ready; "
                                    "RuntimeClasses present for kata")


def test_a_stalled_scale_down_with_an_unknown_cooldown_does_not_quote_one() -> None:
    from kgc.layers.keda.evidence import Stall

    ev = synth({"kata": uniform(1, 1)})
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, config=ScalingConfig(), repetitions=tuple(
            dataclasses.replace(r, scaled_down=None,
                                stalls=(Stall("scale-down", 45, 45, "1 pod left"),))
            for r in ev.kata.repetitions)))  # type: ignore[union-attr]
    v = judge("keda.scale-down-completes", ev, prof(compare_baseline=False))
    assert v.reason == "1 scale-down(s) never completed within the 45 s wait: kata r1: 1 pod left"


def test_a_trigger_stall_without_detail_says_the_trigger_could_not_be_raised() -> None:
    from kgc.layers.keda.evidence import Stall

    ev = synth({"kata": uniform(1, 1)})
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=tuple(
            dataclasses.replace(r, trigger=None, stalls=(Stall("trigger", 60, 60, ""),))
            for r in ev.kata.repetitions)))  # type: ignore[union-attr]
    v = judge("keda.scale-up-completes", ev, prof(compare_baseline=False))
    assert (v.status, v.reason) == (Status.ERROR, "the run could not raise its metrics-api "
                                    "trigger: kata repetition 1: the trigger could not be raised")


# -- an eighth sample (100, seed `done`) of keda/checks.py ------------------------------------

def test_a_single_pod_the_deployment_never_created_is_a_stall_not_a_driver_defect() -> None:
    """K = 1 and no pod record: the repetition asked for a pod that never came, a decision
    stall (fail naming it), not the "asked for no pod" error."""
    from kedasynth import repetition

    ev = synth({"kata": [[exact()]]})
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(repetition(1, [], k=1, prefix="kata-"),)))
    v = judge("keda.scale-up-completes", ev, prof(compare_baseline=False))
    assert v.status is Status.FAIL, v.reason
    assert "stalled in decision (1): kata r1 #1 (never created)" in v.reason


def test_three_recorded_waits_are_quoted_as_their_range() -> None:
    ev = synth({"kata": [[pod(), STALLED, STALLED, STALLED]]})
    rep = ev.kata.repetitions[0]  # type: ignore[union-attr]
    st = tuple(dataclasses.replace(s, timeout_s=w) for s, w in zip(rep.stalls, (30.0, 20.0, 40.0),
                                                                  strict=True))
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(dataclasses.replace(rep, stalls=st),)))
    v = judge("keda.scale-up-completes", ev, prof(compare_baseline=False))
    assert "3 of 4 pods never became Ready within the 20-40 s waits" in v.reason


def test_other_missing_objects_are_listed_together() -> None:
    v = judge("keda.preflight", KedaEvidence("preflight-failed", "", Preflight(
        True, "2.21.0", ("Deployment keda-operator", "Service keda-metrics"), True)))
    assert (v.status, v.reason) == (Status.FAIL, "Deployment keda-operator, Service "
                                    "keda-metrics missing")


def test_an_hpa_step_that_stalled_quotes_how_long_it_was_waited_for() -> None:
    from kedasynth import stamp

    from kgc.layers.keda.evidence import Stall

    never = Stall("decision", 120.0, 120.0, "desired replicas never 2", None, stamp(1120.0))
    ev = synth({"kata": [[exact()]]}, k=2, extra_stalls=(never,))
    v = judge("keda.scaling-config", ev, prof(compare_baseline=False))
    assert v.status is Status.WARN, v.reason
    assert "HPA scale-up (pods 2..K) p50 > 120 s (stalled)" in v.reason


# -- keda/phases.py, a sample (100, seed `s27`, stop 27) --------------------------------------
def _rep(**over):  # type: ignore[no-untyped-def]
    from kedasynth import repetition

    return dataclasses.replace(repetition(1, [pod()]), **over)


def test_pods_without_a_created_stamp_are_ranked_by_their_first_milestone() -> None:
    from kedasynth import stamp

    from kgc.layers.keda.evidence import PodRecord
    from kgc.layers.keda.phases import repetition_phases

    # the watch missed both pods' ADDED event: "zz" was scheduled first, "aa" later, so the
    # HPA's first replica is "zz" (by name "aa" would come first)
    zz = PodRecord("zz", {"scheduled": stamp(1001.0), "ready": stamp(1002.0)}, {})
    aa = PodRecord("aa", {"scheduled": stamp(1005.0), "ready": stamp(1006.0)}, {})
    rows = repetition_phases(_rep(pods=(aa, zz), target_replicas=2))
    assert [(r.rank, r.pod) for r in rows] == [(1, "zz"), (2, "aa")]
    # a pod with no usable stamp at all comes after those with one
    nan = PodRecord("a0", {"scheduled": stamp(math.nan)}, {})
    rows = repetition_phases(_rep(pods=(nan, aa), target_replicas=2))
    assert [r.pod for r in rows] == ["aa", "a0"]


def test_a_non_finite_trigger_time_says_so_in_every_measure_from_the_trigger() -> None:
    from kgc.layers.keda.evidence import Stamp
    from kgc.layers.keda.phases import MISSING, OK, repetition_phases

    (row,) = repetition_phases(_rep(trigger=Stamp(math.nan, math.nan)))
    for m in ("decision", "e2e"):
        assert row.values[m].status == MISSING
        assert row.values[m].note == "trigger time non-finite timestamp"
    assert row.values["startup"].status == OK and "trigger" not in row.marks


def test_a_milestone_before_the_trigger_is_printed_with_its_minus_sign() -> None:
    """Issue 21's note: the out-of-order text printed "pod Ready at +-1.000 s"."""
    from kedasynth import stamp

    from kgc.layers.keda.evidence import PodRecord
    from kgc.layers.keda.phases import OUT_OF_ORDER, repetition_phases

    rep = _rep()
    p = rep.pods[0]
    early = PodRecord(p.name, {**p.observed, "ready": stamp(999.0)}, p.api, p.node)
    (row,) = repetition_phases(dataclasses.replace(rep, pods=(early,)))
    v = row.values["e2e"]
    assert v.status == OUT_OF_ORDER
    assert "+-" not in v.note
    assert v.note.startswith("kata r1 #1 p1-1: out of order: pod Ready at -1.000 s observed "
                             "1.000 s before trigger raised at 1000.000 s (client monotonic)")


def test_a_stalled_value_is_no_duration_and_rel_counts_from_the_trigger() -> None:
    from kedasynth import stamp

    from kgc.layers.keda.evidence import Stall
    from kgc.layers.keda.phases import STALLED as CENSORED
    from kgc.layers.keda.phases import repetition_phases

    never = Stall("decision", 300.0, 300.0, "desired replicas never 1", None, stamp(1300.0))
    (row,) = repetition_phases(_rep(pods=(), scale=(), active=None, stalls=(never,)))
    assert row.values["decision"].status == CENSORED
    assert row.values["decision"].seconds == pytest.approx(300.0)  # the lower bound is kept
    assert row.seconds("decision") is None  # ... but it is no duration
    assert row.seconds("e2e") is None and row.seconds("no-such-measure") is None
    (ok,) = repetition_phases(_rep())
    assert ok.rel("trigger") == 0.0 and ok.rel("ready") == pytest.approx(1.67)
    assert ok.rel("sandbox_ready") == pytest.approx(1.37)
    assert row.rel("created") is None  # never created
    (blind,) = repetition_phases(_rep(trigger=None))
    assert blind.rel("ready") is None  # no trigger


def test_a_clock_whose_samples_disagree_says_how_many_and_how() -> None:
    from kgc.layers.keda.phases import estimate_clock_offset

    c = estimate_clock_offset([(0.0, 10.0, 0.1), (0.0, 20.0, 0.1), (5.0, math.nan, 6.0)])
    assert c is not None and c.samples == 2
    assert c.method == "median of per-sample midpoints (intervals disagree: clock stepped?)"
    c = estimate_clock_offset([(0.0, 10.0, 0.1), (0.2, 10.0, 0.3)])
    assert c is not None and c.samples == 2
    assert c.method == "interval intersection of whole-second API timestamps"


def test_scale_downs_name_their_class_repetition_and_what_went_wrong() -> None:
    from kgc.layers.keda.evidence import Repetition, Stall
    from kgc.layers.keda.phases import MISSING, OUT_OF_ORDER, ScaleDown, scale_downs
    from kgc.layers.keda.phases import STALLED as CENSORED

    ev = synth({"kata": uniform(1, 1)})
    run = ev.kata
    rep = run.repetitions[0]  # type: ignore[union-attr]
    rep2 = Repetition(2, 1, rep.trigger, lowered=rep.scaled_down, scaled_down=rep.lowered)
    rep3 = Repetition(3, 1, rep.trigger, lowered=rep.lowered)
    st = Stall("scale-down", 60.0, 61.5, "", None, None)
    rep4 = dataclasses.replace(rep, index=4, stalls=(st,))
    run = dataclasses.replace(run, repetitions=(rep2, rep3, rep4))  # type: ignore[arg-type]
    assert scale_downs(run) == (
        ScaleDown("kata", 2, None, OUT_OF_ORDER,
                  "scale-down observed before the trigger was lowered"),
        ScaleDown("kata", 3, None, MISSING, "scale-down to 0 not recorded"),
        ScaleDown("kata", 4, 61.5, CENSORED, "not back to 0 within 60 s"),
    )
    ev = dataclasses.replace(ev, kata=dataclasses.replace(run, repetitions=(rep2,)))
    v = judge("keda.scale-down-completes", ev, prof(compare_baseline=False))
    assert v.status is Status.SKIP
    assert v.reason == ("scale-down not recorded for 1 repetition(s): kata r2: scale-down "
                        "observed before the trigger was lowered")


# -- keda/phases.py, a second sample (100, seed `wt3-unseen-a`) ---------------------------------
def test_a_row_never_takes_the_trigger_or_scale_down_stall() -> None:
    from kedasynth import stamp

    from kgc.layers.keda.evidence import Stall
    from kgc.layers.keda.phases import NOT_REACHED, repetition_phases
    from kgc.layers.keda.phases import STALLED as CENSORED

    down = Stall("scale-down", 60.0, 60.0, "pods left after cooldown", None, stamp(1600.0))
    trig = Stall("trigger", 30.0, 30.0, "metric never raised", None, stamp(1030.0))
    dec = Stall("decision", 120.0, 120.0, "desired replicas never 2", None, stamp(1120.0))
    rows = repetition_phases(_rep(target_replicas=2, stalls=(down, trig, dec)))
    assert rows[1].pod is None and rows[1].stall == dec
    v = rows[1].values["decision"]
    assert (v.status, v.note) == (CENSORED, "desired replicas never 2")
    assert v.seconds == pytest.approx(120.0)  # from the trigger (1000 s) to the give-up
    c = rows[1].values["creation"]
    assert (c.measure, c.status, c.seconds, c.note) == ("creation", NOT_REACHED, None,
                                                        "stalled in decision")
    s = rows[1].values["startup"]
    assert (s.status, s.seconds, s.note) == (NOT_REACHED, None, "stalled in decision")
    alone = repetition_phases(_rep(target_replicas=2, stalls=(down, trig)))
    assert alone[1].stall is None
    assert alone[1].values["decision"].note == "never observed Ready"


def test_every_value_names_its_measure() -> None:
    from kedasynth import stamp

    from kgc.layers.keda.evidence import PodRecord
    from kgc.layers.keda.phases import OUT_OF_ORDER, repetition_phases

    rep = _rep()
    p = rep.pods[0]
    swapped = PodRecord(p.name, {**p.observed, "sandbox_ready": stamp(1000.5)}, p.api, p.node)
    (row,) = repetition_phases(dataclasses.replace(rep, pods=(swapped,)))
    assert row.values["sandbox"].status == OUT_OF_ORDER
    assert all(v.measure == m for m, v in row.values.items()) and set(row.values) == set(MEASURES)


def test_a_clock_that_stepped_is_estimated_by_the_median_midpoint() -> None:
    from kgc.layers.keda.phases import estimate_clock_offset

    # intervals [9.9, 11.0] and [19.9, 21.0] (midpoints 10.45 and 20.45) do not meet: the
    # upper median 20.45, give or take the spread 10 plus the widest half-width 0.55
    c = estimate_clock_offset([(5.0, math.nan, 6.0), (0.0, 10.0, 0.1), (0.0, 20.0, 0.1)])
    assert c is not None and c.samples == 2
    assert c.offset_s == pytest.approx(20.45) and c.uncertainty_s == pytest.approx(10.55)


def test_receipt_lags_add_the_offset_and_skip_unusable_stamps() -> None:
    from kgc.layers.keda.evidence import PodRecord, Stamp
    from kgc.layers.keda.phases import receipt_lags

    ev = synth({"kata": [[pod()]]}, clock=ClockOffset(2.0, 0.05, 20, "test"))
    rep = ev.kata.repetitions[0]  # type: ignore[union-attr]
    p = rep.pods[0]
    obs = {**p.observed, "started": Stamp(p.observed["started"].mono, math.nan)}
    api = {"unknown": 5.0, **p.api}  # a stamp the record has no receipt for, first
    q = PodRecord(p.name, obs, api, p.node)
    ev = dataclasses.replace(ev, kata=dataclasses.replace(  # type: ignore[arg-type]
        ev.kata, repetitions=(dataclasses.replace(rep, pods=(q,)),)))
    lags = {lag.milestone: lag.lag_s for lag in receipt_lags(ev)}
    assert set(lags) == {"created", "scheduled", "sandbox_ready", "ready"}  # started: nan
    for m, lag in lags.items():
        assert lag == pytest.approx(obs[m].wall + 2.0 - api[m]), m


def test_a_scale_down_within_a_second_or_at_once_is_measured() -> None:
    from kedasynth import stamp

    from kgc.layers.keda.evidence import Repetition
    from kgc.layers.keda.phases import MISSING, OK, ScaleDown, scale_downs

    run = synth({"kata": uniform(1, 1)}).kata
    t = stamp(1500.0)
    reps = (Repetition(1, 1, t, lowered=t, scaled_down=t),
            Repetition(2, 1, t, lowered=t, scaled_down=stamp(1500.5)),
            Repetition(3, 1, t, scaled_down=t))
    assert scale_downs(dataclasses.replace(run, repetitions=reps)) == (  # type: ignore[arg-type]
        ScaleDown("kata", 1, 0.0, OK), ScaleDown("kata", 2, 0.5, OK),
        ScaleDown("kata", 3, None, MISSING, "trigger lowering not recorded"))


# -- keda/phases.py, a third sample (100, seed `wt3-unseen-b`) ----------------------------------
def test_a_non_finite_ready_stamp_is_invalid_not_a_stall() -> None:
    from kgc.layers.keda.evidence import PodRecord, Stamp
    from kgc.layers.keda.phases import INVALID, repetition_phases

    rep = _rep()
    p = rep.pods[0]
    bad = PodRecord(p.name, {**p.observed, "ready": Stamp(math.nan, math.nan)}, p.api, p.node)
    (row,) = repetition_phases(dataclasses.replace(rep, pods=(bad,)))
    for m in ("ready", "startup", "e2e"):
        assert (row.values[m].status, row.values[m].note) == (
            INVALID, "pod Ready: non-finite timestamp"), m


def test_a_stalled_rows_values_name_their_measures() -> None:
    from kgc.layers.keda.phases import repetition_phases

    rows = repetition_phases(synth({"kata": [[pod(), STALLED]]}).kata.repetitions[0])  # type: ignore[union-attr]
    assert all(v.measure == m for m, v in rows[1].values.items())
    assert set(rows[1].values) == set(MEASURES)


def test_a_pod_never_created_is_named_so_in_an_out_of_order_note() -> None:
    from kedasynth import stamp

    from kgc.layers.keda.evidence import ScaleMark
    from kgc.layers.keda.phases import OUT_OF_ORDER, repetition_phases

    rep = _rep()
    early = ScaleMark("deployment", 2, stamp(999.5))  # replicas 2 seen before the trigger
    rows = repetition_phases(dataclasses.replace(rep, target_replicas=2,
                                                 scale=(*rep.scale, early)))
    v = rows[1].values["decision"]
    assert v.status == OUT_OF_ORDER
    assert v.note == ("kata r1 #2 (never created): out of order: replicas raised at -0.500 s "
                      "observed 0.500 s before trigger raised at 1000.000 s (client monotonic)")
