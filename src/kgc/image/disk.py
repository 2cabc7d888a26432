"""A node image file, read-only and in user space: format, partition table, filesystems.

Nothing here mounts anything or needs a kernel module. A raw image is read with ``pread``;
a qcow2 image through ``qemu-img`` (``dd`` for a few sectors, ``convert`` of one partition
into a private sparse raw file for the filesystem reader). The partition table (MBR, GPT)
and the filesystem signatures are parsed by the pure functions below, which never raise
anything but :class:`ImageError` (one line, exit 2) on any input.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import tempfile
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path

SECTOR = 512
HEAD_BYTES = 1024 * 1024  # MBR + GPT header and entries live in the first MiB
QEMU_TIMEOUT_S = 600

# GPT partition type GUIDs (UEFI spec; systemd Discoverable Partitions Specification)
GPT_TYPES = {
    "c12a7328-f81f-11d2-ba4b-00a0c93ec93b": "efi",
    "21686148-6449-6e6f-744e-656564454649": "bios-boot",
    "0fc63daf-8483-4772-8e79-3d69d8477de4": "linux",
    "4f68bce3-e8cd-4db1-96e7-fbcaf984b709": "linux-root-x86-64",
    "b921b045-1df0-41c3-af44-4c6f280d3fae": "linux-root-arm64",
    "44479540-f297-41b2-9af7-d131d5f0458a": "linux-root-x86",
    "bc13c2ff-59e6-4262-a352-b275fd6f7172": "linux-xbootldr",
    "933ac7e1-2eb4-4f13-b844-0e14e2aef915": "linux-home",
    "0657fd6d-a4ab-43c4-84e5-0933c84b4f4f": "linux-swap",
    "e6d6d379-f507-44c2-a23c-238f2a3df928": "linux-lvm",
    "a19d880f-05fc-4d3b-a006-743f0f84911e": "linux-raid",
    "ca7d7ccb-63ed-4c53-861c-1742536059cc": "linux-luks",
    "8da63339-0007-60c0-c436-083ac8230908": "linux-reserved",
    "ebd0a0a2-b9e5-4433-87c0-68b6b72699c7": "basic-data",
}
MBR_TYPES = {0x83: "linux", 0x82: "linux-swap", 0x8E: "linux-lvm", 0xEF: "efi",
             0xFD: "linux-raid", 0x0C: "fat32", 0x0B: "fat32", 0x06: "fat16", 0x07: "ntfs"}
MBR_EXTENDED = (0x05, 0x0F, 0x85)
# partitions that may hold a Linux root filesystem
LINUX_DATA = ("linux", "linux-root-x86-64", "linux-root-arm64", "linux-root-x86",
              "linux-xbootldr", "basic-data")

OTHER_FORMATS = {
    b"KDMV": "vmdk", b"vhdx": "vhdx", b"QED\x00": "qed", b"conectix": "vpc (vhd)",
    b"<<< Oracle VM VirtualBox Disk Image >>>": "vdi",
}


class ImageError(Exception):
    """The image cannot be read as a node image. ``str()`` is one line (exit 2)."""


@dataclass(frozen=True)
class Partition:
    number: int
    start: int  # bytes from the start of the disk
    size: int  # bytes
    kind: str  # efi, linux, linux-lvm, ... or "gpt:<guid>" / "mbr:0xNN" when unknown
    name: str = ""
    partuuid: str = ""

    @property
    def end(self) -> int:
        return self.start + self.size


@dataclass(frozen=True)
class Layout:
    scheme: str  # gpt | mbr | none (a bare filesystem)
    partitions: tuple[Partition, ...]


def _u32(b: bytes, off: int) -> int:
    return int(struct.unpack_from("<I", b, off)[0])


def _u64(b: bytes, off: int) -> int:
    return int(struct.unpack_from("<Q", b, off)[0])


def _guid(b: bytes) -> str:
    return str(uuid.UUID(bytes_le=bytes(b)))


def parse_gpt(head: bytes, disk_size: int) -> Layout | None:
    """GPT from the first MiB (header at LBA 1 for 512-byte sectors, at 4096 for 4Kn).
    None when there is no GPT signature; ImageError when there is one that is corrupt."""
    for sector in (SECTOR, 4096):
        if len(head) < sector + 92 or head[sector:sector + 8] != b"EFI PART":
            continue
        hdr = head[sector:sector + 512]
        hsize = _u32(hdr, 12)
        if not 92 <= hsize <= min(512, sector):
            raise ImageError(f"GPT header size {hsize} is invalid: corrupt partition table")
        want = _u32(hdr, 16)
        probe = bytearray(hdr[:hsize])
        probe[16:20] = b"\0\0\0\0"
        if zlib.crc32(bytes(probe)) & 0xFFFFFFFF != want:
            raise ImageError("GPT header checksum mismatch: corrupt partition table")
        entries_lba, count, esize = _u64(hdr, 72), _u32(hdr, 80), _u32(hdr, 84)
        if not (128 <= esize <= 4096 and esize % 8 == 0) or count > 1024:
            raise ImageError(f"GPT entry table ({count} x {esize} bytes) is invalid")
        off = entries_lba * sector
        table = head[off:off + count * esize]
        if len(table) < count * esize:
            raise ImageError("GPT entry table lies beyond the first MiB of the image: "
                             "unsupported layout")
        if zlib.crc32(table) & 0xFFFFFFFF != _u32(hdr, 88):
            raise ImageError("GPT entry table checksum mismatch: corrupt partition table")
        parts = []
        for i in range(count):
            e = table[i * esize:(i + 1) * esize]
            tguid = _guid(e[0:16])
            if tguid == "00000000-0000-0000-0000-000000000000":
                continue
            first, last = _u64(e, 32), _u64(e, 40)
            if last < first:
                raise ImageError(f"GPT partition {i + 1} ends before it starts: corrupt")
            name = e[56:128].decode("utf-16-le", errors="replace").split("\0", 1)[0]
            parts.append(Partition(i + 1, first * sector, (last - first + 1) * sector,
                                   GPT_TYPES.get(tguid, f"gpt:{tguid}"), name,
                                   _guid(e[16:32])))
        return Layout("gpt", tuple(parts))
    return None


def parse_mbr(head: bytes) -> Layout | None:
    """Primary MBR partitions (None: no MBR boot signature)."""
    if len(head) < SECTOR or head[510:512] != b"\x55\xaa":
        return None
    parts = []
    for i in range(4):
        e = head[446 + 16 * i:446 + 16 * (i + 1)]
        ptype, lba, n = e[4], _u32(e, 8), _u32(e, 12)
        if ptype == 0 or n == 0:
            continue
        if e[0] not in (0x00, 0x80):
            return None  # not a partition table (a boot sector whose bytes only look like one)
        if ptype in MBR_EXTENDED:
            raise ImageError(f"MBR partition {i + 1} is an extended partition (logical "
                             "partitions are not supported): use a GPT or primary partitions")
        parts.append(Partition(i + 1, lba * SECTOR, n * SECTOR,
                               MBR_TYPES.get(ptype, f"mbr:0x{ptype:02x}")))
    return Layout("mbr", tuple(parts))


def fs_type(block: bytes) -> str | None:
    """The filesystem (or volume) whose signature starts ``block`` (>= 68 KiB for btrfs)."""
    if len(block) >= 1082 and block[1080:1082] == b"\x53\xef":
        return "ext"
    if block[:4] == b"XFSB":
        return "xfs"
    if len(block) >= 65536 + 72 and block[65536 + 64:65536 + 72] == b"_BHRfS_M":
        return "btrfs"
    if block[:6] == b"LUKS\xba\xbe":
        return "luks"
    if len(block) >= 1048 and block[512:520] == b"LABELONE" and block[536:544] == b"LVM2 001":
        return "lvm"
    if block[:4] in (b"hsqs", b"sqsh"):
        return "squashfs"
    if len(block) >= 512 and block[510:512] == b"\x55\xaa" and (
            block[82:87] == b"FAT32" or block[54:59] in (b"FAT12", b"FAT16")):
        return "vfat"
    if len(block) >= 4096 and block[4086:4096] in (b"SWAPSPACE2", b"SWAP-SPACE"):
        return "swap"
    if len(block) >= 32774 and block[32769:32774] == b"CD001":
        return "iso9660"
    return None


@dataclass(frozen=True)
class ExtSuper:
    size: int  # bytes the filesystem spans
    block_size: int
    uuid: str
    label: str
    features_incompat: int

    @property
    def journal_dev(self) -> bool:
        return bool(self.features_incompat & 0x8)


def parse_ext_super(block: bytes) -> ExtSuper:
    """The ext2/3/4 superblock at offset 1024 of ``block``."""
    sb = block[1024:2048]
    if len(sb) < 1024 or sb[56:58] != b"\x53\xef":
        raise ImageError("no ext2/3/4 superblock")
    log = _u32(sb, 24)
    if log > 6:
        raise ImageError(f"ext superblock: block size 2^{10 + log} is invalid: corrupt")
    bs = 1024 << log
    incompat = _u32(sb, 0x60)
    blocks = _u32(sb, 4)
    if incompat & 0x80:  # 64bit
        blocks |= _u32(sb, 0x150) << 32
    label = sb[0x78:0x88].split(b"\0", 1)[0].decode("utf-8", errors="replace")
    return ExtSuper(blocks * bs, bs, str(uuid.UUID(bytes=bytes(sb[0x68:0x78]))), label,
                    incompat)


def layout(head: bytes, disk_size: int) -> Layout:
    """The disk's partitions, or one pseudo-partition for a bare filesystem."""
    gpt = parse_gpt(head, disk_size)
    if gpt is not None:
        lay = gpt
    else:
        mbr = parse_mbr(head)
        if mbr is not None and any(p.kind != "mbr:0xee" for p in mbr.partitions) and \
                mbr.partitions:
            lay = mbr
        elif mbr is not None and any(p.kind == "mbr:0xee" for p in mbr.partitions):
            raise ImageError("protective MBR without a valid GPT header: corrupt partition "
                             "table")
        elif fs_type(head) is not None:
            return Layout("none", (Partition(0, 0, disk_size, fs_type(head) or ""),))
        elif mbr is not None:
            raise ImageError("an MBR with no partitions and no filesystem at the start")
        else:
            raise ImageError("no partition table I know (GPT, MBR) and no filesystem at the "
                             "start: not a disk image, or an unknown partition table")
    for p in lay.partitions:
        if p.end > disk_size:
            raise ImageError(f"partition {p.number} ends at byte {p.end}, beyond the image's "
                             f"{disk_size} bytes: truncated image")
    return lay


# -- the image file ---------------------------------------------------------------------
class ImageFile:
    """One image file (raw or qcow2), read-only. ``bytes_read`` counts what this object
    read itself; partitions handed to the filesystem reader are counted by the caller."""

    def __init__(self, path: str | Path, scratch: Path) -> None:
        self.path = Path(path)
        self.scratch = scratch
        self.bytes_read = 0
        self.converted_bytes = 0
        try:
            st = self.path.stat()
        except FileNotFoundError:
            raise ImageError(f"{self.path}: no such file") from None
        except OSError as exc:
            raise ImageError(f"{self.path}: cannot read: {exc.strerror or exc}") from None
        if not self.path.is_file():
            raise ImageError(f"{self.path}: not a regular file")
        if not os.access(self.path, os.R_OK):
            raise ImageError(f"{self.path}: not readable")
        with open(self.path, "rb") as fh:
            magic = fh.read(64)
        self.bytes_read += len(magic)
        if not magic:
            raise ImageError(f"{self.path}: empty file, not a disk image")
        if magic[:4] == b"QFI\xfb":
            self.format = "qcow2"
            self.size = self._qcow2_info()
        else:
            for sig, name in OTHER_FORMATS.items():
                if magic.startswith(sig):
                    raise ImageError(f"{self.path}: a {name} image; kgc reads qcow2 or raw "
                                     "(qemu-img convert -O qcow2 IN OUT)")
            self.format = "raw"
            self.size = st.st_size
            if self.size < 64 * 1024:
                raise ImageError(f"{self.path}: {self.size} bytes, too small for a disk image")

    def _qemu(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            res = subprocess.run(["qemu-img", *args], capture_output=True, text=True,
                                 timeout=QEMU_TIMEOUT_S, check=False)
        except FileNotFoundError:
            raise ImageError("qemu-img not found: install qemu-utils to read qcow2 "
                             "images") from None
        except subprocess.TimeoutExpired:
            raise ImageError(f"{self.path}: qemu-img {args[0]} took longer than "
                             f"{QEMU_TIMEOUT_S} s") from None
        if res.returncode != 0:
            err = " ".join((res.stderr or res.stdout).split())[:300]
            raise ImageError(f"{self.path}: qemu-img {args[0]} failed: {err}")
        return res

    def _qcow2_info(self) -> int:
        res = self._qemu(["info", "--output=json", "-f", "qcow2", str(self.path)])
        try:
            info = json.loads(res.stdout)
            size = int(info["virtual-size"])
        except (ValueError, KeyError, TypeError):
            raise ImageError(f"{self.path}: qemu-img info gave no usable answer") from None
        if info.get("backing-filename") or info.get("full-backing-filename"):
            raise ImageError(f"{self.path}: a qcow2 overlay with a backing file "
                             f"({str(info.get('backing-filename'))[:80]}): flatten it first "
                             "(qemu-img convert -O qcow2 IN OUT)")
        data = (info.get("format-specific") or {}).get("data") or {}
        if data.get("data-file"):
            raise ImageError(f"{self.path}: a qcow2 image with an external data file: "
                             "flatten it first (qemu-img convert -O qcow2 IN OUT)")
        if data.get("corrupt"):
            raise ImageError(f"{self.path}: qemu-img marks this qcow2 image corrupt")
        # metadata check (milliseconds): a truncated file has clusters beyond its end
        try:
            chk = subprocess.run(["qemu-img", "check", "--output=json", "-f", "qcow2",
                                  str(self.path)], capture_output=True, text=True,
                                 timeout=QEMU_TIMEOUT_S, check=False)
            report = json.loads(chk.stdout) if chk.stdout.strip() else {}
        except (subprocess.TimeoutExpired, ValueError):
            report = {}
        bad = int(report.get("corruptions") or 0) + int(report.get("check-errors") or 0)
        if bad or (chk.returncode not in (0, 3) and not report):
            first = next((ln for ln in chk.stderr.splitlines() if ln.strip()), "")
            raise ImageError(f"{self.path}: qemu-img check finds {bad or 'errors'} "
                             f"corruption(s): truncated or damaged qcow2 ({first[:160]})")
        return size

    def read_at(self, offset: int, length: int) -> bytes:
        """Bytes of the virtual disk (short at the end of the disk)."""
        length = max(0, min(length, self.size - offset))
        if length == 0:
            return b""
        if self.format == "raw":
            with open(self.path, "rb") as fh:
                data = os.pread(fh.fileno(), length, offset)
            self.bytes_read += len(data)
            return data
        # a slice of the virtual disk through qemu's raw driver (offset/size) on top of the
        # qcow2 one: `qemu-img dd skip=` refuses offsets beyond `count` blocks
        start = offset // SECTOR * SECTOR
        end = min(self.size, -(-(offset + length) // SECTOR) * SECTOR)
        fd, tmp = tempfile.mkstemp(dir=self.scratch, suffix=".slice")
        os.close(fd)
        try:
            self._qemu(["convert", "--image-opts", self._slice_opts(start, end - start),
                        "-O", "raw", tmp])
            data = Path(tmp).read_bytes()
        finally:
            Path(tmp).unlink(missing_ok=True)
        self.bytes_read += len(data)
        return data[offset - start:offset - start + length]

    def _slice_opts(self, offset: int, size: int) -> str:
        if any(c in str(self.path) for c in ",:\n"):
            raise ImageError(f"{self.path}: a qcow2 path with ',' or ':' cannot be handed to "
                             "qemu-img --image-opts: rename or copy the file")
        return (f"driver=raw,offset={offset},size={size},file.driver=qcow2,"
                f"file.file.driver=file,file.file.filename={self.path}")

    def raw_view(self, part: Partition) -> tuple[Path, int]:
        """(a raw file, the byte offset of the partition in it) for the filesystem reader:
        the image itself when raw; a private sparse raw copy of just this partition when
        qcow2 (qemu-img convert copies only its allocated clusters)."""
        if self.format == "raw":
            return self.path, part.start
        out = self.scratch / f"part{part.number}.raw"
        self._qemu(["convert", "--image-opts", self._slice_opts(part.start, part.size),
                    "-O", "raw", "-S", "4k", str(out)])
        self.converted_bytes += os.stat(out).st_blocks * 512
        return out, 0
