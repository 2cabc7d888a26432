"""The fleet pod's mounts on a real OCI runtime (runc): the volumes and volumeMounts of
:func:`kgc.fleet.manifests.fleet_daemonset` turned into the bind/tmpfs mounts containerd
hands runc (hostPath -> rbind, readOnly -> ro, recursiveReadOnly -> rro; emptyDir -> a
tmpfs here), in a read-only busybox rootfs with the pod's two capabilities and no new
privileges. Under ``chroot /host`` the node's own sh and awk run, the five /proc files and
/dev/null are there, the masks read empty, /var is absent and nothing is writable; a mask
whose directory the node lacks stops the container (runc cannot create the mount point in a
read-only tree) and nothing is created on the node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from kgc.fleet import manifests as fm

pytestmark = [pytest.mark.slow]

# the sizing lab's static busybox, in the labs' cache (KGC_CACHE, as every lab reads it)
BUSYBOX = Path(os.environ.get("KGC_CACHE") or Path.home() / ".cache" / "kgc") / "sizing" / "busybox"
PROBE = (
    "chroot /host /bin/sh -c '"
    'echo BOOT=$(cat /proc/sys/kernel/random/boot_id); echo CMDLINE=$(wc -c < /proc/cmdline); '
    "echo SHADOW=$(wc -c < /etc/shadow); echo VARLIB=$(ls -d /var/lib 2>/dev/null || echo no); "
    "echo DEVNULL=$(echo x > /dev/null && echo ok); echo AWK=$(echo 1 2 | awk \"{print \\$2}\"); "
    "echo WRITE=$(touch /etc/kgc-probe 2>/dev/null && echo yes || echo no); "
    "for m in $KGC_MASKS; do echo MASK $m=$(ls -A $m | wc -l); done'"
)


def static_busybox() -> Path:
    """The sizing lab's static busybox; fetched the lab's way (busybox-static from Debian's
    archive) when this test runs before the sizing lab built it (a cold cache): never a
    skip for a missing cache entry."""
    if BUSYBOX.is_file():
        return BUSYBOX
    from kgc_lab.guests import find_assets

    return find_assets().busybox


def bundle(tmp: Path, masks: tuple[str, ...]) -> Path:
    b = tmp / "bundle"
    (b / "rootfs" / "bin").mkdir(parents=True)
    shutil.copy(static_busybox(), b / "rootfs" / "bin" / "busybox")
    for tool in ("sh", "chroot", "cat", "ls", "wc", "echo", "awk", "touch"):
        (b / "rootfs" / "bin" / tool).symlink_to("busybox")
    for d in ("proc", "dev", "sys", "tmp", "host"):
        (b / "rootfs" / d).mkdir(exist_ok=True)
    spec = fm.fleet_daemonset(masks=masks)["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["ro"]}]
    for m in spec["containers"][0]["volumeMounts"]:
        v = vols[m["name"]]
        ro = "ro" if m.get("readOnly") else "rw"
        if "hostPath" in v:
            mounts.append({"destination": m["mountPath"], "type": "bind",
                           "source": v["hostPath"]["path"],
                           "options": ["rbind", ro, *(["rro"] if m.get("recursiveReadOnly")
                                                      else [])]})
        else:
            mounts.append({"destination": m["mountPath"], "type": "tmpfs", "source": "tmpfs",
                           "options": [ro, "size=1m"]})
    caps = [f"CAP_{c}" for c in spec["containers"][0]["securityContext"]["capabilities"]["add"]]
    cfg = {"ociVersion": "1.0.2", "root": {"path": "rootfs", "readonly": True},
           "process": {"user": {"uid": 0, "gid": 0}, "cwd": "/", "noNewPrivileges": True,
                       "args": ["/bin/sh", "-c", PROBE],
                       "env": ["PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                               "KGC_MASKS=" + " ".join(masks)],
                       "capabilities": {k: caps for k in ("bounding", "effective", "permitted")}},
           "hostname": "pod", "mounts": mounts,
           "linux": {"namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
                     "resources": {"devices": [
                         {"allow": False, "access": "rwm"},
                         {"allow": True, "type": "c", "major": 1, "minor": 3, "access": "rwm"}]}}}
    (b / "config.json").write_text(json.dumps(cfg))
    return b


def runc(b: Path) -> subprocess.CompletedProcess[str]:
    name = f"kgc-mounts-{uuid.uuid4().hex[:8]}"
    try:
        return subprocess.run(["runc", "run", name], cwd=b, capture_output=True, text=True,
                              timeout=120)
    finally:
        subprocess.run(["runc", "delete", "-f", name], capture_output=True, timeout=60)


@pytest.mark.lab  # root, runc and the lab's busybox: the lab tier
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runc"), reason="needs root and runc")
def test_the_pods_mounts_on_runc(tmp_path: Path) -> None:
    here = tuple(m for m in fm.MASKS if Path(m).is_dir())
    assert here, "no mask directory exists on this machine"
    p = runc(bundle(tmp_path / "ok", here))
    out = dict(ln.split("=", 1) for ln in p.stdout.splitlines() if "=" in ln)
    assert p.returncode == 0, p.stdout + p.stderr
    assert out["BOOT"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert int(out["CMDLINE"]) > 0 and out["DEVNULL"] == "ok" and out["AWK"] == "2"
    assert out["SHADOW"] == "0" and out["VARLIB"] == "no" and out["WRITE"] == "no"
    assert all(out[f"MASK {m}"] == "0" for m in here), out
    missing = next((m for m in fm.MASKS if not Path(m).exists()), None)
    if missing is None:
        return
    p = runc(bundle(tmp_path / "stop", fm.MASKS))  # a mask the machine lacks
    assert p.returncode != 0 and "read-only file system" in p.stderr, p.stdout + p.stderr
    assert not Path(missing).exists()  # nothing was created on the node
