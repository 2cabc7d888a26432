"""`kgc image check` on small synthetic images (made with mkfs.ext4 -d, no mount, no lab):
the reader (bare filesystem, GPT, MBR, qcow2, a separate /boot), the tree it builds (exactly
what the query reads; symlinks never lead out of the image), the answers it reads from the
image (default boot entry, initramfs, module aliases), the verdicts, and bad input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from diskutil import (
    LINUX_FS,
    LINUX_ROOT_X86_64,
    LVM,
    Link,
    Part,
    Special,
    cpio_newc,
    gpt_disk,
    mbr_disk,
    mkfs_ext4,
    to_qcow2,
)

from conftest import REPO
from kgc.core.engine import host_query
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers
from kgc.image.check import ImageReader, check_image
from kgc.image.extfs import Vfs
from kgc.image.tree import TreeBuilder, command_paths

HW = REPO / "fixtures" / "bundles" / "good.json"  # the lab node's PCI inventory
KVER = "6.1.0-test"
BOOT_UUID = "5e1f0000-0000-4000-8000-00000000b007"
ROOT_UUID = "5e1f0000-0000-4000-8000-0000000000aa"


def initrd(with_vfio: bool = True, extra: tuple[str, ...] = ()) -> bytes:
    mods = f"usr/lib/modules/{KVER}/kernel/drivers"
    files: dict[str, bytes | None] = {"usr": None, f"{mods}/virtio/virtio_blk.ko": b"ko"}
    if with_vfio:
        files[f"{mods}/vfio/pci/vfio-pci.ko"] = b"ko"
        files["etc/modprobe.d/vfio.conf"] = b"options vfio-pci ids=1234:11e8,8086:100e\n"
    for e in extra:
        files[e] = b"ko"
    early = cpio_newc({"kernel/x86/microcode/GenuineIntel.bin": b"ucode"})
    return early + gzip.compress(cpio_newc(files))


def node_files(*, persisted: bool = True, boot_in_root: bool = True,
               options: str = "root=LABEL=root intel_iommu=on") -> dict:
    files: dict = {
        "/etc/os-release": 'PRETTY_NAME="Synthetic Node 1"\nID=synthetic\n',
        "/etc/passwd": "IMAGE-PASSWD\n",
        "/etc/fstab": "LABEL=root / ext4 defaults 0 1\n",
        "/lib": Link("usr/lib"),
        "/usr/lib/modprobe.d/aliases.conf": "alias char-major-10-196 vfio\n",
        f"/usr/lib/modules/{KVER}/modules.alias": (
            "# Aliases extracted from modules themselves.\n"
            "alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000\n"
            "alias pci:v00008086d000010D3sv*sd*bc*sc*i* e1000e\n"
            "alias pci:v*d*sv*sd*bc01sc06i01* ahci\n"
            "alias pci:v00001AF4d00001000sv*sd*bc*sc*i* virtio_pci\n"),
        "/var/lib/dpkg/status": ("Package: containerd\nStatus: install ok installed\n"
                                 "Version: 1.7.24~ds1-6\n\n"),
        "/etc/containerd/config.toml": ('version = 2\n[plugins."io.containerd.nri.v1.nri"]\n'
                                        "  disable = false\n"),
        "/opt/kata/bin/containerd-shim-kata-v2": "#!/bin/sh\nexit 1\n",
    }
    if persisted:
        files["/etc/modprobe.d/vfio.conf"] = (
            "options vfio-pci ids=1234:11e8,8086:100e\nsoftdep e1000 pre: vfio-pci\n")
        files["/etc/modules-load.d/vfio.conf"] = "vfio-pci\n"
    if boot_in_root:
        files["/boot/loader/entries/node.conf"] = (
            f"title Synthetic\nlinux /boot/vmlinuz-{KVER}\ninitrd /boot/initrd.img-{KVER}\n"
            f"options {options}\n")
        files[f"/boot/vmlinuz-{KVER}"] = b"\x7fkernel"
        files[f"/boot/initrd.img-{KVER}"] = initrd(persisted)
    return files


@pytest.fixture(scope="module")
def lab():
    return load_profile("lab")


def verdicts(res) -> dict[str, str]:
    return {r["check"]: r["status"] for r in res.results}


# -- the whole path on a bare filesystem ----------------------------------------------------------
def test_bare_ext4_image_judged_from_its_files(tmp_path: Path, lab) -> None:
    img = mkfs_ext4(tmp_path / "node.img", node_files(), label="root")
    res = check_image(img, lab, report_dir=tmp_path / "r", hardware=HW)
    v = verdicts(res)
    assert {k: v[k] for k in v if k.startswith("persistence.")} == {
        "persistence.coverage": "pass", "persistence.load-order": "pass",
        "persistence.initramfs": "pass", "persistence.over-capture": "pass",
        # no running kernel in an image: the running command line cannot be compared
        "persistence.cmdline": "skip"}, [r["reason"] for r in res.results]
    for layer in ("iommu", "vfio", "reboot", "nri"):
        rs = [r for r in res.results if r["layer"] == layer]
        assert rs and all(r["status"] == "skip" and "needs a running node" in r["reason"]
                          for r in rs)
    f = res.run["image"]
    assert f["scheme"] == "none" and f["format"] == "raw" and f["root"]["label"] == "root"
    assert f["boot"]["kernel"] == KVER and f["boot"]["source"].endswith("node.conf")
    assert f["initramfs"]["formats"] == "cpio+gzip"
    assert f["os"] == "Synthetic Node 1"
    assert f["hardware"]["devices"] == 12
    assert "modules.alias" in f["answered"]["pci_modalias_drivers"]
    assert res.run["layers_judged"] == ["persistence", "runtime"]
    doc = json.loads((tmp_path / "r" / "verdict.json").read_text())
    assert doc["schema"] == "kgc-verdict/1" and doc["run"]["targets"] == ["image:node.img"]
    # the image's own modules decided which host driver competes for 8086:100e
    lo = next(r for r in res.results if r["check"] == "persistence.load-order")
    assert "e1000: softdep e1000 pre: vfio-pci" in json.dumps(lo["evidence"])


def test_image_without_persistence_fails_coverage(tmp_path: Path, lab) -> None:
    img = mkfs_ext4(tmp_path / "node.img", node_files(persisted=False), label="root")
    res = check_image(img, lab, report_dir=tmp_path / "r", hardware=HW)
    cov = next(r for r in res.results if r["check"] == "persistence.coverage")
    assert cov["status"] == "fail"
    assert "0000:00:04.0 [1234:11e8]" in cov["reason"] and "driverctl set-override" in \
        cov["remediation"]


def test_without_hardware_per_device_checks_skip(tmp_path: Path, lab) -> None:
    img = mkfs_ext4(tmp_path / "node.img", node_files(), label="root")
    res = check_image(img, lab, report_dir=tmp_path / "r")
    v = verdicts(res)
    assert v["persistence.coverage"] == "skip" and v["persistence.initramfs"] == "skip"
    assert "no devices" in res.run["image"]["answered"]["pci_modalias_drivers"]


# -- the tree: exactly what the query reads, nothing leads out -
def test_tree_holds_what_the_query_reads_and_symlinks_stay_inside(tmp_path: Path, lab) -> None:
    files = node_files()
    files.update({
        "/etc/modprobe.d/abs.conf": Link("/etc/passwd"),
        "/etc/modprobe.d/climb.conf": Link("../../../../../../../../etc/passwd"),
        "/etc/modprobe.d/dangling.conf": Link("/nonexistent/x.conf"),
        "/etc/modprobe.d/loop.conf": Link("loop.conf"),
        "/etc/modprobe.d/pipe.conf": Special("fifo"),
        "/etc/unrelated/big.bin": b"\0" * 100000,
    })
    img = mkfs_ext4(tmp_path / "node.img", files, label="root")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    vfs = ImageReader(img, scratch).open()
    tree = tmp_path / "tree"
    tree.mkdir()
    tb = TreeBuilder(vfs, tree, scratch)
    tb.build(host_query(load_layers(), lab))
    # every symlink in the tree is relative and resolves inside the tree
    for p in tree.rglob("*"):
        if p.is_symlink():
            assert not os.readlink(p).startswith("/"), p
            assert str(Path(os.path.realpath(p))).startswith(str(tree.resolve())), p
        assert not p.is_fifo(), p
    m = tree / "etc" / "modprobe.d"
    assert (m / "abs.conf").read_text() == "IMAGE-PASSWD\n"  # the image's file, not the host's
    assert (m / "climb.conf").read_text() == "IMAGE-PASSWD\n"
    assert not (m / "dangling.conf").exists() and (m / "dangling.conf").is_symlink()
    assert not (m / "pipe.conf").exists()
    assert "/etc/modprobe.d/pipe.conf" in tb.stats.skipped
    assert (tree / "lib").is_symlink() and os.readlink(tree / "lib") == "usr/lib"
    assert (tree / "lib" / "modprobe.d" / "aliases.conf").read_text().startswith("alias")
    # what no layer reads is not copied out
    assert not (tree / "etc" / "unrelated").exists() and not (tree / "etc" / "fstab").exists()
    # a stat-only file is a sparse stand-in with the image's size and mode
    shim = tree / "opt/kata/bin/containerd-shim-kata-v2"
    assert shim.stat().st_size == len("#!/bin/sh\nexit 1\n") and shim.stat().st_mode & 0o111
    assert shim.read_bytes() == b"\0" * shim.stat().st_size
    assert tb.stats.rewritten_links >= 2


def test_command_paths_are_found_in_collector_scripts() -> None:
    q = host_query(load_layers(), load_profile("lab"))
    found = {p for _n, c in q.commands for p in command_paths(c)}
    assert "/proc/cpuinfo" in found and "/boot/initrd.img-*" in found
    assert "/sys/bus/pci/devices/*" in found
    assert command_paths('cat "$R/var/lib/dpkg/status"; ls "$R"/etc/x.d/*.conf') == [
        "/var/lib/dpkg/status", "/etc/x.d/*.conf"]


# -- partitioned disks, qcow2, a separate /boot -
@pytest.fixture(scope="module")
def gpt_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("gpt")
    root_files = node_files(boot_in_root=False)
    root_files["/etc/fstab"] = (f"UUID={ROOT_UUID} / ext4 defaults 0 1\n"
                                f"UUID={BOOT_UUID} /boot ext4 defaults 0 2\n"
                                "PARTLABEL=esp /boot/efi vfat umask=0077 0 1\n")
    root_files["/boot"] = None
    root = mkfs_ext4(tmp / "root.ext4", root_files, size_mb=24, fs_uuid=ROOT_UUID)
    boot = mkfs_ext4(tmp / "boot.ext4", {
        "/loader/entries/node.conf": (f"linux /vmlinuz-{KVER}\ninitrd /initrd.img-{KVER}\n"
                                      "options root=UUID=x vfio-pci.ids=1234:11e8\n"),
        f"/vmlinuz-{KVER}": b"k", f"/initrd.img-{KVER}": initrd(True)},
        size_mb=8, fs_uuid=BOOT_UUID)
    esp = tmp / "esp.img"
    sector = bytearray(512)  # a FAT32 boot sector's signature (not a usable filesystem)
    sector[0:11] = b"\xeb\x58\x90mkfs.fat"
    sector[82:90] = b"FAT32   "
    sector[510:512] = b"\x55\xaa"
    esp.write_bytes(bytes(sector) + b"\0" * (1024 * 1024 - 512))
    disk = tmp / "disk.raw"
    gpt_disk(disk, [Part(esp, "c12a7328-f81f-11d2-ba4b-00a0c93ec93b", "esp"),
                    Part(boot, LINUX_FS, "boot"), Part(root, LINUX_ROOT_X86_64, "root")])
    return disk


def test_gpt_disk_with_a_separate_boot_partition(gpt_image: Path, tmp_path: Path, lab) -> None:
    res = check_image(gpt_image, lab, report_dir=tmp_path / "r", hardware=HW)
    f = res.run["image"]
    assert f["scheme"] == "gpt" and f["root"]["partition"] == 3
    assert f["root"]["type"] == "linux-root-x86-64" and f["root"]["uuid"] == ROOT_UUID
    assert f["mounts"] == {"/boot": "partition 2"}
    assert "/boot/efi" in f["unread_mounts"] and "vfat" in f["unread_mounts"]["/boot/efi"]
    # the boot loader's entry names files on the boot partition: found under /boot
    assert f["boot"]["source"] == "/boot/loader/entries/node.conf"
    assert f["initramfs"]["path"] == f"/boot/initrd.img-{KVER}"
    v = verdicts(res)
    assert v["persistence.initramfs"] == "pass"
    # the entry's vfio-pci.ids=1234:11e8 comes after modprobe.d's ids= (libkmod appends the
    # command line's options last) and the kernel keeps the last assignment: 8086:100e, in
    # vfio.conf only, is bound by nothing at the next boot -- the entry on the boot
    # partition is what says so (tests/layers/test_vfio_ids_last_assignment.py)
    cov = next(r for r in res.results if r["check"] == "persistence.coverage")
    assert cov["status"] == "fail" and "0000:00:04.0" not in cov["reason"], cov["reason"]
    assert ("/etc/modprobe.d/vfio.conf lists 8086:100e in vfio-pci ids=, but the kernel "
            "command line in /boot/loader/entries/node.conf sets vfio-pci.ids=") in cov["reason"]
    persistence = [r for r in res.results if r["layer"] == "persistence"]
    assert "/boot/loader/entries/node.conf" in json.dumps([r["evidence"] for r in persistence])


@pytest.mark.lab  # qemu-img converts the disk: the lab tier
def test_qcow2_of_the_same_disk_gives_the_same_verdicts(gpt_image: Path, tmp_path: Path,
                                                         lab) -> None:
    raw = check_image(gpt_image, lab, report_dir=tmp_path / "a", hardware=HW)
    q = to_qcow2(gpt_image, tmp_path / "disk.qcow2")
    res = check_image(q, lab, report_dir=tmp_path / "b", hardware=HW)
    assert res.run["image"]["format"] == "qcow2"
    assert res.run["image"]["bytes"]["qcow2_converted"] > 0
    strip = [(r["check"], r["status"], r["reason"]) for r in raw.results]
    assert [(r["check"], r["status"], r["reason"]) for r in res.results] == strip


def test_mbr_disk(tmp_path: Path, lab) -> None:
    root = mkfs_ext4(tmp_path / "root.ext4", node_files(), size_mb=24, label="root")
    disk = tmp_path / "mbr.raw"
    mbr_disk(disk, [Part(None, size=2 * 1024 * 1024, mbr_type=0x82), Part(root)])
    res = check_image(disk, lab, report_dir=tmp_path / "r", hardware=HW)
    assert res.run["image"]["scheme"] == "mbr" and res.run["image"]["root"]["partition"] == 2
    assert verdicts(res)["persistence.coverage"] == "pass"


# -- bad input: exit 2, one line, nothing written -
def _bad_inputs(tmp: Path) -> dict[str, tuple[Path, str]]:
    out: dict[str, tuple[Path, str]] = {}
    t = tmp / "notes.txt"
    t.write_text("not a disk\n")
    out["text"] = (t, "too small for a disk image")
    r = tmp / "random.bin"
    r.write_bytes(os.urandom(2 * 1024 * 1024))
    out["random"] = (r, "no partition table I know")
    e = tmp / "empty.img"
    e.write_bytes(b"")
    out["empty"] = (e, "empty file")
    noroot = mkfs_ext4(tmp / "data.ext4", {"/srv/data.txt": "x"}, size_mb=8)
    out["no-root"] = (noroot, "no Linux root filesystem")
    full = mkfs_ext4(tmp / "r.ext4", node_files(), size_mb=24, label="root")
    disk = tmp / "gpt.raw"
    gpt_disk(disk, [Part(full)])
    trunc = tmp / "truncated.raw"
    trunc.write_bytes(disk.read_bytes()[: 12 * 1024 * 1024])
    out["truncated"] = (trunc, "truncated image")
    bare = tmp / "trunc-fs.raw"
    bare.write_bytes(full.read_bytes()[: 6 * 1024 * 1024])
    out["truncated-fs"] = (bare, "truncated image")
    q = to_qcow2(disk, tmp / "gpt.qcow2")
    tq = tmp / "truncated.qcow2"
    tq.write_bytes(q.read_bytes()[: q.stat().st_size // 2])
    out["truncated-qcow2"] = (tq, "truncated or damaged qcow2")
    ov = tmp / "overlay.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(q),
                    str(ov)], check=True)
    out["overlay"] = (ov, "backing file")
    vm = tmp / "disk.vmdk"
    vm.write_bytes(b"KDMV" + b"\0" * 70000)
    out["vmdk"] = (vm, "a vmdk image")
    lvm = tmp / "lvm.raw"
    gpt_disk(lvm, [Part(None, LVM, size=4 * 1024 * 1024)])
    out["lvm-only"] = (lvm, "no Linux root filesystem")
    mbr = tmp / "mbr-empty.raw"
    mbr_disk(mbr, [])
    out["mbr-empty"] = (mbr, "an MBR with no partitions")
    corrupt = tmp / "corrupt-gpt.raw"
    data = bytearray(disk.read_bytes())
    data[512 + 40] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    out["corrupt-gpt"] = (corrupt, "GPT header checksum mismatch")
    return out


@pytest.mark.lab  # qemu-img makes the bad qcow2s: the lab tier
def test_bad_images_are_exit_2_one_line_nothing_written(tmp_path: Path) -> None:
    cases = _bad_inputs(tmp_path)
    rdir = tmp_path / "reports"
    for name, (path, msg) in cases.items():
        out = subprocess.run([sys.executable, "-m", "kgc.cli", "image", "check", str(path),
                              "--profile", "lab", "--report-dir", str(rdir)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 2, (name, out.stdout, out.stderr)
        assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, (name, out.stderr)
        assert msg in out.stderr, (name, out.stderr)
        assert not rdir.exists(), name
    missing = subprocess.run([sys.executable, "-m", "kgc.cli", "image", "check",
                              str(tmp_path / "nope.qcow2"), "--report-dir", str(rdir)],
                             capture_output=True, text=True, timeout=60, check=False)
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_no_temporary_tree_is_left_behind(tmp_path: Path, lab, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    img = mkfs_ext4(tmp_path / "node.img", node_files(), label="root")
    check_image(img, lab, report_dir=tmp_path / "r", hardware=HW)
    assert list((tmp_path / "tmp").iterdir()) == []
    res = check_image(img, lab, report_dir=tmp_path / "r2", keep_tree=True)
    kept = Path(res.run["image"]["tree"]["kept"])
    assert (kept / "etc/modprobe.d/vfio.conf").is_file()


def test_vfs_lookup_and_glob(tmp_path: Path) -> None:
    img = mkfs_ext4(tmp_path / "n.img", {
        "/a/b/c.conf": "x", "/a/.hidden.conf": "h", "/l": Link("a"), "/abs": Link("/a/b"),
        "/up": Link("../../../a"), "/loop1": Link("loop2"), "/loop2": Link("loop1")})
    scratch = tmp_path / "s"
    scratch.mkdir()
    from kgc.image.extfs import ExtFS

    vfs = Vfs(ExtFS(img, 0, scratch))
    assert vfs.lookup("/l/b/c.conf").canon == "/a/b/c.conf"
    assert vfs.lookup("/abs/c.conf").canon == "/a/b/c.conf"
    assert vfs.lookup("/up/b/../b/c.conf").canon == "/a/b/c.conf"
    assert vfs.lookup("/loop1") is None and vfs.lookup("/loop1", follow=False).kind == "link"
    assert [p for p, _n in vfs.glob("/l/*.conf")] == []  # * skips dot files, as sh does
    assert [p for p, _n in vfs.glob("/l/.*.conf")] == ["/l/.hidden.conf"]
    # the shell follows symlinked directories while globbing; a symlink loop matches nothing
    assert [p for p, _n in vfs.glob("/*/b/*.conf")] == [
        "/a/b/c.conf", "/l/b/c.conf", "/up/b/c.conf"]
