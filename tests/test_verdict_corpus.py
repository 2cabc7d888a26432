"""Every check says exactly the recorded thing on every scenario of the verdict corpus
(tests/verdict_corpus.py, tests/data/verdict_corpus.json): status, reason, remediation,
expected/found and the evidence it shows. A change to any verdict text or branch fails here
and must be reviewed (regenerate with `.venv/bin/python tests/verdict_corpus.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verdict_corpus import CORPUS, profile_for

DOC = json.loads(Path(CORPUS).read_text())
SCENARIOS = DOC["scenarios"]


def test_corpus_format() -> None:
    assert DOC["format"] == "kgc-verdict-corpus/1"
    assert len({s["name"] for s in SCENARIOS}) == len(SCENARIOS)


@pytest.mark.parametrize("sc", SCENARIOS, ids=[s["name"] for s in SCENARIOS])
def test_scenario_gives_the_recorded_verdicts(sc) -> None:  # type: ignore[no-untyped-def]
    from verdict_corpus import judge

    prof = profile_for(sc["profile"], sc["patch"])
    evidence = json.loads(sc["evidence"])
    for layer, want in sc["verdicts"].items():
        got = judge(layer, evidence, prof)
        for w, g in zip(want, got, strict=True):
            assert g == w, f"{sc['name']} {w['check']}"
    statuses = {v["check"]: v["status"] for rows in sc["verdicts"].values() for v in rows}
    assert {c: statuses.get(c) for c in sc["expect"]} == sc["expect"]


def test_every_check_of_the_host_runtime_nri_and_reboot_layers_is_covered() -> None:
    """Each check gives every status it can give somewhere in the corpus (pass and a
    non-pass at least), so no branch family is unpinned."""
    seen: dict[str, set[str]] = {}
    for sc in SCENARIOS:
        for rows in sc["verdicts"].values():
            for v in rows:
                seen.setdefault(v["check"], set()).add(v["status"])
    missing = {c: s for c, s in seen.items() if "pass" not in s or s == {"pass"}}
    assert missing == {}, missing
