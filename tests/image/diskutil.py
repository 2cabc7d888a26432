"""Small synthetic disk images for the image reader's self-tests, built without mounting:
ext4 filesystems from a dict with ``mkfs.ext4 -d``, and GPT/MBR partition tables written
byte by byte (layouts per the UEFI spec: protective MBR, header at LBA 1, 128-byte
entries, CRC32 over header and entry array; backup header at the last LBA)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path

SECTOR = 512
LINUX_FS = "0fc63daf-8483-4772-8e79-3d69d8477de4"
LINUX_ROOT_X86_64 = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709"
EFI = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
LVM = "e6d6d379-f507-44c2-a23c-238f2a3df928"


@dataclass(frozen=True)
class Link:
    target: str


@dataclass(frozen=True)
class Special:
    kind: str  # "fifo"


def populate(root: Path, files: dict[str, str | bytes | Link | Special | None]) -> None:
    """Write a tree: text/bytes -> file, Link -> symlink, None -> directory."""
    for path, content in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            p.mkdir(parents=True, exist_ok=True)
        elif isinstance(content, Link):
            os.symlink(content.target, p)
        elif isinstance(content, Special):
            os.mkfifo(p)
        elif isinstance(content, bytes):
            p.write_bytes(content)
        else:
            p.write_text(content)
        if "/bin/" in path and not isinstance(content, Link | Special) and content is not None:
            p.chmod(0o755)


def mkfs_ext4(out: Path, files: dict[str, str | bytes | Link | Special | None],
              size_mb: int = 16, label: str = "", fs_uuid: str = "") -> Path:
    stage = Path(tempfile.mkdtemp(prefix="kgc-mkfs-"))
    try:
        populate(stage, files)
        with open(out, "wb") as fh:
            fh.truncate(size_mb * 1024 * 1024)
        cmd = ["mkfs.ext4", "-q", "-F", "-E", "root_owner=0:0", "-d", str(stage)]
        if label:
            cmd += ["-L", label]
        if fs_uuid:
            cmd += ["-U", fs_uuid]
        subprocess.run([*cmd, str(out)], check=True, capture_output=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out


@dataclass(frozen=True)
class Part:
    image: Path | None  # filesystem image to copy in (None: leave zeros)
    type_guid: str = LINUX_FS
    name: str = ""
    size: int = 0  # bytes; default: the image's size
    mbr_type: int = 0x83


def _copy_sparse(src: Path, dst_fd: int, offset: int) -> None:
    with open(src, "rb") as fh:
        pos = 0
        while True:
            chunk = fh.read(1024 * 1024)
            if not chunk:
                break
            if chunk.strip(b"\0"):
                os.pwrite(dst_fd, chunk, offset + pos)
            pos += len(chunk)


def _layout(parts: list[Part]) -> tuple[list[tuple[int, int]], int]:
    start = 1024 * 1024
    spans = []
    for p in parts:
        size = p.size or (p.image.stat().st_size if p.image else 1024 * 1024)
        size = -(-size // (1024 * 1024)) * 1024 * 1024
        spans.append((start, size))
        start += size
    return spans, start + 1024 * 1024


def gpt_disk(out: Path, parts: list[Part], disk_guid: str = "") -> list[tuple[int, int]]:
    """A GPT disk with these partitions (1 MiB aligned); returns (offset, size) of each."""
    spans, total = _layout(parts)
    nlba = total // SECTOR
    entries = bytearray(128 * 128)
    for i, (p, (off, size)) in enumerate(zip(parts, spans, strict=True)):
        e = struct.pack("<16s16sQQQ72s", uuid.UUID(p.type_guid).bytes_le,
                        uuid.uuid4().bytes_le, off // SECTOR, (off + size) // SECTOR - 1, 0,
                        p.name.encode("utf-16-le")[:72])
        entries[i * 128:(i + 1) * 128] = e
    ecrc = zlib.crc32(bytes(entries)) & 0xFFFFFFFF
    dguid = uuid.UUID(disk_guid) if disk_guid else uuid.uuid4()

    def header(my: int, alt: int, table: int) -> bytes:
        h = bytearray(struct.pack("<8sIIIIQQQQ16sQIII", b"EFI PART", 0x00010000, 92, 0, 0,
                                  my, alt, 34, nlba - 34, dguid.bytes_le, table, 128, 128,
                                  ecrc))
        struct.pack_into("<I", h, 16, zlib.crc32(bytes(h)) & 0xFFFFFFFF)
        return bytes(h) + b"\0" * (SECTOR - len(h))

    mbr = bytearray(SECTOR)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\0\x02\0", 0xEE, b"\xff\xff\xff", 1,
                               min(nlba - 1, 0xFFFFFFFF))
    mbr[510:512] = b"\x55\xaa"
    with open(out, "wb") as fh:
        fh.truncate(total)
        fd = fh.fileno()
        os.pwrite(fd, bytes(mbr), 0)
        os.pwrite(fd, header(1, nlba - 1, 2), SECTOR)
        os.pwrite(fd, bytes(entries), 2 * SECTOR)
        os.pwrite(fd, bytes(entries), (nlba - 33) * SECTOR)
        os.pwrite(fd, header(nlba - 1, 1, nlba - 33), (nlba - 1) * SECTOR)
        for p, (off, _size) in zip(parts, spans, strict=True):
            if p.image is not None:
                _copy_sparse(p.image, fd, off)
    return spans


def mbr_disk(out: Path, parts: list[Part]) -> list[tuple[int, int]]:
    spans, total = _layout(parts)
    mbr = bytearray(SECTOR)
    for i, (p, (off, size)) in enumerate(zip(parts, spans, strict=True)):
        mbr[446 + 16 * i:462 + 16 * i] = struct.pack("<B3sB3sII", 0, b"\0\0\0", p.mbr_type,
                                                     b"\0\0\0", off // SECTOR, size // SECTOR)
    mbr[510:512] = b"\x55\xaa"
    with open(out, "wb") as fh:
        fh.truncate(total)
        os.pwrite(fh.fileno(), bytes(mbr), 0)
        for p, (off, _size) in zip(parts, spans, strict=True):
            if p.image is not None:
                _copy_sparse(p.image, fh.fileno(), off)
    return spans


def to_qcow2(raw: Path, out: Path) -> Path:
    subprocess.run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw),
                    str(out)], check=True)
    return out


def cpio_newc(files: dict[str, bytes | None]) -> bytes:
    """A newc cpio archive (what initramfs-tools writes); None -> a directory."""
    out = bytearray()
    ino = 1

    def add(name: str, data: bytes, mode: int) -> None:
        nonlocal ino
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        out.extend(hdr.encode() + nb)
        out.extend(b"\0" * (-len(out) % 4))
        out.extend(data)
        out.extend(b"\0" * (-len(out) % 4))
        ino += 1

    for name, data in files.items():
        add(name, data or b"", 0o040755 if data is None else 0o100644)
    add("TRAILER!!!", b"", 0)
    out.extend(b"\0" * (-len(out) % 512))
    return bytes(out)
