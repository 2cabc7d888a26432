"""`kgc image check IMAGE --boot`: boot the image in QEMU through ITS OWN boot loader and
certify the running node: the host layers over SSH, then the real reboot test (the reboot
goes through the firmware and the image's boot loader again), then power off.

- Machine: :mod:`kgc.image.qemu` (q35 with an emulated IOMMU, Intel, interrupt remapping,
  and stand-in devices: edu accelerator, e1000 pair in one IOMMU group, the host's own
  NICs — so the built-in ``lab`` profile's targets exist). UEFI (OVMF) when the disk has an
  EFI system partition, else BIOS (SeaBIOS) from the disk's MBR boot code. TCG: no KVM
  needed.
- The image file is never written: QEMU runs on a private qcow2 overlay.
- Access: an ephemeral SSH key injected with a cloud-init NoCloud seed (a FAT volume
  labelled CIDATA; the host key is injected too and pinned, so nothing is trusted on first
  use) — or the image's documented way: a key baked in by the pipeline
  (``--ssh-identity-file`` + ``--boot-host-key``).

Needs qemu-system-x86_64 and qemu-img, ssh and ssh-keygen, OVMF for UEFI images and mtools
for the NoCloud seed: the host's (apt install qemu-system-x86 ovmf mtools), or unpacked
under ``$KGC_BOOT_TOOLS`` (a root with ``usr/share/OVMF`` and ``usr/bin/mtools``), or the
firmware pair named by ``KGC_OVMF_CODE`` and ``KGC_OVMF_VARS``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgc import __version__
from kgc.core import report
from kgc.core.engine import Context, error_verdict
from kgc.core.layer import Scope
from kgc.core.profile import Profile, load_profile
from kgc.core.registry import catalogue, load_layers
from kgc.core.target import NodeTarget
from kgc.image.disk import HEAD_BYTES, ImageError, ImageFile, layout
from kgc.image.qemu import Hardware, QemuVM, VMError
from kgc.progress import install, note, uninstall

OVMF_PAIRS = (
    ("/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"),
    ("/usr/share/OVMF/OVMF_CODE.fd", "/usr/share/OVMF/OVMF_VARS.fd"),
    ("/usr/share/edk2/ovmf/OVMF_CODE.fd", "/usr/share/edk2/ovmf/OVMF_VARS.fd"),
)


def find_ovmf() -> tuple[Path, Path]:
    env = os.environ.get("KGC_OVMF_CODE"), os.environ.get("KGC_OVMF_VARS")
    cands = [env] if all(env) else []
    cands += list(OVMF_PAIRS)
    tools = os.environ.get("KGC_BOOT_TOOLS")
    if tools:
        t = Path(tools) / "usr/share/OVMF"
        cands.append((str(t / "OVMF_CODE_4M.fd"), str(t / "OVMF_VARS_4M.fd")))
    for code, vars_ in cands:
        if code and vars_ and Path(code).is_file() and Path(vars_).is_file():
            return Path(code), Path(vars_)
    raise ImageError("the image has an EFI system partition but no UEFI firmware (OVMF) is "
                     "installed: apt install ovmf, or set KGC_OVMF_CODE and KGC_OVMF_VARS")


def mtool(name: str, tools: Path | None = None) -> list[str]:
    """An mtools command: the host's, else the multi-call ``mtools`` under ``tools`` (default
    ``$KGC_BOOT_TOOLS``)."""
    found = shutil.which(name)
    if found:
        return [found]
    root = tools or (Path(os.environ["KGC_BOOT_TOOLS"]) if os.environ.get("KGC_BOOT_TOOLS")
                     else None)
    multi = root / "usr" / "bin" / "mtools" if root else None
    if multi is None or not multi.is_file():
        raise ImageError(f"{name} (mtools) is not installed: apt install mtools, or set "
                         "KGC_BOOT_TOOLS to a root with usr/bin/mtools")
    return [str(multi), "-c", name]


def _keygen(path: Path, comment: str) -> tuple[Path, str]:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f",
                    str(path)], check=True, capture_output=True)
    return path, path.with_suffix(".pub").read_text().strip()


def nocloud_seed(out: Path, user: str, client_pub: str, host_key: Path, host_pub: str,
                 instance: str) -> Path:
    """A NoCloud seed volume (FAT, label CIDATA): the client key for ``user`` (root is
    allowed to log in with it) and the host key the VM must present (pinned by kgc)."""
    key = "\n".join("      " + ln for ln in host_key.read_text().strip().splitlines())
    user_data = (
        "#cloud-config\n"
        "disable_root: false\n"
        f"ssh_authorized_keys:\n  - {json.dumps(client_pub)}\n"
        + (f"users:\n  - default\n  - name: {user}\n    ssh_authorized_keys:\n"
           f"      - {json.dumps(client_pub)}\n" if user != "root" else "")
        + "ssh_deletekeys: true\n"
        "ssh_keys:\n"
        "    ed25519_private: |\n" + key + "\n"
        f"    ed25519_public: {json.dumps(host_pub)}\n"
    )
    meta = f"instance-id: {instance}\nlocal-hostname: {instance}\n"
    d = out.parent
    (d / "user-data").write_text(user_data)
    (d / "meta-data").write_text(meta)
    with open(out, "wb") as fh:
        fh.truncate(4 * 1024 * 1024)
    env = dict(os.environ, MTOOLS_SKIP_CHECK="1")
    for cmd in ([*mtool("mformat"), "-i", str(out), "-v", "CIDATA", "::"],
                [*mtool("mcopy"), "-i", str(out), str(d / "user-data"), "::/user-data"],
                [*mtool("mcopy"), "-i", str(out), str(d / "meta-data"), "::/meta-data"]):
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if res.returncode != 0:
            raise ImageError(f"could not write the NoCloud seed: {res.stderr.strip()[:200]}")
    return out


@dataclass
class Access:
    how: str
    identity: Path
    host_pub: str
    user: str
    seed: Path | None = None


@dataclass
class BootVM(QemuVM):
    """A VM that boots a whole disk through its firmware and boot loader."""

    name: str
    workdir: Path
    disk: Path
    access: Access
    hardware: Hardware = Hardware(memory_mib=1024)
    disk_format: str = "raw"
    firmware: tuple[Path, Path] | None = None
    boot_timeout_s: float = 900.0
    ssh_probe_timeout_s: float = 20.0
    port: int = 0
    boot_s: float | None = None
    qemu_cmd: list[str] = field(default_factory=list)
    # guest resets QEMU turned into a power cycle (-no-reboot: QEMU exits on the guest's
    # reset, the warden starts it again on the same disk, NVRAM and port): OVMF under TCG
    # did not always come back from a warm reset (on a clean-clone CI run the guest printed
    # "reboot: Restarting system" and the firmware printed nothing for 900 s)
    guest_resets: int = 0
    warden_error: str = ""
    _stopping: bool = False
    _warden: threading.Thread | None = None

    @property
    def dir(self) -> Path:
        return self.workdir

    @property
    def qmp_socket(self) -> Path:
        return self.dir / "qmp.sock"

    @property
    def spec(self) -> str:
        return f"ssh://{self.access.user}@kgc-{self.name}"

    def _argv(self, overlay: Path, port: int) -> list[str]:
        fw: list[str] = []
        if self.firmware is not None:
            fw = ["-drive", f"if=pflash,format=raw,unit=0,readonly=on,file={self.firmware[0]}",
                  "-drive", f"if=pflash,format=raw,unit=1,file={self.dir / 'OVMF_VARS.fd'}"]
        seed: list[str] = []
        if self.access.seed is not None:
            seed = ["-drive", f"file={self.access.seed},if=none,id=seed,format=raw,"
                    "readonly=on", "-device", "virtio-blk-pci,drive=seed,addr=0x9"]
        self.qemu_cmd = [
            "qemu-system-x86_64", "-name", f"kgc-{self.name}",
            *self.hardware.qemu_args(), *fw,
            "-drive", f"file={overlay},if=none,id=d0,format=qcow2,cache=unsafe",
            "-device", "virtio-blk-pci,drive=d0,addr=0x3,bootindex=1", *seed,
            "-netdev", f"user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:22",
            "-device", "virtio-net-pci,netdev=n0,addr=0x2",
            "-serial", f"file:{self.console_log}",
            "-monitor", f"unix:{self.dir / 'monitor.sock'},server,nowait",
            "-qmp", f"unix:{self.qmp_socket},server=on,wait=off", "-no-reboot",
            "-pidfile", str(self.dir / "qemu.pid"), "-daemonize",
        ]
        return self.qemu_cmd

    def _shutdown_reason(self) -> str | None:
        """Block on QMP until QEMU goes away; the reason of its last SHUTDOWN event
        (``guest-reset``, ``guest-shutdown``, ``host-qmp-quit``, ...) or None."""
        reason = None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(str(self.qmp_socket))
            fh = s.makefile("rwb")
            fh.readline()  # the greeting
            fh.write(b'{"execute": "qmp_capabilities"}\n')
            fh.flush()
            s.settimeout(None)
            for line in fh:
                with contextlib.suppress(ValueError):
                    msg = json.loads(line)
                    if msg.get("event") == "SHUTDOWN":
                        reason = (msg.get("data") or {}).get("reason") or "unknown"
        return reason

    def _watch(self, overlay: Path) -> None:
        """The warden: a guest reset ends QEMU (-no-reboot); start it again, cold, on the
        same overlay, NVRAM and loopback port (the SSH configuration stays valid)."""
        while not self._stopping:
            try:
                reason = self._shutdown_reason()
            except OSError as exc:
                if self._stopping or not self.alive():
                    return
                self.warden_error = f"QMP: {exc}"
                return
            if self._stopping or reason != "guest-reset":
                return
            if not self._gone_within(30):
                self.warden_error = "QEMU did not exit after the guest's reset"
                return
            port = self.port
            cmd = self._argv(overlay, port)
            (self.dir / "qemu.cmd").write_text(shlex.join(cmd) + "\n")
            res = subprocess.run(cmd, text=True, capture_output=True, check=False)
            if res.returncode != 0:
                self.warden_error = ("QEMU did not start again after the guest's reset: "
                                     + " ".join(res.stderr.split())[:500])
                return
            self.guest_resets += 1

    def stop(self, timeout_s: float = 30) -> None:
        self._stopping = True
        super().stop(timeout_s)

    def start(self) -> float:
        """Boot on a private overlay; return seconds from QEMU start to SSH answering. A
        QEMU that refuses to start is bad input (ImageError); a guest that does not answer
        SSH in time is a VMError (a finding about the image)."""
        overlay = self.dir / "overlay.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", self.disk_format,
                        "-b", str(self.disk.resolve()), str(overlay)], check=True,
                       capture_output=True)
        if self.firmware is not None:
            shutil.copyfile(self.firmware[1], self.dir / "OVMF_VARS.fd")
        t0 = self._launch(lambda port: self._argv(overlay, port), start_error=ImageError)
        self._warden = threading.Thread(target=self._watch, args=(overlay,), daemon=True,
                                        name=f"kgc-{self.name}-warden")
        self._warden.start()
        self._write_ssh_files(self.access.user, self.access.identity, self.access.host_pub)
        self.wait_ssh(self.boot_timeout_s)
        self.boot_s = time.monotonic() - t0
        return self.boot_s


class BootTarget(NodeTarget):
    """The booted image over SSH, named after the image file."""

    def __init__(self, spec: str, ssh_config: str, name: str) -> None:
        super().__init__(spec=spec, ssh_config=ssh_config, timeout_s=30)
        self._name = name

    @property
    def name(self) -> str:
        return self._name


@dataclass
class BootRun:
    results: list[dict[str, Any]]
    run: dict[str, Any]
    verdict_path: Path
    console_log: str


def boot_image(image: str | Path, profile: Profile, *, report_dir: Path,
               ssh_key: str | None = None, host_key: str | None = None, user: str = "root",
               boot_timeout_s: float = 900, reboot_timeout_s: float = 900,
               keep: bool = False, command: list[str] | None = None) -> BootRun:
    started = time.time()
    image = Path(image)
    work = Path(tempfile.mkdtemp(prefix="kgc-boot-"))
    os.chmod(work, 0o700)
    vm = None
    try:
        img = ImageFile(image, work)
        lay = layout(img.read_at(0, HEAD_BYTES), img.size)
        if lay.scheme == "none":
            raise ImageError(f"{image}: a bare filesystem has no boot loader; --boot needs a "
                             "bootable disk (a partition table and a boot loader)")
        uefi = any(p.kind == "efi" for p in lay.partitions)
        firmware = find_ovmf() if uefi else None
        if ssh_key:
            if not host_key:
                raise ImageError("--ssh-identity-file needs --boot-host-key (the image's SSH host "
                                 "public key, pinned: nothing is trusted on first use)")
            try:
                pub = Path(host_key).read_text().split()
                ident = Path(ssh_key).resolve(strict=True)
            except OSError as exc:
                raise ImageError("--ssh-identity-file/--boot-host-key: "
                                 f"{exc.strerror or exc}") from None
            access = Access("a key baked into the image (--ssh-identity-file)", ident,
                            " ".join(pub[:2]), user)
        else:
            ident, cpub = _keygen(work / "id_ed25519", "kgc-image-boot")
            hkey, hpub = _keygen(work / "ssh_host_ed25519_key", "kgc-image-boot-host")
            seed = nocloud_seed(work / "seed.img", user, cpub, hkey, hpub,
                                f"kgc-{os.getpid()}")
            access = Access("cloud-init NoCloud seed (ephemeral client and host keys)", ident,
                            " ".join(hpub.split()[:2]), user, seed)
        name = f"boot-{os.getpid()}"
        vm = BootVM(name=name, workdir=work, disk=image, access=access,
                    boot_timeout_s=boot_timeout_s, disk_format=img.format, firmware=firmware)
        layers = load_layers()
        node = [n for n, lay_ in layers.items() if lay_.scope is Scope.NODE]
        tname = f"image:{image.name} (booted)"
        note("booting %s in QEMU through its own boot loader (%s); waiting up to %g s for "
             "SSH (%s)", image.name, "UEFI" if firmware else "BIOS", boot_timeout_s, access.how)
        try:
            boot_s = vm.start()
        except VMError as exc:
            # the image did not boot (or not to SSH): a finding about the image, every node
            # check gets it as an error, and the console tells why
            why = (f"the image did not boot to SSH through its own boot loader "
                   f"({'UEFI' if firmware else 'BIOS'}, {access.how}): "
                   + " ".join(str(exc).split())[:1500])
            fix = ("Boot the image by hand (the QEMU command is in the run directory with "
                   "--keep-tree) and read its console: boot loader entry, root= on the kernel "
                   "command line, the SSH service and the injected key.")
            results = [error_verdict(c, tname, why, fix).to_dict()
                       for c in catalogue(layers) if c.layer in node]
            run = _run_meta(started, profile, tname, node, [], layers, command, {},
                            _image_meta(image, img.format, lay.scheme, firmware, access,
                                        "", {}, work if keep else None), results)
            path = report.write_verdict_json(report_dir / "verdict.json", results, run)
            return BootRun(results, run, path, vm.console_tail(40))
        target = BootTarget(vm.spec, str(vm.ssh_config), tname)
        ctx = Context(target=target, profile=profile, layers=layers,
                      options={"allow_reboot": True, "reboot_timeout_s": reboot_timeout_s,
                               "console_log": str(vm.console_log)})
        note("SSH answered after %.0f s; judging the host layers", boot_s)
        t0 = time.monotonic()
        verdicts = ctx.judge_all([n for n in node if n != "reboot"])
        host_s = time.monotonic() - t0
        t1 = time.monotonic()
        verdicts += ctx.judge_all(["reboot"]) if "reboot" in node else []
        reboot_s = time.monotonic() - t1
        snap = ctx.host()
        vm.stop()
        results = [v.to_dict() for v in verdicts]
        judged = [n for n in node if any(r["layer"] == n and r["status"] != "skip"
                                         for r in results)]
        env = {"kgc": __version__, "python": platform.python_version(),
               "profile": profile.name, "runner": platform.node(),
               f"{tname}.round_trips": str(target.round_trips),
               f"{tname}.origin": target.origin}
        env.update({f"{tname}.{k}": v for k, v in ctx.describe().items()})
        if snap.text("/proc/sys/kernel/osrelease"):
            env[f"{tname}.kernel"] = snap.text("/proc/sys/kernel/osrelease") or ""
        for line in (snap.read("/etc/os-release") or "").splitlines():
            if line.startswith("PRETTY_NAME="):
                env[f"{tname}.distro"] = line.split("=", 1)[1].strip('"')
        secs = {"boot_to_ssh": round(boot_s, 1), "host_layers": round(host_s, 1),
                "reboot_test": round(reboot_s, 1)}
        im_meta = _image_meta(image, img.format, lay.scheme, firmware, access,
                              snap.text("/proc/cmdline") or "", secs, work if keep else None)
        # each guest reset was a power cycle of QEMU (see BootVM.guest_resets)
        im_meta["guest_resets"] = vm.guest_resets
        if vm.warden_error:
            im_meta["restart_error"] = vm.warden_error
        run = _run_meta(started, profile, tname, node, judged, layers, command, env,
                        im_meta, results)
        path = report.write_verdict_json(report_dir / "verdict.json", results, run)
        return BootRun(results, run, path, vm.console_tail(40))
    finally:
        if vm is not None and vm.alive():
            vm.stop()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def _image_meta(image: Path, fmt: str, scheme: str, firmware: tuple[Path, Path] | None,
                access: Access, cmdline: str, seconds: dict[str, float],
                kept: Path | None) -> dict[str, Any]:
    return {
        "path": str(image), "format": fmt, "mode": "boot", "scheme": scheme,
        "firmware": f"UEFI ({firmware[0]})" if firmware else "BIOS (SeaBIOS)",
        "access": access.how,
        "machine": "q35, intel-iommu (intremap), stand-in devices at fixed addresses "
                   "(kgc.image.qemu), TCG",
        "cmdline": cmdline, "seconds": seconds, "kept": str(kept or ""),
    }


def _run_meta(started: float, profile: Profile, tname: str, node: list[str],
              judged: list[str], layers: Any, command: list[str] | None,
              env: dict[str, str], image: dict[str, Any],
              results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duration_s": round(time.time() - started, 3), "kgc_version": __version__,
        "profile": profile.name, "profile_source": profile.source, "targets": [tname],
        "layers": node, "layers_judged": judged,
        "scope": report.scope_note(node, judged, list(layers)),
        "command": command or [], "environment": env, "image": image,
        **report.run_identity(profile, {tname: "node"}, node, results, registry=layers),
    }


def boot_check(a: argparse.Namespace) -> int:
    """The CLI: `kgc image check IMAGE --boot` (ImageError -> exit 2 by the caller)."""
    prof = load_profile(a.profile)
    sink = install()  # minutes of booting and rebooting: say what is awaited, on stderr
    try:
        res = boot_image(a.image, prof, report_dir=Path(a.report_dir), ssh_key=a.ssh_key,
                         host_key=a.boot_host_key, user=a.ssh_user,
                         boot_timeout_s=a.boot_timeout, reboot_timeout_s=a.reboot_timeout,
                         keep=a.keep_tree, command=["kgc", *sys.argv[1:]])
    except VMError as exc:
        # the VM machinery failed after the boot (a reboot that never came back is judged
        # by the reboot layer; this is QEMU or SSH plumbing)
        print(f"kgc image --boot: {' '.join(str(exc).split())[:2000]}", file=sys.stderr)
        return 3
    finally:
        uninstall(sink)
    im = res.run["image"]
    if im["seconds"]:
        print(f"booted {im['path']} through its own boot loader ({im['firmware']}); access: "
              f"{im['access']}; SSH after {im['seconds']['boot_to_ssh']} s; kernel command "
              f"line: {im['cmdline']}")
    else:
        print(f"{im['path']} did not boot through its own boot loader ({im['firmware']}); "
              f"console:\n{res.console_log}")
    if im.get("restart_error"):
        # the reboot test then errs on its timeout; this is why the guest never came back
        print(f"the guest's reset was not followed by a new start: {im['restart_error']}")
    for line in report.summary_table(res.results):
        print(line)
    det = report.details(res.results)
    if det:
        print("\n== what to fix (fail, error, warn) ==")
        print("\n".join(det))
    status, why = report.overall_and_reason(res.results)
    print(f"overall: {status.upper()} {res.run['scope']} — {why}")
    print(f"report: {res.verdict_path}")
    return 0 if status == "pass" else 1


__all__ = ["BootVM", "boot_check", "boot_image", "find_ovmf", "mtool", "nocloud_seed"]
