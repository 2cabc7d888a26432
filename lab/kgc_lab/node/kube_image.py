"""The ``kube`` node-image variant: the lab's node image with a real kubelet and containerd.

Built from the cached base tree like every variant (cached by content hash under
``${KGC_CACHE}/node/variants/kube-<hash>/``). On top of the ``good`` variant's vfio
configuration (so the host layers have a certified node to look at) it installs:

* **kubelet** — built by ``scripts/bootstrap.d/30-cluster.sh`` from the same
  ``k8s.io/kubernetes`` module (and version) as the lab's control plane;
* **containerd 2.x** — the Debian sid ``.deb`` the containerd lab already fetched
  (``${KGC_CACHE}/containerd/sid/debs``), unpacked into the image; **runc** and the CNI
  plugins (``containernetworking-plugins``: bridge, host-local, loopback) from Debian
  bookworm, installed with apt in a chroot;
* **kgc-dra-plugin** — the lab's DRA kubelet plugin (driver ``dra.kgc.io``, stand-in
  devices, CDI specs under ``/var/run/cdi``), built by the same script from
  ``lab/cluster/go/dra`` (:mod:`kgc_lab.cluster.realnode_dra`);
* containerd configured for the kubelet: CRI with the systemd cgroup driver (cgroup v2,
  the bookworm default; no swap exists), NRI enabled, CDI enabled (the DRA plugin's specs;
  2.x's default, written out), the runtime handler ``runc``, the
  sandbox image pinned to the lab's locally built pause image, no registry: the lab's
  busybox images are imported into the image's containerd store at build time (by the
  same containerd, run on the build host against the tree's ``/var/lib/containerd``);
* ``/opt/kgc``: a venv (the image's own Python 3.11) with kgc's runtime dependencies, copied
  from the lab's environment — kgc itself is installed into it when a node joins
  (:func:`kgc_lab.cluster.realnode.install_kgc`), so it is always the checkout's;
* systemd units: ``containerd`` (enabled), ``kubelet`` and ``kgc-dra-plugin`` (started by
  the lab once it has written the node's credentials and configuration, see
  :mod:`kgc_lab.cluster.realnode`).

Everything is read from local caches except Debian's archive (apt, once per build).
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement

from kgc_lab.common import LabError, lab_cache
from kgc_lab.images import BUSYBOX_CANDIDATES, PAUSE_IMAGE, build_archive
from kgc_lab.node.lab import Variant, _chroot_mounts, _run
from kgc_lab.node.scenarios import GOOD_FILES

# Bump when the recipe below changes in a way the hashed inputs do not show.
RECIPE = 4
DIST = "kata-gpu-conformance"
PY = "python3.11"
VENV = "/opt/kgc"
SITE = f"{VENV}/lib/{PY}/site-packages"
BUSYBOX_IMAGE = "kgc.local/busybox:1"
APT_PACKAGES = ("runc", "containernetworking-plugins", "python3")
# the guest reaches the API server here (a QEMU guestfwd rule to the host's loopback)
API_GUEST_ADDR = "10.0.2.100"
API_GUEST_PORT = 6443
POD_SUBNET = "10.88.0.0/24"
CONTAINERD_SOCK = "/run/containerd/containerd.sock"
NRI_SOCK = "/var/run/nri/nri.sock"
# where a pod that runs the node's kgc writes its reports (an emptyDir is mounted here)
REPORT_MOUNT = "/var/lib/kgc/report"

CONTAINERD_CONFIG = f"""# kgc lab node: containerd for the kubelet (CRI), NRI on, no registry
version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "{CONTAINERD_SOCK}"

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{PAUSE_IMAGE}"

# CDI (the DRA plugin's device specs): containerd 2.1.9's defaults (`containerd config
# default`), written out because the lab's DRA test rests on them
[plugins."io.containerd.cri.v1.runtime"]
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "/etc/cni/net.d"

[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  SystemdCgroup = true
  BinaryName = "/usr/sbin/runc"

[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = "{NRI_SOCK}"
"""

CNI_CONFIG = json.dumps({
    "cniVersion": "1.0.0",
    "name": "kgc-lab",
    "plugins": [{
        "type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False,
        "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                 "routes": [{"dst": "0.0.0.0/0"}]},
    }],
}, indent=1) + "\n"

CONTAINERD_UNIT = """[Unit]
Description=containerd (kgc lab node)
After=local-fs.target
[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/bin/containerd
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=2
LimitNOFILE=1048576
TasksMax=infinity
OOMScoreAdjust=-999
[Install]
WantedBy=multi-user.target
"""

# Not enabled: the lab starts it once /etc/kubernetes holds this node's credentials.
KUBELET_UNIT = """[Unit]
Description=kubelet (kgc lab node)
After=containerd.service
Requires=containerd.service
ConditionPathExists=/etc/kubernetes/kubelet.kubeconfig
[Service]
EnvironmentFile=/etc/kubernetes/kubelet.env
ExecStart=/usr/local/bin/kubelet $KUBELET_ARGS
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
"""

# Not enabled: the lab starts it once the node is Ready (the plugin publishes a
# ResourceSlice owned by the Node object). It uses the kubelet's credentials
# (system:node:<name>): the Node authorizer lets a node manage the ResourceSlices whose
# spec.nodeName is itself and get the ResourceClaims of its pods (k8s.io/kubernetes v1.37.2
# plugin/pkg/auth/authorizer/node, plugin/pkg/admission/noderestriction).
DRA_PLUGIN_UNIT = """[Unit]
Description=kgc lab DRA kubelet plugin (dra.kgc.io, stand-in devices)
After=kubelet.service
ConditionPathExists=/etc/kubernetes/kgc-dra.env
[Service]
EnvironmentFile=/etc/kubernetes/kgc-dra.env
ExecStart=/usr/local/bin/kgc-dra-plugin $DRA_ARGS
Restart=always
RestartSec=2
[Install]
WantedBy=multi-user.target
"""
DRA_PLUGIN = "/usr/local/bin/kgc-dra-plugin"

NODE_FILES: dict[str, str] = {
    **GOOD_FILES,
    "/etc/containerd/config.toml": CONTAINERD_CONFIG,
    "/etc/cni/net.d/10-kgc-lab.conflist": CNI_CONFIG,
    "/etc/systemd/system/containerd.service": CONTAINERD_UNIT,
    "/etc/systemd/system/kubelet.service": KUBELET_UNIT,
    "/etc/systemd/system/kgc-dra-plugin.service": DRA_PLUGIN_UNIT,
    "/etc/modules-load.d/kgc-kube.conf": "overlay\n",
    "/etc/sysctl.d/90-kgc-kube.conf": "net.ipv4.ip_forward = 1\n",
    # the lab's SSH sessions skip PAM: no logind session and no `systemd --user` manager
    # per login, which cost a TCG guest tens of seconds (key-only root login is unchanged)
    "/etc/ssh/sshd_config.d/kgc-kube.conf": "UsePAM no\n",
}
UNITS_ENABLED = ("containerd.service",)
# Boot work a TCG node does not need (no display, no EFI, no FUSE, no device mapper, no
# loop devices): each costs tens of seconds of emulated CPU at boot.
UNITS_MASKED = ("modprobe@drm.service", "modprobe@efi_pstore.service",
                "modprobe@fuse.service", "modprobe@dm_mod.service", "modprobe@loop.service")


# -------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Inputs:
    kubelet: Path
    dra_plugin: Path
    containerd_deb: Path
    archive: Path
    dists: tuple[md.Distribution, ...]

    def key(self) -> str:
        h = hashlib.sha256()
        h.update(f"recipe {RECIPE} {' '.join(APT_PACKAGES)} {sys.version_info[:2]}".encode())
        for p in (self.kubelet, self.dra_plugin, self.containerd_deb, self.archive):
            h.update(p.name.encode() + _sha256(p).encode())
        h.update(" ".join(sorted(f"{d.metadata['Name']}=={d.version}"
                                 for d in self.dists)).encode())
        h.update(json.dumps(NODE_FILES, sort_keys=True).encode())
        return h.hexdigest()[:16]


@cache
def _sha256_cached(path: str, size: int, mtime: float) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _sha256(p: Path) -> str:
    st = p.stat()
    return _sha256_cached(str(p), st.st_size, st.st_mtime)


def kubelet_binary() -> Path:
    from kgc_lab.cluster.lab import binaries

    p = binaries().root / "kube" / "kubelet"
    if not os.access(p, os.X_OK):
        raise LabError(f"kubelet not built at {p} — run scripts/bootstrap.d/30-cluster.sh "
                       "(builds it with the control plane from lab/cluster/go/kube)")
    return p


def dra_plugin_binary() -> Path:
    from kgc_lab.cluster.lab import binaries

    p = binaries().root / "dra" / "kgc-dra-plugin"
    if not os.access(p, os.X_OK):
        raise LabError(f"the DRA kubelet plugin is not built at {p} — run "
                       "scripts/bootstrap.d/30-cluster.sh (builds it from lab/cluster/go/dra)")
    return p


def containerd_deb() -> Path:
    debs = sorted((lab_cache("containerd") / "sid" / "debs").glob("containerd_2.*.deb"))
    if not debs:
        raise LabError("no containerd 2.x .deb in "
                       f"{lab_cache('containerd') / 'sid' / 'debs'} — run "
                       "scripts/bootstrap.d/20-containerd.sh")
    return debs[-1]


def node_archive() -> Path:
    """The busybox images the node imports at boot: the pause image (CRI sandbox) and a
    busybox with every applet (test pods, the in-cluster host run's ``chroot``)."""
    applets = subprocess.run(["busybox", "--list"], capture_output=True, text=True,
                             check=False).stdout.split()
    links = tuple(sorted(a for a in applets if a and "/" not in a and a != "busybox"))
    if "chroot" not in links:
        raise LabError(f"{' '.join(BUSYBOX_CANDIDATES)}: no static busybox with a chroot "
                       "applet (apt-get install busybox-static)")
    return build_archive(lab_cache("node") / "images" / "node-images.tar", {
        PAUSE_IMAGE: ["/bin/sleep", "2147483647"],
        BUSYBOX_IMAGE: ["/bin/sh"],
    }, links)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def runtime_closure(dist: str = DIST) -> tuple[md.Distribution, ...]:
    """kgc's runtime dependencies (no extras), as installed in this environment."""
    seen: dict[str, md.Distribution] = {}
    todo = [dist]
    while todo:
        name = todo.pop()
        try:
            d = md.distribution(name)
        except md.PackageNotFoundError:
            raise LabError(f"{name} (a kgc dependency) is not installed here") from None
        key = _norm(d.metadata["Name"])
        if key in seen:
            continue
        seen[key] = d
        for r in d.requires or []:
            req = Requirement(r)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    seen.pop(_norm(dist), None)  # kgc itself is installed at join time
    return tuple(seen[k] for k in sorted(seen))


@cache
def inputs() -> Inputs:
    if sys.version_info[:2] != (3, 11):
        raise LabError(f"the kube node image copies kgc's dependencies from this Python "
                       f"({sys.version.split()[0]}); the image's Python is 3.11")
    return Inputs(kubelet_binary(), dra_plugin_binary(), containerd_deb(), node_archive(),
                  runtime_closure())


# -------------------------------------------------------------------------- build


def _copy_dists(dists: tuple[md.Distribution, ...], site: Path) -> None:
    for d in dists:
        for f in d.files or []:
            if ".." in f.parts:
                continue  # console scripts live outside site-packages
            src = Path(str(d.locate_file(f)))
            if not src.is_file():
                continue
            dst = site / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def prepare(root: Path) -> None:
    """Build hook of the ``kube`` variant (runs on the variant's tree, as root)."""
    ins = inputs()
    resolv = root / "etc" / "resolv.conf"
    saved = resolv.read_bytes() if resolv.exists() else None
    shutil.copy2("/etc/resolv.conf", resolv)
    policy = root / "usr" / "sbin" / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    env = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8",
           "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
    try:
        with _chroot_mounts(root):
            _run(["chroot", str(root), "apt-get", "-qq", "update"], env=env)
            _run(["chroot", str(root), "apt-get", "install", "-y", "-qq",
                  "--no-install-recommends", *APT_PACKAGES], env=env)
            _run(["chroot", str(root), "apt-get", "clean"], env=env)
            _run(["chroot", str(root), PY, "-m", "venv", "--without-pip", VENV], env=env)
    finally:
        policy.unlink(missing_ok=True)
        if saved is None:
            resolv.unlink(missing_ok=True)
        else:
            resolv.write_bytes(saved)
    shutil.rmtree(root / "var" / "lib" / "apt" / "lists", ignore_errors=True)
    (root / "var" / "lib" / "apt" / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    for doc in ("usr/share/doc", "usr/share/man"):
        shutil.rmtree(root / doc, ignore_errors=True)
    # containerd 2.x: the binaries of the sid package (the image's dpkg does not know them)
    with tempfile.TemporaryDirectory(prefix="kgc-containerd-deb-") as tmp:
        _run(["dpkg-deb", "-x", str(ins.containerd_deb), tmp])
        for b in ("containerd", "containerd-shim-runc-v2", "ctr"):
            shutil.copy2(Path(tmp) / "usr" / "bin" / b, root / "usr" / "bin" / b)
    for src, dst in ((ins.kubelet, "usr/local/bin/kubelet"), (ins.dra_plugin, DRA_PLUGIN[1:])):
        target = root / dst
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target)
        target.chmod(0o755)
    preimport(root, ins.containerd_deb, ins.archive)
    (root / REPORT_MOUNT.lstrip("/")).mkdir(parents=True, exist_ok=True)
    (root / "etc" / "kubernetes" / "pki").mkdir(parents=True, exist_ok=True)
    site = root / SITE.lstrip("/")
    if not site.is_dir():
        raise LabError(f"the image's venv has no {SITE} (is its Python {PY}?)")
    _copy_dists(ins.dists, site)
    # compiled once here: the in-cluster run reads the venv through a read-only mount
    _run([sys.executable, "-m", "compileall", "-q", "-j", "0", str(site)])
    wants = root / "etc" / "systemd" / "system" / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit in UNITS_ENABLED:
        link = wants / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(f"/etc/systemd/system/{unit}")
    for unit in UNITS_MASKED:
        link = root / "etc" / "systemd" / "system" / unit
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to("/dev/null")


def preimport(root: Path, deb: Path, archive: Path, timeout_s: float = 120.0) -> None:
    """Import ``archive`` into the tree's containerd store (namespace ``k8s.io``, unpacked
    for the overlayfs snapshotter) with the image's own containerd run here, so the node
    boots with its images instead of importing them under TCG."""
    from kgc_lab import procs
    from kgc_lab.ledger import LabRecord

    tmp = Path(tempfile.mkdtemp(prefix="kgc-preimport-"))
    rec = LabRecord.create("node-build", name="kube-preimport", tmp=str(tmp))
    rec.add_owned(tmp, ["containerd", "ctr"])
    rec.add_mounts(str(root / "var" / "lib" / "containerd"))
    rec.add_path(tmp)
    proc: subprocess.Popen[bytes] | None = None
    try:
        _run(["dpkg-deb", "-x", str(deb), str(tmp / "deb")])
        bin_dir = tmp / "deb" / "usr" / "bin"
        sock = tmp / "containerd.sock"
        (tmp / "config.toml").write_text(
            f'version = 3\nroot = "{root}/var/lib/containerd"\nstate = "{tmp}/state"\n'
            f'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime",'
            f' "io.containerd.cri.v1.images", "io.containerd.nri.v1.nri"]\n'
            f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{sock}.ttrpc"\n')
        with open(tmp / "containerd.log", "wb") as log:
            proc = subprocess.Popen([str(bin_dir / "containerd"), "--config",
                                     str(tmp / "config.toml")], stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        rec.add_process("containerd", proc.pid, exe=str(bin_dir / "containerd"), group=True)
        ctr = [str(bin_dir / "ctr"), "--address", str(sock), "-n", "k8s.io"]
        from kgc.kube.wait import WaitTimeout, wait_for

        def serving() -> bool:
            assert proc is not None
            if proc.poll() is not None:
                raise LabError("the build's containerd exited: "
                               + (tmp / "containerd.log").read_text(errors="replace")[-2000:])
            return subprocess.run([*ctr, "version"], capture_output=True,
                                  check=False).returncode == 0

        try:
            wait_for("the build's containerd to serve", serving, timeout_s, 0.2)
        except WaitTimeout as exc:
            raise LabError(f"{exc}: {(tmp / 'containerd.log').read_text()[-2000:]}") from None
        _run([*ctr, "images", "import", str(archive)], timeout=timeout_s)
    finally:
        if proc is not None:
            procs.stop(proc.pid, procs.proc_start(proc.pid), group=True, grace_s=10.0)
            proc.wait(timeout=10)
        for mp in procs.mounts_under(str(root / "var" / "lib" / "containerd")):
            subprocess.run(["umount", "-l", mp], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
        if not procs.mounts_under(str(root / "var" / "lib" / "containerd")):
            rec.close()


def kube_variant() -> Variant:
    return Variant("kube", files=NODE_FILES, initramfs=True, prepare=prepare,
                   prepare_key=inputs().key(), disk_gib=4)
