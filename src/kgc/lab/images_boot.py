"""Release-gating images for the lab: node images as a pipeline would ship them.

The node lab builds bare ext4 node images (``kgc.lab.node``: the ``good`` variant with
vfio-pci persisted, ``base`` with nothing persisted — what ``runtime-bind-only`` boots). A
node image that ships also carries the container runtime. These builders add that payload
to a copy of a lab image, in user space (e2fsprogs ``debugfs -w`` on the copy: no mount):

- containerd from the lab's cache (the Debian package's binary, and its stanza in
  ``/var/lib/dpkg/status`` as dpkg records an installed package — the version an offline
  check reads), 1.7 (trixie) or 2.x (sid);
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

from kgc.lab.containerd import KATA_OK_CONFIG
from kgc.lab.containerd_instance import FLAVOURS, cache_dir
from kgc.lab.node import VARIANTS, build_variant, cache_root
from kgc.lab.node.lab import LabError

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
    binary = cache_dir() / FLAVOURS[g.containerd] / "root" / "usr" / "bin" / "containerd"
    if not binary.is_file():
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
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)
