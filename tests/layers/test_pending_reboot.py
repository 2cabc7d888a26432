"""One story for a binding that is configured but not yet applied (issue 18.2).

A node whose vfio-pci binding is written to its boot configuration but which was not
rebooted since: every check that fails because the GPU is still on its host driver says
"configured (where), pending reboot" and gives the reboot (with what must precede it) as the
remedy -- never driverctl, a second mechanism beside the one in use.

The configuration is the one a real setup script writes before asking for a reboot:
Scrut1ny/Hypervisor-Phantom, its ``configs`` function
(https://github.com/Scrut1ny/Hypervisor-Phantom, the menu entry "Auto [grub.cfg +
vfio.conf]"): ``GRUB_CMDLINE_LINUX_DEFAULT="amd_iommu=on iommu=pt vfio-pci.ids=<ids>"`` in
/etc/default/grub and ``options vfio-pci ids=<ids>`` + ``softdep nvidia pre: vfio-pci`` in
/etc/modprobe.d/vfio.conf, then update-grub and update-initramfs. The GPU is an H100 PCIe
(10de:2331) on the nvidia driver, as a node is until it reboots.
"""

from __future__ import annotations

from pathlib import Path

from fakehost import Dev, FakeHost

from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.layers import persistence, vfio

PROFILE = load_profile("generic-nvidia-passthrough")
GPU = "0000:41:00.0"
AUDIO_PEER = "0000:41:00.1"
GRUB = 'GRUB_CMDLINE_LINUX_DEFAULT="amd_iommu=on iommu=pt vfio-pci.ids=10de:2331"\n'
VFIO_CONF = "options vfio-pci ids=10de:2331\nsoftdep nvidia pre: vfio-pci\n"
RUNNING = "BOOT_IMAGE=/vmlinuz-6.1.0-50-amd64 root=/dev/sda1 ro quiet iommu=pt"
VFIO_CHECKS = ("vfio.driver", "vfio.device-node", "vfio.competing-driver")


def judge(host: FakeHost, layer) -> dict:  # type: ignore[no-untyped-def]
    ev = layer.parse(host.collect(layer.QUERY))
    return {c.id: c.judge(ev, PROFILE, "node") for c in layer.LAYER.checks}


def gpu(driver: str = "nvidia", **kw) -> Dev:  # type: ignore[no-untyped-def]
    return Dev(GPU, "10de", "2331", "030200", driver, "7", modules=("nvidia",), **kw)


def node(tmp_path: Path, devices: list[Dev], files: dict[str, str], **kw) -> FakeHost:  # type: ignore[no-untyped-def]
    return FakeHost(tmp_path, devices, files=files, cmdline=RUNNING,
                    modules_loaded=("nvidia",), **kw)


def test_configured_but_not_rebooted_is_one_pending_reboot_story(tmp_path: Path) -> None:
    h = node(tmp_path, [gpu()], {"/etc/default/grub": GRUB,
                                 "/etc/modprobe.d/vfio.conf": VFIO_CONF})
    res = {**judge(h, vfio), **judge(h, persistence)}
    assert res["persistence.cmdline"].status is Status.WARN
    assert "pending reboot" in res["persistence.cmdline"].reason
    for cid in VFIO_CHECKS:
        v = res[cid]
        assert v.status is Status.FAIL, (cid, v.reason)
        assert "pending reboot" in v.reason, (cid, v.reason)
        # the command line's vfio-pci.ids= is what binds it: libkmod appends it after every
        # modprobe.d option and the kernel keeps the last ids= (test_vfio_ids_last_assignment),
        # so the modprobe.d line (the same id) is not a binding of its own
        assert "/etc/default/grub: vfio-pci.ids=10de:2331" in v.reason, (cid, v.reason)
        assert "/etc/modprobe.d/vfio.conf: options" not in v.reason, (cid, v.reason)
        assert "driverctl" not in v.remediation, (cid, v.remediation)
        assert "reboot" in v.remediation.lower(), (cid, v.remediation)
        assert v.evidence["fix"][-1] == {"run": "reboot"}, (cid, v.evidence["fix"])


def test_a_group_peer_configured_but_not_rebooted_gets_the_reboot(tmp_path: Path) -> None:
    # the GPU's HDMI audio function (10de:22bc) shares the group, listed in the same ids=
    peer = Dev(AUDIO_PEER, "10de", "22bc", "040300", "snd_hda_intel", "7",
               modules=("snd_hda_intel",))
    conf = ("options vfio-pci ids=10de:2331,10de:22bc\nsoftdep nvidia pre: vfio-pci\n"
            "softdep snd_hda_intel pre: vfio-pci\n")
    h = node(tmp_path, [gpu("vfio-pci"), peer], {"/etc/modprobe.d/vfio.conf": conf},
             vfio_nodes=("7",))
    v = judge(h, vfio)["vfio.group-viable"]
    assert v.status is Status.FAIL
    assert AUDIO_PEER in v.reason and "pending reboot" in v.reason, v.reason
    assert "driverctl" not in v.remediation and "reboot" in v.remediation.lower()


def test_ids_configured_but_no_softdep_names_the_real_gap(tmp_path: Path) -> None:
    """The ids are there: the remedy must not say to add them, but name what is wrong (the
    host driver is not ordered after vfio-pci) and edit that."""
    h = node(tmp_path, [gpu()], {"/etc/modprobe.d/vfio.conf": "options vfio-pci ids=10de:2331\n"})
    v = judge(h, vfio)["vfio.driver"]
    assert v.status is Status.FAIL
    assert "nothing makes vfio-pci load before nvidia" in v.reason, v.reason
    assert "ids=" not in v.remediation.replace("ids=10de:2331", ""), v.remediation
    assert {"file": "/etc/modprobe.d/vfio.conf", "old": None,
            "new": "softdep nvidia pre: vfio-pci"} in v.evidence["fix"]
    assert "driverctl" not in v.remediation


def test_cmdline_ids_already_booted_is_not_a_pending_reboot(tmp_path: Path) -> None:
    """vfio-pci.ids is on the running command line and the GPU is still on nvidia: a reboot
    changes nothing, and the verdict must not promise that it does."""
    h = FakeHost(tmp_path, [gpu()], files={"/etc/default/grub": GRUB,
                                           "/etc/modprobe.d/vfio.conf":
                                           "softdep nvidia pre: vfio-pci\n"},
                 cmdline=RUNNING + " vfio-pci.ids=10de:2331", modules_loaded=("nvidia",))
    v = judge(h, vfio)["vfio.driver"]
    assert v.status is Status.FAIL
    assert "pending reboot" not in v.reason and "reboot alone changes nothing" in v.reason


def test_unconfigured_device_still_gets_per_device_driverctl(tmp_path: Path) -> None:
    h = node(tmp_path, [gpu()], {})
    v = judge(h, vfio)["vfio.driver"]
    assert "pending" not in v.reason
    assert f"driverctl set-override {GPU} vfio-pci" in v.remediation


def test_grub_only_config_not_regenerated_asks_for_update_grub_first(tmp_path: Path) -> None:
    grub_cfg = ("menuentry 'Debian GNU/Linux' {\n"
                "\tlinux /vmlinuz-6.1.0-50-amd64 root=/dev/sda1 ro quiet iommu=pt\n}\n")
    h = node(tmp_path, [gpu()], {"/etc/default/grub": GRUB, "/boot/grub/grub.cfg": grub_cfg,
                                 "/etc/modprobe.d/vfio.conf": "softdep nvidia pre: vfio-pci\n"})
    v = judge(h, vfio)["vfio.driver"]
    assert "update-grub" in v.remediation and "reboot" in v.remediation, v.remediation
    assert "driverctl" not in v.remediation
