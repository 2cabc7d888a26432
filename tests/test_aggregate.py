"""A check judged per pod (or per shape) gives one cluster verdict: the worst status wins
and the reason names the pods that decided it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kgc.core.model import Outcome, Status, aggregate, errored, failed, passed, skipped, warned

MAKERS = {Status.PASS: lambda r: passed(r), Status.FAIL: lambda r: failed(r, "fix " + r),
          Status.WARN: lambda r: warned(r, "look at " + r), Status.SKIP: lambda r: skipped(r),
          Status.ERROR: lambda r: errored(r, "rerun " + r)}
ORDER = [Status.FAIL, Status.ERROR, Status.WARN, Status.PASS, Status.SKIP]


def test_nothing_to_judge_is_a_skip_never_a_pass() -> None:
    assert aggregate([]).status is Status.SKIP


def test_one_failing_pod_fails_the_check_and_is_named() -> None:
    out = aggregate([("a/p1", passed("ok")), ("b/p2", failed("no GPU", "bind it")),
                     ("c/p3", skipped("n/a"))])
    assert out.status is Status.FAIL
    assert "b/p2: no GPU" in out.reason and "a/p1" not in out.reason
    assert out.remediation == "bind it"
    assert set(out.evidence["pods"]) == {"a/p1", "b/p2", "c/p3"}


def test_pass_with_skips_passes() -> None:
    out = aggregate([("a", passed("ok")), ("b", skipped("one pod on the node"))])
    assert out.status is Status.PASS


@given(st.lists(st.sampled_from(ORDER), min_size=1, max_size=8))
def test_the_worst_status_wins(statuses: list[Status]) -> None:
    res = [(f"s{i}", MAKERS[s](f"r{i}")) for i, s in enumerate(statuses)]
    out = aggregate(res)
    assert isinstance(out, Outcome)
    assert out.status is min(statuses, key=ORDER.index)
    for i, s in enumerate(statuses):
        if s is out.status:
            assert f"s{i}: r{i}" in out.reason
