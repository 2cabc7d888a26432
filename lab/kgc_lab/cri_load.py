"""Configs that break containerd's CRI plugin (and configs that break nothing), run on the
real containerd 1.7 and 2.x binaries of the lab cache (issue 18.1).

Each case starts a private containerd (:class:`ContainerdInstance`, waiting for its own
API, not for CRI), asks it what it started (``ctr plugins ls -d``, through the same shell
command kgc's collector runs) and keeps its log. :func:`capture` writes what the binary
said under ``fixtures/containerd/<version>/<case>/`` so the fast tests judge the same
outputs without the binaries; ``lab/tests/nri/test_cri_load_lab.py`` runs them live.
``python -m kgc_lab.cri_load DIR`` regenerates the fixtures.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kgc.core.engine import Context
from kgc.core.model import Verdict
from kgc.core.profile import RuntimeProfile
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc.layers.runtime.collect import query_for
from kgc_lab.containerd_instance import ContainerdInstance, base_config, new_tmp, require_lab

PAUSE = "registry.k8s.io/pause:3.10"
NRI_17 = ('\n[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n'
          '  socket_path = "{tmp}/nri.sock"\n')
NRI_2 = '\n[plugins."io.containerd.nri.v1.nri"]\n  socket_path = "{tmp}/nri.sock"\n'
KATA_V2 = ('\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]\n'
           '  runtime_type = "io.containerd.kata.v2"\n')
RUNC_V2 = ('\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
           '  runtime_type = "io.containerd.runc.v2"\n')
KATA_V3 = ('\n[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.kata]\n'
           '  runtime_type = "io.containerd.kata.v2"\n')


@dataclass(frozen=True)
class CriCase:
    name: str
    flavour: str  # the binary: "1.7" or "2"
    description: str
    tail: str
    cri_lines: tuple[str, ...] = ()
    file_format: str = ""  # the config's format ("1.7": version 2, "2": version 3)
    loads: bool = True  # what the real binary did (asserted live by the lab test)
    failed_plugin: str = ""
    error_has: str = ""

    def config(self, tmp: Path) -> str:
        return base_config(self.file_format or self.flavour, tmp, PAUSE, self.cri_lines,
                           self.tail.replace("{tmp}", str(tmp)))


CASES: tuple[CriCase, ...] = (
    CriCase("ok-kata-runc", "1.7", "Kata handler listed next to runc", NRI_17 + KATA_V2 + RUNC_V2),
    CriCase("ok-no-runtimes", "1.7", "no runtimes table (the default runc stays)", NRI_17),
    CriCase("kata-only", "1.7", "runtimes lists only kata: the default runc entry is gone",
            NRI_17 + KATA_V2, loads=False, failed_plugin="io.containerd.grpc.v1.cri",
            error_has='default_runtime_name = "runc"'),
    CriCase("default-runtime-missing", "1.7", 'default_runtime_name = "nvidia", not listed',
            NRI_17 + '\n[plugins."io.containerd.grpc.v1.cri".containerd]\n'
            '  default_runtime_name = "nvidia"\n' + KATA_V2 + RUNC_V2, loads=False,
            failed_plugin="io.containerd.grpc.v1.cri", error_has='default_runtime_name = "nvidia"'),
    CriCase("bad-stream-idle-timeout", "1.7", 'stream_idle_timeout = "4 hours"', NRI_17,
            ('stream_idle_timeout = "4 hours"',), loads=False,
            failed_plugin="io.containerd.grpc.v1.cri", error_has="invalid stream idle timeout"),
    CriCase("mirrors-with-config-path", "1.7", "registry mirrors and config_path together",
            NRI_17 + '\n[plugins."io.containerd.grpc.v1.cri".registry]\n'
            '  config_path = "/etc/containerd/certs.d"\n'
            '[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]\n'
            '  endpoint = ["https://mirror.example"]\n', loads=False,
            failed_plugin="io.containerd.grpc.v1.cri", error_has="`mirrors` cannot be set"),
    CriCase("ok-kata-only", "2", "v3 runtimes lists only kata (2.x keeps runc)", NRI_2 + KATA_V3),
    CriCase("ok-v2-file-kata-only", "2", "a version-2 file listing only kata, migrated",
            NRI_2 + KATA_V2, file_format="1.7"),
    CriCase("default-runtime-missing", "2", 'default_runtime_name = "nvidia", not listed',
            NRI_2 + '\n[plugins."io.containerd.cri.v1.runtime".containerd]\n'
            '  default_runtime_name = "nvidia"\n' + KATA_V3, loads=False,
            failed_plugin="io.containerd.cri.v1.runtime",
            error_has='default_runtime_name = "nvidia"'),
    CriCase("bad-stream-idle-timeout", "2", 'stream_idle_timeout = "4 hours"',
            NRI_2 + '\n[plugins."io.containerd.grpc.v1.cri"]\n  stream_idle_timeout = "4 hours"\n',
            loads=False, failed_plugin="io.containerd.grpc.v1.cri",
            error_has="invalid stream idle timeout"),
    CriCase("bad-drain-timeout", "2", 'drain_exec_sync_io_timeout = "forever"', NRI_2,
            ('drain_exec_sync_io_timeout = "forever"',), loads=False,
            failed_plugin="io.containerd.cri.v1.runtime",
            error_has="invalid `drain_exec_sync_io_timeout`"),
    CriCase("mirrors-with-config-path", "2", "registry mirrors and config_path together",
            NRI_2 + '\n[plugins."io.containerd.cri.v1.images".registry]\n'
            '  config_path = "/etc/containerd/certs.d"\n'
            '[plugins."io.containerd.cri.v1.images".registry.mirrors."docker.io"]\n'
            '  endpoint = ["https://mirror.example"]\n', loads=False,
            failed_plugin="io.containerd.cri.v1.images", error_has="`mirrors` cannot be set"),
)


@dataclass(frozen=True)
class Captured:
    case: CriCase
    version: str  # `containerd --version`
    config: str
    plugins: str  # `ctr plugins ls -d` through kgc's collector command
    plugins_rc: int
    log: str  # containerd's own log lines (what `journalctl -u containerd -o cat` shows)
    dump: str
    dump_rc: int
    nri_socket: bool  # did the NRI socket appear
    tmp: Path
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # kgc's, while it ran


def _sh(cmd: str, inst: ContainerdInstance) -> tuple[int, str]:
    res = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, env=inst.env(),
                         timeout=60)
    return res.returncode, res.stdout + res.stderr


def judge_live(inst: ContainerdInstance, tmp: Path) -> dict[str, Verdict]:
    """The runtime layer's verdicts on the running instance, through the real collector."""
    from kgc_lab.containerd import lab_profile  # cycle: kgc_lab.containerd imports the lab

    prof = lab_profile(tmp)
    prof = prof.model_copy(update={"runtime": prof.runtime.model_copy(
        update={"containerd_bin": inst.containerd})})
    ctx = Context(NodeTarget("local://"), prof, load_layers(("kgc.layers.runtime",)))
    return {v.check: v for v in ctx.judge_all(["runtime"])}


def run_case(case: CriCase, judge: bool = False) -> Captured:
    """Start the case's containerd, ask it what it started (and, with ``judge``, let kgc
    judge it live), stop it."""
    require_lab()
    tmp = new_tmp(f"kgc-cri-{case.flavour}-{case.name}-")
    cfg = case.config(tmp)
    inst = ContainerdInstance(case.flavour, cfg, tmp)
    rp = RuntimeProfile().model_copy(update={"containerd_config": str(inst.config_path),
                                             "containerd_bin": inst.containerd})
    cmds = dict(query_for(rp).commands)
    try:
        inst.start(require_cri=False)
        rc, plugins = _sh(cmds["containerd_plugins"], inst)
        nri = (tmp / "nri.sock").exists()
        drc, dump = _sh(cmds["containerd_config_dump"], inst)
        _vrc, version = _sh(cmds["containerd_version"], inst)
        verdicts = judge_live(inst, tmp) if judge else {}
    finally:
        inst.stop()
    return Captured(case, version.strip(), cfg, plugins, rc, inst.log_tail(1 << 20), dump, drc,
                    nri, tmp, verdicts)


def capture(root: Path) -> list[Path]:
    """Run every case and write what the binaries said under ``root/<version>/<case>/``."""
    out: list[Path] = []
    for case in CASES:
        c = run_case(case)
        ver = c.version.split()[2].split("~")[0].split("+")[0]
        d = root / ver / case.name
        d.mkdir(parents=True, exist_ok=True)
        (d / "config.toml").write_text(c.config)
        (d / "ctr-plugins-ls-d.txt").write_text(c.plugins)
        (d / "containerd-version.txt").write_text(c.version + "\n")
        (d / "config-dump.txt").write_text(c.dump)
        keep = [ln for ln in c.log.splitlines()
                if "level=warning" in ln or "level=error" in ln or "starting containerd" in ln]
        (d / "containerd.log").write_text("\n".join(keep) + "\n")
        (d / "observed.txt").write_text(
            f"binary: {c.version}\ncase: {case.description}\nnri socket created: "
            f"{str(c.nri_socket).lower()}\nplugins rc: {c.plugins_rc}\ndump rc: {c.dump_rc}\n")
        shutil.rmtree(c.tmp, ignore_errors=True)
        out.append(d)
    return out


__all__ = ["CASES", "Captured", "CriCase", "capture", "run_case"]

if __name__ == "__main__":  # pragma: no cover - the fixture generator
    for p in capture(Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures/containerd")):
        print(p)
