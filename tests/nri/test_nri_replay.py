"""Evidence recorded from real containerd (`kgc lab containerd run --record fixtures/nri`)
replays offline to the scenario's documented verdicts: same evaluators, no containerd."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgc.core.bundle import load_bundle
from kgc.core.engine import Context
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers
from kgc_lab.containerd import SCENARIOS

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "nri"
RECORDED = sorted(p.name.removesuffix(".bundle.json") for p in FIX.glob("*.bundle.json"))


def test_fixtures_exist():
    want = {"seed-config", "seed-cri-key-only", "containerd2-default", "kata-handler-ok"}
    assert want <= set(RECORDED)


@pytest.mark.parametrize("name", RECORDED)
def test_recorded_lab_evidence_replays_to_the_documented_verdicts(name):
    sc = SCENARIOS[name]
    profile = load_profile(FIX / f"{name}.profile.yaml")
    layers = load_layers(("kgc.layers.runtime", "kgc.layers.nri"))
    ctx = Context(target=load_bundle(FIX / f"{name}.bundle.json", layers), profile=profile,
                  layers=layers)
    got = {v.check: v for v in ctx.judge_all(["runtime", "nri"])}
    for cid, want in sc.expected.items():
        assert got[cid].status == want, (cid, got[cid].reason)
    for cid, subs in sc.reasons.items():
        for s in subs:
            assert s in got[cid].reason, (cid, got[cid].reason)
