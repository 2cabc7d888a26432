"""Release-gating images for the lab: node images as a pipeline would ship them.

The node lab builds bare ext4 node images (``kgc_lab.node``: the ``good`` variant with
vfio-pci persisted, ``base`` with nothing persisted — what ``runtime-bind-only`` boots). A
node image that ships also carries the container runtime. These builders add that payload
to a copy of a lab image, in user space (e2fsprogs ``debugfs -w`` on the copy: no mount):

- containerd from the lab's cache (the Debian package's binary and systemd unit, enabled,
  and its stanza in ``/var/lib/dpkg/status`` as dpkg records an installed package — the
  version an offline check reads), 1.7 (trixie) or 2.x (sid);
- ``/etc/containerd/config.toml``: the right config for that version (Kata handler, NRI
  on), or the seed tutorial's (``enable_nri = true`` under the CRI plugin, which containerd
  ignores);
- Kata's configuration (the containerd lab's GPU config) and a stand-in Kata shim (a
  script: its presence is what is judged; profiles mark ``runtime.kata-shim`` simulated).

Images: ``good``, ``runtime-bind-only`` (base + the same runtime payload as good),
``seed-config`` (good + containerd 1.7 + the seed's config), ``seed-config-2`` (the seed's
config on containerd 2.x, where NRI is on by default). Cached under
``$KGC_CACHE/node/gating/`` by content hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kgc_lab.containerd import KATA_OK_CONFIG
from kgc_lab.containerd_instance import FLAVOURS, cache_dir
from kgc_lab.node import VARIANTS, build_variant, cache_root
from kgc_lab.node.lab import LabError

KATA_CONFIG = "/opt/kata/share/defaults/kata-containers/configuration.toml"
KATA_SHIM = "/opt/kata/bin/containerd-shim-kata-v2"
SHIM_STANDIN = ("#!/bin/sh\n# kgc lab stand-in for the Kata shim: its presence is what an "
                "image check judges\nexit 1\n")

GOOD_V3 = f"""version = 3

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.kata]
  runtime_type = "io.containerd.kata.v2"
  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.kata.options]
    ConfigPath = "{KATA_CONFIG}"

[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "/var/run/nri/nri.sock"
"""

# the seed tutorial's containerd config (containerd 1.7, config version 2): the Kata handler
# and `enable_nri = true` under the CRI plugin -- a key containerd does not have
SEED_V2 = f"""version = 2

[plugins."io.containerd.grpc.v1.cri"]
  enable_nri = true

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
  runtime_type = "io.containerd.kata.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata.options]
    ConfigPath = "{KATA_CONFIG}"
"""


@dataclass(frozen=True)
class GatingImage:
    name: str
    variant: str  # lab node variant it starts from
    containerd: str  # "1.7" or "2"
    config: str
    doc: str


GATING_IMAGES = {g.name: g for g in (
    GatingImage("good", "good", "2", GOOD_V3,
                "vfio-pci persisted (modprobe.d ids + softdep + modules-load.d, vfio in the "
                "initramfs); containerd 2.x with the Kata handler and NRI on"),
    GatingImage("runtime-bind-only", "base", "2", GOOD_V3,
                "nothing persists the vfio-pci binding (the seed binds at run time); the "
                "runtime payload is good's"),
    GatingImage("seed-config", "good", "1.7", SEED_V2,
                "containerd 1.7 with the seed's config: enable_nri under the CRI plugin "
                "(ignored), no NRI section: NRI is off"),
    GatingImage("seed-config-2", "good", "2", SEED_V2,
                "the seed's config on containerd 2.x: enable_nri is still ignored, but NRI is "
                "on by default from 2.0"),
)}


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, text=True, capture_output=True, check=False, **kw)  # type: ignore[call-overload]
    if res.returncode != 0:
        raise LabError(f"command failed (exit {res.returncode}): {' '.join(cmd)}\n"
                       f"{(res.stdout + res.stderr)[-2000:]}")
    return res


def _deb(flavour: str) -> Path:
    debs = sorted((cache_dir() / FLAVOURS[flavour] / "debs").glob("containerd_*.deb"))
    if not debs:
        raise LabError(f"no containerd {flavour} .deb in {cache_dir()}: run "
                       "scripts/bootstrap.d/20-containerd.sh")
    return debs[-1]


def _status_stanza(deb: Path) -> str:
    """The dpkg status stanza of an installed package, from the .deb's control fields."""
    ctl = _run(["dpkg-deb", "-f", str(deb)]).stdout.rstrip("\n")
    lines = ctl.splitlines()
    out = [lines[0], "Status: install ok installed", *lines[1:]]
    return "\n".join(out) + "\n"


def _drop_stale(out: Path) -> None:
    """Remove earlier builds of the same image (same name, another content hash)."""
    stem = out.name.rsplit("-", 1)[0]
    for old in out.parent.glob(f"{stem}-*.raw"):
        if old != out and len(old.stem) == len(stem) + 17:
            old.unlink(missing_ok=True)


def _debugfs_write(disk: Path, cmds: list[str]) -> None:
    script = Path(tempfile.mkstemp(suffix=".debugfs")[1])
    try:
        script.write_text("\n".join(cmds) + "\n")
        res = _run(["debugfs", "-w", "-f", str(script), str(disk)])
        bad = [ln for ln in res.stderr.splitlines()
               if ln.strip() and not ln.startswith("debugfs ") and "File exists" not in ln]
        if bad:
            raise LabError(f"debugfs -w on {disk}: {' '.join(bad)[:1000]}")
    finally:
        script.unlink(missing_ok=True)


def build_gating_image(name: str) -> Path:
    """Build (or reuse) one gating image; returns its raw disk (a bare ext4 filesystem)."""
    g = GATING_IMAGES[name]
    src = build_variant(VARIANTS[g.variant]).disk
    deb = _deb(g.containerd)
    pkg_root = cache_dir() / FLAVOURS[g.containerd] / "root"
    binary = pkg_root / "usr" / "bin" / "containerd"
    unit = pkg_root / "usr" / "lib" / "systemd" / "system" / "containerd.service"
    if not binary.is_file() or not unit.is_file():
        raise LabError(f"{binary} missing: run scripts/bootstrap.d/20-containerd.sh")
    h = hashlib.sha256(json.dumps([str(src), src.stat().st_mtime_ns, deb.name, g.config,
                                   KATA_OK_CONFIG, SHIM_STANDIN,
                                   Path(__file__).read_text()]).encode()).hexdigest()[:16]
    out_dir = cache_root() / "gating"
    out = out_dir / f"{name}-{h}.raw"
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".gating-{name}-", dir=out_dir))
    try:
        disk = work / "disk.raw"
        _run(["cp", "--sparse=always", str(src), str(disk)])
        status = work / "status"
        _run(["debugfs", "-R", f"dump /var/lib/dpkg/status {status}", str(disk)])
        if not status.is_file():
            raise LabError(f"{src}: no /var/lib/dpkg/status")
        text = status.read_text()
        status.write_text(text.rstrip("\n") + "\n\n" + _status_stanza(deb))
        files = {"config.toml": (g.config, 0o644), "configuration.toml": (KATA_OK_CONFIG, 0o644),
                 "shim": (SHIM_STANDIN, 0o755)}
        for fname, (content, mode) in files.items():
            p = work / fname
            p.write_text(content)
            os.chmod(p, mode)
        os.chmod(status, 0o644)
        cmds = [
            "rm /var/lib/dpkg/status", "cd /var/lib/dpkg", f"write {status} status",
            "cd /usr/bin", f"write {binary} containerd",
            # the package's unit, enabled as dpkg's postinst would: containerd runs on boot
            "cd /usr/lib/systemd/system", f"write {unit} containerd.service",
            "symlink /etc/systemd/system/multi-user.target.wants/containerd.service "
            "/lib/systemd/system/containerd.service",
            "mkdir /etc/containerd", "cd /etc/containerd", f"write {work}/config.toml config.toml",
            "mkdir /opt/kata", "mkdir /opt/kata/bin", "mkdir /opt/kata/share",
            "mkdir /opt/kata/share/defaults", "mkdir /opt/kata/share/defaults/kata-containers",
            "cd /opt/kata/share/defaults/kata-containers",
            f"write {work}/configuration.toml configuration.toml",
            "cd /opt/kata/bin", f"write {work}/shim containerd-shim-kata-v2",
        ]
        _debugfs_write(disk, cmds)
        _run(["e2fsck", "-fn", str(disk)])
        os.replace(disk, out)
        _drop_stale(out)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --------------------------------------------------------------------------------------
# images with their own boot loader (for `kgc image check --boot`)
# --------------------------------------------------------------------------------------
# UEFI firmware (OVMF), systemd-boot and mtools (FAT without a mount), unpacked from Debian
# packages into the cache (`apt-get download`; nothing is installed on the host)
BOOT_PACKAGES = ("ovmf", "systemd-boot-efi", "mtools")
ESP_TYPE = "c12a7328-f81f-11d2-ba4b-00a0c93ec93b"
ROOT_TYPE = "4f68bce3-e8cd-4db1-96e7-fbcaf984b709"  # Linux root (x86-64)
ESP_MIB = 64


def boot_tools() -> Path:
    """The unpacked boot tools: ``usr/share/OVMF``, ``usr/lib/systemd/boot/efi``,
    ``usr/bin/mtools``; fetched once."""
    root = cache_root() / "boot-tools" / "root"
    done = root.parent / ".done"
    if done.exists() and done.read_text() == " ".join(BOOT_PACKAGES):
        return root
    dl = root.parent / "debs"
    shutil.rmtree(root, ignore_errors=True)
    dl.mkdir(parents=True, exist_ok=True)
    _run(["apt-get", "download", *BOOT_PACKAGES], cwd=str(dl))
    root.mkdir(parents=True, exist_ok=True)
    for deb in sorted(dl.glob("*.deb")):
        _run(["dpkg-deb", "-x", str(deb), str(root)])
    done.write_text(" ".join(BOOT_PACKAGES))
    return root


def mtool(name: str) -> list[str]:
    """An mtools command (the host's, else the cached one)."""
    found = shutil.which(name)
    if found:
        return [found]
    return [str(boot_tools() / "usr" / "bin" / "mtools"), "-c", name]


def write_gpt(out: Path, parts: list[tuple[Path, str, str]]) -> list[tuple[int, int]]:
    """A GPT disk (protective MBR, primary and backup headers) holding these partition
    images ``(image, type GUID, name)``, 1 MiB aligned; returns (offset, size) of each."""
    import struct
    import uuid
    import zlib

    sector = 512
    spans, start = [], 1024 * 1024
    for img, _t, _n in parts:
        size = -(-img.stat().st_size // (1024 * 1024)) * 1024 * 1024
        spans.append((start, size))
        start += size
    total = start + 1024 * 1024
    nlba = total // sector
    entries = bytearray(128 * 128)
    for i, ((_img, tguid, name), (off, size)) in enumerate(zip(parts, spans, strict=True)):
        entries[i * 128:(i + 1) * 128] = struct.pack(
            "<16s16sQQQ72s", uuid.UUID(tguid).bytes_le, uuid.uuid4().bytes_le, off // sector,
            (off + size) // sector - 1, 0, name.encode("utf-16-le")[:72])
    ecrc = zlib.crc32(bytes(entries)) & 0xFFFFFFFF
    dguid = uuid.uuid4().bytes_le

    def header(my: int, alt: int, table: int) -> bytes:
        h = bytearray(struct.pack("<8sIIIIQQQQ16sQIII", b"EFI PART", 0x00010000, 92, 0, 0,
                                  my, alt, 34, nlba - 34, dguid, table, 128, 128, ecrc))
        struct.pack_into("<I", h, 16, zlib.crc32(bytes(h)) & 0xFFFFFFFF)
        return bytes(h).ljust(sector, b"\0")

    mbr = bytearray(sector)
    mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\0\x02\0", 0xEE, b"\xff\xff\xff", 1,
                               min(nlba - 1, 0xFFFFFFFF))
    mbr[510:512] = b"\x55\xaa"
    with open(out, "wb") as fh:
        fh.truncate(total)
        fd = fh.fileno()
        os.pwrite(fd, bytes(mbr), 0)
        os.pwrite(fd, header(1, nlba - 1, 2), sector)
        os.pwrite(fd, bytes(entries), 2 * sector)
        os.pwrite(fd, bytes(entries), (nlba - 33) * sector)
        os.pwrite(fd, header(nlba - 1, 1, nlba - 33), (nlba - 1) * sector)
        for (img, _t, _n), (off, _size) in zip(parts, spans, strict=True):
            with open(img, "rb") as src:
                pos = 0
                while chunk := src.read(4 * 1024 * 1024):
                    if chunk.strip(b"\0"):
                        os.pwrite(fd, chunk, off + pos)
                    pos += len(chunk)
    return spans


def build_boot_image(name: str = "good") -> Path:
    """A gating image that boots through its own boot loader: GPT with an EFI system
    partition (systemd-boot, the image's kernel and initramfs, its BLS entry) and the
    image's root filesystem (entry and fstab pointing at /dev/vda2). Raw, cached."""
    src = build_gating_image(name)
    tools = boot_tools()
    sdboot = tools / "usr/lib/systemd/boot/efi/systemd-bootx64.efi"
    h = hashlib.sha256(json.dumps([str(src), src.stat().st_mtime_ns, " ".join(BOOT_PACKAGES),
                                   Path(__file__).read_text()]).encode()).hexdigest()[:16]
    out = cache_root() / "gating" / f"{name}-boot-{h}.raw"
    if out.exists():
        return out
    work = Path(tempfile.mkdtemp(prefix=f".boot-{name}-", dir=out.parent))
    try:
        root = work / "root.ext4"
        _run(["cp", "--sparse=always", str(src), str(root)])
        entry_txt = _run(["debugfs", "-R", "cat /boot/loader/entries/debian.conf",
                          str(root)]).stdout
        entry = {k: v for k, _s, v in (ln.partition(" ") for ln in entry_txt.splitlines())}
        linux, initrd = entry["linux"].strip(), entry["initrd"].strip()
        entry_txt = entry_txt.replace("root=/dev/vda ", "root=/dev/vda2 ")
        (work / "debian.conf").write_text(entry_txt)
        (work / "fstab").write_text("/dev/vda2 / ext4 rw,noatime,errors=remount-ro 0 1\n"
                                    "/dev/vda1 /efi vfat umask=0077,noauto 0 2\n")
        _debugfs_write(root, ["rm /boot/loader/entries/debian.conf", "cd /boot/loader/entries",
                              f"write {work}/debian.conf debian.conf", "rm /etc/fstab",
                              "cd /etc", f"write {work}/fstab fstab", "mkdir /efi"])
        for p, name_ in ((linux, "vmlinuz"), (initrd, "initrd")):
            _run(["debugfs", "-R", f"dump {p} {work / name_}", str(root)])
        esp = work / "esp.img"
        with open(esp, "wb") as fh:
            fh.truncate(ESP_MIB * 1024 * 1024)
        env = dict(os.environ, MTOOLS_SKIP_CHECK="1")
        i = ["-i", str(esp)]
        _run([*mtool("mformat"), *i, "-F", "-v", "ESP", "::"], env=env)
        _run([*mtool("mmd"), *i, "::/EFI", "::/EFI/BOOT", "::/loader", "::/loader/entries"],
             env=env)
        (work / "loader.conf").write_text("timeout 0\ndefault debian.conf\n")
        (work / "esp-entry.conf").write_text(entry_txt.replace(
            f"linux {linux}", "linux /" + Path(linux).name).replace(
            f"initrd {initrd}", "initrd /" + Path(initrd).name))
        for local, dest in ((sdboot, "::/EFI/BOOT/BOOTX64.EFI"),
                            (work / "loader.conf", "::/loader/loader.conf"),
                            (work / "esp-entry.conf", "::/loader/entries/debian.conf"),
                            (work / "vmlinuz", "::/" + Path(linux).name),
                            (work / "initrd", "::/" + Path(initrd).name)):
            _run([*mtool("mcopy"), *i, str(local), dest], env=env)
        disk = work / "disk.raw"
        write_gpt(disk, [(esp, ESP_TYPE, "esp"), (root, ROOT_TYPE, "root")])
        os.replace(disk, out)
        _drop_stale(out)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)
