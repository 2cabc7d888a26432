"""Node-image lab self-tests: boot real QEMU nodes, run every scenario, assert its documented
verdicts, that the host layers wrote nothing, that the reboot really happened, that the
scenario's evidence bundle replays to the identical verdicts, and that a node that never
returns yields an ``error`` verdict with the timeout and the console log.

Costs: 6 VM boots (scenarios sharing the ``base`` image share one VM, the binding: dra ones
another) and 4 real reboots, one per binding mechanism (``Scenario.reboot``; modprobe.d
ids, ``good``, is rebooted by test_node_certify.py; the other scenarios' recorded reboots are
judged offline), ``KGC_LAB_PARALLEL`` (default 2) VMs at a
time. The VMs are booted through conftest.node_lab, shared with test_node_dra.py and
test_node_no_writes.py (which run on the good scenario's VM).
"""

from __future__ import annotations

from typing import Any

import pytest

from kgc.core.model import Status
from kgc_lab.node.runner import ScenarioResult, digest, replay
from kgc_lab.node.scenarios import SCENARIO_SPECS

from .conftest import reboot_verdicts, rebooted

pytestmark = [pytest.mark.lab, pytest.mark.slow]

@pytest.fixture(scope="session")
def lab_results(node_lab: Any) -> dict[str, ScenarioResult]:
    """Every scenario (conftest.node_lab: run once per session, shared with other files)."""
    return node_lab.get(list(SCENARIO_SPECS))


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
    """Live for the scenarios the lab tier reboots (one per binding mechanism); the others'
    recorded real reboots (fixtures/bundles) are judged offline to the documented reboot.*
    verdicts, and each of those records changed the boot id too."""
    live = sorted(n for n, r in lab_results.items() if rebooted(r))
    assert live == sorted(n for n, s in SCENARIO_SPECS.items() if s.reboot)
    # modprobe.d ids (``good``): rebooted live by test_node_certify.py on the same image
    assert {"amd-iommu", "driverctl", "runtime-bind-only", "dra-rebindable"} <= set(live)
    for name, res in lab_results.items():
        reboot = {v["check"]: v for v in reboot_verdicts(res)}
        v = reboot["reboot.returned"]
        assert v["status"] == "pass", (name, v["reason"])
        assert v["evidence"]["boot_id_before"] != v["evidence"]["boot_id_after"], name
        expected = {c: s for c, s in SCENARIO_SPECS[name].expect.items()
                    if c.startswith("reboot.")}
        assert {c: reboot[c]["status"] for c in expected} == expected, name
        if not rebooted(res):  # not judged live: the live run holds no reboot verdict
            assert not [x for x in res.verdicts if x["check"].startswith("reboot.")], name


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


def test_a_node_that_never_returns_is_an_error_with_timeout_and_console(node_lab: Any) -> None:
    ret = next(v for v in node_lab.hook("hang") if v.check == "reboot.returned")
    assert ret.status is Status.ERROR
    assert "within 20 s" in ret.reason
    assert ret.evidence["console_log_tail"] and "kgc-node" in ret.evidence["console_log_tail"]
