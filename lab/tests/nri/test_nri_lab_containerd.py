"""Every containerd lab scenario yields its documented verdicts against REAL containerd
1.7 (Debian trixie) and 2.x (Debian sid), unpacked by scripts/bootstrap.d/20-containerd.sh."""

from __future__ import annotations

import pytest

from kgc_lab.containerd import SCENARIOS
from kgc_lab.containerd_instance import LabUnavailable

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_yields_its_documented_verdicts(name):
    try:
        res = SCENARIOS[name].run()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc} (bootstrap installs it; it needs root)")
    assert res.matches(), res.render() + "\n--- containerd log tail ---\n" + res.log_tail[-3000:]


def test_scenarios_cover_the_issue():
    assert set(SCENARIOS) == {
        "nri-on",
        "nri-default-1.7",
        "seed-config",
        "seed-cri-key-only",
        "containerd2-default",
        "connections-disabled",
        "kata-handler-missing",
        "kata-handler-ok",
        "kata-only-1.7",  # issue 18.1: the CRI plugin refuses the config
    }
    assert {s.flavour for s in SCENARIOS.values()} == {"1.7", "2"}
