"""Mutation test: flip each comparison (``<`` ↔ ``>=``, ``==`` ↔ ``!=``, ``is`` ↔ ``is not``,
``in`` ↔ ``not in``) in the evaluators (checks.py), the phase computation (phases.py) and the
statistics (stats.py), rebuild the layer on the mutant, and require that some vector
notices. A line may opt out with ``# mutant-ok: <why the flip cannot change a verdict>``.

The mutant modules are built in memory (never written to disk); ``sys.modules`` is
restored after each build.
"""

from __future__ import annotations

import ast
import math
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kedasynth import pod, repetition, stamp, synth
from kedavectors import VECTORS, mismatch

import kgc.layers.keda as pkg
from kgc.layers.keda.evidence import ClassRun, PodRecord, Repetition, ScaleMark, Stall, Stamp

PKG = "kgc.layers.keda."
# dependency order; profile and evidence are never mutated (shared by the vectors)
ORDER = ("phases", "stats", "checks")
MUTATED = ("checks", "phases", "stats")
DIR = Path(pkg.__file__).parent
SOURCES = {n: (DIR / f"{n}.py").read_text() for n in ORDER}

FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
        ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
        ast.In: ast.NotIn, ast.NotIn: ast.In}


def sites(name: str) -> list[tuple[int, int]]:
    """(index in _Flip's visiting order, line) of each comparison inside a function."""
    src = SOURCES[name]
    tree, lines = ast.parse(src), src.splitlines()
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


def build(name: str, target: int) -> dict[str, types.ModuleType]:
    """The layer's modules with comparison ``target`` of ``name`` flipped (modules after
    it in ORDER are rebuilt on top of the mutant)."""
    saved = {n: sys.modules[PKG + n] for n in ORDER}
    mods: dict[str, types.ModuleType] = {}
    try:
        rebuild = False
        for n in ORDER:
            rebuild = rebuild or n == name
            if not rebuild:
                mods[n] = saved[n]
                continue
            tree = ast.parse(SOURCES[n])
            if n == name:
                tree = _Flip(target).visit(tree)
                ast.fix_missing_locations(tree)
            mod = types.ModuleType(PKG + n)
            sys.modules[PKG + n] = mod  # later modules import the mutant; dataclasses too
            exec(compile(tree, f"<mutant {n}>", "exec"), mod.__dict__)  # noqa: S102
            mods[n] = mod
    finally:
        for n, m in saved.items():
            sys.modules[PKG + n] = m
    return mods


# ---------------------------------------------------------------------------------------
# direct oracles for phases and stats (beside the verdict vectors)


def _stats_oracle(m: dict[str, Any]) -> None:
    st, ph = m["stats"], m["phases"]
    p = st.percentile
    assert [p([15, 20, 35, 40, 50], q) for q in (5, 30, 40, 50, 100)] == [15, 20, 20, 35, 50]
    assert [p([3, 6, 7, 8, 8, 10, 13, 15, 16, 20], q) for q in (25, 50, 75)] == [7, 8, 15]
    assert p([1, 2], 0) == 1 and p(list(range(1, 1001)), 99.9) == 999
    for bad, q in (([], 50), ([math.nan], 50), ([1.0], 101), ([1.0], -1), (["x"], 50),
                   ([1.0], True)):
        try:
            p(bad, q)
        except ValueError:
            pass
        else:
            raise AssertionError(f"percentile({bad}, {q}) did not raise")
    PV = ph.PhaseValue
    s = st.summarize([PV("x", ph.OK, 1.0), PV("x", ph.OK, 3.0), PV("x", ph.MISSING, None, "m"),
                      PV("x", ph.OUT_OF_ORDER, None, "o"), PV("x", ph.STALLED, 9.0, "s"),
                      PV("x", ph.NOT_REACHED, None), PV("x", ph.OK, -1.0),
                      PV("x", ph.OK, math.nan)], "x")
    assert (s.n, s.censored, s.missing, s.invalid, s.not_reached) == (2, 1, 1, 3, 1), s
    assert (s.p50, s.p95, s.max, s.lower_bound) == (3.0, math.inf, math.inf, 9.0), s
    assert s.notes == ("m", "o", "s", "invalid duration -1.0", "invalid duration nan"), s
    s = st.summarize([0.0, 2.0, -1.0, math.inf, math.nan, "a", True], "y")
    assert (s.n, s.invalid, s.p50, s.max) == (2, 5, 0.0, 2.0), s
    assert st.summarize([PV("x", ph.STALLED, None, "s")], "x").lower_bound is None
    assert st.summarize([], "z").p50 is None
    one, zero, none = st.summarize([1.0], "c"), st.summarize([0.0], "c"), st.summarize([], "c")
    two, inf = st.summarize([2.0], "c"), st.summarize([PV("c", ph.STALLED, None)], "c")
    assert st.ratio(two, one).value == 2.0 and st.ratio(one, two).value == 0.5
    assert st.ratio(one, zero).value is None and st.ratio(one, none).value is None
    assert st.ratio(none, one).value is None and st.ratio(one, inf).value is None
    assert st.ratio(inf, one).value == math.inf
    assert st.fmt_s(None) == "n/a" and st.fmt_s(math.inf) == "stalled"
    assert st.fmt_s(math.inf, 3.0) == "> 3 s (stalled)" and st.fmt_s(123.4) == "123 s"
    assert st.fmt_s(99.94) == "99.9 s" and st.fmt_s(100.0) == "100 s"
    assert st.fmt_num(-150.0) == "-150" and st.fmt_num(math.inf) == "inf"
    assert st.fmt_num(None) == "n/a"
    ev = synth({"kata": [[pod(sandbox=3.0), pod(sandbox=None)]],
                "baseline": [[pod(), pod(sandbox=None, start=None, ready=None, stall=True)]]})
    ls = st.layer_stats(ev)
    text = st.format_table(ls, st.ratios(ls["kata"], ls["baseline"]))
    lines = text.splitlines()
    assert lines[0].split() == ["phase", "kata", "p50", "kata", "p95", "kata", "max", "kata",
                                "n", "runc", "p50", "runc", "p95", "runc", "max", "runc", "n",
                                "ratio", "(p50)"], lines[0]
    assert set(lines[1]) == {"-", " "}
    assert lines[5].split()[:2] == ["sandbox", "ready"] and lines[5].endswith(" 10x"), text
    assert "3  1 (1 n/a)" in lines[5] and "inf  1+1 stalled" in lines[5], text
    assert lines[8].endswith(" 0.516x") and lines[2].split()[-2:] == ["2", "1x"], text
    assert lines[-1] == "(seconds; percentiles by nearest rank)"
    ev2 = synth({"kata": [[pod()]], "baseline": [[pod(sandbox=None)]]})
    ls2 = st.layer_stats(ev2)
    t2 = st.format_table(ls2, st.ratios(ls2["kata"], ls2["baseline"])).splitlines()
    assert t2[5].endswith(" n/a") and t2[2].endswith(" 1x"), t2
    assert "ratio" not in st.format_table(ls).splitlines()[0]
    rows = m["phases"].class_phases(synth({"kata": [[pod()], [pod()]]}).kata)
    assert st.stats_of(rows).repetitions == 2 and st.stats_of(rows, repetitions=5).repetitions == 5
    assert st.difference(ls["kata"], ls["baseline"], "scheduling", "p50") == 0.0
    assert st.difference(ls["kata"], ls["baseline"], "e2e", "max") is None


def _phases_oracle(m: dict[str, Any]) -> None:
    ph = m["phases"]
    rp = ph.repetition_phases
    (row,) = rp(repetition(1, [pod(decision=4.0, sandbox=2.5)]))
    assert [row.values[p].status for p in ph.MEASURES] == [ph.OK] * 8
    assert row.seconds("e2e") == pytest.approx(6.87) and row.seconds("decision") == 4.0
    assert row.ready and row.rel("ready") == pytest.approx(6.87) and row.rel("x") is None
    assert row.label == "r1 #1 kata-1-1" or row.label.startswith("r1 #1 ")
    # out of order: only observed milestones, named with their times, and spans never
    # fold a reversal (tests/keda/test_keda_out_of_order.py on kubelet-shaped records)
    marks = {"created": 1.0, "scheduled": 3.0, "started": 2.0, "ready": 2.5}
    assert ph.out_of_order(marks) == [("scheduled", "started"), ("scheduled", "ready")]
    assert ph.out_of_order(marks, "started", "ready") == []
    rep = repetition(1, [pod(sandbox=None)])
    p0 = rep.pods[0]
    late = dict(p0.observed, scheduled=Stamp(p0.observed["started"].mono + 0.05, 0.0))
    (row,) = rp(Repetition(1, 1, rep.trigger, rep.active, rep.scale,
                           (PodRecord(p0.name, late, p0.api, p0.node),)), "kata")
    assert row.values["scheduling"].status == ph.OK
    assert row.values["startup"].status == ph.OUT_OF_ORDER
    t0 = rep.trigger.mono
    at = f"+{p0.observed['started'].mono - t0:.3f} s"
    assert row.values["startup"].note == (
        f"kata r1 #1 {p0.name}: out of order: containers running at {at} observed 0.050 s "
        f"before pod scheduled at +{late['scheduled'].mono - t0:.3f} s")
    (row,) = rp(Repetition(1, 1, None, rep.active, rep.scale,
                           (PodRecord(p0.name, late, p0.api, p0.node),)), "kata")
    assert row.values["startup"].note.startswith(
        f"kata r1 #1 {p0.name}: out of order: containers running at "
        f"{p0.observed['started'].mono:.3f} s (client monotonic) observed")
    (row,) = rp(repetition(1, [pod(sandbox=None)]))
    assert row.values["sandbox"].status == ph.MISSING and row.values["e2e"].status == ph.OK
    assert row.values["sandbox"].note == "PodReadyToStartContainers not observed"
    rows = rp(repetition(1, [pod(), pod(sandbox=None, start=None, ready=None, stall=True)],
                         stall_wait=30.0))
    r = rows[1]
    assert [r.values[p].status for p in ph.MEASURES] == [
        ph.OK, ph.OK, ph.OK, ph.STALLED, ph.NOT_REACHED, ph.NOT_REACHED, ph.STALLED, ph.STALLED]
    assert r.values["sandbox"].seconds == pytest.approx(30.0)
    assert r.values["startup"].seconds == pytest.approx(30.02)
    rows = rp(repetition(1, [pod()], k=2, extra_stalls=(
        Stall("scale-down", 600, 600, "left over", None, stamp(9000.0)),
        Stall("decision", 120, 120, "desired stuck at 1", None, stamp(1120.0)))))
    assert rows[1].stall is not None and rows[1].stall.phase == "decision"
    assert rows[1].values["decision"].note == "desired stuck at 1"
    assert rows[1].values["decision"].seconds == pytest.approx(120.0)
    assert rows[1].pod is None and rows[1].values["decision"].status == ph.STALLED
    assert rows[1].values["startup"].status == ph.NOT_REACHED
    # out of order and non-finite
    rep = repetition(1, [pod()])
    p0 = rep.pods[0]
    obs = dict(p0.observed)
    obs["sandbox_ready"] = Stamp(obs["scheduled"].mono - 0.5, 0.0)
    (row,) = rp(Repetition(1, 1, rep.trigger, rep.active, rep.scale,
                           (PodRecord(p0.name, obs),)))
    assert row.values["sandbox"].status == ph.OUT_OF_ORDER
    assert row.values["start"].status == ph.OK
    obs = dict(p0.observed)
    obs["scheduled"] = Stamp(math.inf, 0.0)
    (row,) = rp(Repetition(1, 1, rep.trigger, rep.active, rep.scale,
                           (PodRecord(p0.name, obs),)))
    assert row.values["scheduling"].status == ph.INVALID
    assert row.values["creation"].status == ph.OK
    (row,) = rp(Repetition(1, 1, None, rep.active, rep.scale, rep.pods))
    assert row.values["e2e"].status == ph.MISSING and row.values["startup"].status == ph.OK
    (row,) = rp(Repetition(1, 1, Stamp(math.nan, 0.0), rep.active, rep.scale, rep.pods))
    assert "non-finite" in row.values["e2e"].note
    # zero-length phases are measured, not missing
    (row,) = rp(repetition(1, [pod(creation=0.0)]))
    assert row.values["creation"].status == ph.OK and row.seconds("creation") == 0.0
    # ranks follow creation order; requested: deployment, then hpa, then active
    a = repetition(1, [pod(creation=0.5), pod(creation=0.05)])
    assert [r.pod for r in rp(a)] == [a.pods[1].name, a.pods[0].name]
    only_sched = PodRecord("late", {"scheduled": stamp(5000.0)})
    never = PodRecord("ghost", {})
    ordered = rp(Repetition(1, 1, a.trigger, a.active, a.scale, (never, only_sched) + a.pods))
    assert [r.pod for r in ordered] == [a.pods[1].name, a.pods[0].name, "late", "ghost"]
    t = stamp(10.0)
    r2 = Repetition(1, 2, t, active=stamp(12.0), scale=(
        ScaleMark("hpa", 2, stamp(20.0)), ScaleMark("deployment", 1, stamp(13.0)),
        ScaleMark("deployment", 3, stamp(21.0)), ScaleMark("deployment", 2, stamp(22.0))))
    assert ph.requested_at(r2, 1) == (13.0, "deployment")
    assert ph.requested_at(r2, 2) == (21.0, "deployment")
    assert ph.requested_at(r2, 4) == (None, "deployment")
    assert ph.requested_at(Repetition(1, 1, t, active=stamp(12.0)), 1) == (12.0, "active")
    assert ph.requested_at(Repetition(1, 1, t, active=stamp(12.0)), 2) == (None, "")
    assert ph.requested_at(Repetition(1, 1, t, scale=(
        ScaleMark("scaledobject", 1, stamp(15.0)),)), 1) == (15.0, "scaledobject")
    # clock offset
    off = ph.estimate_clock_offset([(10.2, 1000.0, 10.4), (20.7, 1011.0, 20.8)])
    assert off.offset_s == pytest.approx(990.5) and off.uncertainty_s == pytest.approx(0.3)
    assert ph.estimate_clock_offset([(3.0, 5.0, 2.0)]) is None
    assert ph.estimate_clock_offset([(3.0, 5.0, 3.0)]).offset_s == pytest.approx(2.5)
    off = ph.estimate_clock_offset([(0.0, 100.0, 0.1), (50.0, 200.0, 50.1), (1.0, 101.0, 1.1)])
    assert "disagree" in off.method and off.offset_s == pytest.approx(100.45)
    assert off.uncertainty_s == pytest.approx(50.0 + 0.55)
    # receipt lags and scale-downs
    ev = synth({"kata": [[pod()]]})
    assert len(ph.receipt_lags(ev)) == 5
    assert len(ph.receipt_lags(synth({"kata": [[pod()]]}, clock=None))) == 0
    run = ev.kata
    (sd,) = ph.scale_downs(run)
    assert sd.status == ph.OK and sd.seconds == pytest.approx(40.0)
    rep = run.repetitions[0]
    for kw, want in (({"lowered": None}, ph.MISSING), ({"scaled_down": None}, ph.MISSING),
                     ({"lowered": rep.scaled_down, "scaled_down": rep.lowered},
                      ph.OUT_OF_ORDER),
                     ({"lowered": rep.lowered, "scaled_down": rep.lowered}, ph.OK)):
        r3 = Repetition(1, 1, rep.trigger, **{"lowered": rep.lowered,
                                              "scaled_down": rep.scaled_down, **kw})
        got = ph.scale_downs(ClassRun("kata", "kata", (r3,)))[0]
        assert got.status == want, kw
        if "lowered" in kw and kw["lowered"] is None:
            assert got.note == "trigger lowering not recorded"
        if "scaled_down" in kw and kw["scaled_down"] is None:
            assert got.note == "scale-down to 0 not recorded"


ORACLES: list[Callable[[dict[str, Any]], None]] = [_stats_oracle, _phases_oracle]


def test_the_oracles_hold_on_the_real_modules():
    real = {n: sys.modules[PKG + n] for n in ORDER}
    for o in ORACLES:
        o(real)


def _killed(mods: dict[str, types.ModuleType]) -> bool:
    for o in ORACLES:
        try:
            o(mods)
        except Exception:  # noqa: BLE001 - any failure or crash of a mutant is a kill
            return True
    return any(mismatch(mods["checks"].CHECKS, v) for v in VECTORS)


@pytest.mark.parametrize("name", MUTATED)
def test_every_flipped_comparison_is_caught(name: str):
    found = sites(name)
    assert len(found) > 10
    lines = SOURCES[name].splitlines()
    survivors = [f"{name}.py:{line}: {lines[line - 1].strip()}"
                 for target, line in found if not _killed(build(name, target))]
    assert survivors == [], "mutants not killed:\n" + "\n".join(survivors)
