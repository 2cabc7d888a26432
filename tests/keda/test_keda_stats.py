"""Statistics: the nearest-rank percentile, summaries with censored/missing samples, ratios."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kedasynth import synth, uniform

from kgc.layers.keda.phases import MEASURES, MISSING, OK, OUT_OF_ORDER, STALLED, PhaseValue
from kgc.layers.keda.stats import (
    class_stats,
    difference,
    fmt_s,
    format_table,
    layer_stats,
    percentile,
    ratio,
    ratios,
    summarize,
)

# Reference values of the nearest-rank method, worked by hand and identical to the worked
# examples of the "nearest-rank method" in Wikipedia's article "Percentile"
# (https://en.wikipedia.org/wiki/Percentile). No numpy involved.
NEAREST_RANK_VECTORS = [
    ([15, 20, 35, 40, 50], {5: 15, 30: 20, 40: 20, 50: 35, 100: 50}),
    ([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], {25: 7, 50: 8, 75: 15, 100: 20}),
    ([3, 6, 7, 8, 8, 9, 10, 13, 15, 16, 20], {25: 7, 50: 9, 75: 15, 100: 20}),
]


@pytest.mark.parametrize("values,expected", NEAREST_RANK_VECTORS)
def test_percentile_matches_the_nearest_rank_reference_values(values, expected):
    for q, want in expected.items():
        assert percentile(values, q) == want
        assert percentile(list(reversed(values)), q) == want  # order does not matter


def test_percentile_ranks_are_exact_for_decimal_q():
    xs = list(range(1, 1001))
    assert percentile(xs, 99.9) == 999  # ceil(0.999 * 1000) = 999, no float drift to 1000
    assert percentile(list(range(1, 21)), 95) == 19  # ceil(19.0) = 19
    assert percentile(list(range(1, 16)), 95) == 15  # ceil(14.25) = 15: p95 of 15 is max
    assert percentile([4.0], 50) == 4.0
    assert percentile([1, 2], 0) == 1  # q = 0 is the minimum


@pytest.mark.parametrize("bad,q,msg", [
    ([], 50, "empty"),
    ([1.0, math.nan], 50, "not a number"),
    ([1.0, "2"], 50, "not a number"),
    ([1.0], 101, "0..100"),
    ([1.0], -1, "0..100"),
    ([1.0], math.nan, "0..100"),
])
def test_percentile_refuses_bad_input_with_a_clear_message(bad, q, msg):
    with pytest.raises(ValueError, match=msg):
        percentile(bad, q)


durations = st.floats(min_value=0, max_value=1e5, allow_nan=False, allow_infinity=False)
samples = st.lists(durations, min_size=1, max_size=60)
qs = st.floats(min_value=0, max_value=100, allow_nan=False)


@given(samples, qs, qs)
def test_percentiles_are_monotone_in_q(xs, q1, q2):
    lo, hi = sorted((q1, q2))
    assert percentile(xs, lo) <= percentile(xs, hi)


@given(samples, qs)
def test_percentile_is_an_observed_sample(xs, q):
    p = percentile(xs, q)
    assert p in xs
    assert min(xs) <= p <= max(xs)


@given(samples, durations)
def test_adding_a_slower_pod_never_lowers_p95_or_max(xs, extra):
    before50, before95, before_max = percentile(xs, 50), percentile(xs, 95), max(xs)
    slower = max(xs) + extra
    ys = xs + [slower]
    assert percentile(ys, 95) >= before95
    assert percentile(ys, 50) >= before50
    assert max(ys) >= before_max
    # also for any pod at least as slow as the current p95
    zs = xs + [before95 + extra]
    assert percentile(zs, 95) >= before95


@given(st.lists(st.floats(min_value=1e-3, max_value=1e4), min_size=1, max_size=40))
def test_ratio_of_identical_samples_is_exactly_one(xs):
    s = summarize(xs, "sandbox")
    for stat in ("p50", "p95", "max"):
        r = ratio(s, s, stat)
        assert r.value == 1.0, r


def test_summary_counts_censored_missing_and_invalid_and_never_treats_them_as_zero():
    vals = [PhaseValue("sandbox", OK, 1.0), PhaseValue("sandbox", OK, 3.0),
            PhaseValue("sandbox", MISSING, None, "PodReadyToStartContainers not observed"),
            PhaseValue("sandbox", OUT_OF_ORDER, None, "x before y"),
            PhaseValue("sandbox", STALLED, 300.0, "never ready")]
    s = summarize(vals, "sandbox")
    assert (s.n, s.censored, s.missing, s.invalid) == (2, 1, 1, 1)
    assert s.p50 == 3.0  # counted: 1, 3, inf -> rank 2
    assert s.p95 == math.inf and s.max == math.inf and s.lower_bound == 300.0
    assert "PodReadyToStartContainers not observed" in s.notes
    assert fmt_s(s.p95, s.lower_bound) == "> 300 s (stalled)"


@pytest.mark.parametrize("bad,note", [
    (math.nan, "non-finite"), (math.inf, "non-finite"), (-0.5, "negative duration -0.5"),
    ("3", "not a number"), (True, "not a number"),
])
def test_summary_names_bad_plain_numbers(bad, note):
    s = summarize([1.0, bad], "e2e")
    assert s.n == 1 and s.invalid == 1
    assert any(note in n for n in s.notes), s.notes


def test_summary_of_nothing_has_no_percentiles():
    s = summarize([], "e2e")
    assert s.counted == 0 and s.p50 is None and s.p95 is None and s.max is None
    s = summarize([PhaseValue("e2e", MISSING, None, "gone")], "e2e")
    assert s.p95 is None and s.missing == 1


def test_ok_value_with_a_negative_or_nan_duration_is_invalid_not_counted():
    s = summarize([PhaseValue("e2e", OK, -1.0), PhaseValue("e2e", OK, math.nan),
                   PhaseValue("e2e", OK, 2.0)], "e2e")
    assert s.n == 1 and s.invalid == 2 and s.p95 == 2.0


def test_class_stats_hand_computed_vector():
    # kata: 2 repetitions x 3 pods, sandbox 1..6 s; runc sandbox 0.5 s everywhere
    kata = [[{"decision": 2.0, "creation": 0.1, "scheduling": 0.1, "sandbox": float(s),
              "start": 0.2, "ready": 0.1} for s in rep] for rep in ([1, 2, 3], [4, 5, 6])]
    ev = synth({"kata": kata, "baseline": uniform(2, 3, decision=2.0, creation=0.1,
                                                  scheduling=0.1, sandbox=0.5)})
    st_ = layer_stats(ev)
    k = st_["kata"]["sandbox"]
    assert (k.n, k.p50, k.p95, k.max) == (6, 3.0, 6.0, 6.0)  # ranks ceil(3)=3, ceil(5.7)=6
    e = st_["kata"]["e2e"]
    assert e.p50 == pytest.approx(2.0 + 0.1 + 0.1 + 3 + 0.2 + 0.1)
    assert st_["kata"].repetitions == 2 and st_["kata"].pods == 6
    r = ratios(st_["kata"], st_["baseline"], "p50")
    assert r["sandbox"].value == pytest.approx(6.0)
    assert difference(st_["kata"], st_["baseline"], "sandbox", "p50") == pytest.approx(2.5)
    assert class_stats(ev.kata).measures.keys() == set(MEASURES)


def test_ratio_is_undefined_with_a_reason_when_it_cannot_be_computed():
    z = summarize([0.0, 0.0], "creation")
    one = summarize([1.0], "creation")
    none = summarize([], "creation")
    stalled = summarize([PhaseValue("creation", STALLED, None, "x")], "creation")
    assert ratio(one, z).value is None and "0 s" in ratio(one, z).note
    assert ratio(none, one).value is None and "Kata has no" in ratio(none, one).note
    assert ratio(one, none).value is None and "baseline has no" in ratio(one, none).note
    assert ratio(one, stalled).value is None and "baseline stalled" in ratio(one, stalled).note
    assert ratio(stalled, one).value == math.inf
    with pytest.raises(ValueError, match="unknown statistic"):
        ratio(one, one, "p99")


def test_format_table_lists_every_phase_for_both_classes():
    ev = synth({"kata": uniform(2, 2, sandbox=3.0), "baseline": uniform(2, 2)})
    st_ = layer_stats(ev)
    text = format_table(st_, ratios(st_["kata"], st_["baseline"]))
    assert "kata p95" in text and "runc p95" in text and "ratio (p50)" in text
    assert "sandbox ready" in text and "end to end" in text and "10x" in text
    assert "nearest rank" in text
