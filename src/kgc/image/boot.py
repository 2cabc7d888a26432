"""What an image will boot, read from its files (pure functions; no I/O but decompressors).

A running node answers some questions with commands (``uname -r``, ``lsinitramfs``,
``modprobe -R``). An image is not running, and kgc never executes an image's binaries on the
gating host, so :mod:`kgc.image` answers them from the image's own files instead:

- the kernel it boots by default: the boot loader's default entry (BLS type 1 entries as
  systemd-boot and GRUB's blscfg sort them, else ``grub.cfg``'s default ``menuentry``, else
  the newest ``/boot/vmlinuz-*``);
- the contents of that kernel's initramfs: the cpio archives (newc), uncompressed or
  gzip/xz/lzma/bzip2/zstd compressed, listed in Python;
- the kernel modules that claim a device: the image's ``modules.alias`` and
  ``modules.builtin.alias`` for that kernel, matched against the device's modalias.
"""

from __future__ import annotations

import bz2
import fnmatch
import lzma
import posixpath
import re
import shlex
import shutil
import subprocess
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

# the same entries the collector's INITRAMFS_CMD keeps (kgc.evidence.vfio_config)
INITRAMFS_KEEP = re.compile(r"[.]ko([.](xz|zst|gz))?$|modprobe[.]d/|modules-load[.]d/|"
                            r"conf/modules$|driverctl")
MAX_DECOMPRESSED = 1024**3
MAX_ENTRIES = 500_000


class InitramfsError(ValueError):
    """The initramfs cannot be listed (one line)."""


@dataclass(frozen=True)
class BootEntry:
    source: str  # the file the entry came from
    title: str
    linux: str  # path as the boot loader names it
    initrd: tuple[str, ...]
    options: str
    version: str  # kernel release ("6.1.0-50-amd64"), "" when unknown


# -- version ordering (as systemd-boot and blscfg compare versions) --------------------------
def _vkey(v: str) -> tuple[tuple[int, object], ...]:
    out: list[tuple[int, object]] = []
    for part in re.findall(r"\d+|[A-Za-z]+|~", v):
        if part == "~":
            out.append((-1, 0))
        elif part.isdigit():
            out.append((2, int(part)))
        else:
            out.append((1, part))
    return tuple(out)


def kernel_version(linux: str) -> str:
    base = posixpath.basename(linux)
    for pre in ("vmlinuz-", "vmlinux-", "bzImage-", "kernel-", "Image-"):
        if base.startswith(pre):
            return base[len(pre):]
    return ""


# -- BLS type 1 -------------------------------------------------------------------------------
def parse_bls(path: str, text: str) -> BootEntry | None:
    keys: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition(" ")
        keys.setdefault(k, []).append(v.strip())
    linux = (keys.get("linux") or [""])[0]
    if not linux:
        return None
    version = (keys.get("version") or [""])[0] or kernel_version(linux)
    if not version:
        parent = posixpath.basename(posixpath.dirname(linux))
        version = parent if re.match(r"\d", parent) else ""
    return BootEntry(path, (keys.get("title") or [""])[0], linux,
                     tuple(x for v in keys.get("initrd", []) for x in v.split()),
                     " ".join(keys.get("options", [])), version)


def bls_default(entries: Mapping[str, str], loader_conf: str | None = None) -> BootEntry | None:
    """The entry systemd-boot would start: loader.conf ``default`` (a glob over entry file
    names) if it matches, else the first in its order (newest version first)."""
    parsed = [e for p, t in entries.items() if (e := parse_bls(p, t)) is not None]
    if not parsed:
        return None
    order = sorted(parsed, key=lambda e: (_vkey(e.version), _vkey(posixpath.basename(e.source))),
                   reverse=True)
    for line in (loader_conf or "").splitlines():
        k, _, v = line.strip().partition(" ")
        if k == "default" and v.strip() and v.strip() != "@saved":
            pat = v.strip()
            for e in order:
                name = posixpath.basename(e.source)
                if fnmatch.fnmatchcase(name, pat) or fnmatch.fnmatchcase(name[:-5], pat):
                    return e
    return order[0]


# -- grub.cfg ---------------------------------------------------------------------------------
def grub_default(path: str, text: str) -> BootEntry | None:
    """grub.cfg's default entry: ``set default=N`` (a number) or the first menuentry
    (top-level entries; a submenu counts as one and its first entry is used)."""
    default = 0
    m = re.search(r'^\s*set\s+default\s*=\s*"?(\d+)"?\s*$', text, re.M)
    if m:
        default = int(m.group(1))
    top: list[list[str]] = []
    depth = 0
    cur: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if re.match(r"^(menuentry|submenu)\b", line):
            if depth == 0:
                cur = []
                top.append(cur)
            depth += line.count("{") - line.count("}")
            continue
        if depth > 0:
            if cur is not None:
                cur.append(line)
            depth += line.count("{") - line.count("}")
    if not top:
        return None
    body = top[default] if default < len(top) else top[0]
    linux, opts = "", ""
    initrd: tuple[str, ...] = ()
    for line in body:
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        if not words:
            continue
        if words[0] in ("linux", "linuxefi", "linux16") and len(words) > 1 and not linux:
            linux, opts = words[1], " ".join(words[2:])
        elif words[0] in ("initrd", "initrdefi", "initrd16") and not initrd:
            initrd = tuple(words[1:])
    if not linux:
        return None
    return BootEntry(path, "", linux, initrd, opts, kernel_version(linux))


def newest_kernel(names: Iterable[str]) -> str:
    """The newest kernel release among /boot file names (vmlinuz-*)."""
    vs = [kernel_version(n) for n in names]
    vs = [v for v in vs if v]
    return max(vs, key=_vkey) if vs else ""


# -- initramfs ----------------------------------------------------------------------------------
def _external(tool: str, data: bytes, limit: int) -> bytes:
    if shutil.which(tool) is None:
        raise InitramfsError(f"{tool}-compressed initramfs and no `{tool}` on this machine")
    try:
        res = subprocess.run([tool, "-dc"], input=data, capture_output=True, timeout=300,
                             check=False)
    except subprocess.TimeoutExpired:
        raise InitramfsError(f"{tool} -dc took longer than 300 s") from None
    if len(res.stdout) > limit:
        raise InitramfsError(f"the initramfs decompresses to more than {limit} bytes")
    if res.returncode != 0 and not res.stdout:
        raise InitramfsError(f"{tool} could not decompress the initramfs: "
                             f"{res.stderr.decode(errors='replace').strip()[:160]}")
    return res.stdout


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    while data:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out += d.decompress(data, limit - len(out) + 1)
        if len(out) > limit or d.unconsumed_tail:
            raise InitramfsError(f"the initramfs decompresses to more than {limit} bytes")
        data = d.unused_data.lstrip(b"\0")
        if data[:2] != b"\x1f\x8b":
            break
    return bytes(out)


def decompress(data: bytes, limit: int = MAX_DECOMPRESSED) -> tuple[str, bytes]:
    """(compression name, decompressed bytes) of one compressed initramfs segment."""
    try:
        if data[:2] == b"\x1f\x8b":
            return "gzip", _gunzip(data, limit)
        if data[:6] == b"\xfd7zXZ\x00":
            d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
            out = d.decompress(data, max_length=limit + 1)
            return "xz", out
        if data[:3] == b"\x5d\x00\x00":
            d = lzma.LZMADecompressor(format=lzma.FORMAT_ALONE)
            return "lzma", d.decompress(data, max_length=limit + 1)
        if data[:3] == b"BZh":
            d2 = bz2.BZ2Decompressor()
            return "bzip2", d2.decompress(data, max_length=limit + 1)
    except (zlib.error, lzma.LZMAError, OSError, EOFError, ValueError) as exc:
        raise InitramfsError(f"corrupt compressed initramfs: {exc}") from None
    if data[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd", _external("zstd", data, limit)
    if data[:4] in (b"\x02\x21\x4c\x18", b"\x04\x22\x4d\x18"):
        return "lz4", _external("lz4", data, limit)
    raise InitramfsError(f"unknown initramfs format (starts {data[:6].hex()})")


def cpio_names(data: bytes, start: int = 0) -> tuple[list[str], int]:
    """Names in the newc/crc cpio archive(s) starting at ``start``; returns them and the
    offset after the last complete archive (concatenated archives are read on)."""
    names: list[str] = []
    off = start
    end = len(data)
    while off + 110 <= end:
        while off < end and data[off] == 0:  # padding between archives
            off += 1
        if off + 110 > end or data[off:off + 6] not in (b"070701", b"070702"):
            break
        try:
            fields = [int(data[off + 6 + 8 * i:off + 14 + 8 * i], 16) for i in range(13)]
        except ValueError:
            raise InitramfsError(f"corrupt cpio header at byte {off}") from None
        fsize, nsize = fields[6], fields[11]
        if nsize == 0 or nsize > 4096:
            raise InitramfsError(f"corrupt cpio header at byte {off} (name size {nsize})")
        name_end = off + 110 + nsize
        if name_end > end:
            raise InitramfsError("truncated cpio archive")
        name = data[off + 110:name_end - 1].decode("utf-8", "replace")
        off = (name_end + 3) & ~3
        off = (off + fsize + 3) & ~3
        if off > end:
            raise InitramfsError("truncated cpio archive (file data beyond the end)")
        if name != "TRAILER!!!":
            names.append(name)
            if len(names) > MAX_ENTRIES:
                raise InitramfsError(f"more than {MAX_ENTRIES} entries: not an initramfs")
    return names, off


def initramfs_entries(data: bytes, limit: int = MAX_DECOMPRESSED) -> tuple[list[str], list[str]]:
    """Every path in an initramfs image (early uncompressed cpio archives, then one
    compressed archive to the end, as the kernel unpacks them), and the formats seen."""
    names: list[str] = []
    formats: list[str] = []
    off = 0
    while True:
        while off < len(data) and data[off] == 0:
            off += 1
        if off >= len(data):
            break
        if data[off:off + 6] in (b"070701", b"070702"):
            got, nxt = cpio_names(data, off)
            if nxt <= off:
                raise InitramfsError(f"corrupt cpio archive at byte {off}")
            names += got
            formats.append("cpio")
            off = nxt
            continue
        kind, raw = decompress(data[off:], limit)
        formats.append(kind)
        more, _ = cpio_names(raw)
        if not more:
            raise InitramfsError(f"the {kind} data holds no cpio archive")
        names += more
        break
    if not names:
        raise InitramfsError("no cpio archive in the initramfs")
    return [n.removeprefix("./") for n in names], formats


def initramfs_listing(image_path: str, data: bytes) -> tuple[str, int, str]:
    """(output, rc, formats) in the shape the collector's ``initramfs_list`` command gives."""
    try:
        names, formats = initramfs_entries(data)
    except InitramfsError as exc:
        return f"# image {image_path}\nKGC-IMAGE-INITRAMFS-UNREADABLE: {exc}\n", 5, ""
    kept = [n for n in names if INITRAMFS_KEEP.search(n)]
    return "\n".join([f"# image {image_path}", *kept]) + "\n", 0, "+".join(formats)


# -- modalias -> modules ------------------------------------------------------------------------
def parse_aliases(*texts: str) -> list[tuple[str, str]]:
    out = []
    for text in texts:
        for line in text.splitlines():
            w = line.split()
            if len(w) == 3 and w[0] == "alias":
                out.append((w[1], w[2]))
    return out


def modalias_output(devices: Mapping[str, str], aliases: list[tuple[str, str]],
                    match: Callable[[str, str], bool] = fnmatch.fnmatchcase) -> str:
    """The collector's ``pci_modalias_drivers`` output for these devices (bdf -> modalias),
    resolved against the image's module aliases as ``modprobe -R`` would."""
    lines = []
    seen: set[str] = set()
    # only patterns whose literal prefix (before the first wildcard) starts the modalias can
    # match: checking that first keeps ~25,000 aliases cheap
    pre = [(re.split(r"[*?\[]", pat, maxsplit=1)[0], pat, m) for pat, m in aliases]
    for bdf in sorted(devices):
        a = devices[bdf].strip()
        if not a:
            continue
        lines.append(f"D {bdf} {a}")
        if a in seen:
            continue
        seen.add(a)
        mods = list(dict.fromkeys(m for lit, pat, m in pre
                                  if a.startswith(lit) and match(a, pat)))
        lines.append(f"A {a} {' '.join(mods)} ")
    return "\n".join(lines)
