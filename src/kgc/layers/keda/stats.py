"""Statistics over the measured phases (pure): p50/p95/max per phase and class, ratios.

**Percentile method: nearest rank** (Hyndman & Fan type 1; numpy's
``method="inverted_cdf"``). The q-th percentile of n samples is the smallest sample with
at least q % of the samples at or below it: ``sorted(x)[ceil(q/100 · n) − 1]`` (q = 0 is
the minimum). It always returns an observed duration (never an interpolation below the
slowest pod that counted), it is monotone in q, and adding a slower sample can never lower
it -- the properties a latency budget needs. With the few dozen samples of a run, p95 is
often the maximum; that is deliberate (conservative), not a bug.

Samples are :class:`~kgc.layers.keda.phases.PhaseValue`: ``ok`` values count; ``stalled``
values are **censored** -- known only to exceed a bound -- and count as +∞ (a pod that
never became Ready within the wait makes p95 infinite once it reaches the p95 rank, so a
scale-up that stalled can never look fast); ``missing``, ``out-of-order`` and
``invalid`` values are counted and named, never treated as 0; ``not-reached`` ones (a
phase after the one a pod stalled in) are counted apart.
Plain numbers are accepted too: a NaN, ±∞ or negative number is counted as invalid.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kgc.layers.keda.evidence import ClassRun, KedaEvidence
from kgc.layers.keda.phases import (
    MEASURES,
    MISSING,
    NOT_REACHED,
    OK,
    STALLED,
    TITLES,
    PhaseValue,
    PodPhases,
    class_phases,
)

STATS = ("p50", "p95", "max")
INF = math.inf


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0..100) of ``values``; +∞ entries are allowed
    (censored samples). Raises ValueError on an empty sample, a NaN, or q outside 0..100."""
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0 <= q <= 100:
        raise ValueError(f"percentile q must be a number in 0..100, got {q!r}")
    if len(values) == 0:
        raise ValueError("percentile of an empty sample")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v):
            raise ValueError(f"percentile sample is not a number: {v!r}")
    xs = sorted(values)
    n = len(xs)
    # exact rank: q as the rational of its shortest decimal repr (95 -> 95, 99.9 -> 999/10)
    rank = math.ceil(Fraction(repr(float(q))) * n / 100)
    return xs[max(rank, 1) - 1]


@dataclass(frozen=True)
class Summary:
    """One measure of one runtime class. ``n`` valid samples; ``censored`` stalled ones
    (counted as +∞); ``missing``/``invalid`` not counted (``notes`` says why). ``p50``,
    ``p95``, ``max`` are None when nothing counted, +∞ when a censored sample is at that
    rank; ``lower_bound`` is then the largest known wait of a censored sample."""

    measure: str
    n: int = 0
    censored: int = 0
    missing: int = 0
    invalid: int = 0
    not_reached: int = 0
    p50: float | None = None
    p95: float | None = None
    max: float | None = None
    lower_bound: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def counted(self) -> int:
        return self.n + self.censored

    def get(self, stat: str) -> float | None:
        if stat not in STATS:
            raise ValueError(f"unknown statistic {stat!r} (one of {', '.join(STATS)})")
        return getattr(self, stat)

    def to_dict(self) -> dict[str, Any]:
        def num(x: float | None) -> float | str | None:
            if x is None:
                return None
            return "inf" if math.isinf(x) else round(x, 6)

        return {
            "n": self.n, "censored": self.censored, "missing": self.missing,
            "invalid": self.invalid, "not_reached": self.not_reached,
            "p50": num(self.p50), "p95": num(self.p95), "max": num(self.max),
            "lower_bound": num(self.lower_bound),
            "notes": list(self.notes),
        }


def summarize(samples: Iterable[PhaseValue | float], measure: str = "") -> Summary:
    """Summary of a sample of phase values (or plain seconds)."""
    vals: list[float] = []
    censored = missing = invalid = not_reached = 0
    lbs: list[float] = []
    notes: list[str] = []

    def note(s: str) -> None:
        if s and s not in notes and len(notes) < 5:
            notes.append(s)

    for s in samples:
        if isinstance(s, PhaseValue):
            if s.status == OK and s.seconds is not None and math.isfinite(s.seconds) \
                    and s.seconds >= 0:
                vals.append(float(s.seconds))
            elif s.status == OK:
                invalid += 1
                note(f"invalid duration {s.seconds!r}")
            elif s.status == STALLED:
                censored += 1
                if s.seconds is not None and math.isfinite(s.seconds):
                    lbs.append(s.seconds)
                note(s.note)
            elif s.status == MISSING:
                missing += 1
                note(s.note)
            elif s.status == NOT_REACHED:
                not_reached += 1
            else:  # OUT_OF_ORDER, INVALID
                invalid += 1
                note(s.note)
        elif isinstance(s, bool) or not isinstance(s, int | float):
            invalid += 1
            note(f"not a number: {s!r}")
        elif math.isnan(s) or math.isinf(s):
            invalid += 1
            note(f"non-finite duration {s!r}")
        elif s < 0:
            invalid += 1
            note(f"negative duration {s!r} s")
        else:
            vals.append(float(s))
    counted = vals + [INF] * censored
    if not counted:
        return Summary(measure, 0, 0, missing, invalid, not_reached, notes=tuple(notes))
    return Summary(
        measure, len(vals), censored, missing, invalid, not_reached,
        p50=percentile(counted, 50), p95=percentile(counted, 95), max=max(counted),
        lower_bound=max(lbs) if lbs else None, notes=tuple(notes),
    )


@dataclass(frozen=True)
class ClassStats:
    role: str
    runtime_class: str | None
    repetitions: int
    pods: int  # pod rows, phantom rows included
    measures: Mapping[str, Summary] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.runtime_class or "default runtime"

    def __getitem__(self, measure: str) -> Summary:
        return self.measures[measure]

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role, "runtime_class": self.runtime_class,
            "repetitions": self.repetitions, "pods": self.pods,
            "measures": {m: s.to_dict() for m, s in self.measures.items()},
        }


def stats_of(rows: Sequence[PodPhases], role: str = "", runtime_class: str | None = None,
             repetitions: int | None = None) -> ClassStats:
    measures = {m: summarize((r.values[m] for r in rows if m in r.values), m) for m in MEASURES}
    reps = len({r.repetition for r in rows}) if repetitions is None else repetitions
    return ClassStats(role, runtime_class, reps, len(rows), measures)


def class_stats(run: ClassRun) -> ClassStats:
    """p50/p95/max of every phase and span over all pods of all repetitions."""
    return stats_of(class_phases(run), run.role, run.runtime_class, len(run.repetitions))


def layer_stats(ev: KedaEvidence) -> dict[str, ClassStats]:
    """Per role (``kata``, ``baseline``) that was measured."""
    return {run.role: class_stats(run) for run in ev.runs()}


@dataclass(frozen=True)
class Ratio:
    """Kata / baseline for one measure and statistic; None with ``note`` when undefined."""

    measure: str
    stat: str
    value: float | None
    kata: float | None
    baseline: float | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        def num(x: float | None) -> float | str | None:
            return None if x is None else ("inf" if math.isinf(x) else round(x, 6))

        return {"stat": self.stat, "value": num(self.value), "kata": num(self.kata),
                "baseline": num(self.baseline), "note": self.note}


def ratio(kata: Summary, baseline: Summary, stat: str = "p50") -> Ratio:
    """``kata.stat / baseline.stat``. Identical samples give exactly 1.0. Undefined (None)
    when either side has no sample, the baseline stalled (+∞) or took 0 s (below the watch
    resolution); +∞ when only Kata stalled."""
    k, b = kata.get(stat), baseline.get(stat)
    m = kata.measure or baseline.measure
    if k is None or b is None:
        side = "Kata" if k is None else "the baseline"
        return Ratio(m, stat, None, k, b, f"{side} has no {TITLES.get(m, m)} sample")
    if math.isinf(b):
        return Ratio(m, stat, None, k, b, "the baseline stalled (its value is censored)")
    if b <= 0:
        return Ratio(m, stat, None, k, b,
                     f"the baseline's {stat} is 0 s (below the watch resolution)")
    if math.isinf(k):
        return Ratio(m, stat, INF, k, b, "Kata stalled (its value is censored)")
    return Ratio(m, stat, k / b, k, b)


def ratios(kata: ClassStats, baseline: ClassStats, stat: str = "p50") -> dict[str, Ratio]:
    """Kata/baseline ratio of every measure."""
    return {m: ratio(kata[m], baseline[m], stat) for m in MEASURES}


def difference(kata: ClassStats, baseline: ClassStats, measure: str,
               stat: str = "p50") -> float | None:
    """``kata − baseline`` of one measure and statistic, in seconds (None if undefined or
    censored) -- e.g. how much longer the microVM sandbox takes than runc's."""
    k, b = kata[measure].get(stat), baseline[measure].get(stat)
    if k is None or b is None or math.isinf(k) or math.isinf(b):
        return None
    return k - b


# ---------------------------------------------------------------------------------------
# words


def fmt_s(x: float | None, lower_bound: float | None = None) -> str:
    """Seconds for a reason: ``7.9 s``, ``0.312 s``, ``123 s``; +∞ is ``stalled`` (with its
    known lower bound: ``> 300 s``); None is ``n/a``."""
    if x is None:
        return "n/a"
    if math.isinf(x):
        return f"> {fmt_num(lower_bound)} s (stalled)" if lower_bound is not None else "stalled"
    return f"{fmt_num(x)} s"


def fmt_num(x: float | None) -> str:
    if x is None:
        return "n/a"
    if math.isinf(x):
        return "inf"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}"


def format_table(stats: Mapping[str, ClassStats],
                 rats: Mapping[str, Ratio] | None = None) -> str:
    """The console's per-phase table: one row per measure, p50/p95/max per class, and the
    Kata/baseline ratio when given."""
    roles = [r for r in ("kata", "baseline") if r in stats]
    head = ["phase"]
    for r in roles:
        lab = f"{stats[r].label}"
        head += [f"{lab} p50", f"{lab} p95", f"{lab} max", f"{lab} n"]
    if rats:
        st = next(iter(rats.values())).stat
        head.append(f"ratio ({st})")
    rows = [head]
    for m in MEASURES:
        row = [TITLES[m]]
        for r in roles:
            s = stats[r][m]
            cnt = f"{s.n}" + (f"+{s.censored} stalled" if s.censored else "")
            if s.missing or s.invalid:
                cnt += f" ({s.missing + s.invalid} n/a)"
            row += [fmt_num(s.p50), fmt_num(s.p95), fmt_num(s.max), cnt]
        if rats:
            q = rats.get(m)
            row.append("n/a" if q is None or q.value is None else f"{fmt_num(q.value)}x")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines: list[str] = []
    for i, row_ in enumerate(rows):
        cells = [c.ljust(widths[0]) if j == 0 else c.rjust(widths[j])
                 for j, c in enumerate(row_)]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n(seconds; percentiles by nearest rank)\n"
