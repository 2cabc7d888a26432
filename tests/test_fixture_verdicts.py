"""Every verdict on every fixture bundle stays what was recorded (tests/fixture_verdicts.py,
tests/data/fixture_verdicts.json): the guard that a redesign changes no behaviour users see.
An intended change regenerates the record and its diff is reviewed."""

from __future__ import annotations

import json

import pytest

from fixture_verdicts import RECORD, bundles, judge, key

DOC = json.loads(RECORD.read_text())


def test_every_fixture_bundle_is_recorded() -> None:
    """A bundle added to fixtures/ without a record (or a record whose bundle is gone) fails:
    the set of judged bundles is part of the promise."""
    assert DOC["format"] == "kgc-fixture-verdicts/1"
    assert sorted(DOC["bundles"]) == sorted(key(b) for b in bundles())
    assert all(v["verdicts"] for v in DOC["bundles"].values()), "a bundle judged to nothing"


@pytest.mark.parametrize("bundle", bundles(), ids=key)
def test_bundle_gives_the_recorded_verdicts(bundle) -> None:  # type: ignore[no-untyped-def]
    want = DOC["bundles"][key(bundle)]["verdicts"]
    got = judge(bundle)
    assert [(r["check"], r["target"]) for r in got] == [(r["check"], r["target"]) for r in want]
    for g, w in zip(got, want, strict=True):
        assert g == w, f"{g['check']} on {g['target']} changed"
