"""The image reader's pure parsers: partition tables, filesystem signatures, ext
superblocks, debugfs listings, boot loader entries, initramfs archives, module aliases.
Total (hypothesis): any input gives a result or the module's own one-line error."""

from __future__ import annotations

import gzip
import lzma
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from diskutil import LINUX_ROOT_X86_64, Part, cpio_newc, gpt_disk, mbr_disk, mkfs_ext4
from hypothesis import given, settings
from hypothesis import strategies as st

from kgc.image import boot
from kgc.image.disk import (
    HEAD_BYTES,
    ImageError,
    fs_type,
    layout,
    parse_ext_super,
    parse_gpt,
    parse_mbr,
)
from kgc.image.extfs import parse_ls


# -- partition tables --------------------------------------------------------------------------
def test_gpt_and_mbr_layouts(tmp_path: Path) -> None:
    fs = mkfs_ext4(tmp_path / "r.ext4", {"/etc/os-release": "x"}, size_mb=4)
    disk = tmp_path / "g.raw"
    spans = gpt_disk(disk, [Part(None, size=1024 * 1024), Part(fs, LINUX_ROOT_X86_64, "root")])
    head = disk.read_bytes()[:HEAD_BYTES]
    lay = layout(head, disk.stat().st_size)
    assert lay.scheme == "gpt" and [p.kind for p in lay.partitions] == [
        "linux", "linux-root-x86-64"]
    assert (lay.partitions[1].start, lay.partitions[1].size) == spans[1]
    assert lay.partitions[1].name == "root"
    assert parse_mbr(head) is not None  # the protective MBR is there too
    mdisk = tmp_path / "m.raw"
    mbr_disk(mdisk, [Part(fs, mbr_type=0x83)])
    mlay = layout(mdisk.read_bytes()[:HEAD_BYTES], mdisk.stat().st_size)
    assert mlay.scheme == "mbr" and mlay.partitions[0].kind == "linux"
    bare = layout(fs.read_bytes()[:HEAD_BYTES], fs.stat().st_size)
    assert bare.scheme == "none" and bare.partitions[0].kind == "ext"
    with pytest.raises(ImageError, match="truncated image"):
        layout(head, spans[1][0] + 1000)
    ext = bytearray(512)
    ext[446 + 4] = 0x05
    ext[446 + 12] = 1
    ext[510:512] = b"\x55\xaa"
    with pytest.raises(ImageError, match="extended partition"):
        parse_mbr(bytes(ext))


def test_filesystem_signatures_and_ext_superblock(tmp_path: Path) -> None:
    fs = mkfs_ext4(tmp_path / "r.ext4", {"/a": "x"}, size_mb=4, label="kgcroot",
                   fs_uuid="12345678-1234-4234-8234-123456789abc")
    blk = fs.read_bytes()[:70000]
    assert fs_type(blk) == "ext"
    sb = parse_ext_super(blk)
    assert (sb.label, sb.uuid, sb.size) == ("kgcroot", "12345678-1234-4234-8234-123456789abc",
                                            4 * 1024 * 1024)
    assert fs_type(b"XFSB" + b"\0" * 5000) == "xfs"
    assert fs_type(b"LUKS\xba\xbe" + b"\0" * 100) == "luks"
    lvm = bytearray(4096)
    lvm[512:520] = b"LABELONE"
    lvm[536:544] = b"LVM2 001"
    assert fs_type(bytes(lvm)) == "lvm"
    assert fs_type(b"\0" * 70000) is None


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=4096), size=st.integers(0, 2**40),
       sig=st.sampled_from([b"", b"EFI PART", b"\x55\xaa"]))
def test_layout_is_total(data: bytes, size: int, sig: bytes) -> None:
    head = bytearray(data.ljust(1024, b"\0"))
    if sig == b"EFI PART":
        head[512:520] = sig
    elif sig:
        head[510:512] = sig
    try:
        lay = layout(bytes(head), size)
    except ImageError as exc:
        assert "\n" not in str(exc)
        return
    for p in lay.partitions:
        assert 0 <= p.start and p.end <= max(size, p.end if lay.scheme == "none" else size)


@settings(max_examples=200, deadline=None)
@given(count=st.integers(0, 3000), esize=st.integers(0, 5000), lba=st.integers(0, 2**64 - 1),
       entry=st.binary(min_size=128, max_size=128))
def test_gpt_parser_with_valid_checksums_but_wild_fields(count, esize, lba, entry) -> None:
    head = bytearray(HEAD_BYTES)
    table = (entry * 4)[: max(0, min(count * esize, 65536))]
    hdr = bytearray(struct.pack("<8sIIIIQQQQ16sQIII", b"EFI PART", 0x10000, 92, 0, 0, 1, 2,
                                34, 100, b"\1" * 16, lba % 4096, count, esize,
                                zlib.crc32(bytes(table)) & 0xFFFFFFFF))
    struct.pack_into("<I", hdr, 16, zlib.crc32(bytes(hdr)) & 0xFFFFFFFF)
    head[512:512 + len(hdr)] = hdr
    off = (lba % 4096) * 512
    head[off:off + len(table)] = table[: max(0, HEAD_BYTES - off)]
    try:
        parse_gpt(bytes(head), 2**40)
    except ImageError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=0, max_size=3000))
def test_ext_superblock_parser_is_total(data: bytes) -> None:
    blk = bytearray(data.ljust(2048, b"\0"))
    blk[1080:1082] = b"\x53\xef"
    try:
        parse_ext_super(bytes(blk))
    except ImageError:
        pass


def test_debugfs_listing_parser() -> None:
    text = ("/2/040755/0/0/.//\n/2/040755/0/0/..//\n/12/100644/0/0/a.conf/129/\n"
            "/13/120777/0/0/lib/7/\n/14/140755/0/0/sock/0/\nnot a line\n/x/y/\n")
    got = parse_ls(text)
    assert got is not None
    assert {n: (e.ino, e.kind, e.size) for n, e in got.items()} == {
        "a.conf": (12, "file", 129), "lib": (13, "link", 7), "sock": (14, "socket", 0)}
    assert parse_ls("") is None and parse_ls("/nonexistent: File not found") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_debugfs_listing_parser_is_total(text: str) -> None:
    parse_ls(text)


# -- boot loader entries -
def test_bls_default_is_the_newest_unless_loader_conf_says_otherwise() -> None:
    entries = {
        "/boot/loader/entries/a-6.1.0-9.conf": "linux /boot/vmlinuz-6.1.0-9-amd64\n"
                                              "initrd /boot/initrd.img-6.1.0-9-amd64\n",
        "/boot/loader/entries/a-6.1.0-10.conf": "title new\nlinux /boot/vmlinuz-6.1.0-10-amd64\n"
                                               "options root=/dev/vda vfio-pci.ids=10de:2335\n"
                                               "options quiet\n",
        "/boot/loader/entries/bad.conf": "title no kernel\n",
    }
    e = boot.bls_default(entries)
    assert e is not None and e.version == "6.1.0-10-amd64" and e.title == "new"
    assert e.options == "root=/dev/vda vfio-pci.ids=10de:2335 quiet"
    e = boot.bls_default(entries, "timeout 3\ndefault a-6.1.0-9.conf\n")
    assert e is not None and e.version == "6.1.0-9-amd64"
    assert e.initrd == ("/boot/initrd.img-6.1.0-9-amd64",)
    assert boot.bls_default({"/x.conf": "title only"}) is None
    uki = boot.parse_bls("/efi/loader/entries/m.conf",
                         "linux /abc123/6.8.0-1/linux\ninitrd /abc123/6.8.0-1/initrd\n")
    assert uki is not None and uki.version == "6.8.0-1"


def test_grub_default_entry() -> None:
    cfg = """set default="1"
menuentry 'Debian' --class debian {
    load_video
    linux   /boot/vmlinuz-6.1.0-9-amd64 root=UUID=abc ro quiet
    initrd  /boot/initrd.img-6.1.0-9-amd64
}
submenu 'Advanced options' {
    menuentry 'Debian, with Linux 6.1.0-8-amd64' {
        linux /boot/vmlinuz-6.1.0-8-amd64 root=UUID=abc ro intel_iommu=on
        initrd /boot/initrd.img-6.1.0-8-amd64
    }
}
"""
    e = boot.grub_default("/boot/grub/grub.cfg", cfg)
    assert e is not None and e.version == "6.1.0-8-amd64" and "intel_iommu=on" in e.options
    e = boot.grub_default("/g", cfg.replace('set default="1"', 'set default="${saved}"'))
    assert e is not None and e.version == "6.1.0-9-amd64"
    assert boot.grub_default("/g", "no entries") is None
    assert boot.newest_kernel(["vmlinuz-6.1.0-9-amd64", "vmlinuz-6.1.0-10-amd64",
                               "config-6.1.0-11"]) == "6.1.0-10-amd64"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=600))
def test_boot_parsers_are_total(text: str) -> None:
    boot.grub_default("/g", text)
    boot.bls_default({"/e.conf": text}, text)
    boot.newest_kernel(text.split())


# -- initramfs -
FILES = {"usr/lib/modules/6.1/kernel/drivers/vfio/pci/vfio-pci.ko": b"x",
         "usr/lib/modules/6.1/kernel/net/e1000.ko.zst": b"y",
         "etc/modprobe.d/vfio.conf": b"options vfio-pci ids=1:2\n", "conf/modules": b"",
         "bin/sh": b"#!", "usr": None}


@pytest.mark.parametrize("compress", ["none", "gzip", "xz", "lzma", "bzip2", "zstd",
                                      "early+gzip", "gzip-multi"])
def test_initramfs_formats(compress: str) -> None:
    import bz2

    arc = cpio_newc(FILES)
    data = {
        "none": arc, "gzip": gzip.compress(arc), "xz": lzma.compress(arc),
        "lzma": lzma.compress(arc, format=lzma.FORMAT_ALONE), "bzip2": bz2.compress(arc),
        "early+gzip": cpio_newc({"kernel/x86/microcode/AuthenticAMD.bin": b"u"})
        + gzip.compress(arc),
        "gzip-multi": gzip.compress(arc[:1000]) + gzip.compress(arc[1000:]),
    }.get(compress)
    if compress == "zstd":
        data = subprocess.run(["zstd", "-q", "-c"], input=arc, capture_output=True,
                              check=True).stdout
    assert data is not None
    text, rc, fmts = boot.initramfs_listing("/boot/initrd.img-6.1", data)
    assert rc == 0, text
    lines = text.splitlines()
    assert lines[0] == "# image /boot/initrd.img-6.1"
    assert lines[1:] == ["usr/lib/modules/6.1/kernel/drivers/vfio/pci/vfio-pci.ko",
                         "usr/lib/modules/6.1/kernel/net/e1000.ko.zst",
                         "etc/modprobe.d/vfio.conf", "conf/modules"]
    assert fmts.endswith(compress.split("+")[-1].replace("none", "cpio").replace(
        "gzip-multi", "gzip"))


def test_initramfs_errors_are_one_line_listings() -> None:
    for data in (b"", b"garbage here", gzip.compress(b"not a cpio archive"),
                 cpio_newc(FILES)[:300], b"\x1f\x8b" + b"\0" * 50):
        text, rc, _ = boot.initramfs_listing("/boot/i", data)
        assert rc == 5 and "KGC-IMAGE-INITRAMFS-UNREADABLE" in text


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.sampled_from([b"", b"070701", b"\x1f\x8b", b"\xfd7zXZ\x00"]))
def test_initramfs_reader_is_total(data: bytes, prefix: bytes) -> None:
    try:
        boot.initramfs_entries(prefix + data, limit=1 << 20)
    except boot.InitramfsError:
        pass


# -- module aliases ------------------------------------------------------------------------------
def test_modalias_resolution_like_modprobe_R() -> None:
    aliases = boot.parse_aliases(
        "alias pci:v00008086d0000100Esv*sd*bc*sc*i* e1000\n"
        "alias pci:v*d*sv*sd*bc01sc06i01* ahci\nalias pci:v00008086d00002922sv*sd*bc*sc*i* ahci\n"
        "alias usb:v1234p* usbthing\nnot an alias line\n",
        "alias pci:v00001AF4d00001000sv*sd*bc*sc*i* virtio_net\n")
    out = boot.modalias_output({
        "0000:01:01.0": "pci:v00008086d0000100Esv00008086sd00001100bc02sc00i00",
        "0000:01:02.0": "pci:v00008086d0000100Esv00008086sd00001100bc02sc00i00",
        "0000:00:1f.2": "pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01",
        "0000:00:02.0": "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
        "0000:00:03.0": ""}, aliases)
    from kgc.core.hostfs import CommandResult, HostSnapshot
    from kgc.evidence.vfio_config import parse_modalias_drivers

    got = parse_modalias_drivers(HostSnapshot(commands={"pci_modalias_drivers":
                                                        CommandResult(0, out)}))
    assert got == {"0000:01:01.0": ("e1000",), "0000:01:02.0": ("e1000",),
                   "0000:00:1f.2": ("ahci",), "0000:00:02.0": ("virtio_net",)}
