"""The verdict model every layer shares.

A *check* is immutable data plus a pure evaluator: ``evaluate(evidence, profile) -> Outcome``.
The engine turns an outcome into a :class:`Verdict` for one target. Checks never hold run
state; the same catalogue judges any number of nodes.
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kgc.errors import EvidenceError as EvidenceError  # defined below kgc.kube, shared here


class Status(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    ERROR = "error"

    @property
    def blocks(self) -> bool:
        """A status that makes the overall certification fail."""
        return self in (Status.FAIL, Status.ERROR)


class Severity(enum.StrEnum):
    BLOCKER = "blocker"
    CRITICAL = "critical"
    NORMAL = "normal"
    MINOR = "minor"
    TRIVIAL = "trivial"


@dataclass(frozen=True)
class Outcome:
    """What an evaluator decides. ``remediation`` overrides the check's default text."""

    status: Status
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remediation: str | None = None
    expected: str | None = None
    found: str | None = None


def passed(
    reason: str, *, expected: str | None = None, found: str | None = None, **evidence: Any
) -> Outcome:
    return Outcome(Status.PASS, reason, evidence, None, expected, found)


def failed(
    reason: str,
    remediation: str | None = None,
    *,
    expected: str | None = None,
    found: str | None = None,
    **evidence: Any,
) -> Outcome:
    return Outcome(Status.FAIL, reason, evidence, remediation, expected, found)


def warned(
    reason: str,
    remediation: str | None = None,
    *,
    expected: str | None = None,
    found: str | None = None,
    **evidence: Any,
) -> Outcome:
    return Outcome(Status.WARN, reason, evidence, remediation, expected, found)


def skipped(reason: str, **evidence: Any) -> Outcome:
    return Outcome(Status.SKIP, reason, evidence)


def errored(reason: str, remediation: str | None = None, **evidence: Any) -> Outcome:
    return Outcome(Status.ERROR, reason, evidence, remediation)


Evaluator = Callable[[Any, Any], Outcome]


@dataclass(frozen=True)
class Check:
    id: str
    layer: str
    title: str
    severity: Severity
    remediation: str
    evaluate: Evaluator
    doc: str = ""

    def judge(self, evidence: Any, profile: Any, target: str) -> Verdict:
        """Run the pure evaluator; a crash inside it becomes an ``error`` verdict."""
        try:
            out = self.evaluate(evidence, profile)
        except Exception as exc:  # noqa: BLE001 - turned into an error verdict, not hidden
            out = Outcome(
                Status.ERROR,
                f"evaluator crashed: {type(exc).__name__}: {exc}",
                {},
                "This is a defect in kgc; please report it with the evidence bundle "
                "(`kgc snapshot`).",
            )
        if not isinstance(out, Outcome):
            out = Outcome(Status.ERROR, f"evaluator returned {type(out).__name__}, not Outcome")
        remediation = out.remediation if out.remediation is not None else self.remediation
        if out.status is Status.PASS or (out.status is Status.SKIP and out.remediation is None):
            # nothing to fix: a pass, or a check that did not apply here
            remediation = ""
        return Verdict(
            check=self.id,
            layer=self.layer,
            title=self.title,
            severity=self.severity,
            target=target,
            status=out.status,
            reason=out.reason,
            remediation=remediation,
            evidence=dict(out.evidence),
            expected=out.expected,
            found=out.found,
        )


@dataclass(frozen=True)
class Verdict:
    check: str
    layer: str
    title: str
    severity: Severity
    target: str
    status: Status
    reason: str
    remediation: str
    evidence: Mapping[str, Any]
    expected: str | None = None
    found: str | None = None
    # where the evidence came from: "live" (collected in this run) or "bundle" (replayed)
    origin: str = "live"
    # the evidence came from a stand-in (a lab's simulated cluster, a stub binary): a pass
    # here proves the suite, not a node
    simulated: bool = False
    simulated_why: str = ""

    @property
    def category(self) -> str | None:
        """Who has to act: ``node`` (the node or cluster is not conformant), ``environment``
        (kgc could not decide: unreachable, unreadable, missing permission, a lab problem)
        or ``suite`` (a defect in kgc). None for pass and skip."""
        if self.status in (Status.FAIL, Status.WARN):
            return "node"
        if self.status is Status.ERROR:
            if self.evidence.get("evidence_unavailable") == "suite" or self.reason.startswith(
                    "evaluator crashed"):
                return "suite"
            return "environment"
        return None

    def with_origin(self, origin: str, simulated_why: str | None) -> Verdict:
        reason = self.reason
        if simulated_why:
            reason = f"{reason} [simulated: {simulated_why}]"
        return replace(self, origin=origin, simulated=bool(simulated_why),
                       simulated_why=simulated_why or "", reason=reason)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "layer": self.layer,
            "title": self.title,
            "severity": str(self.severity),
            "target": self.target,
            "status": str(self.status),
            "reason": self.reason,
            "remediation": self.remediation,
            "expected": self.expected,
            "found": self.found,
            "origin": self.origin,
            "simulated": self.simulated,
            "simulated_why": self.simulated_why,
            "category": self.category,
            "evidence": self.evidence,
        }


class Registry:
    """A check catalogue. Ids are stable and unique; ``layer`` is the id's prefix.

    Each layer module owns one ``Registry`` filled at import time; ``kgc.catalogue``
    merges them. Nothing mutates a catalogue after import.
    """

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}

    def add(self, check: Check) -> Check:
        if check.id in self._checks:
            raise ValueError(f"duplicate check id {check.id!r}")
        if not check.id.startswith(check.layer + "."):
            raise ValueError(f"check id {check.id!r} must start with its layer {check.layer!r}")
        self._checks[check.id] = check
        return check

    def check(
        self,
        id: str,
        *,
        title: str,
        remediation: str,
        severity: Severity = Severity.CRITICAL,
    ) -> Callable[[Evaluator], Check]:
        """Decorator: register a pure evaluator as a check."""

        def deco(fn: Evaluator) -> Check:
            layer = id.split(".", 1)[0]
            return self.add(
                Check(
                    id=id,
                    layer=layer,
                    title=title,
                    severity=severity,
                    remediation=remediation,
                    evaluate=fn,
                    doc=(fn.__doc__ or "").strip(),
                )
            )

        return deco

    def get(self, id: str) -> Check:
        try:
            return self._checks[id]
        except KeyError:
            raise KeyError(f"unknown check id {id!r}") from None

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(sorted(self._checks.values(), key=lambda c: c.id))

    def __len__(self) -> int:
        return len(self._checks)

    def layer(self, layer: str) -> list[Check]:
        return [c for c in self if c.layer == layer]

    def merge(self, *others: Registry) -> Registry:
        out = Registry()
        for reg in (self, *others):
            for c in reg:
                out.add(c)
        return out


_WORST = {Status.FAIL: 0, Status.ERROR: 1, Status.WARN: 2, Status.PASS: 3, Status.SKIP: 4}


def aggregate(results: list[tuple[str, Outcome]], noun: str = "pod") -> Outcome:
    """One check judged per subject (a pod, a shape) -> one outcome for the cluster.

    The worst status wins (fail, error, warn, pass, skip): a single failing pod fails the
    check. The reason names every subject that decided the status; every subject's own
    outcome is kept in the evidence. No subject at all is a skip, never a pass."""
    if not results:
        return skipped(f"no {noun} to judge")
    worst = min((o.status for _, o in results), key=_WORST.__getitem__)
    deciding = [(s, o) for s, o in results if o.status is worst]
    others = [(s, o) for s, o in results if o.status is not worst]
    if len(results) == 1:
        s, o = results[0]
        reason = f"{s}: {o.reason}"
    else:
        reason = f"{len(deciding)} of {len(results)} {noun}s {worst}: " + "; ".join(
            f"{s}: {o.reason}" for s, o in deciding)
        if others and worst is not Status.SKIP:
            counts = Counter(str(o.status) for _, o in others)
            reason += " (" + ", ".join(f"{n} {st}" for st, n in sorted(counts.items())) + ")"
    remedies = list(dict.fromkeys(o.remediation for _, o in deciding if o.remediation))
    evidence = {f"{noun}s": {s: {"status": str(o.status), "reason": o.reason,
                                 "expected": o.expected, "found": o.found,
                                 "evidence": dict(o.evidence)} for s, o in results}}
    one = deciding[0][1] if len(deciding) == 1 else None
    return Outcome(worst, reason, evidence, "\n".join(remedies) if remedies else None,
                   one.expected if one else None, one.found if one else None)
