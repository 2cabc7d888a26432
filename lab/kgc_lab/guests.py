"""Tiny real QEMU guests at a chosen size, for proving the sizing layer on real kernels.

``boot_guest(vcpus, memory_mib)`` boots a Debian kernel under TCG with a busybox initramfs
whose ``/init`` runs the sizing layer's own in-guest collector
(:data:`kgc.layers.sizing.evidence.SIZING_GUEST_QUERY`: ``nproc --all``, ``/proc/meminfo``,
``/proc/cpuinfo``, ``/proc/zoneinfo``, the memory-block size) and powers off. The collector's
output comes back on a second serial port and is parsed by the same code as a pod's.

``boot_vcpus``/``boot_memory_mib`` below the final size reproduce Kata's Go runtime in
dynamic mode: the VM boots small (``-smp 1,maxcpus=N``, ``-m 2048M,slots=10,maxmem=...``),
and once the guest is up, vCPUs and a ``pc-dimm`` are hot-plugged over QMP, then onlined by
``/init`` as Kata's agent does.

Commands (``python -m kgc_lab.guests``):

    record --out fixtures/guest/sizing      # boot every capture in CAPTURES, write bundles
    selftest                                # boot one small guest and judge it (~15 s)

Assets, in order: the node lab's cached kernel (``$KGC_CACHE/node/variants/*/vmlinuz``), else
``vmlinuz`` extracted from Debian's ``linux-image-amd64`` dependency (``apt-get download``,
cached in ``$KGC_CACHE/sizing``); a statically linked busybox (``/bin/busybox`` if static,
else from ``busybox-static``). TCG only: KVM is not assumed (and hangs on some hosts).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from kgc.core.hostfs import HostSnapshot, build_script, new_boundary, parse_output
from kgc.layers.sizing.evidence import SIZING_GUEST_QUERY, GuestSize

QEMU = "qemu-system-x86_64"
KERNEL_CMDLINE = "console=ttyS0 panic=-1 quiet"
READY = "KGC-GUEST-READY"
DONE = "KGC-GUEST-DONE"


class GuestError(Exception):
    """A guest could not be built, booted or read. ``str()`` is the whole message."""


def cache_root() -> Path:
    return Path(os.environ.get("KGC_CACHE") or Path.home() / ".cache" / "kgc")


def _log(msg: str) -> None:
    print(f"[kgc lab guests] {msg}", file=sys.stderr, flush=True)


def _run(cmd: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(list(cmd), text=True, capture_output=True, check=False, **kw)
    if res.returncode != 0:
        raise GuestError(f"command failed (exit {res.returncode}): {shlex.join(cmd)}\n"
                         f"{(res.stdout + res.stderr).strip()[-2000:]}")
    return res


# -- assets ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GuestAssets:
    kernel: Path
    kernel_origin: str  # where the kernel came from (node lab cache, Debian package)
    busybox: Path
    busybox_origin: str


def _is_static_elf(p: Path) -> bool:
    """An ELF with no PT_INTERP program header (statically linked)."""
    try:
        data = p.read_bytes()[:65536]
    except OSError:
        return False
    if data[:4] != b"\x7fELF" or data[4] != 2:  # 64-bit only
        return False
    phoff = int.from_bytes(data[32:40], "little")
    phentsize = int.from_bytes(data[54:56], "little")
    phnum = int.from_bytes(data[56:58], "little")
    for i in range(phnum):
        off = phoff + i * phentsize
        if off + 4 > len(data):
            return False
        if int.from_bytes(data[off:off + 4], "little") == 3:  # PT_INTERP
            return False
    return True


def _apt_download(pkg: str, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    _run(["apt-get", "download", "-q", pkg], cwd=dest, timeout=600)
    debs = sorted(dest.glob(f"{pkg}_*.deb"))
    if not debs:
        raise GuestError(f"apt-get download {pkg} produced no .deb in {dest}")
    return debs[-1]


def _extract(deb: Path, member_glob: str, dest: Path) -> Path:
    with tempfile.TemporaryDirectory(dir=dest) as td:
        _run(["dpkg-deb", "-x", str(deb), td], timeout=600)
        hits = sorted(Path(td).glob(member_glob))
        if not hits:
            raise GuestError(f"{deb.name} has no {member_glob}")
        out = dest / hits[-1].name
        shutil.copy2(hits[-1], out)
        return out


def find_assets(download: bool = True) -> GuestAssets:
    """The kernel and busybox to boot, downloading Debian's packages when ``download`` and
    nothing is cached. Raises :class:`GuestError` saying what is missing."""
    root = cache_root()
    own = root / "sizing"
    kernel = origin = None
    lab = sorted((root / "node" / "variants").glob("*/vmlinuz"))
    if lab:
        kernel, origin = lab[0], f"node lab image {lab[0].parent.name}"
    else:
        mine = sorted(own.glob("vmlinuz-*"))
        if mine:
            kernel, origin = mine[-1], f"Debian package ({mine[-1].name}, cached)"
        elif download and shutil.which("apt-get") and shutil.which("dpkg-deb"):
            dep = _run(["apt-cache", "depends", "linux-image-amd64"], timeout=120).stdout
            m = re.search(r"Depends:\s*(linux-image-[0-9][^\s]*)", dep)
            if not m:
                raise GuestError(f"cannot resolve linux-image-amd64: {dep.strip()[:300]}")
            deb = _apt_download(m.group(1), own / "debs")
            kernel = _extract(deb, "boot/vmlinuz-*", own)
            origin = f"Debian package {deb.name}"
    if kernel is None:
        raise GuestError("no guest kernel: build the node lab (kgc lab node build) or allow "
                         "`apt-get download linux-image-amd64`")
    bb = bb_origin = None
    for cand in (Path("/bin/busybox"), Path("/usr/bin/busybox")):
        if cand.exists() and _is_static_elf(cand):
            bb, bb_origin = cand, f"{cand} (static)"
            break
    if bb is None:
        cached = own / "busybox"
        if cached.exists():
            bb, bb_origin = cached, "busybox-static (cached)"
        elif download and shutil.which("apt-get") and shutil.which("dpkg-deb"):
            deb = _apt_download("busybox-static", own / "debs")
            bb = _extract(deb, "bin/busybox", own)
            bb_origin = f"Debian package {deb.name}"
    if bb is None:
        raise GuestError("no statically linked busybox: install busybox-static or allow "
                         "`apt-get download busybox-static`")
    return GuestAssets(kernel, origin or "", bb, bb_origin or "")


# -- initramfs ---------------------------------------------------------------------------------
def _cpio_newc(entries: Sequence[tuple[str, int, bytes]]) -> bytes:
    """A newc cpio archive (what the kernel unpacks as an initramfs). ``entries`` are
    (path, mode, content); symlinks carry their target as content."""
    out = bytearray()

    def pad4(n: int) -> None:
        out.extend(b"\0" * ((4 - n % 4) % 4))

    for ino, (name, mode, data) in enumerate([*entries, ("TRAILER!!!", 0, b"")], start=1):
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08X}" for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(nb), 0))
        out.extend(hdr.encode())
        out.extend(nb)
        pad4(110 + len(nb))
        out.extend(data)
        pad4(len(data))
    return bytes(out)


_INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mkdir -p /proc /sys /dev /tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo 1 > /proc/sys/kernel/printk
want_cpus=$(sed -n 's/.*kgc\.cpus=\([0-9]*\).*/\1/p' /proc/cmdline)
want_mib=$(sed -n 's/.*kgc\.ram_mib=\([0-9]*\).*/\1/p' /proc/cmdline)
echo "@READY@"
if [ -n "$want_cpus" ]; then
  # Kata's agent onlines hot-plugged vCPUs and memory blocks; do the same, bounded
  bs=$(( 0x$(cat /sys/devices/system/memory/block_size_bytes) / 1048576 ))
  i=0
  while [ $i -lt 600 ]; do
    for f in /sys/devices/system/memory/memory*/online /sys/devices/system/cpu/cpu*/online; do
      [ "$(cat $f 2>/dev/null)" = 0 ] && echo 1 > $f 2>/dev/null
    done
    cpus=$(ls -d /sys/devices/system/cpu/cpu[0-9]* | wc -l)
    online=$(grep -c ^processor /proc/cpuinfo)
    blocks=$(ls -d /sys/devices/system/memory/memory[0-9]* | wc -l)
    offline=$(grep -l 0 /sys/devices/system/memory/memory*/online 2>/dev/null | wc -l)
    if [ "$cpus" -ge "$want_cpus" ] && [ "$online" -ge "$want_cpus" ] && \
       [ $((blocks * bs)) -ge "$want_mib" ] && [ "$offline" = 0 ]; then break; fi
    i=$((i + 1)); sleep 0.2
  done
  echo "hotplug wait: $i rounds, cpus=$cpus online=$online blocks=$blocks offline=$offline"
fi
stty -F /dev/ttyS1 raw -echo 2>/dev/null
sh /collect.sh > /dev/ttyS1 2>/dev/null
echo "@DONE@"
poweroff -f
"""


def build_initramfs(busybox: Path, collector: str, out: Path) -> Path:
    init = _INIT.replace("@READY@", READY).replace("@DONE@", DONE)
    entries = [
        ("bin", 0o040755, b""),
        ("bin/busybox", 0o100755, busybox.read_bytes()),
        ("bin/sh", 0o120777, b"busybox"),
        ("init", 0o100755, init.encode()),
        ("collect.sh", 0o100644, collector.encode()),
    ]
    out.write_bytes(gzip.compress(_cpio_newc(entries), compresslevel=1))
    return out


# -- QMP ---------------------------------------------------------------------------------------
class Qmp:
    """A minimal QMP client on a unix socket (one command at a time)."""

    def __init__(self, path: Path, timeout_s: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout_s)
        self.sock.connect(str(path))
        self.buf = b""
        self._read()  # greeting
        self.cmd("qmp_capabilities")

    def _read(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise GuestError("QMP connection closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        msg: dict[str, Any] = json.loads(line)
        return msg

    def cmd(self, name: str, **args: Any) -> Any:
        self.sock.sendall(json.dumps({"execute": name, "arguments": args}).encode() + b"\n")
        while True:
            msg = self._read()
            if "return" in msg:
                return msg["return"]
            if "error" in msg:
                raise GuestError(f"QMP {name}: {msg['error'].get('desc', msg['error'])}")

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


# -- booting -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class GuestCapture:
    vcpus: int
    memory_mib: int
    boot_vcpus: int
    boot_memory_mib: int
    snapshot: HostSnapshot
    raw: str
    console: str
    boot_s: float
    qemu_argv: tuple[str, ...]
    qemu_version: str
    kernel_origin: str
    kernel_sha256: str
    collected_at: str
    hotplugged: tuple[str, ...] = ()

    @property
    def guest(self) -> GuestSize:
        return GuestSize.from_snapshot(self.snapshot)

    def bundle(self, label: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A ``kgc-bundle/1`` document (the format of fixtures/guest/*.bundle.json) with the
        capture's provenance under ``capture``."""
        return {
            "format": "kgc-bundle/1",
            "target": "guest",
            "label": label,
            "collected_at": self.collected_at,
            "collector_wall_s": round(self.boot_s, 3),
            "collector_rc": 0 if self.snapshot.complete else 1,
            "host": self.snapshot.to_dict(),
            "capture": {
                "vm": {"vcpus": self.vcpus, "memory_mib": self.memory_mib,
                       "boot_vcpus": self.boot_vcpus, "boot_memory_mib": self.boot_memory_mib,
                       "hotplugged": list(self.hotplugged)},
                "boot_s": round(self.boot_s, 2),
                "qemu": {"version": self.qemu_version, "argv": list(self.qemu_argv)},
                "kernel": {"origin": self.kernel_origin, "sha256": self.kernel_sha256},
                "console_tail": self.console[-1500:],
                **(dict(extra) if extra else {}),
            },
        }


def qemu_version() -> str:
    out = _run([QEMU, "--version"], timeout=30).stdout
    return out.splitlines()[0].strip() if out else "unknown"


def _sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _host_mem_mib() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 65536


def _wait_for(what: str, probe: Callable[[], bool], timeout_s: float) -> None:
    """Poll ``probe`` every 0.2 s until it is true (bounded; a probe's error propagates)."""
    try:
        Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(0.2),
                 retry=retry_if_result(lambda ok: not ok))(probe)
    except RetryError:
        raise GuestError(f"timed out after {timeout_s:.0f} s waiting for {what}") from None


def boot_guest(
    vcpus: int,
    memory_mib: int,
    *,
    boot_vcpus: int | None = None,
    boot_memory_mib: int | None = None,
    assets: GuestAssets | None = None,
    workdir: Path | None = None,
    timeout_s: float = 300.0,
) -> GuestCapture:
    """Boot one guest at ``vcpus``/``memory_mib`` (hot-plugging from the boot size when
    that is smaller), run the sizing collector inside, and return what it reported."""
    if vcpus < 1 or memory_mib < 64:
        raise GuestError(f"refusing to boot a {vcpus} vCPU / {memory_mib} MiB guest")
    if shutil.which(QEMU) is None:
        raise GuestError(f"{QEMU} is not installed (apt-get install qemu-system-x86)")
    a = assets or find_assets()
    bv = boot_vcpus or vcpus
    bm = boot_memory_mib or memory_mib
    if bv > vcpus or bm > memory_mib:
        raise GuestError("the boot size cannot exceed the final size")
    hot = bv < vcpus or bm < memory_mib
    boundary = new_boundary()
    collector = build_script(SIZING_GUEST_QUERY, boundary)
    with contextlib.ExitStack() as stack:
        wd = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kgc-guest-")))
        wd.mkdir(parents=True, exist_ok=True)
        initrd = build_initramfs(a.busybox, collector, wd / "initramfs.cpio.gz")
        console, data, qmp_path = wd / "console.log", wd / "data.txt", wd / "qmp.sock"
        for f in (console, data, qmp_path):
            f.unlink(missing_ok=True)
        append = KERNEL_CMDLINE
        if hot:
            append += f" kgc.cpus={vcpus} kgc.ram_mib={memory_mib}"
            maxmem = max(_host_mem_mib(), memory_mib + 1024)
            smp = f"{bv},sockets={vcpus},cores=1,threads=1,maxcpus={vcpus}"
            mem = f"{bm}M,slots=10,maxmem={maxmem}M"
        else:
            smp, mem = str(vcpus), f"{memory_mib}M"
        # guest RAM is mapped MAP_NORESERVE (reserve=off): a TCG guest touches little of it,
        # and a VM larger than half this host's RAM must still start
        argv = [QEMU, "-machine", "q35,memory-backend=ram0", "-accel", "tcg", "-cpu", "max",
                "-smp", smp, "-m", mem,
                "-object", f"memory-backend-ram,id=ram0,size={bm}M,reserve=off", "-nodefaults",
                "-display", "none", "-no-reboot",
                "-kernel", str(a.kernel), "-initrd", str(initrd), "-append", append,
                "-serial", f"file:{console}", "-serial", f"file:{data}",
                "-qmp", f"unix:{qmp_path},server=on,wait=off"]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        plugged: list[str] = []
        try:
            if hot:
                def ready() -> bool:
                    if proc.poll() is not None:
                        raise GuestError(f"QEMU exited {proc.returncode} before the guest "
                                         f"was up: {_tail(console)}")
                    return console.exists() and READY in console.read_text(errors="replace")
                _wait_for("the guest to boot (console: " + READY + ")", ready, timeout_s)
                plugged = _hotplug(qmp_path, vcpus - bv, memory_mib - bm)
            try:
                out, _ = proc.communicate(timeout=max(5.0, timeout_s - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                raise GuestError(f"the guest did not power off within {timeout_s:.0f} s; "
                                 f"console: {_tail(console)}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)
        boot_s = time.monotonic() - t0
        if proc.returncode != 0:
            raise GuestError(f"QEMU exited {proc.returncode}: {out.strip()[-800:]}")
        raw = data.read_text(errors="replace") if data.exists() else ""
        snap = parse_output(raw.replace("\r\n", "\n"), boundary)
        con = console.read_text(errors="replace") if console.exists() else ""
        if not snap.complete:
            raise GuestError(f"the collector's output is incomplete; console: {con[-1500:]}")
        return GuestCapture(
            vcpus=vcpus, memory_mib=memory_mib, boot_vcpus=bv, boot_memory_mib=bm,
            snapshot=snap, raw=raw, console=con, boot_s=boot_s,
            qemu_argv=tuple(_portable_argv(argv, a, wd)), qemu_version=qemu_version(),
            kernel_origin=a.kernel_origin, kernel_sha256=_sha256(a.kernel),
            collected_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            hotplugged=tuple(plugged),
        )


def _tail(p: Path) -> str:
    return p.read_text(errors="replace")[-1200:] if p.exists() else "(no console output)"


def _portable_argv(argv: Sequence[str], a: GuestAssets, wd: Path) -> list[str]:
    """The command line with this machine's paths replaced by names."""
    out = []
    for x in argv:
        x = x.replace(str(a.kernel), f"<{a.kernel.name}>").replace(str(wd) + "/", "")
        out.append(x)
    return out


def _hotplug(qmp_path: Path, add_cpus: int, add_mib: int) -> list[str]:
    """Hot-plug vCPUs and one pc-dimm the way Kata's Go runtime does (QMP device_add)."""
    _wait_for("the QMP socket", qmp_path.exists, 30)
    q = Qmp(qmp_path)
    done: list[str] = []
    try:
        if add_cpus > 0:
            free = [c for c in q.cmd("query-hotpluggable-cpus") if not c.get("qom-path")]
            for i, c in enumerate(sorted(free, key=lambda c: c["props"].get("socket-id", 0))):
                if i == add_cpus:
                    break
                props = {k: v for k, v in c["props"].items() if k != "node-id"}
                q.cmd("device_add", driver=c["type"], id=f"cpu-{i}", **props)
                done.append(f"cpu-{i} {c['type']} {props}")
            if len(done) < add_cpus:
                raise GuestError(f"only {len(done)} of {add_cpus} vCPUs could be hot-plugged")
        if add_mib > 0:
            q.cmd("object-add", **{"qom-type": "memory-backend-ram", "id": "mem0",
                                  "size": add_mib * 1024 * 1024, "reserve": False})
            q.cmd("device_add", driver="pc-dimm", id="dimm0", memdev="mem0")
            done.append(f"dimm0 pc-dimm {add_mib} MiB")
    finally:
        q.close()
    return done


# -- the recorded captures ---------------------------------------------------------------------
@dataclass(frozen=True)
class CaptureSpec:
    """A fixture: the shape and Kata config whose predicted VM the guest is booted at."""

    name: str
    preset: str  # key of kgc.layers.sizing.model.KATA_PRESETS
    shape: str  # name of a shape in kgc.layers.sizing.profile.DEFAULT_SHAPES (or "probe")
    hotplug: bool = False  # boot at the defaults and hot-plug (Go dynamic)
    note: str = ""


CAPTURES: tuple[CaptureSpec, ...] = (
    CaptureSpec("go-qemu-probe-1x2048", "qemu", "probe",
                note="the default VM: a pod without limits"),
    CaptureSpec("go-qemu-one-container-3x4096-hotplug", "qemu", "one-container", hotplug=True,
                note="Go dynamic: boots 1/2048, 2 vCPUs and a 2048 MiB DIMM hot-plugged"),
    CaptureSpec("go-qemu-fractional-2x2304-hotplug", "qemu", "fractional-cpu", hotplug=True,
                note="Go dynamic: 250m -> ceil(1.25) = 2 vCPUs; 256Mi rounded to 2 blocks"),
    CaptureSpec("go-nvidia-one-container-3x10240", "qemu-nvidia-gpu", "one-container",
                note="Go static (NVIDIA config): the large one"),
    CaptureSpec("go-nvidia-gpu-pod-5x24576", "qemu-nvidia-gpu", "gpu",
                note="Go static (NVIDIA config): the GPU shape, multi-vCPU"),
    CaptureSpec("rs-qemu-one-container-3x2080", "qemu-runtime-rs", "one-container",
                note="runtime-rs static: 32 MiB overhead, a size that is not block-aligned"),
    CaptureSpec("rs-nvidia-two-containers-2x2560", "qemu-nvidia-gpu-runtime-rs",
                "two-containers", note="runtime-rs static (NVIDIA): 512 MiB overhead"),
    # the rest of the default matrix under the NVIDIA Go config (the cluster lab's simulated
    # Kata nodes serve these: kgc_lab.cluster.sim_sizing)
    CaptureSpec("go-nvidia-probe-1x8192", "qemu-nvidia-gpu", "probe",
                note="Go static (NVIDIA config): the default VM, a pod without limits"),
    CaptureSpec("go-nvidia-two-containers-2x10240", "qemu-nvidia-gpu", "two-containers",
                note="Go static (NVIDIA config): 2 x 500m -> ceil(1.0) + 1 = 2 vCPUs"),
    CaptureSpec("go-nvidia-memory-only-1x9216", "qemu-nvidia-gpu", "memory-only",
                note="Go static (NVIDIA config): no CPU limit, only the default vCPU"),
    CaptureSpec("go-nvidia-fractional-2x8448", "qemu-nvidia-gpu", "fractional-cpu",
                note="Go static (NVIDIA config): 250m -> ceil(0.25) + 1 = 2 vCPUs"),
)


def predicted(spec: CaptureSpec) -> Any:
    """The VmSize the model predicts for a capture spec."""
    from kgc.layers.sizing.model import KATA_PRESETS, expected_vm
    from kgc.layers.sizing.profile import shape_pod

    return expected_vm(shape_pod(spec.shape), KATA_PRESETS[spec.preset])


def record(
    out_dir: Path, names: Sequence[str] = (), assets: GuestAssets | None = None
) -> list[Path]:
    """Boot each capture at its predicted size and write ``<name>.bundle.json``."""
    a = assets or find_assets()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in CAPTURES:
        if names and spec.name not in names:
            continue
        vm = predicted(spec)
        bv, bm = (vm.boot_vcpus, vm.boot_memory_mib) if spec.hotplug else (None, None)
        _log(f"{spec.name}: booting {vm.vcpus} vCPU / {vm.memory_mib} MiB"
             + (f" (boot {bv}/{bm}, hot-plug the rest)" if spec.hotplug else ""))
        cap = boot_guest(vm.vcpus, vm.memory_mib, boot_vcpus=bv, boot_memory_mib=bm, assets=a)
        g = cap.guest
        _log(f"{spec.name}: {cap.boot_s:.1f} s; nproc --all={g.nproc_all} "
             f"MemTotal={g.memtotal_mib:.1f} MiB RAM={g.ram_mib} MiB")
        doc = cap.bundle(
            f"sizing capture {spec.name}: {spec.note}",
            {"spec": {"name": spec.name, "preset": spec.preset, "shape": spec.shape,
                      "hotplug": spec.hotplug, "note": spec.note},
             "predicted": vm.to_dict(),
             "recorded_by": "python -m kgc_lab.guests record"})
        path = out_dir / f"{spec.name}.bundle.json"
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        written.append(path)
    return written


def selftest() -> int:
    """Boot the smallest capture for real and judge it with the sizing evaluator."""
    from kgc.layers.sizing.checks import judge_guest
    from kgc.layers.sizing.profile import SizingProfile

    spec = CAPTURES[0]
    vm = predicted(spec)
    cap = boot_guest(vm.vcpus, vm.memory_mib, timeout_s=120)
    j = judge_guest(vm, cap.guest, SizingProfile().memtotal)
    print(f"{spec.name}: booted in {cap.boot_s:.1f} s: {j.status}: {j.reason}")
    return 0 if j.status == "pass" else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgc_lab.guests",
                                 description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="boot every capture and write its bundle")
    r.add_argument("--out", type=Path, default=Path("fixtures/guest/sizing"))
    r.add_argument("names", nargs="*", help="only these captures")
    sub.add_parser("selftest", help="boot one small guest and judge it")
    sub.add_parser("assets", help="locate (or download) the kernel and busybox")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "record":
            for p in record(a.out, a.names):
                print(p)
            return 0
        if a.cmd == "assets":
            print(find_assets())
            return 0
        return selftest()
    except GuestError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CAPTURES", "GuestAssets", "GuestCapture", "GuestError", "boot_guest", "find_assets",
           "record", "selftest"]
