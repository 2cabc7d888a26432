"""The product's QEMU machine and boot VM (`kgc image check --boot`), without booting: the
command line it gives QEMU, how it retries a taken port, where it finds firmware and
mtools. The boots themselves: tests/image/test_image_boot.py (lab tier)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from kgc.image.boot_qemu import Access, BootVM, find_ovmf, mtool
from kgc.image.disk import ImageError
from kgc.image.qemu import ADDR, Hardware, QemuVM, VMError


@dataclass
class _VM(QemuVM):
    name: str
    where: Path
    port: int = 0
    ssh_probe_timeout_s: float = 1.0

    @property
    def dir(self) -> Path:
        return self.where


def _access(tmp_path: Path, seed: bool) -> Access:
    return Access("test", tmp_path / "id", "ssh-ed25519 AAAA", "debian",
                  tmp_path / "seed.img" if seed else None)


def test_boot_vm_boots_the_disk_through_firmware_on_the_stand_in_machine(tmp_path: Path):
    fw = (tmp_path / "CODE.fd", tmp_path / "VARS.fd")
    vm = BootVM(name="b", workdir=tmp_path, disk=tmp_path / "img.raw",
                access=_access(tmp_path, seed=True), firmware=fw)
    argv = vm._argv(tmp_path / "overlay.qcow2", 2222)
    joined = " ".join(argv)
    assert argv[0] == "qemu-system-x86_64" and "-kernel" not in argv  # its own boot loader
    assert Hardware(memory_mib=1024).qemu_args() == argv[3:3 + len(vm.hardware.qemu_args())]
    assert "intel-iommu,intremap=on" in argv and "edu,addr=0x4" in argv
    assert f"if=pflash,format=raw,unit=0,readonly=on,file={fw[0]}" in argv
    assert f"if=pflash,format=raw,unit=1,file={tmp_path / 'OVMF_VARS.fd'}" in argv  # a copy
    assert "virtio-blk-pci,drive=d0,addr=0x3,bootindex=1" in argv
    assert ADDR["root-disk"].endswith(":00:03.0") and ADDR["ssh-nic"].endswith(":00:02.0")
    assert "hostfwd=tcp:127.0.0.1:2222-:22" in joined and "drive=seed" in joined
    assert vm.spec == "ssh://debian@kgc-b"
    # a guest reset ends QEMU (its warden starts it again, cold): OVMF under TCG did not
    # always come back from a warm reset
    assert "-no-reboot" in argv
    assert f"unix:{tmp_path / 'qmp.sock'},server=on,wait=off" in argv
    bios = BootVM(name="b", workdir=tmp_path, disk=tmp_path / "img.raw",
                  access=_access(tmp_path, seed=False))._argv(tmp_path / "o.qcow2", 1)
    assert not any("pflash" in a or "seed" in a for a in bios)


def test_ssh_files_pin_the_host_key(tmp_path: Path) -> None:
    vm = _VM("n", tmp_path, port=4242)
    vm._write_ssh_files("debian", tmp_path / "id", "ssh-ed25519 AAAAkey")
    assert (tmp_path / "known_hosts").read_text() == "[127.0.0.1]:4242 ssh-ed25519 AAAAkey\n"
    cfg = vm.ssh_config.read_text()
    assert "StrictHostKeyChecking yes" in cfg and "User debian" in cfg and "Port 4242" in cfg
    assert vm.ssh_base()[-1] == "kgc-n" and "ControlPath=none" in vm.ssh_base()


def test_launch_retries_a_taken_port_then_says_so(tmp_path: Path) -> None:
    vm = _VM("n", tmp_path)
    ports: list[int] = []

    def taken(port: int) -> list[str]:
        ports.append(port)
        return ["sh", "-c", "echo 'Could not set up host forwarding rule' >&2; exit 1"]

    with pytest.raises(VMError, match="could not bind a loopback port"):
        vm._launch(taken)
    assert len(ports) == 3 and (tmp_path / "qemu.cmd").is_file()


def test_launch_refused_command_line_is_the_callers_error_type(tmp_path: Path) -> None:
    vm = _VM("n", tmp_path)
    with pytest.raises(ImageError, match="QEMU did not start n: bad option"):
        vm._launch(lambda p: ["sh", "-c", "echo 'bad option' >&2; exit 1"],
                   start_error=ImageError)
    with pytest.raises(VMError, match="bad option"):
        vm._launch(lambda p: ["sh", "-c", "echo 'bad option' >&2; exit 1"])


def test_a_vm_that_never_started_is_not_alive_and_stops_quietly(tmp_path: Path) -> None:
    vm = _VM("n", tmp_path)
    assert vm.pid() is None and not vm.alive()
    vm.stop()  # nothing to stop: no error
    assert vm.console_tail() == "(no console log)" and not vm.panicked()


def test_firmware_and_mtools_from_the_boot_tools_root(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the host's packages, ``$KGC_BOOT_TOOLS`` (an unpacked root) provides them;
    without either, the error says what to install."""
    ovmf = tmp_path / "usr/share/OVMF"
    ovmf.mkdir(parents=True)
    for f in ("OVMF_CODE_4M.fd", "OVMF_VARS_4M.fd"):
        (ovmf / f).write_bytes(b"")
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "usr/bin/mtools").write_bytes(b"")
    monkeypatch.setattr("kgc.image.boot_qemu.OVMF_PAIRS", ())
    monkeypatch.setattr("kgc.image.boot_qemu.shutil.which", lambda name: None)
    monkeypatch.delenv("KGC_OVMF_CODE", raising=False)
    monkeypatch.setenv("KGC_BOOT_TOOLS", str(tmp_path))
    assert find_ovmf() == (ovmf / "OVMF_CODE_4M.fd", ovmf / "OVMF_VARS_4M.fd")
    assert mtool("mformat") == [str(tmp_path / "usr/bin/mtools"), "-c", "mformat"]
    monkeypatch.delenv("KGC_BOOT_TOOLS")
    with pytest.raises(ImageError, match="apt install ovmf"):
        find_ovmf()
    with pytest.raises(ImageError, match="apt install mtools"):
        mtool("mformat")


# -- the warden: a guest reset is a power cycle ------------------------------------------
def _qmp_server(path: Path, reasons: list[str]) -> threading.Thread:
    """A QMP socket that, per connection, greets, takes qmp_capabilities, sends a SHUTDOWN
    event with the next reason and hangs up (QEMU exiting); gone after the last."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def serve() -> None:
        for reason in reasons:
            conn, _ = srv.accept()
            # a client that hangs up early (the stopping warden's stand-in) is not an error
            with conn, contextlib.suppress(BrokenPipeError, ConnectionResetError):
                f = conn.makefile("rwb")
                f.write(b'{"QMP": {"version": {}, "capabilities": []}}\n')
                f.flush()
                assert b"qmp_capabilities" in f.readline()
                f.write(b'{"return": {}}\n')
                f.write(json.dumps({"event": "SHUTDOWN", "data": {"guest": reason.startswith(
                    "guest"), "reason": reason}}).encode() + b"\n")
                f.close()  # the file holds the socket open: QEMU exiting closes both
        srv.close()
        path.unlink()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def _warded(tmp_path: Path, relaunch: list[str]) -> BootVM:
    vm = BootVM(name="w", workdir=tmp_path, disk=tmp_path / "img.raw",
                access=_access(tmp_path, seed=False), port=5555)
    vm._argv = lambda overlay, port: [*relaunch, str(port)]  # type: ignore[method-assign]
    vm._gone_within = lambda timeout_s: True  # type: ignore[method-assign]
    return vm


def test_a_guest_reset_restarts_qemu_cold_on_the_same_port(tmp_path: Path) -> None:
    srv = _qmp_server(tmp_path / "qmp.sock", ["guest-reset", "guest-reset", "host-qmp-quit"])
    vm = _warded(tmp_path, ["true"])
    vm._watch(tmp_path / "overlay.qcow2")
    srv.join(5)
    assert vm.guest_resets == 2 and vm.warden_error == ""
    assert (tmp_path / "qemu.cmd").read_text() == "true 5555\n"  # the same loopback port


@pytest.mark.parametrize("reason", ["guest-shutdown", "host-qmp-quit", "host-signal"])
def test_a_power_off_or_our_own_quit_is_not_restarted(tmp_path: Path, reason: str) -> None:
    srv = _qmp_server(tmp_path / "qmp.sock", [reason])
    vm = _warded(tmp_path, ["sh", "-c", "exit 1"])
    vm._watch(tmp_path / "overlay.qcow2")
    srv.join(5)
    assert vm.guest_resets == 0 and vm.warden_error == ""
    assert not (tmp_path / "qemu.cmd").exists()


def test_a_restart_that_fails_says_why(tmp_path: Path) -> None:
    srv = _qmp_server(tmp_path / "qmp.sock", ["guest-reset"])
    vm = _warded(tmp_path, ["sh", "-c", "echo 'Could not set up host forwarding rule' >&2; exit 1"])
    vm._watch(tmp_path / "overlay.qcow2")
    srv.join(5)
    assert vm.guest_resets == 0
    assert vm.warden_error.startswith("QEMU did not start again after the guest's reset: ")
    assert "host forwarding" in vm.warden_error


def test_stopping_ends_the_warden_without_a_restart(tmp_path: Path) -> None:
    srv = _qmp_server(tmp_path / "qmp.sock", ["guest-reset"])
    vm = _warded(tmp_path, ["true"])
    vm._stopping = True
    vm._watch(tmp_path / "overlay.qcow2")
    assert vm.guest_resets == 0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # release the fake
        s.connect(str(tmp_path / "qmp.sock"))
        s.makefile("rwb").readline()
        s.sendall(b'{"execute": "qmp_capabilities"}\n')
    srv.join(5)


def test_the_cli_says_when_the_guest_was_not_started_again(tmp_path: Path, monkeypatch,
                                                           capsys) -> None:
    """A restart that failed is printed beside the reboot test's timeout it causes."""
    import argparse

    from kgc.image import boot_qemu

    res = [{"check": "reboot.returned", "layer": "reboot", "status": "error", "title": "t",
            "severity": "blocker", "target": "image:x (booted)", "simulated": False,
            "reason": "the node did not come back with a new boot_id within 900 s",
            "remediation": "read the console"}]
    run = {"image": {"path": "x.raw", "firmware": "UEFI (c)", "access": "seed",
                     "cmdline": "root=/dev/vda2",
                     "seconds": {"boot_to_ssh": 50.0, "host_layers": 9.0, "reboot_test": 900.0},
                     "guest_resets": 0, "restart_error": "QEMU did not start again after the "
                     "guest's reset: Could not set up host forwarding rule"},
           "scope": "(node)"}
    monkeypatch.setattr(boot_qemu, "boot_image", lambda *a, **k: boot_qemu.BootRun(
        res, run, tmp_path / "verdict.json", ""))
    a = argparse.Namespace(profile="lab", image="x.raw", report_dir=str(tmp_path),
                           ssh_key=None, boot_host_key=None, ssh_user="root",
                           boot_timeout=900, reboot_timeout=900, keep_tree=False)
    assert boot_qemu.boot_check(a) == 1
    out = capsys.readouterr().out
    assert ("the guest's reset was not followed by a new start: QEMU did not start again "
            "after the guest's reset: Could not set up host forwarding rule") in out
