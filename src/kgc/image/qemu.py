"""The QEMU machine `kgc image check --boot` boots a node image on, and the handle of a VM
running on it (start over loopback SSH, wait, power off).

The machine is q35 under TCG (no KVM needed) with an emulated IOMMU (interrupt remapping)
and stand-in devices at fixed guest addresses (:data:`ADDR`), so that the targets of the
built-in ``lab`` profile exist on it:

==============  ===========  =========  ==================================================
guest address   device       ids        role (profiles/lab.yaml)
==============  ===========  =========  ==================================================
0000:00:02.0    virtio-net   1af4:1000  SSH NIC, host keeps it
0000:00:03.0    virtio-blk   1af4:1001  root disk, host keeps it
0000:00:04.0    edu          1234:11e8  target "accel0": driverless accelerator
0000:00:05.0    pcie-pci-br  1b36:000e  bridge; its bus 01 is one IOMMU group
0000:01:01.0    e1000        8086:100e  target "gpu0" (competing host driver e1000)
0000:01:02.0    e1000        8086:100e  target "gpu0-fn1" (same group, like HDMI audio)
0000:00:06.0    e1000e       8086:10d3  host keeps it ("host-nic")
0000:00:08.0+   edu ...      1234:11e8  benchmark only: extra accelerators (multifunction)
==============  ===========  =========  ==================================================

:class:`QemuVM` is the part every VM on this machine shares (its directory, console, SSH
configuration, liveness, power-off); a subclass says how QEMU boots (``start``) and where
its directory is (``dir``). Errors are raised as ``self.Error`` (:class:`VMError` unless a
subclass names its own), so a caller catches the one error type it knows.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

# guest addresses of the stand-in devices (fixed by Hardware.qemu_args and the disk/NIC
# addresses every start uses)
ADDR = {
    "ssh-nic": "0000:00:02.0",
    "root-disk": "0000:00:03.0",
    "accel0": "0000:00:04.0",
    "bridge": "0000:00:05.0",
    "gpu0": "0000:01:01.0",
    "gpu0-fn1": "0000:01:02.0",
    "host-nic": "0000:00:06.0",
}


class VMError(Exception):
    """A VM could not start, answer or stop; ``str()`` is the message for the user (with
    the console's tail when the guest is the reason)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (a caller that loses the race retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Hardware:
    iommu: Literal["intel", "amd", "none"] = "intel"
    extra_accels: int = 0  # extra edu devices (benchmarks), multifunction from 00:08.0
    memory_mib: int = 768
    vcpus: int = 1

    def qemu_args(self) -> list[str]:
        # the CPU vendor matches the IOMMU (the guest reads vmx/svm and vendor_id)
        cpu = "max,vendor=AuthenticAMD" if self.iommu == "amd" else "max,vendor=GenuineIntel"
        a = ["-machine", "q35,kernel-irqchip=split", "-accel", "tcg", "-cpu", cpu,
             "-smp", str(self.vcpus), "-m", str(self.memory_mib), "-nodefaults", "-display", "none"]
        if self.iommu == "intel":
            a += ["-device", "intel-iommu,intremap=on"]
        elif self.iommu == "amd":
            a += ["-device", "amd-iommu,intremap=on"]
        a += [
            "-device", "edu,addr=0x4",
            "-device", "pcie-pci-bridge,id=br1,bus=pcie.0,addr=0x5",
            "-device", "e1000,bus=br1,addr=0x1,mac=52:54:00:00:01:01",
            "-device", "e1000,bus=br1,addr=0x2,mac=52:54:00:00:01:02",
            "-device", "e1000e,addr=0x6,mac=52:54:00:00:00:06",
            # entropy: without it sshd waits for the CRNG for minutes under TCG
            "-object", "rng-random,id=rng0,filename=/dev/urandom",
            "-device", "virtio-rng-pci,rng=rng0,addr=0x7",
        ]
        for i in range(self.extra_accels):
            slot, fn = 8 + i // 8, i % 8
            mf = ",multifunction=on" if fn == 0 else ""
            a += ["-device", f"edu,addr={slot:#x}.{fn}{mf}"]
        return a


class QemuVM:
    """What every VM on the machine shares. Not a dataclass: subclasses are, with their own
    field order; these are the attributes the methods read."""

    Error: ClassVar[type[Exception]] = VMError
    name: str
    hardware: Hardware
    port: int
    ssh_probe_timeout_s: float

    @property
    def dir(self) -> Path:
        raise NotImplementedError

    @property
    def console_log(self) -> Path:
        return self.dir / "console.log"

    @property
    def ssh_config(self) -> Path:
        return self.dir / "ssh_config"

    def ssh_base(self) -> list[str]:
        # the VM's own calls never ride on a (possibly stale) shared master connection
        return ["ssh", "-F", str(self.ssh_config), "-o", "ControlPath=none", f"kgc-{self.name}"]

    def pid(self) -> int | None:
        """QEMU's pid while it runs (it daemonizes: its pid file says which)."""
        try:
            pid = int((self.dir / "qemu.pid").read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def alive(self) -> bool:
        return self.pid() is not None

    def _write_ssh_files(self, user: str, identity: Path, host_pub: str) -> None:
        """The VM's ssh_config and known_hosts: its loopback port, the pinned host key
        (``type base64``; nothing is trusted on first use) and the client key."""
        (self.dir / "known_hosts").write_text(f"[127.0.0.1]:{self.port} {host_pub}\n")
        self.ssh_config.write_text(
            f"Host kgc-{self.name}\n"
            f"  HostName 127.0.0.1\n  Port {self.port}\n  User {user}\n"
            f"  IdentityFile {identity}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {self.dir / 'known_hosts'}\n"
            "  StrictHostKeyChecking yes\n  GlobalKnownHostsFile /dev/null\n"
            "  BatchMode yes\n  LogLevel ERROR\n"
            "  ServerAliveInterval 5\n  ServerAliveCountMax 3\n"
            # short: a unix socket path must stay under 108 bytes (%C: hash of host/port/user)
            "  ControlPath /tmp/kgc-ssh-%C\n"
        )

    def _launch(self, argv: Callable[[int], list[str]],
                start_error: type[Exception] | None = None) -> float:
        """Start the daemonizing QEMU ``argv(port)`` builds (``port``: the loopback port SSH
        is forwarded from), retrying with another port when that one was taken meanwhile.
        Returns the monotonic time QEMU was started at. A QEMU that refuses its command line
        raises ``start_error`` (default ``self.Error``)."""
        err = start_error or self.Error
        for _attempt in range(3):
            self.port = free_port()
            self._port_chosen(self.port)
            cmd = argv(self.port)
            (self.dir / "qemu.cmd").write_text(shlex.join(cmd) + "\n")
            t0 = time.monotonic()
            res = subprocess.run(cmd, text=True, capture_output=True, check=False)
            if res.returncode == 0:
                return t0
            if "hostfwd" not in res.stderr and "host forwarding" not in res.stderr:
                raise err(f"QEMU did not start {self.name}: "
                          f"{' '.join(res.stderr.split())[:2000]}")
        raise err(f"QEMU could not bind a loopback port for {self.name}")

    def _port_chosen(self, port: int) -> None:
        """Hook: a subclass records the port before QEMU binds it."""

    def ssh(self, script: str, timeout: float = 120, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([*self.ssh_base(), script], text=True, capture_output=True,
                             timeout=timeout, check=False)
        if check and res.returncode != 0:
            raise self.Error(f"{self.name}: remote command failed (exit {res.returncode}): "
                             f"{script[:200]}\n{(res.stdout + res.stderr).strip()[-2000:]}")
        return res

    def _may_probe(self) -> bool:
        """Hook: False while SSH probes would only pile up in a guest still booting."""
        return True

    def _ssh_ok(self) -> bool:
        if not self.alive():
            raise self.Error(f"node {self.name}: QEMU exited during boot; console:\n"
                             + self.console_tail())
        if self.panicked():
            raise self.Error(f"node {self.name}: the guest kernel panicked; console:\n"
                             + self.console_tail())
        if not self._may_probe():
            return False
        try:
            r = subprocess.run([*self.ssh_base()[:-1], "-o", "ConnectTimeout=5",
                                self.ssh_base()[-1], "true"], capture_output=True,
                               timeout=self.ssh_probe_timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return False
        return r.returncode == 0

    def wait_ssh(self, timeout_s: float) -> None:
        try:
            Retrying(stop=stop_after_delay(timeout_s), wait=wait_fixed(1),
                     retry=retry_if_result(lambda ok: not ok))(self._ssh_ok)
        except RetryError:
            raise self.Error(
                f"node {self.name}: SSH on 127.0.0.1:{self.port} did not answer within "
                f"{timeout_s:.0f} s; console log {self.console_log}:\n{self.console_tail()}"
            ) from None

    def panicked(self) -> bool:
        try:
            with open(self.console_log, "rb") as fh:
                return b"Kernel panic - not syncing" in fh.read()
        except OSError:
            return False

    def console_tail(self, n: int = 60) -> str:
        try:
            lines = self.console_log.read_text(errors="replace").splitlines()
        except OSError:
            return "(no console log)"
        return "\n".join(lines[-n:])

    def monitor(self, command: str) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.dir / "monitor.sock"))
            s.sendall(command.encode() + b"\n")
            with contextlib.suppress(OSError):
                s.recv(4096)

    def _gone_within(self, timeout_s: float) -> bool:
        # a daemonized QEMU is not our child: no handle to wait on, so poll its liveness
        with contextlib.suppress(RetryError):
            Retrying(retry=retry_if_result(bool), wait=wait_fixed(0.2),
                     stop=stop_after_delay(timeout_s))(self.alive)
        return not self.alive()

    def stop(self, timeout_s: float = 30) -> None:
        """Power off: QEMU monitor ``quit``; SIGTERM to the QEMU we started if it lingers."""
        pid = self.pid()
        if pid is None:
            self._forget()
            return
        with contextlib.suppress(OSError):
            self.monitor("quit")
        if not self._gone_within(timeout_s):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        subprocess.run(["ssh", "-F", str(self.ssh_config), "-O", "exit", f"kgc-{self.name}"],
                       capture_output=True, check=False)
        if self._gone_within(10.0):
            self._forget()

    def _forget(self) -> None:
        """Hook: the VM is down (a subclass drops what it recorded about it)."""
