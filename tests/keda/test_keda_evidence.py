"""Evidence model: JSON round trip, and malformed input is always an EvidenceError that
names the field -- never a TypeError/KeyError/AttributeError."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kedasynth import pod, synth, uniform

from kgc.core.model import EvidenceError
from kgc.layers.keda.checks import CHECKS
from kgc.layers.keda.evidence import KedaEvidence, ScalingConfig

GOOD = synth({"kata": [[pod(), pod(stall=True, sandbox=None, start=None, ready=None)]],
              "baseline": uniform(1, 2)})


def test_round_trip_through_json_is_identical():
    d = json.loads(json.dumps(GOOD.to_dict()))
    back = KedaEvidence.from_dict(d)
    assert back == GOOD
    assert back.to_dict() == GOOD.to_dict()


def test_round_trip_gives_identical_verdicts():
    back = KedaEvidence.from_dict(json.loads(json.dumps(GOOD.to_dict())))
    for c in CHECKS:
        assert c.judge(back, None, "cluster") == c.judge(GOOD, None, "cluster"), c.id


def test_hpa_behavior_survives_the_round_trip():
    cfg = ScalingConfig(hpa_behavior={"scaleUp": {"stabilizationWindowSeconds": 0,
                                                  "policies": [{"type": "Pods", "value": 4,
                                                                "periodSeconds": 15}]}})
    assert ScalingConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def _at(d: Any, path: list[Any]) -> Any:
    for p in path:
        d = d[p]
    return d


@pytest.mark.parametrize("path,value,message", [
    (["status"], "finished", "status: 'finished' is not one of done"),
    (["kata", "repetitions", 0, "pods", 1, "observed", "created", "mono"], "x",
     "kata.repetitions[0].pods[1].observed.created.mono: expected a number, got 'x'"),
    (["kata", "repetitions", 0, "pods", 0, "observed", "ready", "wall"], None,
     "kata.repetitions[0].pods[0].observed.ready.wall: expected a number, got None"),
    (["kata", "repetitions", 0, "pods", 0, "observed", "ready", "mono"], float("nan"),
     "kata.repetitions[0].pods[0].observed.ready.mono: expected a finite number"),
    (["kata", "repetitions", 0, "target_replicas"], 0,
     "kata.repetitions[0].target_replicas: must be >= 1"),
    (["kata", "repetitions", 0, "target_replicas"], True,
     "kata.repetitions[0].target_replicas: expected an integer"),
    (["kata", "repetitions", 0, "scale", 0, "source"], "keda",
     "kata.repetitions[0].scale[0].source: 'keda' is not one of deployment"),
    (["kata", "repetitions", 0, "scale", 0, "replicas"], -1,
     "kata.repetitions[0].scale[0].replicas: negative"),
    (["kata", "repetitions", 0, "stalls", 0, "phase"], "boot",
     "kata.repetitions[0].stalls[0].phase: 'boot' is not one of trigger"),
    (["kata", "repetitions"], {"a": 1}, "kata.repetitions: expected a list, got dict"),
    (["kata", "role"], "baseline", "kata.role: 'baseline' recorded under 'kata'"),
    (["kata", "config", "polling_interval_s"], "30s",
     "kata.config.polling_interval_s: expected a number, got '30s'"),
    (["kata", "config", "hpa_behavior"], [1], "kata.config.hpa_behavior: expected an object"),
    (["baseline"], "runc", "baseline: expected an object, got str"),
    (["clock", "uncertainty_s"], -0.1, "clock.uncertainty_s: negative"),
    (["preflight", "missing"], "CRD", "preflight.missing: expected a list, got str"),
    (["preflight", "keda_installed"], "yes", "preflight.keda_installed: expected true/false"),
])
def test_malformed_field_is_an_evidence_error_naming_it(path, value, message):
    d = copy.deepcopy(GOOD.to_dict())
    _at(d, path[:-1])[path[-1]] = value
    with pytest.raises(EvidenceError) as exc:
        KedaEvidence.from_dict(d)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("path,message", [
    (["status"], "status: missing"),
    (["kata", "repetitions", 0, "trigger"], "kata.repetitions[0].trigger: missing"),
    (["kata", "repetitions", 0, "pods", 0, "name"], "kata.repetitions[0].pods[0].name: missing"),
    (["kata", "role"], "kata.role: missing"),
    (["clock", "offset_s"], "clock.offset_s: missing"),
])
def test_missing_required_key_is_named(path, message):
    d = copy.deepcopy(GOOD.to_dict())
    del _at(d, path[:-1])[path[-1]]
    with pytest.raises(EvidenceError, match=message.replace("[", r"\[").replace("]", r"\]")):
        KedaEvidence.from_dict(d)


def test_unknown_milestone_is_refused():
    d = copy.deepcopy(GOOD.to_dict())
    d["kata"]["repetitions"][0]["pods"][0]["observed"]["booted"] = {"mono": 1, "wall": 2}
    with pytest.raises(EvidenceError, match=r"observed\['booted'\]: 'booted' is not one of"):
        KedaEvidence.from_dict(d)


def test_top_level_not_an_object():
    for bad in (None, [], "x", 3):
        with pytest.raises(EvidenceError, match="keda: expected an object"):
            KedaEvidence.from_dict(bad)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(json_values)
def test_any_json_is_parsed_or_refused_with_evidence_error(value):
    try:
        KedaEvidence.from_dict(value)
    except EvidenceError:
        pass


def _paths(d: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += _paths(v, prefix + (i,))
    return out


PATHS = _paths(GOOD.to_dict())


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(PATHS), json_values, st.booleans())
def test_a_mutated_record_is_parsed_or_refused_never_a_crash(path, value, delete):
    d = copy.deepcopy(GOOD.to_dict())
    parent = _at(d, list(path[:-1]))
    if delete and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    try:
        ev = KedaEvidence.from_dict(d)
    except EvidenceError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    # whatever parsed is judged without crashing the evaluators
    for c in CHECKS:
        v = c.judge(ev, None, "cluster")
        assert "evaluator crashed" not in v.reason, (c.id, v.reason)


def test_non_finite_numbers_in_the_raw_hpa_behavior_are_refused():
    d = copy.deepcopy(GOOD.to_dict())
    d["kata"]["config"]["hpa_behavior"] = {"scaleUp": {"x": math.inf}}
    with pytest.raises(EvidenceError, match="hpa_behavior.scaleUp.x: expected a finite"):
        KedaEvidence.from_dict(d)
