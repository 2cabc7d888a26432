"""The node layers under ``platform.gpu.binding: dra`` on the node lab's real kernels (issue
20): the dra-* scenarios (lab/kgc_lab/node/scenarios.py, profile lab/kgc_lab/node/lab-dra.yaml)
boot one real QEMU node, and each is judged; dra-rebindable is rebooted for real and judged
again (the dra mechanism's live reboot), the other two's real reboots were recorded
(fixtures/bundles) and are judged offline here as in tests/node/test_bundles.py:

* dra-rebindable: gpu0 (the e1000 stand-in GPU) on its host driver, its group peer on
  vfio-pci (driverctl), nothing holding it or pre-binding it: the dra rules pass.
* dra-held: a process named nvidia-persistenced (a stand-in, see scenarios.DRA_HOLDER_UNIT)
  holds /dev/nvidia0 from an enabled unit: both rebindable checks fail naming it.
* dra-prebound: a modprobe.d ids= pre-binding left from binding: boot: coverage warns now,
  and the real reboot brings gpu0 back on vfio-pci.

Shares conftest.node_lab with test_node_lab.py (one boot for the three between them).
Costs: 1 VM boot + 1 real reboot (TCG); KGC_LAB_REBOOT_ALL=1 reboots all three."""

from __future__ import annotations

from typing import Any

import pytest

from kgc_lab.node.runner import ScenarioResult, digest, replay
from kgc_lab.node.scenarios import DRA_PROFILE, SCENARIO_SPECS

from .conftest import reboot_verdicts

pytestmark = [pytest.mark.lab, pytest.mark.slow]

DRA = [n for n, s in SCENARIO_SPECS.items() if s.profile == DRA_PROFILE]
GPU0, PEER = "0000:01:01.0", "0000:01:02.0"


@pytest.fixture(scope="module")
def dra(node_lab: Any) -> dict[str, ScenarioResult]:
    return node_lab.get(DRA)


def verdict(res: ScenarioResult, check: str) -> dict[str, Any]:
    """The scenario's verdict of ``check``; a reboot.* one live when the lab tier rebooted the
    scenario, else from its recorded real reboot (conftest.reboot_verdicts)."""
    pool = reboot_verdicts(res) if check.startswith("reboot.") else res.verdicts
    return next(v for v in pool if v["check"] == check)


def test_the_dra_scenarios_are_registered() -> None:
    assert DRA == ["dra-rebindable", "dra-held", "dra-prebound"]


@pytest.mark.parametrize("name", DRA)
def test_dra_scenario_yields_its_documented_verdicts(dra: dict[str, ScenarioResult],
                                                     name: str) -> None:
    res = dra[name]
    got = {v["check"]: (v["status"], v["reason"]) for v in res.verdicts}
    assert res.mismatches == {}, "\n".join(
        f"{c}: {m}; reason: {got.get(c, ('', ''))[1]}" for c, m in res.mismatches.items())
    assert res.no_writes, res.writes_diff
    assert res.round_trips <= 3, f"{res.round_trips} round trips for one host run"
    assert digest(replay(res.bundle_path)) == digest(res.verdicts)
    ret = verdict(res, "reboot.returned")
    assert ret["evidence"]["boot_id_before"] != ret["evidence"]["boot_id_after"]


@pytest.mark.parametrize("name", DRA)
def test_dra_boot_rules_skip_naming_their_replacement(dra: dict[str, ScenarioResult],
                                                      name: str) -> None:
    for check, instead in (("vfio.driver", "vfio.rebindable"),
                           ("persistence.load-order", "persistence.coverage"),
                           ("reboot.binding-persists", "reboot.rebindable")):
        v = verdict(dra[name], check)
        assert v["status"] == "skip" and instead in v["reason"], (check, v["reason"])


def test_dra_rebindable_the_real_reboot_finds_gpu0_back_on_its_host_driver(
        dra: dict[str, ScenarioResult]) -> None:
    res = dra["dra-rebindable"]
    now = verdict(res, "vfio.rebindable")
    assert f"{GPU0} on e1000" in now["reason"] and now["evidence"]["holders_complete"]
    after = verdict(res, "reboot.rebindable")
    assert "after the reboot" in after["reason"], after["reason"]
    assert after["evidence"]["holders"] == []
    cov = verdict(res, "persistence.coverage")
    assert cov["evidence"]["prebound"] == {}


def test_dra_held_both_checks_name_the_holder_and_the_fix(
        dra: dict[str, ScenarioResult]) -> None:
    res = dra["dra-held"]
    after = verdict(res, "reboot.rebindable")
    pids = []
    for v in (verdict(res, "vfio.rebindable"), after):
        assert "(nvidia-persiste)" in v["reason"] and "/dev/nvidia" in v["reason"], v["reason"]
        assert "WaitForGPUFree" in v["reason"]
        assert "systemctl disable --now nvidia-persistenced" in v["remediation"]
        assert "dra-driver-nvidia-gpu#1037" in v["remediation"]
        held = [h for h in v["evidence"]["holders"] if "nvidia-persiste" in h]
        assert any("/dev/nvidia0" in h for h in held), v["evidence"]["holders"]
        pids.append(held[0].split()[1])
    # the unit is enabled: after the real reboot a new process holds the node again (the
    # reboot recorded in fixtures/bundles/dra-held.json, when the lab tier does not reboot it)
    assert pids[0] != pids[1], pids


def test_dra_prebound_coverage_warns_and_the_reboot_proves_it(
        dra: dict[str, ScenarioResult]) -> None:
    res = dra["dra-prebound"]
    cov = verdict(res, "persistence.coverage")
    assert "/etc/modprobe.d/kgc-vfio.conf" in cov["reason"] and "8086:100e" in cov["reason"]
    assert verdict(res, "vfio.rebindable")["status"] == "pass"  # still on e1000 before it
    # live when rebooted here, else the real reboot recorded in fixtures/bundles
    reboot = {v["check"]: v for v in reboot_verdicts(res)}
    after = reboot["reboot.rebindable"]
    assert "pre-bound by modprobe" in after["reason"], after["reason"]
    assert "/etc/modprobe.d/kgc-vfio.conf" in after["reason"]
    rb = reboot["reboot.returned"]["evidence"]
    assert rb["boot_id_before"] != rb["boot_id_after"]
