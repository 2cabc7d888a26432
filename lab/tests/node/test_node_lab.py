"""Node-image lab self-tests: boot real QEMU nodes, run every scenario, assert its documented
verdicts, that the host layers wrote nothing, that the reboot really happened, that the
scenario's evidence bundle replays to the identical verdicts, and that a node that never
returns yields an ``error`` verdict with the timeout and the console log.

Costs: 6 VM boots (scenarios sharing the ``base`` image share one VM, the binding: dra ones
another; each scenario's own reboot separates them) run ``KGC_LAB_PARALLEL`` (default 2) at
a time. The VMs are booted through conftest.node_lab, shared with test_node_dra.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from kgc.core.engine import Context
from kgc.core.model import Status
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc_lab.node.lab import NodeVM
from kgc_lab.node.runner import ScenarioResult, digest, lab_profile, replay
from kgc_lab.node.scenarios import SCENARIO_SPECS, Scenario

pytestmark = [pytest.mark.lab, pytest.mark.slow]

HUNG: dict[str, Any] = {}


class FreezingTarget(NodeTarget):
    """A live SSH target whose node freezes (QEMU `stop`) right after it accepts the
    reboot: the node never comes back, as a hung firmware or kernel would."""

    vm: NodeVM | None = None

    def run(self, script: str, limit_s: int | None = None) -> tuple[int, str, str]:
        res = super().run(script, limit_s)
        if "kgc-reboot-scheduled" in res[1] and self.vm is not None:
            self.vm.monitor("stop")
        return res


def _hang_test(vm: NodeVM, group: list[Scenario]) -> None:
    if group[0].name != "good":
        return
    t = FreezingTarget(vm.spec, ssh_config=str(vm.ssh_config), timeout_s=10)
    t.vm = vm
    ctx = Context(target=t, profile=lab_profile(), layers=load_layers(),
                  options={"allow_reboot": True, "reboot_timeout_s": 20,
                           "console_log": str(vm.console_log)})
    HUNG["verdicts"] = ctx.judge_all(["reboot"])


@pytest.fixture(scope="session")
def lab_results(node_lab: Any) -> dict[str, ScenarioResult]:
    """Every scenario (conftest.node_lab: those another test file ran already are reused)."""
    return node_lab.get(list(SCENARIO_SPECS), after=_hang_test)


@pytest.mark.parametrize("name", list(SCENARIO_SPECS))
def test_scenario_yields_its_documented_verdicts(lab_results: dict[str, ScenarioResult],
                                                 name: str) -> None:
    res = lab_results[name]
    got = {v["check"]: (v["status"], v["reason"]) for v in res.verdicts}
    assert res.mismatches == {}, "\n".join(
        f"{c}: {m}; reason: {got.get(c, ('', ''))[1]}" for c, m in res.mismatches.items())
    assert res.verdict_path.exists()


@pytest.mark.parametrize("name", list(SCENARIO_SPECS))
def test_host_layers_write_nothing_on_the_node(lab_results: dict[str, ScenarioResult],
                                               name: str) -> None:
    res = lab_results[name]
    assert res.no_writes, res.writes_diff
    assert res.round_trips <= 3, f"{res.round_trips} round trips for one host run"


@pytest.mark.parametrize("name", list(SCENARIO_SPECS))
def test_bundle_replays_to_identical_verdicts(lab_results: dict[str, ScenarioResult],
                                              name: str) -> None:
    res = lab_results[name]
    assert digest(replay(res.bundle_path)) == digest(res.verdicts)


def test_reboot_really_changed_the_boot_id(lab_results: dict[str, ScenarioResult]) -> None:
    for name, res in lab_results.items():
        v = next(x for x in res.verdicts if x["check"] == "reboot.returned")
        assert v["status"] == "pass", (name, v["reason"])
        assert v["evidence"]["boot_id_before"] != v["evidence"]["boot_id_after"]


def test_group_not_viable_names_the_peer(lab_results: dict[str, ScenarioResult]) -> None:
    v = next(x for x in lab_results["group-not-viable"].verdicts
             if x["check"] == "vfio.group-viable")
    assert "0000:01:02.0" in v["reason"] and "e1000" in v["reason"]


def test_runtime_bind_only_reboot_proves_the_binding_lost(
        lab_results: dict[str, ScenarioResult]) -> None:
    v = next(x for x in lab_results["runtime-bind-only"].verdicts
             if x["check"] == "reboot.binding-persists")
    assert "vfio-pci -> e1000" in v["reason"]


def test_amd_scenario_carries_amd_evidence(lab_results: dict[str, ScenarioResult]) -> None:
    res = lab_results["amd-iommu"]
    dn = next(x for x in res.verdicts if x["check"] == "vfio.device-node")
    assert any(u.startswith("ivhd") for u in dn["evidence"]["iommu_units"]), dn["evidence"]


def test_a_node_that_never_returns_is_an_error_with_timeout_and_console(
        lab_results: dict[str, ScenarioResult]) -> None:
    assert "verdicts" in HUNG, "the hang test did not run on the good scenario's VM"
    ret = next(v for v in HUNG["verdicts"] if v.check == "reboot.returned")
    assert ret.status is Status.ERROR
    assert "within 20 s" in ret.reason
    assert ret.evidence["console_log_tail"] and "kgc-node" in ret.evidence["console_log_tail"]
