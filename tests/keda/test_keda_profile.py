"""KedaProfile: strict (unknown keys refused), frozen, defaults valid, waits consistent."""

from __future__ import annotations

import typing

import pytest
import yaml
from pydantic import ValidationError

from kgc.layers.keda.phases import MEASURES, PHASES
from kgc.layers.keda.profile import KedaBudgets, KedaProfile, Measure, Phase


def test_defaults_are_valid_and_documented_values():
    kp = KedaProfile()
    assert kp.runtime_class == "kata" and kp.baseline_runtime_class == "runc"
    assert kp.trigger == "metrics-api" and kp.gpu.per_pod == 0  # GPU requests off
    assert (kp.repetitions, kp.replicas, kp.polling_interval_s) == (5, 3, 30)
    assert kp.budgets.phase_p95_s == {"sandbox": 10.0}
    assert kp.budgets.ratio_stat == "p50" and kp.budgets.ratio_measure == "e2e"


def test_phase_names_in_the_schema_match_the_computation():
    assert typing.get_args(Phase) == PHASES
    assert typing.get_args(Measure) == MEASURES


def test_a_yaml_section_validates():
    raw = yaml.safe_load("""
runtime_class: kata-qemu-nvidia-gpu
baseline_runtime_class: null
repetitions: 10
replicas: 4
polling_interval_s: 5
cooldown_period_s: 15
gpu: {per_pod: 1, resource: nvidia.com/pgpu}
budgets:
  e2e_p95_s: 20
  phase_p95_s: {sandbox: 5, scheduling: 1}
  ratio_max: 2
  phase_ratio_max: {startup: 4}
timeouts: {activation_s: 60, ready_s: 240, scale_down_s: 120}
""")
    kp = KedaProfile.model_validate(raw)
    assert kp.baseline_runtime_class is None and kp.gpu.per_pod == 1
    assert kp.budgets.phase_p95_s == {"sandbox": 5.0, "scheduling": 1.0}


@pytest.mark.parametrize("raw,where", [
    ({"repetitons": 3}, "repetitons"),
    ({"budgets": {"e2e_p95": 3}}, "e2e_p95"),
    ({"budgets": {"phase_p95_s": {"boot": 3}}}, "boot"),
    ({"timeouts": {"ready": 3}}, "ready"),
    ({"gpu": {"count": 1}}, "count"),
])
def test_unknown_keys_are_refused_naming_the_field(raw, where):
    with pytest.raises(ValidationError) as exc:
        KedaProfile.model_validate(raw)
    assert where in str(exc.value)


@pytest.mark.parametrize("raw,msg", [
    ({"repetitions": 0}, "greater than or equal to 1"),
    ({"replicas": 0}, "greater than or equal to 1"),
    ({"trigger": "cron"}, "metrics-api"),
    ({"runtime_class": ""}, "must name the Kata RuntimeClass"),
    ({"budgets": {"e2e_p95_s": 0}}, "greater than 0"),
    ({"budgets": {"phase_p95_s": {"sandbox": -1}}}, "sandbox: a budget must be > 0"),
    ({"budgets": {"ratio_stat": "p99"}}, "p50"),
    ({"budgets": {"decision_dominance": 1.5}}, "less than or equal to 1"),
    ({"polling_interval_s": 30, "timeouts": {"activation_s": 30}},
     "timeouts.activation_s (30) must exceed polling_interval_s (30)"),
    ({"timeouts": {"activation_s": 100, "ready_s": 50}}, "must be at least"),
    ({"cooldown_period_s": 300, "timeouts": {"scale_down_s": 300}},
     "must exceed cooldown_period_s (300)"),
    ({"baseline_runtime_class": "kata"}, "nothing to compare"),
])
def test_bad_values_are_refused_with_a_clear_message(raw, msg):
    with pytest.raises(ValidationError) as exc:
        KedaProfile.model_validate(raw)
    assert msg in str(exc.value)


def test_same_class_is_fine_without_comparison():
    kp = KedaProfile(baseline_runtime_class="kata", compare_baseline=False)
    assert not kp.compare_baseline


def test_frozen():
    kp = KedaProfile()
    with pytest.raises(ValidationError):
        kp.repetitions = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        KedaBudgets().e2e_p95_s = 1  # type: ignore[misc]
