"""Layer 6. KEDA scale-up latency. A platform that scales GPU inference pods from zero with KEDA
must bring them up within its budget under Kata, and the owners must see where the time goes:
the run drives two identical scale-to-zero workloads (Kata and the baseline runtime) 0 -> K -> 0
with a trigger it controls and times every phase from watch events."""

import pytest

pytestmark = pytest.mark.layer("keda")


def test_keda_is_installed_and_the_runtime_classes_exist(certify):
    certify("keda.preflight")


def test_every_scale_up_reaches_its_ready_pods(certify):
    certify("keda.scale-up-completes")


def test_every_scale_down_returns_to_zero_pods(certify):
    certify("keda.scale-down-completes")


def test_kata_scale_up_p95_is_within_the_end_to_end_budget(certify):
    certify("keda.e2e-p95")


def test_every_budgeted_phase_is_within_its_p95_budget(certify):
    certify("keda.phase-budgets")


def test_kata_adds_no_more_than_the_allowed_ratio_over_the_baseline(certify):
    certify("keda.kata-overhead")


def test_scaling_configuration_is_reported_and_does_not_dominate(certify):
    certify("keda.scaling-config")


def test_watch_receipt_times_agree_with_the_api_timestamps(certify):
    certify("keda.watch-precision")


def test_the_baseline_runtime_starts_pods_within_its_own_budgets(certify):
    certify("keda.baseline-budgets")
