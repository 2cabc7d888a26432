"""``platform.gpu.binding: dra`` (issue 20) on the node layers: NVIDIA's DRA driver binds a GPU
to vfio-pci only when a claim is prepared, so the boot rules ("bound to vfio-pci at boot and
after a reboot") skip, each naming the check that judges the node instead: vfio.rebindable
(host driver or vfio-pci, whole group viable, nothing holding the GPU's node),
persistence.coverage (turned round: a boot-time vfio-pci binding is the finding) and
reboot.rebindable (the node comes back rebindable, not pre-bound). Every node layer keeps a
judged check, so no gate certifies a DRA node on skips; under ``boot`` nothing changes and
the DRA-only rules skip. The trees are read through the real collector (FakeHost)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fakehost import FakeHost, lab_devices

from kgc.core.model import Status
from kgc.core.profile import DeviceSelector, Profile, load_profile
from kgc.layers import persistence, reboot, vfio
from kgc.layers.common import BOOT_BINDING_RULES, DRA_REPLACEMENT, DRA_RULES

LAB = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml")
IDS = "/etc/modprobe.d/kgc-vfio.conf"


def dra(profile: Profile, host_driver: str = "e1000") -> Profile:
    """The lab profile under binding: dra; the lab's stand-in GPU sits on e1000, and its
    second function (01:02.0, the "audio function") is its group peer, not a target."""
    gpu = profile.platform.gpu.model_copy(update={"binding": "dra", "host_driver": host_driver})
    pt = profile.host.passthrough
    targets = (pt.targets[0], DeviceSelector(address="0000:01:01.0", name="gpu0"))
    return profile.model_copy(update={
        "platform": profile.platform.model_copy(update={"gpu": gpu}),
        "host": profile.host.model_copy(update={"passthrough": pt.model_copy(
            update={"targets": targets})})})


def between_claims(root: Path, **kw: Any) -> FakeHost:
    """The lab node as a DRA node between claims: accel0 on vfio-pci (a prepared claim),
    gpu0 on its host driver, its second function without a driver (what the driver's unbind
    leaves), nothing configured for vfio-pci, one idle process."""
    devs = lab_devices(accel0="vfio-pci", gpu0="e1000", gpu0_fn1=None)
    args: dict[str, Any] = {"vfio_nodes": ("2",), "modules_loaded": ("e1000", "vfio_pci"),
                            "procs": {1: ("systemd", {0: "/dev/null"})}}
    args.update(kw)
    return FakeHost(root, devs, **args)


def judge(host: FakeHost, layer: Any, profile: Profile) -> dict[str, Any]:
    ev = layer.parse(host.collect(persistence.QUERY | vfio.QUERY))
    return {c.id: c.judge(ev, profile, "node") for c in layer.LAYER.checks}


def test_every_boot_binding_rule_names_a_judged_replacement() -> None:
    ids = {c.id for layer in (vfio, persistence, reboot) for c in layer.LAYER.checks}
    assert BOOT_BINDING_RULES <= ids, BOOT_BINDING_RULES - ids
    assert set(DRA_REPLACEMENT.values()) <= ids and set(DRA_RULES) <= ids
    # a replacement is never itself skipped under dra
    assert not set(DRA_REPLACEMENT.values()) & BOOT_BINDING_RULES


@pytest.mark.parametrize("layer", [vfio, persistence], ids=["vfio", "persistence"])
def test_under_dra_the_boot_rules_skip_naming_their_replacement(layer: Any,
                                                                tmp_path: Path) -> None:
    h = between_claims(tmp_path)
    boot = judge(h, layer, LAB)
    under = judge(h, layer, dra(LAB))
    for cid, v in under.items():
        if cid not in BOOT_BINDING_RULES:
            continue
        assert v.status is Status.SKIP, (cid, v.status, v.reason)
        assert "platform.gpu.binding: dra" in v.reason
        assert f"{DRA_REPLACEMENT[cid]} judges the node instead" in v.reason
        assert "driverctl" not in v.reason and not v.evidence.get("fix")
    # the same node fails the boot rules: the skip is the binding mode's, not the node's
    assert any(boot[c].status in (Status.FAIL, Status.WARN) for c in boot
               if c in BOOT_BINDING_RULES | set(DRA_REPLACEMENT.values()))


def test_a_dra_node_between_claims_is_judged_rebindable(tmp_path: Path) -> None:
    h = between_claims(tmp_path)
    v = judge(h, vfio, dra(LAB))
    assert v["vfio.rebindable"].status is Status.PASS, v["vfio.rebindable"].reason
    assert "0000:01:01.0 on e1000" in v["vfio.rebindable"].reason
    assert "0000:00:04.0 on vfio-pci" in v["vfio.rebindable"].reason
    p = judge(h, persistence, dra(LAB))
    assert p["persistence.coverage"].status is Status.PASS, p["persistence.coverage"].reason
    # every node layer keeps a judged check under dra (the default per-layer policy)
    for layer in (v, p):
        assert any(x.status is not Status.SKIP for x in layer.values())


def test_under_boot_the_dra_rules_skip_naming_the_boot_rule(tmp_path: Path) -> None:
    v = judge(between_claims(tmp_path), vfio, LAB)["vfio.rebindable"]
    assert v.status is Status.SKIP and "platform.gpu.binding: boot" in v.reason
    assert "vfio.driver judges the binding" in v.reason


def test_nvidia_persistenced_holding_the_node_fails_naming_pid_comm_and_the_fix(
        tmp_path: Path) -> None:
    h = between_claims(tmp_path, procs={1: ("systemd", {}),
                                             4242: ("nvidia-persiste", {3: "/dev/nvidia0"})})
    v = judge(h, vfio, dra(LAB))["vfio.rebindable"]
    assert v.status is Status.FAIL
    assert "pid 4242 (nvidia-persiste)" in v.reason and "0000:01:01.0" in v.reason
    assert "systemctl disable --now nvidia-persistenced" in v.remediation
    assert "nvidia-smi -i 0000:01:01.0 -pm 0" in v.remediation


def test_the_audio_function_of_a_vga_gpu_is_left_to_the_driver(tmp_path: Path) -> None:
    """go-nvlib's Unbind takes a VGA GPU's consumer-linked function with it: on its host
    driver it does not make the group non-viable; without the device link it does."""
    devs = [d if d.bdf != "0000:01:01.0" else type(d)(**{**vars(d), "cls": "030000"})
            for d in lab_devices(accel0="vfio-pci", gpu0="e1000", gpu0_fn1="snd_hda_intel")]
    prof = dra(LAB)
    linked = FakeHost(tmp_path / "a", devs, procs={1: ("init", {})},
                      consumers={"0000:01:01.0": "0000:01:02.0"})
    v = judge(linked, vfio, prof)["vfio.rebindable"]
    assert v.status is Status.PASS, v.reason
    plain = FakeHost(tmp_path / "b", devs, procs={1: ("init", {})})
    v = judge(plain, vfio, prof)["vfio.rebindable"]
    assert v.status is Status.FAIL and "peer 0000:01:02.0" in v.reason
    assert "snd_hda_intel" in v.reason


def test_an_offline_tree_has_no_process_table_and_is_never_a_pass(tmp_path: Path) -> None:
    h = between_claims(tmp_path, procs=None)
    v = judge(h, vfio, dra(LAB))["vfio.rebindable"]
    assert v.status is Status.ERROR and "no process table" in v.reason


def test_a_snapshot_without_the_holder_scan_errs_naming_it(tmp_path: Path) -> None:
    import dataclasses

    snap = between_claims(tmp_path).collect(vfio.QUERY)
    old = dataclasses.replace(snap, commands={k: c for k, c in snap.commands.items()
                                              if k != "dev_holders"})
    v = vfio.LAYER.checks.get("vfio.rebindable").judge(vfio.parse(old), dra(LAB), "n")
    assert v.status is Status.ERROR and "no dev_holders record" in v.reason


def test_pre_binding_at_boot_is_a_warning_naming_its_source(tmp_path: Path) -> None:
    h = between_claims(tmp_path, files={IDS: "options vfio-pci ids=8086:100e\n"})
    v = judge(h, persistence, dra(LAB))["persistence.coverage"]
    assert v.status is Status.WARN
    assert f"{IDS}: options vfio-pci ids=8086:100e" in v.reason
    assert "nvlib.go enumerateGpuVfioDevices" in v.reason
    assert f"remove the ID from `options vfio-pci ids=8086:100e` in {IDS}" in v.remediation


def test_rules_not_about_the_boot_binding_are_judged_alike(tmp_path: Path) -> None:
    h = between_claims(tmp_path)
    a, b = judge(h, vfio, dra(LAB)), judge(h, vfio, LAB)
    assert a["vfio.host-kept"].status == b["vfio.host-kept"].status


def test_without_iommu_groups_the_dra_driver_refuses_passthrough(tmp_path: Path) -> None:
    import dataclasses

    devs = [dataclasses.replace(d, group=None)
            for d in lab_devices(accel0="vfio-pci", gpu0="e1000", gpu0_fn1=None)]
    h = FakeHost(tmp_path, devs, procs={1: ("init", {})})
    v = judge(h, vfio, dra(LAB))["vfio.rebindable"]
    assert v.status is Status.FAIL and "refuses VFIO passthrough" in v.reason
    assert "intel_iommu=on" in v.remediation
