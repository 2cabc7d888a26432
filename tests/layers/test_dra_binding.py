"""``platform.gpu.binding: dra`` (issue 20): NVIDIA's DRA driver binds a GPU to vfio-pci only
when a claim is prepared, so the node rules "bound to vfio-pci at boot and after a reboot"
fail such a node by design and their fixes (vfio-pci ids at boot) fight the driver. Under
``dra`` those rules skip, naming the binding mode, and ``vfio.driver`` is an error saying the
binding is not judged — never a pass: rebindability is not judged by this release, so no
gate certifies a DRA node's host layers. Under ``boot`` nothing changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakehost import FakeHost, lab_devices

from kgc.core.model import Status
from kgc.core.profile import Profile, load_profile
from kgc.layers import persistence, reboot, vfio
from kgc.layers.common import BOOT_BINDING_RULES, DRA_UNJUDGED

LAB = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml")


def dra(profile: Profile) -> Profile:
    gpu = profile.platform.gpu.model_copy(update={"binding": "dra"})
    return profile.model_copy(update={"platform": profile.platform.model_copy(
        update={"gpu": gpu})})


@pytest.fixture(scope="module")
def host_on_its_driver(tmp_path_factory: Any) -> Any:
    """The targets on their host driver, nothing configured for vfio-pci: what a DRA node
    looks like between claims."""
    host = FakeHost(tmp_path_factory.mktemp("node"), lab_devices(accel0=None),
                    vfio_nodes=(), modules_loaded=("e1000",))
    return host.collect(persistence.QUERY | vfio.QUERY)


def test_every_boot_binding_rule_is_a_check_of_the_node_layers() -> None:
    ids = {c.id for layer in (vfio, persistence, reboot) for c in layer.LAYER.checks}
    assert BOOT_BINDING_RULES <= ids, BOOT_BINDING_RULES - ids


@pytest.mark.parametrize("layer", [vfio, persistence], ids=["vfio", "persistence"])
def test_under_dra_the_boot_rules_skip_naming_the_binding_and_never_pass(
        layer: Any, host_on_its_driver: Any) -> None:
    ev = layer.parse(host_on_its_driver)
    boot_failures = 0
    for check in layer.LAYER.checks:
        if check.id not in BOOT_BINDING_RULES:
            continue
        under_boot = check.judge(ev, LAB, "node")
        boot_failures += under_boot.status in (Status.FAIL, Status.WARN)
        v = check.judge(ev, dra(LAB), "node")
        # one blocker says "not judged" as an error (no gate certifies the node on the
        # checks that remain), the others skip naming it; none passes
        want = Status.ERROR if check.id == DRA_UNJUDGED else Status.SKIP
        assert v.status is want, (check.id, v.status, v.reason)
        assert "platform.gpu.binding: dra" in v.reason and "not judged" in v.reason
        assert "driverctl" not in v.reason and not v.evidence.get("fix")
    # the same node fails the boot rules: the skip is the binding mode's, not the node's
    assert boot_failures >= 1


def test_under_dra_the_checks_that_still_apply_are_judged(host_on_its_driver: Any) -> None:
    """Rules that are not about the boot binding (devices the host keeps) are still judged."""
    ev = vfio.parse(host_on_its_driver)
    kept = vfio.LAYER.checks.get("vfio.host-kept")
    assert kept.judge(ev, dra(LAB), "node").status == kept.judge(ev, LAB, "node").status
