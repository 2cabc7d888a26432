"""Image building and VM lifecycle for the node lab (see the package docstring)."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from kgc.image.qemu import ADDR, Hardware, QemuVM, free_port
from kgc_lab import procs
from kgc_lab.common import LabError, lab_cache
from kgc_lab.ledger import LabRecord

HERE = Path(__file__).resolve().parent
BUILD_BASE = HERE / "build-base.sh"
BOOT_ENTRY = "boot/loader/entries/debian.conf"

# shared with every lab (kgc_lab.common); the machine and its guest addresses are the
# product's (`kgc image check --boot` boots on it)
__all__ = ["ADDR", "Hardware", "LabError", "free_port"]


def cache_root() -> Path:
    return lab_cache("node")


def _log(msg: str) -> None:
    print(f"[kgc lab node] {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, text=True, capture_output=True, **kw)
    if res.returncode != 0:
        raise LabError(
            f"command failed (exit {res.returncode}): {shlex.join(cmd)}\n"
            f"{(res.stdout + res.stderr).strip()[-3000:]}"
        )
    return res


# --------------------------------------------------------------------------------------
# images
# --------------------------------------------------------------------------------------
def base_root() -> Path:
    """The debootstrapped tree, keyed by the build script's content (a change rebuilds it)."""
    return cache_root() / f"base-root-{hashlib.sha256(BUILD_BASE.read_bytes()).hexdigest()[:12]}"


@contextlib.contextmanager
def _build_lock(what: str) -> Iterator[None]:
    """One builder of ``what`` at a time across processes (the vm and rest sessions of
    `make test` both build the base tree and the same variants on an empty cache: two
    debootstraps into one tree, or a rename onto the other's finished image, broke the
    second). An advisory flock, released by the kernel when its holder dies."""
    d = cache_root() / "locks"
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"{what}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def build_base() -> Path:
    """Debootstrap the base tree once (minutes); later calls return the cached tree."""
    root = base_root()
    if (root / ".kgc-base-done").exists():
        return root
    with _build_lock(root.name):
        return _build_base(root)


def _build_base(root: Path) -> Path:
    if (root / ".kgc-base-done").exists():  # another process built it while we waited
        return root
    if os.geteuid() != 0:
        raise LabError("building the node image needs root (debootstrap, chroot)")
    for tool in ("debootstrap", "mkfs.ext4", "qemu-img"):
        if shutil.which(tool) is None:
            raise LabError(f"{tool} not found: run scripts/bootstrap.d/10-node-lab.sh")
    root.parent.mkdir(parents=True, exist_ok=True)
    _log(f"building base tree {root} (debootstrap bookworm; a few minutes)")
    # the build mounts /proc, /sys, /dev into the tree: recorded for `kgc lab cleanup`
    record = LabRecord.create("node-build", name="base", root=str(root))
    record.add_owned(root, ["bash", "nice", "debootstrap", "chroot"])
    record.add_mounts(root)
    res = subprocess.run(["nice", "-n", "10", "bash", str(BUILD_BASE), str(root)], text=True,
                         capture_output=True)
    left = procs.mounts_under(str(root.resolve()))
    for mp in left:  # what the script's trap missed is not left to the next step
        subprocess.run(["umount", "-l", mp], check=False)
    if not procs.mounts_under(str(root.resolve())):
        record.close()
    if left:
        (root / ".kgc-base-done").unlink(missing_ok=True)  # not a tree to reuse
        raise LabError(f"the base tree build left {len(left)} mount(s) behind under {root}: "
                       f"{', '.join(left)}\n{(res.stdout + res.stderr)[-2000:]}")
    if res.returncode != 0:
        raise LabError(f"base image build failed:\n{(res.stdout + res.stderr)[-4000:]}")
    return root


def check_no_mounts(tree: Path, what: str) -> None:
    """Go no further with a mount at or under ``tree``: copying (``cp``), imaging
    (``mkfs.ext4 -d``) or removing the tree would walk into the host's /proc, /sys or /dev
    (a base tree with /proc still mounted was copied until the disk was full). The error
    names every mount."""
    left = procs.mounts_under(str(tree.resolve()))
    if left:
        raise LabError(f"{what}: {len(left)} mount(s) under {tree}: {', '.join(left)} "
                       "(unmount them, or run `kgc lab cleanup`)")


def ensure_keys() -> Path:
    """The lab's generated SSH client key and the nodes' host key (pinned in known_hosts)."""
    kd = cache_root() / "keys"
    kd.mkdir(parents=True, exist_ok=True)
    for name in ("id_ed25519", "ssh_host_ed25519_key"):
        if not (kd / name).exists():
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"kgc-lab-{name}",
                  "-f", str(kd / name)])
    return kd


# What every lab node's boot entry adds to its kernel command line. The lab's nodes are
# emulated (TCG), where the guest kernel's speculative-execution mitigations cost most:
# with PTI the kernel switches page tables on every entry and exit, and TCG flushes its
# whole software TLB on each switch. They protect nothing on a throwaway lab node, and
# no check reads them (the product never names mitigations; the bundles recorded before
# carry the old command line and are judged unchanged). Measured in benchmarks/README.md.
# A user's image that `kgc image check --boot` boots keeps its own entry untouched.
LAB_GUEST_OPTIONS = "mitigations=off"


def lab_options(options: str) -> str:
    """``options`` with :data:`LAB_GUEST_OPTIONS` appended (once)."""
    words = options.split()
    extra = [w for w in LAB_GUEST_OPTIONS.split() if w not in words]
    return " ".join([*words, *extra])


@dataclass(frozen=True)
class Variant:
    """The base tree plus files; optionally a rebuilt initramfs and another boot entry."""

    name: str
    files: Mapping[str, str] = field(default_factory=dict)
    options: str | None = None  # kernel command line in the boot entry (None: base's)
    initramfs: bool = False  # rebuild the initramfs in a chroot after adding the files
    # Build hook run on the variant's tree after the files are written (installs packages,
    # copies binaries); ``prepare_key`` is a content hash of everything the hook puts in.
    prepare: Callable[[Path], None] | None = field(default=None, compare=False, repr=False)
    prepare_key: str = ""
    disk_gib: int = 2

    def key(self) -> str:
        h = hashlib.sha256()
        h.update(BUILD_BASE.read_bytes())
        h.update((base_root() / ".kgc-base-done").read_bytes())
        kd = ensure_keys()
        h.update((kd / "id_ed25519.pub").read_bytes())
        h.update((kd / "ssh_host_ed25519_key.pub").read_bytes())
        h.update(CONSOLE_REPORT_UNIT.encode() + LAB_NET_RULE.encode() + LAB_BLACKLIST.encode())
        h.update(json.dumps(LAB_LINKS, sort_keys=True).encode())
        h.update(LAB_GUEST_OPTIONS.encode())
        h.update(json.dumps([dict(self.files), self.options, self.initramfs],
                            sort_keys=True).encode())
        if self.prepare is not None or self.disk_gib != 2:  # older variants keep their keys
            h.update(json.dumps([self.prepare_key, self.disk_gib]).encode())
        return h.hexdigest()[:16]


# Prints the node's state to the serial console once booted: the console log then tells
# why a node is unreachable (it is attached to error verdicts).
CONSOLE_REPORT_UNIT = """[Unit]
Description=kgc lab: report boot state on the serial console
After=ssh.socket
[Service]
Type=oneshot
StandardOutput=tty
TTYPath=/dev/ttyS0
ExecStart=/bin/sh -c 'echo "== kgc-node ready: $(cat /proc/uptime)"; ip -br addr; \
 systemctl is-active ssh.socket; systemctl --failed --no-legend'
[Install]
WantedBy=multi-user.target
"""


# Fast boot to SSH: only the virtio NIC (QEMU user networking) is configured, by udev as
# soon as it appears (no networkd, nothing waits for network.target); the stand-in NICs stay
# unconfigured. sshd is socket-activated, so port 22 listens early in boot.
LAB_NET_RULE = (
    'ACTION=="add", SUBSYSTEM=="net", DRIVERS=="virtio_net", RUN+="/bin/sh -c '
    "'ip link set %k up; ip addr add 10.0.2.15/24 dev %k; ip route add default via 10.0.2.2'"
    '"\n'
)
# Emulated hardware the lab does not need and that misbehaves under a starved TCG vCPU:
# the ICH9 TCO watchdog (armed by systemd at shutdown) and KVM (no nested virtualisation).
LAB_BLACKLIST = (
    "# kgc lab: not needed on an emulated node\n"
    "blacklist iTCO_wdt\nblacklist iTCO_vendor_support\nblacklist kvm_amd\nblacklist kvm_intel\n"
)
LAB_LINKS: dict[str, str | None] = {
    "etc/systemd/system/multi-user.target.wants/kgc-console-report.service":
        "/etc/systemd/system/kgc-console-report.service",
    "etc/systemd/system/multi-user.target.wants/systemd-networkd.service": None,
    "etc/systemd/system/sockets.target.wants/systemd-networkd.socket": None,
    "etc/systemd/system/network-online.target.wants/systemd-networkd-wait-online.service": None,
    "etc/systemd/system/multi-user.target.wants/ssh.service": None,
    "etc/systemd/system/sockets.target.wants/ssh.socket": "/lib/systemd/system/ssh.socket",
    "etc/systemd/system/systemd-networkd.service": "/dev/null",
}


@dataclass(frozen=True)
class BuiltImage:
    disk: Path
    kernel: Path
    initrd: Path
    options: str


def _parse_entry(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        k, _, v = line.strip().partition(" ")
        if k and not k.startswith("#"):
            out[k] = v.strip()
    return out


@contextlib.contextmanager
def _chroot_mounts(root: Path) -> Iterator[None]:
    done: list[Path] = []
    try:
        for src, dst, args in (("proc", "proc", ["-t", "proc"]), ("sys", "sys", ["-t", "sysfs"]),
                               ("/dev", "dev", ["--bind"])):
            _run(["mount", *args, src, str(root / dst)])
            done.append(root / dst)
        yield
    finally:
        for m in reversed(done):
            subprocess.run(["umount", "-l", str(m)], check=False)


def build_variant(v: Variant) -> BuiltImage:
    """Build (or reuse) the disk image of a variant: cached under node/variants/<hash>/."""
    build_base()
    vd = cache_root() / "variants" / f"{v.name}-{v.key()}"
    if not (vd / "image.json").exists():
        with _build_lock(f"variant-{vd.name}"):
            return _build_variant(v, vd)
    return _build_variant(v, vd)


def _build_variant(v: Variant, vd: Path) -> BuiltImage:
    meta = vd / "image.json"
    if meta.exists():
        m = json.loads(meta.read_text())
        # the files sit next to image.json: paths recorded through another cache root (a
        # test's private cache that links to this one) may no longer exist
        return BuiltImage(vd / "disk.raw", vd / "vmlinuz", vd / "initrd.img", m["options"])
    vd.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{v.name}-", dir=vd.parent))
    # the build mounts /proc, /sys and /dev into the tree: recorded for `kgc lab cleanup`
    record = LabRecord.create("node-build", name=v.name, tmp=str(tmp))
    record.add_owned(tmp, ["chroot", "update-initramfs", "mkfs.ext4", "cp"])
    record.add_mounts(tmp)
    record.add_path(tmp)
    try:
        root = tmp / "root"
        _log(f"building image variant {v.name} ({vd.name})")
        check_no_mounts(base_root(), f"copying the base tree for variant {v.name}")
        # never across a mount point, should one appear while copying
        _run(["cp", "-a", "--one-file-system", "--reflink=auto", str(base_root()), str(root)])
        kd = ensure_keys()
        files = dict(v.files)
        files["/root/.ssh/authorized_keys"] = (kd / "id_ed25519.pub").read_text()
        files["/etc/ssh/ssh_host_ed25519_key"] = (kd / "ssh_host_ed25519_key").read_text()
        files["/etc/ssh/ssh_host_ed25519_key.pub"] = (kd / "ssh_host_ed25519_key.pub").read_text()
        files["/etc/systemd/system/kgc-console-report.service"] = CONSOLE_REPORT_UNIT
        files["/etc/udev/rules.d/70-kgc-lab-net.rules"] = LAB_NET_RULE
        files["/etc/modprobe.d/kgc-lab-quiet.conf"] = LAB_BLACKLIST
        for rel, dest in LAB_LINKS.items():
            link = root / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink() or link.exists():
                link.unlink()
            if dest is not None:
                link.symlink_to(dest)
        entry_path = root / BOOT_ENTRY
        entry = _parse_entry(entry_path.read_text())
        options = lab_options(v.options if v.options is not None else entry["options"])
        text = entry_path.read_text()
        lines = [ln if not ln.startswith("options ") else f"options {options}"
                 for ln in text.splitlines()]
        files["/" + BOOT_ENTRY] = "\n".join(lines) + "\n"
        for path, content in files.items():
            p = root / path.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            if p.exists() or p.is_symlink():
                p.unlink()
            p.write_text(content)
            p.chmod(0o600 if "ssh_host" in path and not path.endswith(".pub") else 0o644)
        if v.prepare is not None:
            v.prepare(root)
        entry = _parse_entry(entry_path.read_text())
        kver = (base_root() / ".kgc-base-done").read_text().strip()
        if v.initramfs:
            with _chroot_mounts(root):
                _run(["chroot", str(root), "update-initramfs", "-u", "-k", kver])
        vd_tmp = tmp / "out"
        vd_tmp.mkdir()
        shutil.copy2(root / entry["linux"].lstrip("/"), vd_tmp / "vmlinuz")
        shutil.copy2(root / entry["initrd"].lstrip("/"), vd_tmp / "initrd.img")
        disk = vd_tmp / "disk.raw"
        with open(disk, "wb") as fh:
            fh.truncate(v.disk_gib * 1024**3)
        check_no_mounts(root, f"imaging variant {v.name}")
        _run(["mkfs.ext4", "-q", "-F", "-L", "kgcroot", "-E", "root_owner=0:0", "-d", str(root),
              str(disk)])
        shutil.rmtree(root)
        vd_tmp.rename(vd)
        img = BuiltImage(vd / "disk.raw", vd / "vmlinuz", vd / "initrd.img", entry["options"])
        meta.write_text(json.dumps({k: str(x) for k, x in asdict(img).items()}))
        return img
    finally:
        for mp in procs.mounts_under(str(tmp.resolve())):
            subprocess.run(["umount", "-l", mp], check=False)
        # removed only with nothing mounted in it (rmtree would delete through a bind
        # mount of /dev); else left, with its record, to `kgc lab cleanup`
        if not procs.mounts_under(str(tmp.resolve())):
            shutil.rmtree(tmp, ignore_errors=True)
            record.close()


# --------------------------------------------------------------------------------------
# VMs
# --------------------------------------------------------------------------------------
def run_dir() -> Path:
    return cache_root() / "run"


@dataclass
class NodeVM(QemuVM):
    """One lab node. ``start()`` boots it and waits for SSH; ``stop()`` really stops it."""

    Error = LabError

    name: str
    image: BuiltImage
    hardware: Hardware = Hardware()
    boot_timeout_s: float = 420.0
    # user-mode network: ``restrict`` cuts the guest off from the host and the outside
    # (only the forwards below lead anywhere); ``forwards`` are extra ``hostfwd=``/
    # ``guestfwd=`` rules, e.g. a kubelet port on loopback and the API server for the guest
    restrict: bool = False
    forwards: tuple[str, ...] = ()
    # A busy guest (a node running a kubelet, on a loaded host) may take longer than the
    # default to complete one SSH handshake; waiting for the console's boot report first
    # keeps early probes from piling up sshd instances in the booting guest.
    ssh_probe_timeout_s: float = 20.0
    probe_after_console_report: bool = False
    port: int = 0
    boot_s: float | None = None
    record: LabRecord | None = field(default=None, repr=False)

    @property
    def dir(self) -> Path:
        return run_dir() / self.name

    @property
    def spec(self) -> str:
        return f"ssh://root@kgc-{self.name}"

    def _argv(self, port: int) -> list[str]:
        """QEMU boots the image's own boot entry directly (the lab is the boot loader)."""
        return [
            "qemu-system-x86_64", "-name", f"kgc-{self.name}",
            *self.hardware.qemu_args(),
            "-kernel", str(self.image.kernel), "-initrd", str(self.image.initrd),
            "-append", self.image.options,
            "-drive", f"file={self.dir / 'disk.qcow2'},if=none,id=d0,format=qcow2,cache=unsafe",
            "-device", "virtio-blk-pci,drive=d0,addr=0x3",
            "-netdev", ",".join([
                "user", "id=n0", *(["restrict=on"] if self.restrict else []),
                f"hostfwd=tcp:127.0.0.1:{port}-:22", *self.forwards]),
            "-device", "virtio-net-pci,netdev=n0,addr=0x2",
            "-serial", f"file:{self.console_log}",
            "-monitor", f"unix:{self.dir / 'monitor.sock'},server,nowait",
            "-pidfile", str(self.dir / "qemu.pid"), "-daemonize",
        ]

    def _port_chosen(self, port: int) -> None:
        assert self.record is not None
        self.record.add_ssh_port(port)

    def start(self) -> float:
        """Boot; return seconds from QEMU start to SSH answering."""
        if self.alive():
            raise LabError(f"node {self.name} is already running (pid {self.pid()})")
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        # Recorded before QEMU starts (it daemonizes: no parent will reap it): a QEMU whose
        # command line names this VM's directory is this lab's, even if we die right now.
        self.record = LabRecord.create("node", name=self.name, vm_dir=str(self.dir))
        self.record.add_owned(self.dir, ["qemu-system-x86_64"])
        _run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b",
              str(self.image.disk), str(self.dir / "disk.qcow2")])
        t0 = self._launch(self._argv)
        qemu = self.pid()
        if qemu is not None:
            self.record.add_process("qemu", qemu, exe="qemu-system-x86_64")
            self.record.update(port=self.port)
        kd = ensure_keys()
        host_pub = " ".join((kd / "ssh_host_ed25519_key.pub").read_text().split()[:2])
        self._write_ssh_files("root", kd / "id_ed25519", host_pub)
        (self.dir / "meta.json").write_text(json.dumps({
            "name": self.name, "port": self.port, "image": {k: str(x) for k, x in
                                                            asdict(self.image).items()},
            "hardware": asdict(self.hardware)}))
        self.wait_ssh(self.boot_timeout_s)
        self.boot_s = time.monotonic() - t0
        return self.boot_s

    def _may_probe(self) -> bool:
        return not self.probe_after_console_report or self.console_reported()

    def console_reported(self) -> bool:
        """The guest printed its boot report (kgc-console-report.service) on the console."""
        try:
            with open(self.console_log, "rb") as fh:
                return b"== kgc-node ready" in fh.read()
        except OSError:
            return False

    def reboot(self, timeout_s: float = 240) -> float:
        """Reboot from inside the guest (detached) and wait for a new boot_id."""
        old = self.ssh("cat /proc/sys/kernel/random/boot_id").stdout.strip()
        self.ssh("(sleep 1; systemctl reboot) >/dev/null 2>&1 </dev/null &")
        t0 = time.monotonic()

        def new_boot() -> bool:
            if not self._ssh_ok():
                return False
            return self.ssh("cat /proc/sys/kernel/random/boot_id", check=False
                            ).stdout.strip() not in ("", old)

        try:
            Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(2),
                     retry=retry_if_result(lambda ok: not ok))(new_boot)
        except RetryError:
            raise LabError(f"node {self.name} did not come back with a new boot_id within "
                           f"{timeout_s:.0f} s; console:\n{self.console_tail()}") from None
        return time.monotonic() - t0

    def _forget(self) -> None:
        """The VM is down: drop its lab record (the one this object made, or the one found
        by name when another process started it)."""
        rec = self.record
        if rec is None:
            from kgc_lab.ledger import records

            found = [r for r in records("node")[0] if r.data.get("name") == self.name]
            rec = found[-1] if found else None
        if rec is not None:
            rec.close()
        self.record = None

    @classmethod
    def load(cls, name: str) -> NodeVM:
        d = run_dir() / name
        try:
            m = json.loads((d / "meta.json").read_text())
        except OSError:
            raise LabError(f"no lab node named {name!r} (see `kgc lab node list`)") from None
        mi = m["image"]
        img = BuiltImage(Path(mi["disk"]), Path(mi["kernel"]), Path(mi["initrd"]), mi["options"])
        vm = cls(name, img, Hardware(**m["hardware"]))
        vm.port = int(m["port"])
        return vm


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------
def _cmd_build(args: argparse.Namespace) -> int:
    from kgc_lab.node.scenarios import VARIANTS

    build_base()
    for name in args.variant or ["base"]:
        img = build_variant(VARIANTS[name])
        print(f"{name}: {img.disk}")
    return 0


def _cmd_start(args: argparse.Namespace) -> int:
    from kgc_lab.node.scenarios import VARIANTS

    img = build_variant(VARIANTS[args.variant])
    hw = Hardware(iommu=args.iommu, extra_accels=args.extra_accels)
    vm = NodeVM(args.name, img, hw)
    secs = vm.start()
    print(json.dumps({"name": vm.name, "spec": vm.spec, "ssh_config": str(vm.ssh_config),
                      "boot_to_ssh_s": round(secs, 1)}))
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    NodeVM.load(args.name).stop()
    return 0


def _cmd_reboot(args: argparse.Namespace) -> int:
    vm = NodeVM.load(args.name)
    print(json.dumps({"name": vm.name, "reboot_s": round(vm.reboot(), 1)}))
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    d = run_dir()
    for p in sorted(d.glob("*/meta.json")) if d.exists() else []:
        vm = NodeVM.load(p.parent.name)
        print(f"{vm.name}\t{'running' if vm.alive() else 'stopped'}\t{vm.spec}\t"
              f"ssh_config={vm.ssh_config}")
    return 0


def _cmd_ssh(args: argparse.Namespace) -> int:
    vm = NodeVM.load(args.name)
    return subprocess.call([*vm.ssh_base(), *args.command])


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from kgc_lab.node.runner import run_scenarios
    from kgc_lab.node.scenarios import SCENARIO_SPECS

    names = args.only or list(SCENARIO_SPECS)
    res = run_scenarios(names, out_dir=Path(args.out),
                        bundle_dir=Path(args.bundle_dir) if args.bundle_dir else None,
                        keep=args.keep, parallel=args.parallel)
    bad = 0
    for n, r in res.items():
        ok = not r.mismatches
        bad += not ok
        boot = r.boot_s and round(r.boot_s, 1)
        print(f"{n:18} {'as documented' if ok else 'DIFFERS'}  boot={boot}s"
              f" host_run={r.host_run_s:.1f}s round_trips={r.round_trips} "
              f"reboot_test={r.reboot_s and round(r.reboot_s, 1)}s verdicts={r.verdict_path}")
        for c, m in r.mismatches.items():
            print(f"    {c}: {m}")
    return 1 if bad else 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from kgc_lab.node.bench import main

    print(json.dumps(main(Path(args.out)), indent=1))
    return 0


def register(subparsers: Any) -> None:
    """Add ``kgc lab node {build,start,stop,reboot,list,ssh}``."""
    from kgc_lab.node.scenarios import VARIANTS

    p = subparsers.add_parser("node", help="QEMU node-image lab (Debian bookworm, emulated IOMMU)")
    sub = p.add_subparsers(dest="node_cmd", required=True)
    b = sub.add_parser("build", help="build the base image and variants (cached)")
    b.add_argument("--variant", action="append", choices=sorted(VARIANTS))
    b.set_defaults(func=_cmd_build)
    s = sub.add_parser("start", help="boot a node and wait for SSH")
    s.add_argument("name")
    s.add_argument("--variant", default="base", choices=sorted(VARIANTS))
    s.add_argument("--iommu", default="intel", choices=("intel", "amd", "none"))
    s.add_argument("--extra-accels", type=int, default=0)
    s.set_defaults(func=_cmd_start)
    for name, fn, hlp in (("stop", _cmd_stop, "power a node off"),
                          ("reboot", _cmd_reboot, "reboot a node and wait for its new boot_id")):
        q = sub.add_parser(name, help=hlp)
        q.add_argument("name")
        q.set_defaults(func=fn)
    sub.add_parser("list", help="list lab nodes").set_defaults(func=_cmd_list)
    r = sub.add_parser("scenarios", help="run lab scenarios (default: all) and compare each "
                       "with its documented verdicts")
    r.add_argument("--only", action="append", metavar="NAME")
    r.add_argument("--out", default="reports/node-lab")
    r.add_argument("--bundle-dir", default=None, help="write evidence bundles here "
                   "(fixtures/bundles to refresh the regression data)")
    r.add_argument("--parallel", type=int, default=2)
    r.add_argument("--keep", action="store_true", help="leave the VMs running")
    r.set_defaults(func=_cmd_scenarios)
    bb = sub.add_parser("bench", help="run the node-lab benchmarks (benchmarks/node.md)")
    bb.add_argument("--out", default="benchmarks/node.json")
    bb.set_defaults(func=_cmd_bench)
    q = sub.add_parser("ssh", help="run a command on a node")
    q.add_argument("name")
    q.add_argument("command", nargs=argparse.REMAINDER)
    q.set_defaults(func=_cmd_ssh)
