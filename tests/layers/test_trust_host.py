"""Host-layer verdicts that must not be wrong (issue 9): no pass on missing evidence, no
contradiction between checks that judge the same boot, remedies that fit the evidence."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from fakehost import FakeHost, lab_devices

from kgc.core.bundle import load_bundle, write_bundle
from kgc.core.engine import Context
from kgc.core.hostfs import CommandResult, HostQuery, HostSnapshot, build_script, parse_output
from kgc.core.layer import Scope
from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers
from kgc.evidence.vfio_config import CONFIG_QUERY, parse_modalias_drivers
from kgc.layers import iommu, persistence, reboot, vfio
from kgc.layers.reboot.collect import RebootEvidence
from systree import SysTree

REPO = Path(__file__).resolve().parents[2]
LAB = load_profile(REPO / "profiles" / "lab.yaml")
GENERIC = load_profile()
INITRAMFS_VFIO = ("usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/pci/vfio-pci.ko\n"
                  "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/vfio.ko\n"
                  "etc/modprobe.d/kgc-vfio.conf\n")
E1000_KO = "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/net/ethernet/intel/e1000/e1000.ko\n"
GOOD_MODPROBE = "options vfio-pci ids=1234:11e8,8086:100e\nsoftdep e1000 pre: vfio-pci\n"


def judge(host: FakeHost, layer, profile=LAB):  # type: ignore[no-untyped-def]
    ev = layer.parse(host.collect(layer.QUERY))
    return {c.id: c.judge(ev, profile, "fake") for c in layer.LAYER.checks}


def bound(**kw: str | None) -> list:  # type: ignore[type-arg]
    d = {"accel0": "vfio-pci", "gpu0": "vfio-pci", "gpu0_fn1": "vfio-pci"}
    d.update(kw)
    return lab_devices(**d)


# -- 1. missing evidence is never a pass ---------------------------------------------------
@pytest.mark.parametrize("profile", [LAB, GENERIC], ids=["lab", "generic"])
def test_a_bundle_with_no_host_evidence_passes_nothing(tmp_path: Path, profile) -> None:  # type: ignore[no-untyped-def]
    layers = load_layers()
    b = write_bundle(tmp_path / "empty.json", scope=Scope.NODE, target="empty",
                     host=HostSnapshot())
    ctx = Context(load_bundle(b, layers), profile, layers)
    verdicts = ctx.judge_all(["iommu", "vfio", "persistence", "reboot"])
    passed = {v.check: v.reason for v in verdicts if v.status is Status.PASS}
    assert passed == {}, passed


def _no_modprobe_path(tmp_path: Path) -> str:
    """A PATH with the tools the collector uses, but no modprobe."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("sh", "awk", "ls", "stat", "cat", "grep", "uname", "readlink", "tr", "head",
                 "sort", "sed", "zcat", "mktemp", "rm", "cpio", "gzip"):
        real = shutil.which(tool)
        if real:
            os.symlink(real, bindir / tool)
    return str(bindir)


def test_missing_modprobe_is_visible_and_nothing_passes_on_it(tmp_path: Path) -> None:
    h = FakeHost(tmp_path / "node", bound(), vfio_nodes=("2", "3"),
                 modules_loaded=("e1000", "vfio_pci"),
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE,
                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"})
    h.build()
    script = build_script(CONFIG_QUERY | vfio.QUERY, b := "@@B@@")
    res = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False,
                         env={"KGC_ROOT": str(h.root), "PATH": _no_modprobe_path(tmp_path)})
    snap = parse_output(res.stdout, b)
    cmd = snap.command("pci_modalias_drivers")
    assert cmd is not None and cmd.rc != 0 and "modprobe" in cmd.output, cmd
    assert parse_modalias_drivers(snap) is None
    for layer, cid in ((vfio, "vfio.competing-driver"), (persistence, "persistence.load-order")):
        ev = layer.parse(snap)
        v = layer.LAYER.checks.get(cid).judge(ev, LAB, "t")
        assert v.status is not Status.PASS, (cid, v.reason)
        assert "modprobe" in v.reason, (cid, v.reason)


def test_tree_without_a_module_alias_index_is_not_resolved(tmp_path: Path) -> None:
    """An offline tree is resolved against its own /lib/modules, never the host's."""
    t = SysTree(tmp_path / "node")
    t.pci("0000:01:00.0", "10de", "2331", "030200", "vfio-pci", "3")
    (t.root / "sys/devices/pci0000:00/0000:01:00.0/modalias").write_text("pci:v000010DEd1\n")
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    (bindir / "modprobe").write_text("#!/bin/sh\necho nvidia\n")  # the HOST's answer
    (bindir / "modprobe").chmod(0o755)
    script = build_script(CONFIG_QUERY, b := "@@B@@")
    res = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False,
                         env={"KGC_ROOT": str(t.root), "PATH": f"{bindir}:/usr/bin:/bin"})
    snap = parse_output(res.stdout, b)
    assert parse_modalias_drivers(snap) is None, snap.command("pci_modalias_drivers")


@pytest.mark.parametrize("rec", [
    RebootEvidence("done", "rebooted"),
    RebootEvidence("done", "rebooted", boot_id_before="a"),
    RebootEvidence("done", "rebooted", boot_id_before="a", boot_id_after="a"),
    RebootEvidence("done", "rebooted", boot_id_before="", boot_id_after=""),
    RebootEvidence("rebooting", "?", boot_id_before="a", boot_id_after="b"),
    RebootEvidence("", "", boot_id_before="a", boot_id_after="b"),
    RebootEvidence("DONE", "", boot_id_before="a", boot_id_after="b"),
])
def test_reboot_returned_needs_two_different_boot_ids_and_a_done_record(rec) -> None:  # type: ignore[no-untyped-def]
    v = reboot.LAYER.checks.get("reboot.returned").judge(rec, LAB, "t")
    assert v.status is not Status.PASS, v.reason
    for cid in ("reboot.binding-persists", "reboot.host-kept"):
        assert reboot.LAYER.checks.get(cid).judge(rec, LAB, "t").status is not Status.PASS


def test_reboot_returned_passes_on_a_real_record() -> None:
    rec = RebootEvidence("done", "rebooted", boot_id_before="a", boot_id_after="b", waited_s=9)
    v = reboot.LAYER.checks.get("reboot.returned").judge(rec, LAB, "t")
    assert v.status is Status.PASS and "a -> b" in v.reason


def test_non_done_records_are_never_a_pass_whatever_the_status() -> None:
    for status in ("not-allowed", "refused", "timeout", "failed-to-start", "not-recorded", "x"):
        rec = RebootEvidence(status, "m", boot_id_before="a", boot_id_after="b",
                             before={"0000:00:04.0": {"vendor": "1234", "device": "11e8",
                                                      "driver": "vfio-pci"}},
                             after={"0000:00:04.0": {"vendor": "1234", "device": "11e8",
                                                     "driver": "vfio-pci"}})
        for chk in reboot.LAYER.checks:
            assert chk.judge(rec, LAB, "t").status is not Status.PASS, (status, chk.id)


def test_kernel_support_without_a_kernel_config_needs_vfio_pci_shown(tmp_path: Path) -> None:
    t = SysTree(tmp_path / "node")  # no /boot/config-*, no /proc/config.gz read (root set)
    t.acpi("DMAR").cmdline("ro intel_iommu=on").irq_remap()
    t.pci("0000:41:00.0", "10de", "2331", "030200", "nvidia", "7")
    ev = iommu.parse(_collect(t.root, iommu.QUERY))
    v = iommu.LAYER.checks.get("iommu.kernel-support").judge(ev, GENERIC, "t")
    assert v.status is not Status.PASS, v.reason
    assert "vfio-pci" in v.reason
    # vfio-pci registered as a PCI driver: now it is shown
    (t.root / "sys/bus/pci/drivers/vfio-pci").mkdir(parents=True)
    ev = iommu.parse(_collect(t.root, iommu.QUERY))
    v = iommu.LAYER.checks.get("iommu.kernel-support").judge(ev, GENERIC, "t")
    assert v.status is Status.PASS, v.reason
    assert "vfio-pci" in v.reason


def _collect(root: Path, q: HostQuery) -> HostSnapshot:
    from kgc.core.target import NodeTarget

    return NodeTarget("local://", root=str(root)).collect(q)


def test_host_kept_and_over_capture_skip_when_no_host_kept_device_is_present(
        tmp_path: Path) -> None:
    devs = [d for d in bound() if d.vendor != "1af4" and d.device != "10d3"]
    h = FakeHost(tmp_path, devs, vfio_nodes=("2", "3"),
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE})
    assert judge(h, vfio)["vfio.host-kept"].status is Status.SKIP
    assert judge(h, persistence)["persistence.over-capture"].status is Status.SKIP


def test_persistence_cmdline_needs_the_running_command_line(tmp_path: Path) -> None:
    snap = HostSnapshot(files={"/etc/default/grub": 'GRUB_CMDLINE_LINUX="quiet"\n'})
    v = persistence.LAYER.checks.get("persistence.cmdline").judge(persistence.parse(snap), LAB,
                                                                  "t")
    assert v.status is not Status.PASS and "/proc/cmdline" in v.reason, v.reason


def test_persistence_cmdline_needs_a_boot_loader_config(tmp_path: Path) -> None:
    snap = HostSnapshot(files={"/proc/cmdline": "root=/dev/vda ro\n"})
    v = persistence.LAYER.checks.get("persistence.cmdline").judge(persistence.parse(snap), LAB,
                                                                  "t")
    assert v.status is not Status.PASS and "boot loader" in v.reason, v.reason


def test_udev_rule_by_id_captures_a_host_kept_device_and_by_bdf_does_not(tmp_path: Path) -> None:
    """Both branches of the udev part of persistence.over-capture (a surviving mutant)."""
    by_id = ('/etc/udev/rules.d/70-vfio.rules:ACTION=="add", ATTR{vendor}=="0x8086", '
             'ATTR{device}=="0x10d3", ATTR{driver_override}="vfio-pci"')
    by_bdf = ('/etc/udev/rules.d/70-vfio.rules:ACTION=="add", KERNEL=="0000:01:01.0", '
              'ATTR{driver_override}="vfio-pci"')
    base = HostFacts(tmp_path).snapshot()
    for rule, status in ((by_id, Status.WARN), (by_bdf, Status.PASS)):
        cmds = dict(base.commands)
        cmds["udev_driver_override"] = CommandResult(0, rule + "\n")
        snap = HostSnapshot(base.files, base.links, base.dirs, base.stats, cmds)
        v = persistence.LAYER.checks.get("persistence.over-capture").judge(
            persistence.parse(snap), LAB, "t")
        assert v.status is status, (rule, v.reason)
        if status is Status.WARN:
            assert "0000:00:06.0" in v.reason and "udev" in v.reason


class HostFacts:
    def __init__(self, root: Path) -> None:
        files = {"/etc/modprobe.d/kgc-vfio.conf": "softdep e1000 pre: vfio-pci\n",
                 "/etc/default/grub": 'GRUB_CMDLINE_LINUX="quiet"\n'}
        self.host = FakeHost(root, bound(), vfio_nodes=("2", "3"), initramfs=INITRAMFS_VFIO,
                             files=files)

    def snapshot(self) -> HostSnapshot:
        return self.host.collect(persistence.QUERY)


# -- 2. one boot, one story: initramfs, load order and competing driver agree ------------
def test_host_driver_in_the_initramfs_without_vfio_fails_all_three_with_one_reason(
        tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), modules_loaded=("e1000",),
                 initramfs=E1000_KO,
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE,
                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"})
    p = judge(h, persistence)
    c = judge(h, vfio)["vfio.competing-driver"]
    for v in (p["persistence.initramfs"], p["persistence.load-order"], c):
        assert v.status is Status.FAIL, (v.check, v.reason)
        assert "initramfs" in v.reason and "e1000" in v.reason, (v.check, v.reason)
    assert "persistence.initramfs" in p["persistence.load-order"].reason
    assert "persistence.initramfs" in c.reason
    assert "update-initramfs" in c.remediation or "initramfs-tools" in c.remediation


def test_stale_initramfs_warns_in_all_three(tmp_path: Path) -> None:
    listing = E1000_KO + "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/pci/vfio-pci.ko\n"
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), modules_loaded=("e1000",),
                 initramfs=listing,
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE,
                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"})
    p = judge(h, persistence)
    c = judge(h, vfio)["vfio.competing-driver"]
    for v in (p["persistence.initramfs"], p["persistence.load-order"], c):
        assert v.status is Status.WARN, (v.check, v.reason)
        assert "/etc/modprobe.d/kgc-vfio.conf" in v.reason, (v.check, v.reason)


def test_initramfs_with_vfio_and_its_config_lets_all_three_pass(tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), modules_loaded=("e1000",),
                 initramfs=E1000_KO + INITRAMFS_VFIO,
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE,
                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"})
    p = judge(h, persistence)
    c = judge(h, vfio)["vfio.competing-driver"]
    for v in (p["persistence.initramfs"], p["persistence.load-order"], c):
        assert v.status is Status.PASS, (v.check, v.reason)


# -- 4. remedies that fit the evidence ---------------------------------------------------
def test_a_vm_without_an_iommu_is_told_about_a_virtual_iommu_not_the_bios(tmp_path: Path) -> None:
    t = SysTree(tmp_path / "node")
    t.write("proc/cpuinfo", "vendor_id\t: GenuineIntel\nflags\t\t: fpu vmx hypervisor\n")
    t.write("sys/class/dmi/id/sys_vendor", "QEMU\n")
    t.write("sys/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    t.kconfig().cmdline("ro intel_iommu=on")
    t.pci("0000:41:00.0", "10de", "2331", "030200", "nvidia")
    from conftest import judge_tree

    vs = judge_tree(t.root, GENERIC)
    for cid in ("iommu.platform", "iommu.enabled"):
        v = vs[cid]
        assert v.status is Status.FAIL, (cid, v.reason)
        assert "BIOS" not in v.remediation and "VT-d\" in the" not in v.remediation, v.remediation
        assert "virtual IOMMU" in v.remediation and "intel-iommu" in v.remediation, v.remediation
        assert "QEMU" in v.reason or "virtual machine" in v.reason, v.reason


def test_bare_metal_keeps_the_firmware_remedy(tmp_path: Path) -> None:
    t = SysTree(tmp_path / "node")
    t.write("sys/class/dmi/id/sys_vendor", "Supermicro\n")
    t.kconfig().cmdline("ro intel_iommu=on")
    from conftest import judge_tree

    v = judge_tree(t.root, GENERIC)["iommu.platform"]
    assert v.status is Status.FAIL and "BIOS" in v.remediation


def test_ids_in_the_boot_config_but_not_running_is_pending_reboot(tmp_path: Path) -> None:
    ids = "vfio-pci.ids=1234:11e8,8086:100e"
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), cmdline="root=/dev/vda ro",
                 files={"/etc/default/grub": f'GRUB_CMDLINE_LINUX="{ids}"\n',
                        "/boot/grub/grub.cfg":
                        f"menuentry x {{\n  linux /vmlinuz root=/ {ids}\n}}\n"})
    v = judge(h, persistence)["persistence.cmdline"]
    assert v.status is Status.WARN, v.reason
    assert "pending reboot" in v.reason
    assert "reboot" in v.remediation.lower() and "Put vfio-pci.ids" not in v.remediation


def test_ids_in_etc_default_grub_but_not_in_grub_cfg_says_update_grub(tmp_path: Path) -> None:
    ids = "vfio-pci.ids=1234:11e8,8086:100e"
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), cmdline="root=/dev/vda ro",
                 files={"/etc/default/grub": f'GRUB_CMDLINE_LINUX="{ids}"\n',
                        "/boot/grub/grub.cfg": "menuentry x {\n  linux /vmlinuz root=/\n}\n"})
    v = judge(h, persistence)["persistence.cmdline"]
    assert v.status is Status.WARN, v.reason
    assert "update-grub" in v.remediation and "Put vfio-pci.ids" not in v.remediation


# -- surviving mutants named in issue 9 ---------------------------------------------------
def test_a_bridge_bound_to_its_port_driver_keeps_the_group_viable(tmp_path: Path) -> None:
    """The bridge exemption of vfio.group-viable: a PCI bridge in the group is viable even
    when a driver (pcieport/shpchp) has it; a non-bridge peer on a host driver is not."""
    devs = bound()
    for d in devs:
        if d.bdf == "0000:00:05.0":  # the pcie-pci-bridge of group 3
            d.driver = "shpchp"
    h = FakeHost(tmp_path / "a", devs, vfio_nodes=("2", "3"))
    v = judge(h, vfio)["vfio.group-viable"]
    assert v.status is Status.PASS, v.reason
    for d in devs:
        if d.bdf == "0000:00:05.0":
            d.cls = "020000"  # the same peer, but an Ethernet function
    h = FakeHost(tmp_path / "b", devs, vfio_nodes=("2", "3"))
    v = judge(h, vfio)["vfio.group-viable"]
    assert v.status is Status.FAIL and "0000:00:05.0" in v.reason and "shpchp" in v.reason
