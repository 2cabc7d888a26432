"""`kgc diff OLD NEW`: what changed between two verdicts (image N vs N+1, last night vs
tonight), per target, and whether NEW regressed under the policy.

- new failures: fail/error now, not before (absent before counts as not failing);
- fixed: fail/error before, pass/warn now (a check that is gone is not fixed);
- vanished: a check OLD had a result for (whatever its status) and NEW has none, and every
  check of a target that is gone from NEW — each one a regression: what is no longer
  judged is not known to be good;
- changed status: every other change, including a check that appeared;
- changed figures: numbers that differ in a check's ``expected``/``found``/``evidence``
  (latencies, sizing deltas, counts) and in ``run.environment`` (round trips). Timing noise
  is left out unless asked (``timing=True``, `kgc diff --timing`): kernel log timestamps
  (``[   12.345678]``, seconds since boot: every boot differs), waits and wall-clock
  durations (:func:`is_timing`) — the output says how many were left out;
- a warning when OLD and NEW were judged against different profiles (name or content):
  their verdicts then differ by the profile too, not only by the node;
- regressed: NEW has a blocking finding under the policy that OLD did not have (a new
  blocking failure, a required layer no longer judged, ...), or a check or target vanished.
  Exit 1 then, else 0.

A file that holds one (target, check) pair twice counts as its worst result, whatever the
order (:meth:`VerdictDoc.by_target`), in OLD and NEW alike.

Targets are paired by name; two verdicts of one target each with different names (image
N vs N+1, named after their files) are compared with each other, and the output says so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kgc.core.policy import Policy
from kgc.gate.gate import BAD, Finding, GateResult, VerdictDoc, evaluate

_NUM = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?![\w.]*\d)")
MAX_FIGURES_PER_CHECK = 20
# a kernel log line's timestamp (seconds since boot, printk): `[    1.234567] DMAR: ...`
_DMESG_TS = re.compile(r"\[\s*\d+\.\d+\]")
# the last key of a figure's path that says it is how long something took or waited, not
# what was measured against a budget (latencies under test, sizes and counts stay figures)
_TIMING_KEY = re.compile(r"(^|_)(wait|waited|elapsed|took|wall|duration|handshake|uptime)"
                         r"(_[mun]?s|_ms|_ns|_sec|_seconds)?$|(_at|_time|timestamp)$")


def is_timing(field: str) -> bool:
    """Is the figure at ``field`` (a dotted path, ``evidence.waited_s``) timing noise?"""
    last = re.sub(r"\[\d+\]|#\d+$", "", field).rsplit(".", 1)[-1]
    return bool(_TIMING_KEY.search(last))


@dataclass(frozen=True)
class Change:
    check: str
    old: str | None  # status, None = absent
    new: str | None
    severity: str = ""
    reason: str = ""  # the new reason (or the old one when the check disappeared)
    blocking: bool = False  # a blocking finding in NEW that OLD did not have


@dataclass(frozen=True)
class Figure:
    check: str  # "(run)" for run.environment / run.duration_s
    field: str
    old: float
    new: float

    @property
    def delta(self) -> float:
        return self.new - self.old

    def text(self) -> str:
        pct = f" ({self.delta / abs(self.old) * 100:+.0f}%)" if self.old else ""
        return f"{self.check} {self.field}: {_fmt(self.old)} -> {_fmt(self.new)}{pct}"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


@dataclass
class TargetDiff:
    target: str
    old_name: str | None
    new_name: str | None
    new_failures: list[Change] = field(default_factory=list)
    fixed: list[Change] = field(default_factory=list)
    vanished: list[Change] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    still_failing: int = 0


@dataclass
class DiffResult:
    old: str
    new: str
    profile: str
    targets: list[TargetDiff]
    run_figures: list[Figure]
    regressions: list[Finding]
    old_gate: GateResult
    new_gate: GateResult
    warnings: list[str] = field(default_factory=list)
    timing_left_out: int = 0

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def to_dict(self) -> dict[str, Any]:
        return {
            "old": self.old, "new": self.new, "profile": self.profile,
            "regressed": self.regressed,
            "warnings": list(self.warnings),
            "timing_figures_left_out": self.timing_left_out,
            "regressions": [asdict(f) for f in self.regressions],
            "gate": {"old": "certified" if self.old_gate.green else "not certified",
                     "new": "certified" if self.new_gate.green else "not certified"},
            "targets": [
                {"target": t.target, "old_name": t.old_name, "new_name": t.new_name,
                 "new_failures": [asdict(c) for c in t.new_failures],
                 "fixed": [asdict(c) for c in t.fixed],
                 "vanished": [asdict(c) for c in t.vanished],
                 "changed_status": [asdict(c) for c in t.changed],
                 "changed_figures": [asdict(f) | {"delta": f.delta} for f in t.figures],
                 "still_failing": t.still_failing}
                for t in self.targets],
            "run_figures": [asdict(f) | {"delta": f.delta} for f in self.run_figures],
        }


# -- figures ------------------------------------------------------------------------------
def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _numbers(v: Any, timing: bool = True) -> tuple[str, list[float]] | None:
    """(template with numbers masked, the numbers) of a leaf, None for non-figures. Without
    ``timing`` a kernel log timestamp is text, not a figure."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        return "#", [float(v)]
    if isinstance(v, str) and len(v) <= 2000:
        if not timing:
            v = _DMESG_TS.sub("[T]", v)
        nums = [float(m.group(0)) for m in _NUM.finditer(v)]
        if nums:
            return _NUM.sub("#", v), nums
    return None


def figures(check: str, old: Mapping[str, Any], new: Mapping[str, Any],
            timing: bool = True) -> list[Figure]:
    """Numbers that changed between two results of one check, field by field; a text
    field counts only when everything but its numbers stayed the same. ``timing=False``
    leaves out timing noise (kernel log timestamps, waits: :func:`is_timing`)."""
    out: list[Figure] = []
    o = dict(_leaves({"expected": old.get("expected"), "found": old.get("found"),
                      "evidence": old.get("evidence") or {}}))
    n = dict(_leaves({"expected": new.get("expected"), "found": new.get("found"),
                      "evidence": new.get("evidence") or {}}))
    for key in o.keys() & n.keys():
        if not timing and is_timing(key):
            continue
        a, b = _numbers(o[key], timing), _numbers(n[key], timing)
        if a is None or b is None or a[0] != b[0] or len(a[1]) != len(b[1]):
            continue
        for i, (x, y) in enumerate(zip(a[1], b[1], strict=True)):
            if x != y:
                suffix = f"#{i + 1}" if len(a[1]) > 1 else ""
                out.append(Figure(check, key + suffix, x, y))
    out.sort(key=lambda f: f.field)
    return out[:MAX_FIGURES_PER_CHECK]


def _env_figures(old: VerdictDoc, new: VerdictDoc, pair: Mapping[str, str],
                 timing: bool = True) -> list[Figure]:
    out = []
    oe, ne = old.run.get("environment") or {}, new.run.get("environment") or {}
    back = {n: o for o, n in pair.items()}
    for key, nv in ne.items():
        tgt, dot, rest = str(key).rpartition(".")
        okey = f"{back.get(tgt, tgt)}.{rest}" if dot else key
        if okey not in oe:
            continue
        if not timing and is_timing(str(key)):
            continue
        a, b = _numbers(oe[okey]), _numbers(nv)
        if a and b and a[0] == b[0] == "#" and a[1] != b[1]:
            out.append(Figure("(run)", f"environment.{key}", a[1][0], b[1][0]))
    a, b = old.run.get("duration_s"), new.run.get("duration_s")
    if timing and isinstance(a, int | float) and isinstance(b, int | float) and a != b:
        out.append(Figure("(run)", "duration_s", float(a), float(b)))
    return out


# -- pairing and comparing ------------------------------------------------------------------
def pair_targets(old: list[str], new: list[str]) -> tuple[dict[str, str], list[str], list[str]]:
    """old name -> new name; then the unpaired old and new names."""
    pair = {t: t for t in old if t in new}
    lo = [t for t in old if t not in pair]
    ln = [t for t in new if t not in pair.values()]
    if len(old) == 1 and len(new) == 1 and lo and ln:
        pair[lo[0]] = ln[0]
        lo, ln = [], []
    return pair, lo, ln


def _vanished(t: str, cid: str, r: Mapping[str, Any]) -> Finding:
    return Finding("check", f"{cid} on {t}: {r['status']} in OLD, no result in NEW (a check "
                   "that is no longer judged is a regression)", t, cid, r["layer"], "absent",
                   r["severity"], "not judged in NEW",
                   "Run NEW with every check OLD ran (no -k, -m naming whole layers only), "
                   "or find out why this check left no verdict.")


def profile_warnings(old: VerdictDoc, new: VerdictDoc) -> list[str]:
    """A line when OLD and NEW were judged against different profiles (name, else the
    content: ``run.profile_digest``)."""
    if old.profile != new.profile:
        return [f"warning: OLD was judged against profile {old.profile or '(none)'!r}, NEW "
                f"against {new.profile or '(none)'!r}: what changed is the profile too, not "
                "only the target"]
    if old.digest and new.digest and old.digest != new.digest:
        return [f"warning: OLD and NEW were judged against different contents of profile "
                f"{new.profile!r} (digest {old.digest[:19]}… vs {new.digest[:19]}…): what "
                "changed is the profile too, not only the target"]
    return []


def diff(old: VerdictDoc, new: VerdictDoc, policy: Policy, profile: str,
         layers: Mapping[str, str], checks: Mapping[str, Any] | None = None,
         *, digest: str, timing: bool = False) -> DiffResult:
    """``timing``: keep the figures that are timing noise (see the module docstring)."""
    og = evaluate(old, policy, profile, layers, checks, digest=digest)
    ng = evaluate(new, policy, profile, layers, checks, digest=digest)
    pair, only_old, only_new = pair_targets(old.targets(), new.targets())
    back = {n: o for o, n in pair.items()}

    def okey(f: Finding) -> tuple[str, str, str]:
        k = f.key
        return (k[0], back.get(k[1], k[1]), k[2])

    old_keys = {f.key for f in og.blocking}
    regressions = [f for f in ng.blocking if okey(f) not in old_keys]
    seen = {okey(f) for f in regressions}

    def regress(f: Finding) -> None:
        if okey(f) not in seen:
            seen.add(okey(f))
            regressions.append(f)

    ob, nb = old.by_target(), new.by_target()
    vanished: list[tuple[str, str, Mapping[str, Any]]] = []  # (NEW's name, check, OLD result)
    for o_name, n_name in pair.items():
        orr, nrr = ob.get(o_name, {}), nb.get(n_name, {})
        vanished += [(n_name, c, r) for c, r in sorted(orr.items()) if c not in nrr]
    for t in only_old:
        if not ob.get(t):
            continue  # listed in OLD's run.targets, never judged there: nothing was lost
        regress(Finding("run", f"target {t}: judged in OLD, no result in NEW (a target that "
                        "is no longer judged is a regression)", target=t,
                        remediation="Run NEW on every target OLD had, or find out why this "
                        "one left no verdict (kgc fleet collect names missing nodes)."))
        vanished += [(t, c, r) for c, r in sorted(ob.get(t, {}).items())]
    for t, c, r in vanished:
        regress(_vanished(t, c, r))
    new_block = {(back.get(f.target, f.target), f.check) for f in regressions if f.check}

    targets: list[TargetDiff] = []
    left_out = 0
    for o_name, n_name in pair.items():
        td = TargetDiff(n_name if o_name == n_name else f"{o_name} -> {n_name}", o_name, n_name)
        orr, nrr = ob.get(o_name, {}), nb.get(n_name, {})
        for cid in sorted(orr.keys() | nrr.keys()):
            a, b = orr.get(cid), nrr.get(cid)
            sa, sb = (a or {}).get("status"), (b or {}).get("status")
            cur = b or a or {}
            ch = Change(cid, sa, sb, str(cur.get("severity", "")), str(cur.get("reason", "")),
                        (o_name, cid) in new_block)
            if a is not None and b is None:
                td.vanished.append(ch)
            elif sb in BAD and sa not in BAD:
                td.new_failures.append(ch)
            elif sa in BAD and sb in ("pass", "warn"):
                td.fixed.append(ch)
            elif sa != sb:
                td.changed.append(ch)
            elif sa in BAD:
                td.still_failing += 1
            if a is not None and b is not None:
                td.figures += figures(cid, a, b, timing)
                if not timing:
                    left_out += len(figures(cid, a, b)) - len(figures(cid, a, b, False))
        targets.append(td)
    for t in only_old:
        td = TargetDiff(t, t, None)
        td.vanished = [Change(c, r["status"], None, r["severity"], r["reason"], True)
                       for c, r in sorted(ob.get(t, {}).items())]
        targets.append(td)
    for t in only_new:
        td = TargetDiff(t, None, t)
        for c, r in sorted(nb.get(t, {}).items()):
            ch = Change(c, None, r["status"], r["severity"], r["reason"], (t, c) in new_block)
            (td.new_failures if r["status"] in BAD else td.changed).append(ch)
        targets.append(td)
    run_figs = _env_figures(old, new, pair, timing)
    if not timing:
        left_out += len(_env_figures(old, new, pair)) - len(run_figs)
    return DiffResult(old.path, new.path, profile, targets, run_figs, regressions, og, ng,
                      profile_warnings(old, new), left_out)


def render(d: DiffResult, width: int = 100) -> str:
    lines = [f"kgc diff: {d.old} -> {d.new} (policy of profile {d.profile})", *d.warnings]
    lines.append(f"gate: {'certified' if d.old_gate.green else 'NOT certified'} -> "
                 f"{'certified' if d.new_gate.green else 'NOT certified'}")

    def row(c: Change) -> str:
        mark = "  BLOCKS" if c.blocking else ""
        reason = " ".join(c.reason.split())
        room = max(20, width - len(c.check) - 30)
        if len(reason) > room:
            reason = reason[:room - 1] + "…"
        return (f"    {c.check}: {c.old or 'absent'} -> {(c.new or 'absent').upper()}"
                f"{mark}  {reason}")

    for t in d.targets:
        head = t.target
        if t.old_name and t.new_name and t.old_name != t.new_name:
            head = f"{t.new_name} (compared with {t.old_name})"
        elif t.old_name is None:
            head = f"{t.new_name} (only in NEW)"
        elif t.new_name is None:
            head = f"{t.old_name} (only in OLD)"
        lines.append(f"-- {head}")
        for title, items in (("new failures", t.new_failures), ("vanished", t.vanished),
                             ("fixed", t.fixed), ("changed status", t.changed)):
            if items:
                lines.append(f"  {title} ({len(items)}):")
                lines += [row(c) for c in items]
        if t.figures:
            # one line per change; the same change in several checks' evidence is one line
            groups: dict[tuple[str, float, float], list[str]] = {}
            for f in t.figures:
                groups.setdefault((f.field, f.old, f.new), []).append(f.check)
            lines.append(f"  changed figures ({len(groups)}):")
            for (fld, a, b), cks in list(groups.items())[:30]:
                f0 = Figure(cks[0], fld, a, b).text()
                more = f" (also {', '.join(cks[1:4])}{' …' if len(cks) > 4 else ''})" \
                    if len(cks) > 1 else ""
                lines.append(f"    {f0}{more}")
        if not (t.new_failures or t.vanished or t.fixed or t.changed or t.figures):
            lines.append("  no change" + (f" ({t.still_failing} still failing)"
                                          if t.still_failing else ""))
        elif t.still_failing:
            lines.append(f"  still failing: {t.still_failing}")
    if d.run_figures:
        lines.append("-- run")
        lines += [f"    {f.text()}" for f in d.run_figures]
    if d.timing_left_out:
        lines.append(f"({d.timing_left_out} timing figure(s) left out — kernel log "
                     "timestamps, waits, durations: kgc diff --timing)")
    if d.regressions:
        lines.append(f"REGRESSED under the policy of profile {d.profile}: "
                     f"{len(d.regressions)} new blocking or vanished finding(s):")
        lines += [f"  - {f.text}" for f in d.regressions]
    else:
        lines.append(f"not regressed under the policy of profile {d.profile}")
    return "\n".join(lines)
