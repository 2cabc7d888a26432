"""vfio and persistence layers on /sys- and /etc-shaped trees read by the real collector."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakehost import FakeHost, lab_devices, with_overrides

from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.layers import persistence, vfio

PROFILE = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml")
GOOD_MODPROBE = ("options vfio-pci ids=1234:11e8,8086:100e\n"
                 "softdep e1000 pre: vfio-pci\n")
INITRAMFS_VFIO = ("usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/pci/vfio-pci.ko\n"
                  "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/vfio.ko\n"
                  "etc/modprobe.d/kgc-vfio.conf\n")


def judge(host: FakeHost, layer) -> dict[str, object]:  # type: ignore[no-untyped-def]
    ev = layer.parse(host.collect(layer.QUERY))
    return {c.id: c.judge(ev, PROFILE, "fake") for c in layer.LAYER.checks}


def bound(**kw: str | None) -> list:  # type: ignore[type-arg]
    d = {"accel0": "vfio-pci", "gpu0": "vfio-pci", "gpu0_fn1": "vfio-pci"}
    d.update(kw)
    return lab_devices(**d)


def test_good_node_passes_every_vfio_and_persistence_check(tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3", "vfio"),
                 modules_loaded=("e1000", "vfio_pci"), initramfs=INITRAMFS_VFIO,
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE,
                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n",
                        "/boot/loader/entries/debian.conf":
                        "linux /vmlinuz\noptions root=/dev/vda intel_iommu=on iommu=pt\n"})
    for layer in (vfio, persistence):
        for cid, v in judge(h, layer).items():
            # the DRA-only rule skips under binding: boot, naming the boot rule
            want = Status.SKIP if cid == "vfio.rebindable" else Status.PASS
            assert v.status is want, (cid, v.reason)


def test_group_peer_on_a_host_driver_is_named(tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(gpu0_fn1="e1000"), vfio_nodes=("2", "3"))
    v = judge(h, vfio)["vfio.group-viable"]
    assert v.status is Status.FAIL
    assert "0000:01:02.0" in v.reason and "e1000" in v.reason and "group 3" in v.reason
    assert "driverctl set-override 0000:01:02.0 vfio-pci" in v.remediation
    dn = judge(h, vfio)["vfio.device-node"]
    assert dn.status is Status.FAIL and "0000:01:02.0 (on e1000" in dn.reason


def test_bridge_and_driverless_peers_keep_a_group_viable(tmp_path: Path) -> None:
    # 00:05.0 (bridge, no driver) shares group 3 with the e1000 pair
    h = FakeHost(tmp_path, bound(accel0=None), vfio_nodes=("3",))
    assert judge(h, vfio)["vfio.group-viable"].status is Status.PASS


def test_iommu_off_points_at_the_iommu(tmp_path: Path) -> None:
    devs = [d for d in lab_devices()]
    for d in devs:
        d.group = None
    h = FakeHost(tmp_path, devs, cmdline="root=/dev/vda intel_iommu=off")
    res = judge(h, vfio)
    assert res["vfio.driver"].status is Status.FAIL
    assert "IOMMU" in res["vfio.driver"].reason
    assert "intel_iommu=on" in res["vfio.driver"].remediation
    assert res["vfio.group-viable"].status is Status.SKIP
    assert "IOMMU" in res["vfio.group-viable"].reason


def test_runtime_only_binding_fails_persistence_and_competing_driver(tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), modules_loaded=("e1000",))
    res = judge(h, persistence)
    cov = res["persistence.coverage"]
    assert cov.status is Status.FAIL
    assert "0000:01:01.0" in cov.reason and "runtime-only" in cov.reason
    comp = judge(h, vfio)["vfio.competing-driver"]
    assert comp.status is Status.FAIL and "e1000" in comp.reason and "loaded" in comp.reason
    assert "softdep e1000 pre: vfio-pci" in comp.remediation


def test_id_rule_capturing_a_host_kept_device_warns_and_capture_fails(tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(host_nic="vfio-pci"), vfio_nodes=("2", "3", "4"),
                 files={"/etc/modprobe.d/vfio.conf":
                        "options vfio-pci ids=1234:11e8,8086:100e,8086:10d3\n"
                        "softdep e1000 pre: vfio-pci\nsoftdep e1000e pre: vfio-pci\n",
                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"})
    oc = judge(h, persistence)["persistence.over-capture"]
    assert oc.status is Status.WARN
    assert "0000:00:06.0" in oc.reason and "8086:10d3" in oc.reason
    hk = judge(h, vfio)["vfio.host-kept"]
    assert hk.status is Status.FAIL and "0000:00:06.0" in hk.reason


def test_driverctl_and_udev_overrides_cover_devices(tmp_path: Path) -> None:
    ov = {"0000:00:04.0": "vfio-pci", "0000:01:01.0": "vfio-pci", "0000:01:02.0": "vfio-pci"}
    h = FakeHost(tmp_path, with_overrides(bound(), ov), vfio_nodes=("2", "3"),
                 modules_loaded=("e1000",),
                 files={"/etc/driverctl.d/pci-0000:00:04.0": "vfio-pci\n",
                        "/etc/driverctl.d/pci-0000:01:01.0": "vfio-pci\n",
                        "/etc/udev/rules.d/70-vfio.rules":
                        'ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:01:02.0", '
                        'ATTR{driver_override}="vfio-pci"\n'})
    res = judge(h, persistence)
    assert res["persistence.coverage"].status is Status.PASS
    cov = res["persistence.coverage"].evidence["coverage"]
    assert cov["0000:00:04.0"][0].startswith("driverctl")
    assert cov["0000:01:02.0"][0].startswith("udev")
    assert judge(h, vfio)["vfio.competing-driver"].status is Status.PASS


def test_cmdline_ids_count_only_from_the_boot_loader_config(tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"),
                 cmdline="root=/dev/vda vfio-pci.ids=1234:11e8,8086:100e",
                 files={"/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'})
    res = judge(h, persistence)
    assert res["persistence.coverage"].status is Status.FAIL
    assert res["persistence.cmdline"].status is Status.FAIL
    assert "/proc/cmdline" in res["persistence.cmdline"].reason


def test_cmdline_ids_in_grub_and_loader_entries(tmp_path: Path) -> None:
    files = {"/etc/default/grub":
             'GRUB_CMDLINE_LINUX="iommu=pt vfio-pci.ids=1234:11e8,8086:100e"\n',
             "/etc/modprobe.d/vfio.conf": "softdep e1000 pre: vfio-pci\n",
             "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), files=files,
                 cmdline="root=/dev/vda iommu=pt vfio-pci.ids=1234:11e8,8086:100e")
    res = judge(h, persistence)
    assert res["persistence.coverage"].status is Status.PASS, res["persistence.coverage"].reason
    assert res["persistence.load-order"].status is Status.PASS
    assert res["persistence.cmdline"].status is Status.PASS


def test_missing_softdep_fails_load_order(tmp_path: Path) -> None:
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"),
                 files={"/etc/modprobe.d/vfio.conf": "options vfio-pci ids=1234:11e8,8086:100e\n",
                        "/etc/modules-load.d/vfio.conf": "vfio-pci\n"})
    lo = judge(h, persistence)["persistence.load-order"]
    assert lo.status is Status.FAIL
    assert "0000:01:01.0" in lo.reason and "e1000" in lo.reason
    assert "softdep e1000 pre: vfio-pci" in lo.remediation


@pytest.mark.parametrize("with_vfio", [True, False])
def test_initramfs_with_a_host_driver_needs_vfio(tmp_path: Path, with_vfio: bool) -> None:
    listing = "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/net/ethernet/intel/e1000/e1000.ko\n"
    if with_vfio:
        listing += INITRAMFS_VFIO
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), initramfs=listing,
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE})
    v = judge(h, persistence)["persistence.initramfs"]
    assert v.status is (Status.PASS if with_vfio else Status.FAIL), v.reason
    if not with_vfio:
        assert "e1000" in v.reason and "vfio_pci" in v.reason


def test_stale_initramfs_without_the_vfio_config_warns(tmp_path: Path) -> None:
    listing = ("usr/lib/modules/6.1.0-50-amd64/kernel/drivers/net/ethernet/intel/e1000/e1000.ko\n"
               "usr/lib/modules/6.1.0-50-amd64/kernel/drivers/vfio/pci/vfio-pci.ko\n")
    h = FakeHost(tmp_path, bound(), vfio_nodes=("2", "3"), initramfs=listing,
                 files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE})
    v = judge(h, persistence)["persistence.initramfs"]
    assert v.status is Status.WARN and "/etc/modprobe.d/kgc-vfio.conf" in v.reason


class _ReadOnlyTmpHost(FakeHost):
    """The node's root is read-only (a pod's recursive read-only host mount): the listing
    command cannot make its temporary directory and says so."""

    def collect(self, query):  # type: ignore[no-untyped-def]
        import dataclasses

        from kgc.core.hostfs import CommandResult

        snap = super().collect(query)
        cmds = dict(snap.commands)
        if "initramfs_list" in cmds:
            cmds["initramfs_list"] = CommandResult(
                6, "KGC-NO-TMPDIR cannot create a temporary directory")
        return dataclasses.replace(snap, commands=cmds)


def test_an_initramfs_that_could_not_be_listed_is_never_judged_safe(tmp_path: Path) -> None:
    # an e1000 target whose host driver would be in the initramfs: unknown, not "no host
    # driver in the initramfs" (the listing failed; its marker line is not an entry)
    h = _ReadOnlyTmpHost(tmp_path, bound(), vfio_nodes=("2", "3"), initramfs="",
                         files={"/etc/modprobe.d/kgc-vfio.conf": GOOD_MODPROBE})
    v = judge(h, persistence)["persistence.initramfs"]
    assert v.status is not Status.PASS, v.reason
    assert "temporary directory" in v.reason, v.reason
