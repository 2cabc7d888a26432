"""The keda.* checks: catalogue shape, every hand-made vector, and a mutation test that
flips each comparison in the evaluators and requires some vector to notice."""

from __future__ import annotations

import copy
import types

import pytest
from kedavectors import VECTORS, Vector, good, mismatch

from kgc.core.model import Severity, Status
from kgc.layers.keda.checks import CHECKS, keda_profile
from kgc.layers.keda.profile import KedaProfile

IDS = {
    "keda.preflight": Severity.BLOCKER,
    "keda.scale-up-completes": Severity.BLOCKER,
    "keda.scale-down-completes": Severity.NORMAL,
    "keda.e2e-p95": Severity.CRITICAL,
    "keda.phase-budgets": Severity.CRITICAL,
    "keda.kata-overhead": Severity.NORMAL,
    "keda.scaling-config": Severity.NORMAL,
    "keda.watch-precision": Severity.MINOR,
    "keda.baseline-budgets": Severity.NORMAL,
}


def test_catalogue_ids_are_stable_and_documented():
    assert {c.id: c.severity for c in CHECKS} == IDS
    for c in CHECKS:
        assert c.layer == "keda"
        assert c.title and c.remediation and c.doc is not None


@pytest.mark.parametrize("v", VECTORS, ids=[v.name for v in VECTORS])
def test_vector(v: Vector):
    assert mismatch(CHECKS, v) == []


@pytest.mark.parametrize("v", VECTORS, ids=[v.name for v in VECTORS])
def test_no_vector_crashes_any_evaluator_and_nothing_unjudgeable_passes(v: Vector):
    for c in CHECKS:
        verdict = c.judge(v.evidence, v.profile, "cluster")
        assert "evaluator crashed" not in verdict.reason, (c.id, verdict.reason)
        assert verdict.reason
        if verdict.status in (Status.FAIL, Status.ERROR, Status.WARN):
            assert verdict.remediation, (c.id, verdict.reason)


def test_missing_evidence_never_passes():
    from kedavectors import DRIVER_ERROR, NOT_RUN, PREFLIGHT_KEDA

    for ev in (NOT_RUN, DRIVER_ERROR, PREFLIGHT_KEDA, None, {"status": "done"}):
        for c in CHECKS:
            assert c.judge(ev, None, "cluster").status is not Status.PASS, (c.id, ev)


def test_profile_comes_from_cluster_keda_or_defaults():
    kp = KedaProfile(repetitions=2)
    cluster = types.SimpleNamespace(keda=kp)
    assert keda_profile(types.SimpleNamespace(cluster=cluster)) is kp
    assert keda_profile(kp) is kp
    assert keda_profile(None) == KedaProfile()
    assert keda_profile(types.SimpleNamespace(cluster=types.SimpleNamespace())) == KedaProfile()


def test_the_reason_names_the_phase_past_its_budget():
    from kedasynth import synth, uniform

    ev = synth({"kata": uniform(5, 3, sandbox=7.9), "baseline": uniform(5, 3)})
    from kedavectors import prof

    v = CHECKS.get("keda.phase-budgets").judge(ev, prof(phase_p95_s={"sandbox": 5.0,
                                                                       "scheduling": 2.0}), "c")
    assert v.status is Status.FAIL
    assert v.reason == "kata: sandbox ready p95 7.9 s > 5 s budget; everything else within budget"
    assert v.expected == "sandbox ready p95 <= 5 s, scheduling p95 <= 2 s"


def test_evaluators_do_not_mutate_the_evidence():
    ev = good()
    before = copy.deepcopy(ev.to_dict())
    for c in CHECKS:
        c.judge(ev, None, "cluster")
    assert ev.to_dict() == before
