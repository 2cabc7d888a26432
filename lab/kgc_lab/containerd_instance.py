"""One private containerd process for the lab: its own root, state, sockets and config.

The binaries come from the cache filled by ``scripts/bootstrap.d/20-containerd.sh``:
``$KGC_CACHE/containerd/trixie/root/usr/bin`` (containerd 1.7) and ``.../sid/...`` (2.x).
runc is the base system's. Nothing is installed, nothing outside the temp dir is written
except what containerd itself always writes (shim sockets under /run/containerd/s/, named
after a hash of our private address, so they never collide with a system containerd).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from kgc_lab import procs
from kgc_lab.common import LabUnavailable, lab_cache
from kgc_lab.ledger import LabRecord

FLAVOURS = {"1.7": "trixie", "2": "sid"}
# What a lab containerd starts on its own: shims (which start runc and the containers).
HELPER_EXES = ["containerd-shim*", "runc"]

__all__ = ["ContainerdInstance", "LabUnavailable", "base_config", "bin_dir", "cache_dir",
           "new_tmp", "require_lab"]


def cache_dir() -> Path:
    return lab_cache("containerd")


def bin_dir(flavour: str) -> Path:
    suite = FLAVOURS[flavour]
    d = cache_dir() / suite / "root" / "usr" / "bin"
    if not (d / "containerd").is_file():
        raise LabUnavailable(
            f"containerd {flavour} not found at {d}; run scripts/bootstrap.d/20-containerd.sh"
        )
    return d


def require_lab() -> None:
    if os.geteuid() != 0:
        raise LabUnavailable("the containerd lab needs root (containerd, runc, mounts)")
    if shutil.which("runc") is None and not Path("/usr/sbin/runc").exists():
        raise LabUnavailable("runc not found; run scripts/bootstrap.d/20-containerd.sh")


def base_config(
    flavour: str, tmp: Path, sandbox_image: str, cri_lines: tuple[str, ...] = (), tail: str = ""
) -> str:
    """The private paths every lab config carries (root/state/sockets/CRI image).

    ``cri_lines`` go into the CRI plugin's own section (TOML forbids defining it twice);
    ``tail`` is appended verbatim (NRI section, runtimes...). ``restrict_oom_score_adj``
    is set because the lab may run inside a container that cannot lower oom_score_adj.
    """
    extra = "".join(f"  {line}\n" for line in cri_lines)
    head = f"""version = {3 if flavour == "2" else 2}
root = "{tmp}/root"
state = "{tmp}/state"

[grpc]
  address = "{tmp}/containerd.sock"

[ttrpc]
  address = "{tmp}/containerd.sock.ttrpc"

[debug]
  level = "debug"

"""
    if flavour == "2":
        return (
            head
            + f"""[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "{sandbox_image}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
{extra}
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["{tmp}/cni/bin"]
  conf_dir = "{tmp}/cni/conf"

[plugins."io.containerd.internal.v1.opt"]
  path = "{tmp}/opt"
"""
            + tail
        )
    return (
        head
        + f"""[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox_image}"
  restrict_oom_score_adj = true
{extra}
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{tmp}/cni/bin"
  conf_dir = "{tmp}/cni/conf"

[plugins."io.containerd.internal.v1.opt"]
  path = "{tmp}/opt"
"""
        + tail
    )


@dataclass
class ContainerdInstance:
    flavour: str  # "1.7" or "2"
    config_text: str
    tmp: Path
    extra_path: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)
    record: LabRecord | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.bin = bin_dir(self.flavour)
        self.log_path = self.tmp / "containerd.log"

    @property
    def config_path(self) -> Path:
        return self.tmp / "config.toml"

    @property
    def address(self) -> str:
        return str(self.tmp / "containerd.sock")

    @property
    def containerd(self) -> str:
        return str(self.bin / "containerd")

    @property
    def ctr(self) -> str:
        return str(self.bin / "ctr")

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = ":".join(
            [*self.extra_path, str(self.bin), "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        )
        return env

    def start(self, timeout_s: float = 30.0, require_cri: bool = True) -> None:
        """Start containerd and wait until it serves CRI (``require_cri``) or, for a config
        that is meant to break the CRI plugin, until its own API answers."""
        self.tmp.mkdir(parents=True, exist_ok=True)
        for d in ("cni/bin", "cni/conf", "opt"):
            (self.tmp / d).mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(self.config_text)
        # Recorded before it starts: `kgc lab cleanup` finds this containerd, its shims and
        # containers, its mounts and sockets even if this process is killed right now.
        self.record = LabRecord.create("containerd", name=f"containerd{self.flavour}",
                                       tmp=str(self.tmp))
        self.record.add_owned(self.tmp, ["containerd", *HELPER_EXES])
        self.record.add_mounts(self.tmp)
        self.record.add_cri(self.address)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [self.containerd, "--config", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.env(),
            start_new_session=True,
        )
        log.close()
        self.record.add_process("containerd", self.proc.pid, exe=self.containerd, group=True,
                                log=str(self.log_path))

        def up() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise LabUnavailable(
                    f"containerd {self.flavour} exited with {self.proc.returncode}: "
                    f"{self.log_tail()}"
                )
            return self._serving() if require_cri else self._api_up()

        try:
            Retrying(
                stop=stop_after_delay(timeout_s),
                wait=wait_fixed(0.1),
                retry=retry_if_result(lambda ok: not ok),
            )(up)
        except RetryError:
            raise LabUnavailable(
                f"containerd {self.flavour} did not serve CRI within {timeout_s}s: "
                f"{self.log_tail()}"
            ) from None

    def _api_up(self) -> bool:
        if not Path(self.address).exists():
            return False
        res = subprocess.run([self.ctr, "--address", self.address, "version"],
                             capture_output=True, env=self.env(), timeout=10)
        return res.returncode == 0

    def _serving(self) -> bool:
        if not Path(self.address).exists():
            return False
        from kgc.cri.client import CriClient, CriError

        with CriClient(self.address) as c:
            try:
                c.version()
            except CriError:
                return False
        return True

    def import_images(self, archive: Path) -> None:
        res = subprocess.run(
            [self.ctr, "--address", self.address, "-n", "k8s.io", "images", "import", str(archive)],
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=120,
        )
        if res.returncode != 0:
            raise LabUnavailable(
                f"ctr images import failed: {res.stderr.strip() or res.stdout.strip()}"
            )

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        # Shims outlive containerd by design; a pod left running keeps its shim (and the
        # container under it): stop them, children first.
        helpers = procs.referencing(str(self.tmp), HELPER_EXES)
        for pid in [*reversed(procs.descendants(helpers)), *helpers]:
            procs.stop(pid, procs.proc_start(pid), grace_s=3.0)
        self._cleanup_mounts()
        if self.record is not None and not procs.mounts_under(str(self.tmp)):
            self.record.close()
            self.record = None

    def _cleanup_mounts(self) -> None:
        """Unmount anything containerd left mounted under our temp dir (deepest first)."""
        prefix = str(self.tmp) + "/"
        try:
            mounts = Path("/proc/self/mounts").read_text().splitlines()
        except OSError:
            return
        points = sorted(
            (
                m.split()[1]
                for m in mounts
                if len(m.split()) > 1 and m.split()[1].startswith(prefix)
            ),
            key=len,
            reverse=True,
        )
        for mp in points:
            subprocess.run(["umount", "-l", mp], capture_output=True, check=False)


def new_tmp(prefix: str = "kgc-containerd-") -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
