"""The HTML report, headed by the release gate: what `kgc report`, `kgc certify --html` and the
labs build.

The report's first screen says what `kgc gate` says on the run's verdict — the gate is run
here, on the same verdict, with the same profile choice (``--profile``, else the profile the
verdict was judged with: :func:`kgc.gate.gate.gate_profile`) — and Allure's own status badge
(the exit code of ``allure run``, decided by the quality gate) carries that decision as a
rule (:data:`kgc.gate.allure.KGC_GATE_RULE`). Core renders the page
(:func:`kgc.core.report.generate_html`) and decides no word itself: it sits below the gate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kgc.core import report
from kgc.core.profile import ProfileError, load_profile
from kgc.core.report import profile_digest
from kgc.gate.allure import KGC_GATE_RULE, quality_gate_config
from kgc.gate.gate import (
    VerdictError,
    evaluate,
    gate_profile,
    headline,
    layer_catalogue,
    load_verdict,
)


def gated(verdict: Path, profile: str | None = None) -> tuple[dict[str, Any], Any] | None:
    """`kgc gate`'s headline on ``verdict`` and the profile that gated it; None without a
    verdict file. A verdict the gate cannot judge (no profile to gate it with, a file it
    refuses) heads the report NOT CERTIFIED with the gate's own one line as the reason.
    A bad ``profile`` (given explicitly) raises :class:`ProfileError`."""
    if not verdict.is_file():
        return None
    try:
        doc = load_verdict(verdict)
        prof = gate_profile(doc, profile)
    except VerdictError as exc:
        return ({"word": "NOT CERTIFIED", "reason": f"not gated: {exc}", "profile": "",
                 "blocking": []}, None)
    except ProfileError:
        if profile:
            raise
        return ({"word": "NOT CERTIFIED", "reason": "not gated: the verdict's profile "
                 f"{doc.profile!r} does not load here (kgc report --profile NAME|PATH)",
                 "profile": doc.profile, "blocking": []}, None)
    scopes, checks = layer_catalogue()
    res = evaluate(doc, prof.policy, prof.name, scopes, checks, digest=profile_digest(prof))
    return headline(res, doc, scopes), prof


def build(results: Path, out: Path, verdict: Path | None = None, *,
          profile: str | None = None, history: Path | None = None) -> Path:
    """Build the HTML report of ``results`` (allure-results) into ``out``; ``verdict``
    (default: verdict.json beside the results) heads it with the gate's word. Raises
    :class:`kgc.core.report.ReportError` (one line) when it cannot be built."""
    vpath = verdict if verdict is not None else results.parent / "verdict.json"
    if verdict is not None and not vpath.is_file():
        raise report.ReportError(f"{vpath}: no such verdict file")
    got = gated(vpath, profile)
    head, prof = got if got is not None else (None, None)
    qg: dict[str, Any] | None = None
    if prof is not None and head is not None:
        qg = quality_gate_config(prof.policy, gate=head)
    elif head is not None:  # not gated: the badge says failed like the headline
        qg = {"rules": [{"id": "kgc-gate", "kgcGate": {"green": False, "word": head["word"],
                                                        "reason": head["reason"]}}],
              "use": [KGC_GATE_RULE]}
    elif profile:  # results without a verdict: the policy's rules alone
        qg = quality_gate_config(load_profile(profile).policy)
    return report.generate_html(results, out, verdict, history=history, quality_gate=qg,
                                head=head)
