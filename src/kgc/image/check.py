"""`kgc image check IMAGE --profile P`: certify a node image file before it ships.

1. Open the image read-only (raw, or qcow2 through qemu-img), parse its partition table
   (GPT, MBR, or none: a bare filesystem), find the Linux root filesystem (ext2/3/4) and the
   filesystems its ``/etc/fstab`` mounts below it (``/boot``).
2. Copy out exactly what the node layers' query reads into a private temporary tree
   (:mod:`kgc.image.tree`; debugfs, no mount, no kernel module, nothing executed).
3. Judge it with the unchanged offline-tree path: a ``NodeTarget`` whose ``root`` is the
   tree. What a running node answers with commands is answered from the image's files
   (:mod:`kgc.image.boot`): the initramfs of the kernel the boot loader starts by default,
   and — given a hardware inventory (``--hardware BUNDLE``, a ``kgc snapshot`` of a node of
   the platform) — the modules that kernel would load for each device.
4. Layers that need a running node (kernel, /sys, services, sockets, a reboot) are not
   judged: every check of theirs is a ``skip`` that says so.

Output: the same ``verdict.json`` (``run.image`` describes the image) and console as a
conformance run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import posixpath
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgc import __version__
from kgc.core import report
from kgc.core.bundle import Bundle, BundleError, load_bundle
from kgc.core.engine import Context, host_query
from kgc.core.hostfs import CommandResult, HostQuery, HostSnapshot, truncation_reason
from kgc.core.layer import Scope
from kgc.core.model import Check, Outcome, Status, Verdict
from kgc.core.policy import FILE_LAYERS
from kgc.core.profile import Profile
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc.image import boot
from kgc.image.disk import (
    HEAD_BYTES,
    LINUX_DATA,
    ImageError,
    ImageFile,
    Partition,
    fs_type,
    layout,
    parse_ext_super,
)
from kgc.image.extfs import ExtFS, Vfs
from kgc.image.tree import TreeBuilder, TreeGaps

# commands whose inputs kgc.image finds itself (the collector's UDEV_CMD reads relative
# paths after a cd, which tree.command_paths cannot see)
UDEV_RULES = tuple(f"{d}/*.rules" for d in ("/etc/udev/rules.d", "/run/udev/rules.d",
                                             "/usr/lib/udev/rules.d", "/lib/udev/rules.d"))

DEFAULT_TIMEOUT_S = 600  # `kgc image check --timeout`: the bound on one whole check
# commands a running node answers that kgc.image answers from the image's files
ANSWERED = ("initramfs_list", "pci_modalias_drivers")
EXTRA_FILES = ("/etc/fstab", "/etc/os-release", "/usr/lib/os-release",
               "/var/lib/dpkg/status", "/boot/loader/loader.conf")
BOOT_ENTRY_DIRS = ("/boot/loader/entries", "/efi/loader/entries", "/boot/efi/loader/entries")
GRUB_CFGS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")
MAX_INITRD = 512 * 1024 * 1024
READ_MOUNTS = ("/boot", "/efi", "/usr", "/opt", "/etc", "/var", "/lib")
HW_FILES = ("/sys/bus/pci/devices/", "/sys/kernel/iommu_groups/")
_DEVNAME = re.compile(r"^/dev/(?:[svx]d[a-z]|xvd[a-z]|nvme\d+n\d+p|mmcblk\d+p)(\d+)$")
RUNNING_NODE = ("needs a running node: an image file has no running kernel, /proc, /sys, "
                "services or sockets ({what}); certify a node booted from this image "
                "(pytest -m host --hosts ...)")
LAYER_NEEDS = {
    "iommu": "the IOMMU state is the running kernel's",
    "vfio": "driver bindings exist only at run time",
    "reboot": "it reboots a running node",
    "nri": "the NRI probe talks to a running containerd",
}


@dataclass
class ImageFacts:
    """What was learnt about the image while reading it (``run.image`` in verdict.json)."""

    path: str
    format: str
    size: int
    scheme: str = ""
    root: dict[str, Any] = field(default_factory=dict)
    mounts: dict[str, str] = field(default_factory=dict)
    unread_mounts: dict[str, str] = field(default_factory=dict)
    os: str = ""
    boot: dict[str, Any] = field(default_factory=dict)
    initramfs: dict[str, Any] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    answered: dict[str, str] = field(default_factory=dict)
    tree: dict[str, Any] = field(default_factory=dict)
    unsupported: list[str] = field(default_factory=list)
    bytes: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


# -- hardware --------------------------------------------------------------------------
def hardware_from_bundle(bundle: Bundle) -> HostSnapshot:
    """The PCI/IOMMU inventory of a recorded node (what the hardware IS), without its
    run-time state (which driver holds a device now, driver_override): the image decides
    that."""
    host = bundle.host
    if host is None:
        raise ImageError(f"{bundle.path}: a {bundle.scope} bundle holds no node snapshot "
                         "(record one with kgc snapshot --hosts NODE)")
    files = {p: t for p, t in host.files.items() if p.startswith(HW_FILES)
             and not p.endswith("/driver_override")}
    links = {p: t for p, t in host.links.items() if p.startswith(HW_FILES)
             and p.endswith("/iommu_group")}
    dirs = {p: e for p, e in host.dirs.items()
            if p in ("/sys/bus/pci/devices", "/sys/kernel/iommu_groups")
            or (p.startswith("/sys/kernel/iommu_groups/") and p.endswith("/devices"))}
    if "/sys/bus/pci/devices" not in dirs:
        raise ImageError(f"{bundle.path}: the bundle holds no PCI inventory "
                         "(/sys/bus/pci/devices)")
    return HostSnapshot(files=files, links=links, dirs=dirs)


def merge(snap: HostSnapshot, hw: HostSnapshot | None,
          answers: Mapping[str, CommandResult], gaps: TreeGaps | None = None) -> HostSnapshot:
    cmds = dict(snap.commands)
    for name, res in answers.items():
        if name in cmds:
            cmds[name] = res
    if gaps is not None:
        snap = with_gaps(snap, gaps)
    if hw is None:
        return dataclasses.replace(snap, commands=cmds)
    return dataclasses.replace(
        snap, files={**snap.files, **hw.files}, links={**snap.links, **hw.links},
        dirs={**snap.dirs, **hw.dirs}, commands=cmds)


def with_gaps(snap: HostSnapshot, gaps: TreeGaps) -> HostSnapshot:
    """The snapshot with every file the tree could not hold whole marked as such (by the
    path the query reads it through): over the limit -> truncated with its size; special,
    not copied -> unread, and listed in its directory; commands that read one -> a gap. So a
    check that needs such a file is an error naming it, never a judgement without it."""
    files = dict(snap.files)
    truncated = dict(snap.truncated)
    unread = dict(snap.unread)
    dirs = dict(snap.dirs)
    for path, size in gaps.truncated.items():
        files.pop(path, None)
        truncated[path] = size
    for path, why in gaps.unread.items():
        files.pop(path, None)
        unread.setdefault(path, why)
        parent, name = posixpath.split(path)
        if parent in dirs and name not in dirs[parent]:
            dirs[parent] = (*dirs[parent], name)
    return dataclasses.replace(snap, files=files, truncated=truncated, unread=unread, dirs=dirs,
                               command_gaps={**snap.command_gaps, **gaps.commands})


class ImageTarget(NodeTarget):
    """The offline tree of one image, plus the answers kgc.image read from its files."""

    def __init__(self, tree: Path, name: str, hardware: HostSnapshot | None,
                 answers: Mapping[str, CommandResult], gaps: TreeGaps | None = None,
                 collect_timeout_s: int = 300) -> None:
        super().__init__(spec="local://", root=str(tree), collect_timeout_s=collect_timeout_s)
        self._name = name
        self._hardware = hardware
        self._answers = dict(answers)
        self._gaps = gaps
        self.snapshot: HostSnapshot | None = None  # what was judged (for run.image)

    @property
    def name(self) -> str:
        return self._name

    @property
    def redacted(self) -> str:
        return self._name

    def collect(self, query: HostQuery) -> HostSnapshot:
        self.snapshot = merge(super().collect(query), self._hardware, self._answers, self._gaps)
        return self.snapshot


# -- reading the image ------------------------------------------------------------------
def _read(vfs: Vfs, scratch: Path, path: str, cap: int) -> bytes | None:
    node = vfs.lookup(path)
    if node is None or node.kind != "file" or node.entry.size > cap:
        return None
    dest = scratch / f"r{node.entry.ino}-{id(node.fs)}"
    got = node.fs.copy({node.entry.ino: dest}, cap)
    if node.entry.ino not in got:
        return None
    data = dest.read_bytes()
    dest.unlink()
    return data


def _text(vfs: Vfs, scratch: Path, path: str, cap: int = 1024 * 1024) -> str | None:
    data = _read(vfs, scratch, path, cap)
    return None if data is None else data.decode("utf-8", "replace")


def _fstab(text: str) -> list[tuple[str, str, str]]:
    out = []
    for line in text.splitlines():
        w = line.split()
        if len(w) >= 3 and not w[0].startswith("#"):
            out.append((w[0], w[1], w[2]))
    return out


class ImageReader:
    def __init__(self, path: Path, scratch: Path) -> None:
        self.scratch = scratch
        self.img = ImageFile(path, scratch)
        self.facts = ImageFacts(str(path), self.img.format, self.img.size)
        self.fss: list[ExtFS] = []
        self._probe: dict[int, tuple[str | None, Any]] = {}

    def probe(self, p: Partition) -> tuple[str | None, Any]:
        if p.number not in self._probe:
            block = self.img.read_at(p.start, 68 * 1024)
            kind = fs_type(block)
            sup = None
            if kind == "ext":
                sup = parse_ext_super(block)
                if sup.size > p.size:
                    raise ImageError(f"the ext filesystem in {_pname(p)} spans {sup.size} "
                                     f"bytes but its partition has {p.size}: truncated image")
            self._probe[p.number] = (kind, sup)
        return self._probe[p.number]

    def open_fs(self, p: Partition, name: str) -> ExtFS:
        dev, off = self.img.raw_view(p)
        fs = ExtFS(dev, off, self.scratch, name)
        self.fss.append(fs)
        return fs

    def open(self) -> Vfs:
        lay = layout(self.img.read_at(0, HEAD_BYTES), self.img.size)
        self.facts.scheme = lay.scheme
        parts = list(lay.partitions)
        if not parts:
            raise ImageError(f"{self.img.path}: the {lay.scheme} partition table is empty")
        kinds = {p.number: self.probe(p)[0] for p in parts}
        for p in parts:
            if kinds[p.number] in ("xfs", "btrfs", "lvm", "luks", "squashfs"):
                self.facts.unsupported.append(f"{_pname(p)}: {kinds[p.number]}")
        cands = [p for p in parts if kinds[p.number] == "ext"
                 and (lay.scheme == "none" or p.kind in LINUX_DATA or p.kind.startswith(
                     ("gpt:", "mbr:")) or p.kind == "linux")]
        # the discoverable-partitions root type first, then the largest
        cands.sort(key=lambda p: (not p.kind.startswith("linux-root"), -p.size))
        for p in cands:
            fs = self.open_fs(p, "root")
            root = fs.listdir(2) or {}
            etc = root.get("etc")
            if etc is not None and etc.kind == "dir" and (
                    "os-release" in (fs.listdir(etc.ino) or {}) or "usr" in root):
                vfs = Vfs(fs)
                sup = self.probe(p)[1]
                self.facts.root = {"partition": p.number, "type": p.kind, "offset": p.start,
                                   "size": p.size, "fs": "ext", "uuid": sup.uuid,
                                   "label": sup.label}
                self._mount_below(vfs, parts, p)
                return vfs
        if self.facts.unsupported:
            raise ImageError(f"{self.img.path}: no ext2/3/4 root filesystem; found "
                             f"{', '.join(self.facts.unsupported)} (kgc reads ext2/3/4 only)")
        desc = ", ".join(f"{_pname(p)} {p.kind} ({kinds[p.number] or 'no filesystem'})"
                         for p in parts)
        raise ImageError(f"{self.img.path}: no Linux root filesystem (no /etc) in {desc}")

    def _mount_below(self, vfs: Vfs, parts: Sequence[Partition], root: Partition) -> None:
        text = _text(vfs, self.scratch, "/etc/fstab") or ""
        for spec, point, fstype in _fstab(text):
            point = posixpath.normpath(point)
            if point in ("/", "none", "swap") or not point.startswith("/"):
                continue
            # only filesystems that hold what the node layers read (not /home, /srv ...)
            if not any(point == m or point.startswith(m + "/") for m in READ_MOUNTS):
                continue
            part = self._match(spec, parts)
            if part is None:
                vfs.unread_mounts[point] = f"{spec} ({fstype}) is not a partition of this image"
                continue
            if part.number == root.number:
                continue
            kind, _sup = self.probe(part)
            if kind != "ext":
                vfs.unread_mounts[point] = (f"{_pname(part)} is {kind or 'unknown'}: kgc reads "
                                            "ext2/3/4 only (its files are not judged)")
                continue
            vfs.mount(point, self.open_fs(part, point))
            self.facts.mounts[point] = _pname(part)
        self.facts.unread_mounts = dict(vfs.unread_mounts)

    def _match(self, spec: str, parts: Sequence[Partition]) -> Partition | None:
        dev = _DEVNAME.match(spec)
        if dev:  # /dev/vda1, /dev/sda1, /dev/nvme0n1p1: partition N of the (only) disk
            return next((p for p in parts if p.number == int(dev.group(1))), None)
        for prefix, key_ in (("/dev/disk/by-uuid/", "UUID"), ("/dev/disk/by-label/", "LABEL"),
                             ("/dev/disk/by-partuuid/", "PARTUUID"),
                             ("/dev/disk/by-partlabel/", "PARTLABEL")):
            if spec.startswith(prefix):
                spec = f"{key_}={spec[len(prefix):]}"
        key, _, val = spec.partition("=")
        val = val.strip('"').lower()
        for p in parts:
            kind, sup = self.probe(p)
            if key == "UUID" and sup is not None and sup.uuid.lower() == val:
                return p
            if key == "LABEL" and sup is not None and sup.label.lower() == val:
                return p
            if key == "PARTUUID" and p.partuuid.lower() == val:
                return p
            if key == "PARTLABEL" and p.name.lower() == val:
                return p
        return None


def _pname(p: Partition) -> str:
    return "the filesystem" if p.number == 0 else f"partition {p.number}"


# -- what the image boots ------------------------------------------------------------------
def default_boot(vfs: Vfs, scratch: Path) -> boot.BootEntry | None:
    entries: dict[str, str] = {}
    for d in BOOT_ENTRY_DIRS:
        for path, _node in vfs.glob(f"{d}/*.conf"):
            t = _text(vfs, scratch, path)
            if t is not None:
                entries[path] = t
    if entries:
        e = boot.bls_default(entries, _text(vfs, scratch, "/boot/loader/loader.conf"))
        if e is not None:
            return e
    for cfg in GRUB_CFGS:
        t = _text(vfs, scratch, cfg, 8 * 1024 * 1024)
        if t is not None:
            e = boot.grub_default(cfg, t)
            if e is not None:
                return e
    names = [posixpath.basename(p) for p, _n in vfs.glob("/boot/vmlinuz-*")]
    v = boot.newest_kernel(names)
    if v:
        return boot.BootEntry("/boot (newest kernel)", "", f"/boot/vmlinuz-{v}",
                              (), "", v)
    return None


def _boot_path(vfs: Vfs, path: str) -> str | None:
    """A boot loader path as the root sees it (loaders name files on the boot partition)."""
    for cand in (path, f"/boot{path}" if path.startswith("/") else f"/boot/{path}"):
        node = vfs.lookup(cand)
        if node is not None and node.kind == "file":
            return cand
    return None


def image_answers(vfs: Vfs, scratch: Path, hw: HostSnapshot | None,
                  facts: ImageFacts) -> dict[str, CommandResult]:
    out: dict[str, CommandResult] = {}
    entry = default_boot(vfs, scratch)
    version = entry.version if entry else ""
    if entry is not None:
        facts.boot = {"source": entry.source, "title": entry.title, "linux": entry.linux,
                      "initrd": list(entry.initrd), "options": entry.options,
                      "kernel": version}
    # initramfs of the default kernel
    cands = list(entry.initrd) if entry and entry.initrd else []
    if version:
        cands += [f"/boot/initrd.img-{version}", f"/boot/initramfs-{version}.img"]
    initrd = next((p for p in (_boot_path(vfs, c) for c in cands) if p), None)
    if initrd is None:
        out["initramfs_list"] = CommandResult(3, "KGC-NO-INITRAMFS\n")
        facts.initramfs = {"error": "no initramfs for the default kernel "
                           f"({version or 'unknown'})"}
    else:
        data = _read(vfs, scratch, initrd, MAX_INITRD)
        if data is None:
            out["initramfs_list"] = CommandResult(5, f"KGC-IMAGE: {initrd} could not be read\n")
            facts.initramfs = {"path": initrd, "error": "could not be read"}
        else:
            text, rc, fmts = boot.initramfs_listing(initrd, data)
            out["initramfs_list"] = CommandResult(rc, text)
            facts.initramfs = {"path": initrd, "bytes": len(data), "formats": fmts,
                               "entries_kept": max(0, len(text.splitlines()) - 1)}
    facts.answered["initramfs_list"] = (
        f"listed by kgc.image from {initrd} (the default boot entry's initramfs)"
        if initrd else "no initramfs found for the default boot entry")
    # modules that would claim each device of the declared hardware
    if hw is None:
        out["pci_modalias_drivers"] = CommandResult(0, "")
        facts.answered["pci_modalias_drivers"] = "no hardware inventory (--hardware): no devices"
    else:
        devs = {p.split("/")[5]: t.strip() for p, t in hw.files.items()
                if p.startswith("/sys/bus/pci/devices/") and p.endswith("/modalias")}
        mdir = f"/lib/modules/{version}"
        alias = _text(vfs, scratch, f"{mdir}/modules.alias", 64 * 1024 * 1024) if version else None
        builtin = _text(vfs, scratch, f"{mdir}/modules.builtin.alias", 16 * 1024 * 1024) \
            if version else None
        if alias is None:
            out["pci_modalias_drivers"] = CommandResult(
                1, f"KGC-IMAGE: no {mdir or '/lib/modules/<kernel>'}/modules.alias in the image")
            facts.answered["pci_modalias_drivers"] = f"not answered: no {mdir}/modules.alias"
        else:
            aliases = boot.parse_aliases(alias, builtin or "")
            out["pci_modalias_drivers"] = CommandResult(0, boot.modalias_output(devs, aliases))
            facts.answered["pci_modalias_drivers"] = (
                f"resolved by kgc.image against {mdir}/modules.alias"
                + (" and modules.builtin.alias" if builtin else "")
                + f" for {len(devs)} device(s) of the hardware inventory")
    return out


# -- judging ---------------------------------------------------------------------------------
def _skip(chk: Check, target: str, why: str) -> Verdict:
    out = Outcome(Status.SKIP, why)
    return Check(chk.id, chk.layer, chk.title, chk.severity, chk.remediation,
                 lambda _e, _p: out).judge(None, None, target)


def judge(target: ImageTarget, profile: Profile, layer_names: Sequence[str]
          ) -> tuple[list[Verdict], dict[str, str]]:
    """The verdicts, and the environment facts the judged layers tell (containerd ...)."""
    layers = load_layers()
    node_layers = {n: lay for n, lay in layers.items() if lay.scope is Scope.NODE}
    ctx = Context(target=target, profile=profile, layers=layers, options={})
    out: list[Verdict] = []
    for name, lay in node_layers.items():
        if name in layer_names:
            out += ctx.judge_all([name])
        else:
            why = RUNNING_NODE.format(what=LAYER_NEEDS.get(
                name, f"layer {name} is not judged from files"))
            out += [_skip(c, target.name, why) for c in lay.checks]
    return out, ctx.describe()


def _os_release(tree: Path) -> str:
    for rel in ("etc/os-release", "usr/lib/os-release"):
        p = tree / rel
        try:
            text = p.read_text(errors="replace") if p.is_file() else ""
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    return ""


def _containerd_pkg(tree: Path) -> str:
    p = tree / "var/lib/dpkg/status"
    if not p.is_file():
        return ""
    try:
        text = p.read_text(errors="replace")
    except OSError:
        return ""
    for stanza in text.split("\n\n"):
        f = dict(ln.split(": ", 1) for ln in stanza.splitlines() if ": " in ln)
        if f.get("Package") in ("containerd", "containerd.io") and \
                f.get("Status", "").endswith(" installed"):
            return f"{f['Package']} {f.get('Version', '?')} (dpkg)"
    return ""


@dataclass
class ImageRun:
    results: list[dict[str, Any]]
    run: dict[str, Any]
    facts: ImageFacts
    verdict_path: Path


class _Stop(BaseException):
    """Raised by a signal handler inside a check: a BaseException, so no ``except
    Exception`` on the way (the engine turns those into error verdicts) swallows it, and
    every ``finally`` -- the temporary tree's removal -- runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def _bounded(timeout_s: float) -> Iterator[None]:
    """SIGALRM after ``timeout_s``, and SIGTERM/SIGINT, raise :class:`_Stop` for the
    duration (main thread only: elsewhere Python allows no handlers, and the subprocess
    timeouts alone bound the run). The previous handlers come back afterwards. When
    someone else's interval timer is already armed (a test runner's per-test timeout),
    it is left alone: the time bound then rests on the subprocess timeouts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, _frame: Any) -> None:
        raise _Stop(signum)

    sigs = [signal.SIGTERM, signal.SIGINT]
    alarm = signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    if alarm:
        sigs.append(signal.SIGALRM)
    old = {s: signal.signal(s, stop) for s in sigs}
    if alarm:
        signal.setitimer(signal.ITIMER_REAL, max(timeout_s, 0.001))
    try:
        yield
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
        for s, h in old.items():
            signal.signal(s, h)


def check_image(image: str | Path, profile: Profile, *, report_dir: Path,
                hardware: str | Path | None = None, layers: Sequence[str] | None = None,
                keep_tree: bool = False, command: Sequence[str] = (),
                timeout_s: float = DEFAULT_TIMEOUT_S) -> ImageRun:
    """Certify one image file; writes ``verdict.json`` into ``report_dir``. Raises
    :class:`ImageError` (exit 2, nothing written) on an image it cannot read, and when the
    whole check takes longer than ``timeout_s``. SIGTERM and SIGINT remove the temporary
    tree before the process ends by them (SIGINT as KeyboardInterrupt)."""
    if timeout_s <= 0:
        raise ImageError(f"--timeout must be positive, got {timeout_s:g}")
    try:
        with _bounded(timeout_s):
            return _check_image(image, profile, report_dir=report_dir, hardware=hardware,
                                layers=layers, keep_tree=keep_tree, command=command,
                                deadline=time.monotonic() + timeout_s)
    except _Stop as stop:
        # the tree is gone already (the finally below ran on the way out)
        if stop.signum == signal.SIGALRM:
            raise ImageError(f"kgc image check stopped at its time bound of {timeout_s:g} s "
                             "(--timeout): the image was not judged, nothing written") from None
        if stop.signum == signal.SIGINT:
            raise KeyboardInterrupt from None
        signal.signal(stop.signum, signal.SIG_DFL)
        os.kill(os.getpid(), stop.signum)  # end by the signal, as the sender expects
        raise SystemExit(128 + stop.signum) from None  # pragma: no cover - not reached


def _check_image(image: str | Path, profile: Profile, *, report_dir: Path,
                 hardware: str | Path | None, layers: Sequence[str] | None,
                 keep_tree: bool, command: Sequence[str], deadline: float) -> ImageRun:
    started = time.time()
    t0 = time.monotonic()
    all_layers = load_layers()
    node_names = [n for n, lay in all_layers.items() if lay.scope is Scope.NODE]
    chosen = list(layers) if layers else [n for n in FILE_LAYERS if n in node_names]
    unknown = [n for n in chosen if n not in node_names]
    if unknown:
        raise ImageError(f"not node layers of this build: {', '.join(unknown)} "
                         f"(node layers: {', '.join(node_names)})")
    hw = None
    hw_name = ""
    if hardware is not None:
        try:
            b = load_bundle(hardware, all_layers)
        except BundleError as exc:
            raise ImageError(f"--hardware: {exc}") from None
        hw = hardware_from_bundle(b)
        hw_name = f"{Path(hardware).name} (node {b.name}, recorded {b.collected_at})"
    scratch = Path(tempfile.mkdtemp(prefix="kgc-image-"))
    os.chmod(scratch, 0o700)
    tree = scratch / "root"
    tree.mkdir(mode=0o700)
    try:
        reader = ImageReader(Path(image), scratch)
        vfs = reader.open()
        facts = reader.facts
        t_open = time.monotonic()
        query = host_query({n: all_layers[n] for n in chosen}, profile)
        tb = TreeBuilder(vfs, tree, scratch)
        # what the commands kgc.image answers itself would read is not copied into the tree
        tb.build(dataclasses.replace(query, commands=tuple(
            (n, c) for n, c in query.commands if n not in ANSWERED)), EXTRA_FILES,
            command_globs={"udev_driver_override": UDEV_RULES})
        answers = image_answers(vfs, scratch, hw, facts)
        t_extract = time.monotonic()
        name = f"image:{Path(image).name}"
        gaps = tb.gaps()
        target = ImageTarget(tree, name, hw, answers, gaps,
                             collect_timeout_s=max(1, int(deadline - time.monotonic())))
        verdicts, facts_env = judge(target, profile, chosen)
        t_judge = time.monotonic()
        facts.os = _os_release(tree)
        seen = target.snapshot
        facts.tree = {"files": tb.stats.files, "placeholders": tb.stats.placeholders,
                      "links": tb.stats.links, "links_made_relative": tb.stats.rewritten_links,
                      "dirs": tb.stats.dirs, "not_recreated": dict(tb.stats.skipped),
                      "over_limit": dict(tb.stats.too_big),
                      # every file the query reached whose content was not judged, and why
                      "not_read": seen.not_read() if seen is not None else {
                          **{p: truncation_reason(n) for p, n in gaps.truncated.items()},
                          **gaps.unread},
                      "kept": str(tree) if keep_tree else ""}
        if hw is not None:
            facts.hardware = {"from": hw_name, "devices": len(hw.dirs.get(
                "/sys/bus/pci/devices", ()))}
        facts.bytes = {"read_by_kgc": reader.img.bytes_read,
                       "copied_out": sum(f.bytes_copied for f in reader.fss),
                       "qcow2_converted": reader.img.converted_bytes,
                       "debugfs_runs": sum(f.runs for f in reader.fss)}
        facts.seconds = {"open": round(t_open - t0, 3), "extract": round(t_extract - t_open, 3),
                         "judge": round(t_judge - t_extract, 3),
                         "total": round(t_judge - t0, 3)}
        pkg = _containerd_pkg(tree)
    finally:
        if not keep_tree:
            shutil.rmtree(scratch, ignore_errors=True)
    results = [v.to_dict() for v in verdicts]
    judged = [n for n in node_names if any(r["layer"] == n and r["status"] != "skip"
                                           for r in results)]
    env = {"kgc": __version__, "python": platform.python_version(), "profile": profile.name,
           "runner": platform.node(), f"{name}.image_format": facts.format,
           f"{name}.round_trips": str(target.round_trips), f"{name}.origin": target.origin}
    env.update({f"{name}.{k}": v for k, v in facts_env.items()})
    if facts.boot.get("kernel"):
        env[f"{name}.kernel"] = facts.boot["kernel"]
    if facts.os:
        env[f"{name}.distro"] = facts.os
    if pkg:
        env[f"{name}.containerd"] = pkg
    run = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duration_s": round(time.time() - started, 3),
        "kgc_version": __version__,
        "profile": profile.name,
        "profile_source": profile.source,
        "targets": [name],
        "layers": node_names,
        "layers_judged": judged,
        "scope": report.scope_note(node_names, judged, list(all_layers)),
        "command": list(command),
        "environment": env,
        "image": dataclasses.asdict(facts),
        **report.run_identity(profile, {name: "node"}, node_names, results,
                              registry=all_layers),
    }
    path = report.write_verdict_json(report_dir / "verdict.json", results, run)
    return ImageRun(results, run, facts, path)


def console(res: ImageRun, out: Any = None) -> None:
    out = out or sys.stdout
    f = res.facts
    w = out.write
    part = f.root.get("partition")
    where = f"partition {part}" if part else "the whole disk"
    w(f"image {f.path}: {f.format}, {f.size} bytes, {f.scheme} layout, root {where} "
      f"(ext, {f.root.get('label') or 'no label'}); {f.os or 'unknown OS'}\n")
    if f.boot:
        w(f"boots {f.boot.get('linux')} (kernel {f.boot.get('kernel') or '?'}) from "
          f"{f.boot.get('source')}; initramfs {f.initramfs.get('path', '-')} "
          f"({f.initramfs.get('formats') or f.initramfs.get('error', '')})\n")
    for point, why in f.unread_mounts.items():
        w(f"NOT READ: {point}: {why}\n")
    for path, why in sorted(f.tree.get("not_read", {}).items()):
        w(f"NOT READ: {path}: {why}\n")
    if f.hardware:
        w(f"hardware: {f.hardware['devices']} PCI devices from {f.hardware['from']}\n")
    else:
        w("hardware: none given (--hardware BUNDLE): per-device persistence checks skip\n")
    w(f"read in {f.seconds.get('extract', 0) + f.seconds.get('open', 0):.2f} s "
      f"({f.bytes.get('copied_out', 0)} bytes copied out, {f.bytes.get('debugfs_runs')} "
      f"debugfs runs), judged in {f.seconds.get('judge', 0):.2f} s\n\n")
    for line in report.summary_table(res.results):
        w(line + "\n")
    det = report.details(res.results)
    if det:
        w("\n== what to fix (fail, error, warn) ==\n")
        w("\n".join(det) + "\n")
    status, why = report.overall_and_reason(res.results)
    w(f"overall: {status.upper()} {res.run['scope']} — {why}\n")
    w(f"report: {res.verdict_path}\n")


def main_check(image: str, profile: Profile, report_dir: str, hardware: str | None,
               layers: str | None, keep_tree: bool, as_json: bool, argv: Sequence[str],
               timeout_s: float = DEFAULT_TIMEOUT_S) -> int:
    names = [x for x in (layers or "").split(",") if x] or None
    res = check_image(image, profile, report_dir=Path(report_dir), hardware=hardware,
                      layers=names, keep_tree=keep_tree, command=["kgc", *argv],
                      timeout_s=timeout_s)
    if as_json:
        doc = json.loads(res.verdict_path.read_text())
        print(json.dumps({"overall": doc["overall"], "overall_reason": doc["overall_reason"],
                          "image": res.run["image"], "results": res.results}, indent=2,
                         default=str))
    else:
        console(res)
    status, _ = report.overall_and_reason(res.results)
    return 0 if status == "pass" else 1


__all__ = ["ImageError", "ImageTarget", "check_image", "hardware_from_bundle", "main_check"]
