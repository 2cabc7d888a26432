"""The holder scan (kgc.evidence.holders) through the real collector script on a /proc-shaped
tree: it rides in the node's one batched collection, finds the fds that name GPU nodes (also
as a driver container names them), reads each holder's comm, drops the rest, and, run as a
user who may not read another process's fds, says "could not be checked" -- never "nothing
holds it". The snapshot round-trips through a bundle's JSON unchanged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from fakehost import FakeHost

from kgc.core.engine import host_query
from kgc.core.hostfs import HostSnapshot
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers
from kgc.evidence import holders

REPO = Path(__file__).resolve().parents[2]
PROCS = {
    1: ("systemd", {0: "/dev/null", 1: "/dev/null"}),
    812: ("nvidia-persiste", {3: "/dev/nvidia0", 4: "/dev/nvidiactl", 5: "/tmp/x"}),
    900: ("qemu-system-x86", {7: "/dev/vfio/7", 8: "/dev/vfio/devices/vfio0"}),
    950: ("python3", {3: "/run/nvidia/driver/dev/nvidia1", 4: "/dev/nvidia-caps/nvidia-cap1"}),
}


def test_the_scan_is_part_of_the_one_batched_collection() -> None:
    q = host_query(load_layers(), load_profile(REPO / "profiles" / "lab.yaml"))
    assert holders.COMMAND in dict(q.commands)
    assert f"{holders.NVIDIA_GPUS}/*/information" in q.files


def test_the_scan_finds_the_holders_of_gpu_nodes_and_nothing_else(tmp_path: Path) -> None:
    info = {f"{holders.NVIDIA_GPUS}/0000:3b:00.0/information":
            "Model: NVIDIA H200\nIRQ: 140\nDevice Minor: 0\nBus Location: 0000:3b:00.0\n"}
    snap = FakeHost(tmp_path, procs=PROCS, files=info).collect(holders.QUERY)
    use = holders.parse_device_use(snap)
    assert use.complete, use.gap()
    got = {(h.pid, h.comm, h.path) for h in use.holders}
    assert got == {(812, "nvidia-persiste", "/dev/nvidia0"), (812, "nvidia-persiste",
                                                              "/dev/nvidiactl"),
                   (900, "qemu-system-x86", "/dev/vfio/7"),
                   (900, "qemu-system-x86", "/dev/vfio/devices/vfio0"),
                   (950, "python3", "/run/nvidia/driver/dev/nvidia1"),
                   (950, "python3", "/dev/nvidia-caps/nvidia-cap1")}
    assert use.scanned == 4 and use.minors == {"0000:3b:00.0": 0}
    # a bundle keeps it as it was
    again = HostSnapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert holders.parse_device_use(again) == use


def test_one_process_is_scanned_too(tmp_path: Path) -> None:
    snap = FakeHost(tmp_path, procs={812: PROCS[812]}).collect(holders.QUERY)
    use = holders.parse_device_use(snap)
    assert use.complete and use.scanned == 1 and len(use.holders) == 2


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run the scan as another user")
def test_as_another_user_an_unreadable_process_could_not_be_checked() -> None:
    # pytest's own tmp_path sits under a 0700 directory the other user cannot traverse
    top = Path(tempfile.mkdtemp(prefix="kgc-holders-", dir="/tmp"))
    try:
        _as_nobody(top)
    finally:
        shutil.rmtree(top)


def _as_nobody(top: Path) -> None:
    root = FakeHost(top, procs=PROCS).build()
    os.chmod(top, 0o755)
    for p in root.rglob("*"):
        if not p.is_symlink():
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
    os.chmod(root / "proc/812/fd", 0o700)  # another user's process: fds unreadable
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh",
                          "-c", holders.HOLDERS_CMD], env={"R": str(root), "PATH": os.environ[
                              "PATH"]}, capture_output=True, text=True, timeout=30)
    use = holders.parse_output(out.stdout)
    assert use.error is None, use.error
    assert use.unreadable == (812,) and use.unreadable_count == 1 and use.uid == "65534"
    assert not use.complete and "could not be checked" in use.gap()
    assert all(h.pid != 812 for h in use.holders)
