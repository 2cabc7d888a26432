"""Every keda check says exactly the recorded thing on every hand-made vector
(tests/keda/keda_verdicts.py, tests/data/keda_verdicts.json): status, reason, remediation,
expected/found and the evidence it keeps. A change to any verdict text or branch fails here
and must be reviewed (regenerate with `.venv/bin/python tests/keda/keda_verdicts.py`)."""

from __future__ import annotations

import json

import pytest
from keda_verdicts import CORPUS, verdicts
from kedavectors import VECTORS

from kgc.layers.keda.checks import CHECKS

DOC = json.loads(CORPUS.read_text())


def test_the_corpus_covers_every_vector_and_check() -> None:
    assert DOC["format"] == "kgc-keda-verdicts/1"
    assert sorted(DOC["vectors"]) == sorted(v.name for v in VECTORS)
    seen: dict[str, set[str]] = {}
    for x in DOC["vectors"].values():
        for cid, row in x["verdicts"].items():
            seen.setdefault(cid, set()).add(row["status"])
    assert sorted(seen) == sorted(c.id for c in CHECKS)
    # each check passes somewhere and gives a non-pass somewhere: no branch family unpinned
    assert {c: s for c, s in seen.items() if "pass" not in s or s == {"pass"}} == {}


@pytest.mark.parametrize("v", VECTORS, ids=[v.name for v in VECTORS])
def test_vector_gives_the_recorded_verdicts(v) -> None:  # type: ignore[no-untyped-def]
    want = DOC["vectors"][v.name]
    got = verdicts(v)
    for cid, row in want["verdicts"].items():
        assert got[cid] == row, f"{v.name} {cid}"
    assert {c: got[c]["status"] for c in want["expect"]} == want["expect"]
