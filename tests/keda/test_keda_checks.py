"""The keda.* checks: catalogue shape, every hand-made vector, and a mutation test that
flips each comparison in the evaluators and requires some vector to notice."""

from __future__ import annotations

import ast
import copy
import sys
import types
from pathlib import Path

import pytest
from kedavectors import VECTORS, Vector, good

from kgc.core.model import Registry, Severity, Status
from kgc.layers.keda import checks as checks_mod
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
}


def test_catalogue_ids_are_stable_and_documented():
    assert {c.id: c.severity for c in CHECKS} == IDS
    for c in CHECKS:
        assert c.layer == "keda"
        assert c.title and c.remediation and c.doc is not None


def _judge(reg: Registry, v: Vector, cid: str):
    return reg.get(cid).judge(v.evidence, v.profile, "cluster")


def _mismatch(reg: Registry, v: Vector) -> list[str]:
    out = []
    for cid, want in v.expect.items():
        got = _judge(reg, v, cid)
        if str(got.status) != want:
            out.append(f"{cid}: {got.status} != {want} ({got.reason})")
            continue
        if cid in v.exact and got.reason != v.exact[cid]:
            out.append(f"{cid}: reason {got.reason!r} != {v.exact[cid]!r}")
        for w in v.words.get(cid, ()):
            if w not in got.reason:
                out.append(f"{cid}: {w!r} not in reason {got.reason!r}")
        for w in v.fix.get(cid, ()):
            if w not in got.remediation:
                out.append(f"{cid}: {w!r} not in remediation {got.remediation!r}")
    return out


@pytest.mark.parametrize("v", VECTORS, ids=[v.name for v in VECTORS])
def test_vector(v: Vector):
    assert _mismatch(CHECKS, v) == []


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


# ---------------------------------------------------------------------------------------
# mutation test: flip each comparison of checks.py; some vector must notice

FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
        ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
        ast.In: ast.NotIn, ast.NotIn: ast.In}

SOURCE = Path(checks_mod.__file__).read_text()


def _compare_sites() -> list[tuple[int, int]]:
    """(index among Compare nodes in _Flip's visiting order, line) of every comparison
    inside a function body, except lines marked ``# mutant-ok`` (the reason on that line)."""
    tree = ast.parse(SOURCE)
    lines = SOURCE.splitlines()
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
              for n in ast.walk(f) if isinstance(n, ast.Compare)}
    order: list[ast.Compare] = []

    class Walk(ast.NodeVisitor):
        def visit_Compare(self, node: ast.Compare) -> None:
            self.generic_visit(node)
            order.append(node)

    Walk().visit(tree)
    return [(i, n.lineno) for i, n in enumerate(order)
            if id(n) in inside and "# mutant-ok" not in lines[n.lineno - 1]]


class _Flip(ast.NodeTransformer):
    def __init__(self, target: int) -> None:
        self.target, self.i = target, -1

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        self.i += 1
        if self.i == self.target:
            node.ops = [FLIP[type(node.ops[0])]()] + node.ops[1:]
        return node


def _mutant(target: int) -> Registry:
    tree = _Flip(target).visit(ast.parse(SOURCE))
    ast.fix_missing_locations(tree)
    name = "kgc_keda_checks_mutant"
    mod = types.ModuleType(name)
    sys.modules[name] = mod  # dataclasses resolve annotations through sys.modules
    try:
        exec(compile(tree, "<mutant>", "exec"), mod.__dict__)  # noqa: S102 - our own source
    finally:
        del sys.modules[name]
    return mod.CHECKS


SITES = _compare_sites()


def test_there_are_comparisons_to_mutate():
    assert len(SITES) > 40


def test_every_flipped_comparison_is_caught_by_some_vector():
    survivors = []
    for target, line in SITES:
        reg = _mutant(target)
        if not any(_mismatch(reg, v) for v in VECTORS):
            survivors.append(f"checks.py:{line}: {SOURCE.splitlines()[line - 1].strip()}")
    assert survivors == [], "mutants not killed:\n" + "\n".join(survivors)
