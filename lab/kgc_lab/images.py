"""Locally built container images for the containerd lab (no registry involved).

One layer holds the base system's static busybox (``busybox-static``) with ``sh``,
``sleep`` and ``env`` links; two images share it: a pause image for sandboxes and the
probe image. They are written as one docker-archive tarball (``manifest.json`` with
``RepoTags``) that ``ctr images import`` understands. The build is deterministic: same
busybox → byte-identical tarball.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

PAUSE_IMAGE = "kgc.local/pause:1"
PROBE_IMAGE = "kgc.local/nri-probe:1"
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")


def _busybox() -> Path:
    for p in BUSYBOX_CANDIDATES:
        path = Path(p)
        if path.is_file():
            with path.open("rb") as f:
                head = f.read(8192)
            if b"/ld-linux" in head or b"/ld-musl" in head:
                raise FileNotFoundError(
                    f"{path} is dynamically linked; the lab images need a static busybox: "
                    "apt-get install busybox-static"
                )
            return path
    raise FileNotFoundError(
        "no static busybox found (looked at " + ", ".join(BUSYBOX_CANDIDATES) + "); "
        "run scripts/bootstrap.d/20-containerd.sh or `apt-get install busybox-static`"
    )


LINKS = ("sh", "sleep", "env", "cat", "echo")


def _layer(busybox: Path, links: tuple[str, ...] = LINKS) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("bin", "tmp", "proc", "sys", "dev", "etc"):
            ti = tarfile.TarInfo(d)
            ti.type = tarfile.DIRTYPE
            ti.mode = 0o1777 if d == "tmp" else 0o755
            tar.addfile(ti)
        data = busybox.read_bytes()
        ti = tarfile.TarInfo("bin/busybox")
        ti.size = len(data)
        ti.mode = 0o755
        tar.addfile(ti, io.BytesIO(data))
        for name in links:
            ti = tarfile.TarInfo(f"bin/{name}")
            ti.type = tarfile.SYMTYPE
            ti.linkname = "busybox"
            tar.addfile(ti)
    return buf.getvalue()


def _config(diff_id: str, cmd: list[str]) -> bytes:
    return json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": {"Cmd": cmd, "Env": ["PATH=/bin"], "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created_by": "kgc lab images"}],
        },
        sort_keys=True,
    ).encode()


def build_archive(dest: Path, images: dict[str, list[str]] | None = None,
                  links: tuple[str, ...] = LINKS) -> Path:
    """Write a docker-archive of busybox images to ``dest`` (skipped when up to date):
    by default the pause + probe images; ``images`` maps tags to commands, ``links`` names
    the busybox applets linked into /bin."""
    bb = _busybox()
    layer = _layer(bb, links)
    digest = hashlib.sha256(layer).hexdigest()
    # the default archive keeps its stamp (the layer digest); others also hash their tags
    key = digest if images is None else hashlib.sha256(
        (digest + json.dumps(images, sort_keys=True)).encode()).hexdigest()
    images = images or {
        PAUSE_IMAGE: ["/bin/sleep", "2147483647"],
        PROBE_IMAGE: ["/bin/sh", "-c", "env; exec sleep 3600"],
    }
    stamp = dest.with_suffix(".sha256")
    if dest.exists() and stamp.exists() and stamp.read_text().strip() == key:
        return dest
    diff_id = f"sha256:{digest}"
    manifest = []
    files: dict[str, bytes] = {f"{digest}/layer.tar": layer}
    for tag, cmd in images.items():
        cfg = _config(diff_id, cmd)
        cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
        files[cfg_name] = cfg
        manifest.append({"Config": cfg_name, "RepoTags": [tag], "Layers": [f"{digest}/layer.tar"]})
    files["manifest.json"] = json.dumps(manifest).encode()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")  # parallel workers never share a temp file
    with tarfile.open(tmp, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o644
            tar.addfile(ti, io.BytesIO(data))
    tmp.replace(dest)
    stamp_tmp = stamp.with_suffix(f".{os.getpid()}.tmp")
    stamp_tmp.write_text(key + "\n")
    stamp_tmp.replace(stamp)
    return dest
