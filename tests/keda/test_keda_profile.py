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
    # the Kata class is the platform's (kgc.core.profile.PlatformProfile): kata-deploy's
    # NVIDIA GPU class by default; the baseline is the layer's own
    assert kp.runtime_class == "kata-qemu-nvidia-gpu" and kp.baseline_runtime_class == "runc"
    assert kp.trigger == "metrics-api" and kp.gpu.per_pod == 0  # GPU requests off
    assert (kp.repetitions, kp.replicas, kp.polling_interval_s) == (5, 3, 30)
    assert kp.budgets.phase_p95_s == {"sandbox": 10.0}
    assert kp.budgets.ratio_stat == "p50" and kp.budgets.ratio_measure == "e2e"


def test_phase_names_in_the_schema_match_the_computation():
    assert typing.get_args(Phase) == PHASES
    assert typing.get_args(Measure) == MEASURES


def test_a_yaml_section_validates():
    raw = yaml.safe_load("""
baseline_runtime_class: null
repetitions: 10
replicas: 4
polling_interval_s: 5
cooldown_period_s: 15
gpu: {per_pod: 1}
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
    ({"baseline_runtime_class": "kata-qemu-nvidia-gpu"}, "nothing to compare"),
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


def test_placement_per_class_validates_and_lands_in_the_manifests():
    from kgc.layers.keda.workloads import workload_manifest

    kp = KedaProfile.model_validate(yaml.safe_load("""
placement:
  baseline:
    node_selector: {kgc.io/real-node: "true"}
    tolerations: [{key: kgc.io/real-node, value: "true", effect: NoSchedule}]
  kata:
    node_selector: {node.kubernetes.io/instance-type: gpu-h200}
    tolerations: [{key: nvidia.com/gpu, operator: Exists},
                  {key: node.kubernetes.io/unreachable, operator: Exists,
                   effect: NoExecute, toleration_seconds: 30}]
budgets: {baseline_p95_s: {startup: 5, sandbox: 2}}
"""))
    base = workload_manifest("baseline", kp)["spec"]["template"]["spec"]
    kata = workload_manifest("kata", kp)["spec"]["template"]["spec"]
    assert base["nodeSelector"] == {"kgc.io/real-node": "true"}
    assert base["tolerations"] == [{"key": "kgc.io/real-node", "operator": "Equal",
                                    "value": "true", "effect": "NoSchedule"}]
    assert base["runtimeClassName"] == "runc"
    assert kata["runtimeClassName"] == "kata-qemu-nvidia-gpu"  # the platform's default
    assert kata["nodeSelector"] == {"node.kubernetes.io/instance-type": "gpu-h200"}
    assert kata["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists"},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
         "effect": "NoExecute", "tolerationSeconds": 30}]
    assert kp.budgets.baseline_p95_s == {"startup": 5.0, "sandbox": 2.0}
    # the default places nothing: wherever the scheduler puts the pods
    plain = workload_manifest("baseline", KedaProfile())["spec"]["template"]["spec"]
    assert "nodeSelector" not in plain and "tolerations" not in plain


@pytest.mark.parametrize("raw,msg", [
    ({"placement": {"baseline": {"node_selector": {"": "x"}}}}, "label key ''"),
    ({"placement": {"baseline": {"node_selector": {"a/b/c": "x"}}}}, "prefix must be a DNS"),
    ({"placement": {"kata": {"node_selector": {"pool": "-gpu"}}}}, "label value '-gpu'"),
    ({"placement": {"kata": {"node_selector": {"pool": "x" * 64}}}}, "at most 63"),
    ({"placement": {"kata": {"tolerations": [{"value": "x"}]}}},
     "without a key must use operator Exists"),
    ({"placement": {"kata": {"tolerations": [{"key": "k", "operator": "Exists",
                                              "value": "x"}]}}}, "takes no value"),
    ({"placement": {"kata": {"tolerations": [{"key": "k", "effect": "NoSchedule",
                                              "toleration_seconds": 5}]}}},
     "only read with effect NoExecute"),
    ({"placement": {"kata": {"tolerations": [{"key": "k", "effect": "Never"}]}}},
     "NoSchedule"),
    ({"placement": {"runc": {}}}, "runc"),
    ({"placement": {"baseline": {"nodeSelector": {}}}}, "nodeSelector"),
    ({"budgets": {"baseline_p95_s": {"boot": 1}}}, "boot"),
    ({"budgets": {"baseline_p95_s": {"startup": 0}}}, "startup: a budget must be > 0"),
    ({"compare_baseline": False, "placement": {"baseline": {"node_selector": {"a": "b"}}}},
     "only read with compare_baseline: true"),
    ({"compare_baseline": False, "budgets": {"baseline_p95_s": {"startup": 5}}},
     "only read with compare_baseline: true"),
])
def test_bad_placement_and_baseline_budgets_are_refused(raw, msg):
    with pytest.raises(ValidationError) as exc:
        KedaProfile.model_validate(raw)
    assert msg in str(exc.value)


def test_the_lab_profile_keeps_the_baseline_unplaced_and_its_image_runs_on_the_real_node():
    """profiles/lab.yaml serves the kwok-only lab too: no placement there (the real-node
    self-test adds it); the workload image is the one the real node has imported."""
    from kgc.core.profile import load_profile
    from kgc_lab.images import PAUSE_IMAGE

    kp = load_profile("lab").cluster.keda
    assert kp.placement.baseline.node_selector == {}
    assert kp.image == PAUSE_IMAGE
