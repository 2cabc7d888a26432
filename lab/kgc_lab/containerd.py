"""``kgc lab containerd``: real containerd 1.7 / 2.x scenarios for the runtime and nri layers.

Each scenario starts its own containerd (binaries from the bootstrap cache, root/state/
sockets under a fresh temp dir), imports the locally built pause + probe images, runs the
``runtime`` and ``nri`` layers through the real engine and collector against it, stops
containerd and returns the verdicts. ``EXPECTED`` documents what each scenario must yield;
``tests/nri/`` asserts it.

NRI sockets: every scenario sets ``socket_path`` to its temp dir (never the system's
/var/run/nri/nri.sock) and varies only the keys under test (``disable``,
``disable_connections``, ``enable_nri``) — so the per-version default of ``disable`` is
what decides NRI in the "default" scenarios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kgc.core.bundle import write_bundle
from kgc.core.engine import Context
from kgc.core.layer import Scope
from kgc.core.model import Status, Verdict
from kgc.core.profile import PATH_ROOTS_ENV, Profile, load_profile
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc.layers.runtime.collect import query_for, redact_snapshot
from kgc_lab.containerd_instance import (
    ContainerdInstance,
    LabUnavailable,
    base_config,
    cache_dir,
    new_tmp,
    require_lab,
)
from kgc_lab.images import PAUSE_IMAGE, PROBE_IMAGE, build_archive
from kgc_lab.scenarios import (
    LabScenario,
    ScenarioOutcome,
    register_scenarios,
    write_scenario_verdict,
)

KATA_OK_CONFIG = """# Kata configuration for the lab (the shim never runs; its config is judged)
[hypervisor.qemu]
path = "/opt/kata/bin/qemu-system-x86_64"
kernel = "/opt/kata/share/kata-containers/vmlinux.container"
machine_type = "q35"
default_vcpus = 1
default_maxvcpus = 0
default_memory = 8192
memory_slots = 10
cold_plug_vfio = "root-port"
hot_plug_vfio = "no-port"
pcie_root_port = 8
enable_annotations = ["enable_iommu", "kernel_params", "default_vcpus", "default_memory"]

[runtime]
static_sandbox_resource_mgmt = true
sandbox_cgroup_only = true
"""

SEED_CRI_LINES = ("enable_nri = true", "enable_unprivileged_ports = false")


@dataclass(frozen=True)
class Scenario:
    name: str
    flavour: str  # "1.7" or "2"
    description: str
    nri_section: str = ""  # TOML appended (with {tmp} placeholders)
    cri_lines: tuple[str, ...] = ()
    kata: bool = False
    # the config makes containerd refuse its CRI plugin: wait for containerd's own API
    breaks_cri: bool = False
    expected: dict[str, Status] = field(default_factory=dict)
    # substrings the reason of a check must contain
    reasons: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def config(self, tmp: Path) -> str:
        tail = self.nri_section.format(tmp=tmp)
        if self.kata:
            if self.flavour == "2":
                sec = '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.kata]'
            else:
                sec = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]'
            tail += (
                f'\n{sec}\n  runtime_type = "io.containerd.kata.v2"\n'
                f'{sec[:-1]}.options]\n  ConfigPath = "{tmp}/kata/configuration.toml"\n'
            )
        return base_config(self.flavour, tmp, PAUSE_IMAGE, self.cri_lines, tail)

    def run(self, keep: bool = False) -> ScenarioResult:
        return run_scenario(self, keep=keep)

    def outcome(self, report_dir: Path, keep: bool = False) -> ScenarioOutcome:
        """Run; write ``report_dir/verdict.json`` (kgc-verdict/1) and say how it compares
        with the documented verdicts."""
        res = self.run(keep=keep)
        print(res.render())
        path = res.write_verdict(Path(report_dir) / "verdict.json")
        return ScenarioOutcome(self.name, "containerd", path, res.mismatch_map())

    def __call__(self, args: argparse.Namespace) -> int:
        """`kgc lab run --scenario NAME`: run, print verdicts, exit 0 iff as documented."""
        try:
            out = self.outcome(Path(getattr(args, "report_dir", None) or "reports"),
                               keep=bool(getattr(args, "keep", False)))
        except LabUnavailable as exc:
            print(f"lab unavailable: {exc}", file=sys.stderr)
            return 2
        print(f"verdicts: {out.verdict_json}")
        return 0 if out.matches else 1


@dataclass
class ScenarioResult:
    scenario: Scenario
    verdicts: list[Verdict]
    containerd_version: str
    tmp: Path
    log_tail: str = ""
    nri_evidence: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def by_check(self) -> dict[str, Verdict]:
        return {v.check: v for v in self.verdicts}

    def mismatches(self) -> list[str]:
        out = []
        got = self.by_check()
        for cid, want in self.scenario.expected.items():
            v = got.get(cid)
            if v is None:
                out.append(f"{cid}: no verdict")
            elif v.status != want:
                out.append(f"{cid}: expected {want}, got {v.status}: {v.reason}")
        for cid, subs in self.scenario.reasons.items():
            v = got.get(cid)
            for s in subs:
                if v is None or s not in v.reason:
                    out.append(f"{cid}: reason lacks {s!r}: {v.reason if v else '(none)'}")
        return out

    def matches(self) -> bool:
        return not self.mismatches()

    def mismatch_map(self) -> dict[str, str]:
        """The mismatches keyed by check id (a reason mismatch under ``<id> reason``)."""
        out: dict[str, str] = {}
        for m in self.mismatches():
            cid, _, msg = m.partition(": ")
            key = cid if "reason lacks" not in msg else f"{cid} reason"
            out[key] = f"{out[key]}; {msg}" if key in out else msg
        return out

    def write_verdict(self, path: Path) -> Path:
        """This scenario's ``verdict.json``: the same schema as a conformance run."""
        return write_scenario_verdict(
            path, "containerd", self.scenario.name, self.scenario.description,
            [v.to_dict() for v in self.verdicts],
            {k: str(v) for k, v in self.scenario.expected.items()}, self.mismatch_map(),
            layers=("runtime", "nri"), containerd=self.containerd_version,
            seconds=round(self.seconds, 3),
            nri_evidence=self.nri_evidence,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "description": self.scenario.description,
            "containerd": self.containerd_version,
            "matches": self.matches(),
            "mismatches": self.mismatches(),
            "expected": {k: str(v) for k, v in self.scenario.expected.items()},
            "verdicts": [v.to_dict() for v in self.verdicts],
            "nri_evidence": self.nri_evidence,
            "seconds": round(self.seconds, 3),
        }

    def render(self) -> str:
        lines = [
            f"scenario {self.scenario.name} on {self.containerd_version} ({self.seconds:.1f}s)"
        ]
        for v in self.verdicts:
            mark = "*" if v.check in self.scenario.expected else " "
            lines.append(f" {mark} [{v.status.upper():5}] {v.check}: {v.reason}")
        mm = self.mismatches()
        lines.append("as documented" if not mm else "MISMATCH:\n  " + "\n  ".join(mm))
        return "\n".join(lines)


def accept_instance_paths(tmp: Path) -> None:
    """Let kgc (this process and the ones it starts) accept profiles that name files in the
    instance's private directory: the product accepts no lab path of its own
    (``$KGC_PATH_ROOTS``, kgc.core.profile)."""
    roots = [r for r in os.environ.get(PATH_ROOTS_ENV, "").split(":") if r]
    if str(tmp) not in roots:
        os.environ[PATH_ROOTS_ENV] = ":".join([*roots, str(tmp)])


def lab_profile(tmp: Path, base: Profile | None = None) -> Profile:
    """The default profile pointed at one lab instance's private paths, its Kata handler
    the lab's (``kata``: platform.kata and the runtime section's view of it)."""
    p = base or load_profile()
    accept_instance_paths(tmp)
    kata = p.platform.kata.model_copy(update={"runtime_class": "kata", "handler": "kata"})
    platform = p.platform.model_copy(update={"kata": kata})
    rt = p.runtime.model_copy(
        update={
            "containerd_config": f"{tmp}/config.toml",
            "nri_socket": f"{tmp}/nri.sock",
            "kata_handler": "kata",
            "kata_config_paths": (f"{tmp}/kata/configuration.toml",),
            "shim_dirs": (f"{tmp}/bin",),
        }
    )
    nri = p.nri.model_copy(
        update={
            "cri_socket": f"{tmp}/containerd.sock",
            "sandbox_image": PAUSE_IMAGE,
            "probe_image": PROBE_IMAGE,
            "event_timeout_s": 10.0,
            "trigger": "cri",
        }
    )
    # the lab's Kata shim is a script that exits 1 and its Kata configuration is written by
    # the lab: verdicts on them prove the suite, not a Kata installation
    simulated = {
        "runtime.kata-shim": "the containerd lab's Kata shim is a stand-in script",
        "runtime.kata-config": "the containerd lab writes its own Kata configuration",
        "runtime.kata-vfio": "the containerd lab writes its own Kata configuration",
        "runtime.kata-stale-keys": "the containerd lab writes its own Kata configuration",
        **p.simulated,
    }
    return p.model_copy(update={"platform": platform, "runtime": rt, "nri": nri,
                                "simulated": simulated})


def _prepare_kata(tmp: Path) -> None:
    (tmp / "kata").mkdir(parents=True, exist_ok=True)
    (tmp / "kata" / "configuration.toml").write_text(KATA_OK_CONFIG)
    (tmp / "bin").mkdir(parents=True, exist_ok=True)
    shim = tmp / "bin" / "containerd-shim-kata-v2"
    shim.write_text(
        "#!/bin/sh\n# lab stand-in: presence is what runtime.kata-shim checks\nexit 1\n"
    )
    shim.chmod(0o755)


@contextmanager
def lab_node(sc: Scenario, keep: bool = False) -> Iterator[tuple[ContainerdInstance, Profile]]:
    """Start the scenario's containerd with images imported; yield it and a profile that
    points every path (config, sockets, Kata config, shim dir, binary) at it."""
    require_lab()
    tmp = new_tmp(f"kgc-{sc.name}-")
    if sc.kata:
        _prepare_kata(tmp)
    else:
        (tmp / "bin").mkdir(parents=True, exist_ok=True)
    inst = ContainerdInstance(sc.flavour, sc.config(tmp), tmp, extra_path=(str(tmp / "bin"),))
    archive = build_archive(cache_dir() / "images" / "kgc-lab-images.tar")
    profile = lab_profile(tmp)
    profile = profile.model_copy(
        update={"runtime": profile.runtime.model_copy(update={"containerd_bin": inst.containerd})}
    )
    try:
        inst.start(require_cri=not sc.breaks_cri)
        if not keep and inst.record is not None:
            inst.record.add_path(tmp)  # cleanup after a killed run removes it too
        inst.import_images(archive)
        yield inst, profile
    finally:
        inst.stop()
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


def write_profile(profile: Profile, path: Path) -> Path:
    """Save a (lab) profile as YAML that ``--profile PATH`` loads back."""
    doc = profile.model_dump(mode="json", by_alias=True, exclude={"source"}, exclude_none=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_scenario(sc: Scenario, keep: bool = False, record: Path | None = None) -> ScenarioResult:
    """Run one scenario; with ``record`` (a directory), also save what was judged as an
    evidence bundle (``<name>.bundle.json``: host snapshot + the probe's ``nri`` entry) and
    the profile that reads it (``<name>.profile.yaml``) for offline replay."""
    t0 = time.monotonic()
    with lab_node(sc, keep=keep) as (inst, profile):
        layers = load_layers(("kgc.layers.runtime", "kgc.layers.nri"))
        ctx = Context(
            target=NodeTarget("local://"),  # type: ignore[arg-type]
            profile=profile,
            layers=layers,
            # the lab's own containerd: the live probe is what the scenario is for
            options={"cri_socket": inst.address, "nri_probe": True},
        )
        verdicts = ctx.judge_all(["runtime", "nri"])
        nri_ev = ctx.evidence("nri").to_dict()
        version = ctx.evidence("runtime").version
        if record is not None:
            record.mkdir(parents=True, exist_ok=True)
            snap = redact_snapshot(NodeTarget("local://").collect(query_for(profile.runtime)),
                                   profile.runtime)
            write_bundle(record / f"{sc.name}.bundle.json", scope=Scope.NODE,
                         target=f"lab-{sc.name}", host=snap, parts={"nri": nri_ev})
            write_profile(profile, record / f"{sc.name}.profile.yaml")
        return ScenarioResult(
            sc,
            verdicts,
            f"containerd {version}",
            inst.tmp,
            inst.log_tail(),
            nri_ev,
            time.monotonic() - t0,
        )


P, F, W = Status.PASS, Status.FAIL, Status.WARN
NRI_ON = (
    '\n[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n  socket_path = "{tmp}/nri.sock"\n'
)
NRI_SOCKET_ONLY = '\n[plugins."io.containerd.nri.v1.nri"]\n  socket_path = "{tmp}/nri.sock"\n'

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario(
            "nri-on",
            "1.7",
            "containerd 1.7 with NRI enabled (disable = false)",
            nri_section=NRI_ON,
            expected={
                "runtime.nri-enabled": P,
                "runtime.nri-socket": P,
                "runtime.nri-ignored-keys": P,
                "runtime.config": P,
                "runtime.containerd-version": P,
                "nri.events": P,
                "nri.adjustment": P,
                "nri.handshake": P,
                "nri.own-pods-only": P,
            },
        ),
        Scenario(
            "nri-default-1.7",
            "1.7",
            "containerd 1.7, nothing sets `disable` (default true)",
            nri_section=NRI_SOCKET_ONLY,
            expected={"runtime.nri-enabled": F, "runtime.nri-socket": F, "nri.events": F},
            reasons={"runtime.nri-enabled": ("does not set `disable`", "1.7 is disable = true")},
        ),
        Scenario(
            "seed-config",
            "1.7",
            "the tutorial's exact keys (enable_nri under CRI + NRI section)",
            nri_section=NRI_ON,
            cri_lines=SEED_CRI_LINES,
            expected={
                "runtime.nri-enabled": P,
                "runtime.nri-ignored-keys": W,
                "nri.events": P,
                "nri.adjustment": P,
            },
            reasons={"runtime.nri-ignored-keys": ("enable_nri",)},
        ),
        Scenario(
            "seed-cri-key-only",
            "1.7",
            "only `enable_nri = true` under the CRI plugin",
            nri_section=NRI_SOCKET_ONLY,
            cri_lines=("enable_nri = true",),
            expected={"runtime.nri-enabled": F, "runtime.nri-ignored-keys": W, "nri.events": F},
            reasons={
                "runtime.nri-enabled": ("enable_nri", "io.containerd.nri.v1.nri", "disable = false")
            },
        ),
        Scenario(
            "containerd2-default",
            "2",
            "containerd 2.x, config version 3, NRI on by default",
            nri_section=NRI_SOCKET_ONLY,
            expected={
                "runtime.nri-enabled": P,
                "runtime.nri-socket": P,
                "runtime.config": P,
                "nri.events": P,
                "nri.adjustment": P,
                "nri.handshake": P,
            },
            reasons={"runtime.nri-enabled": ("does not set `disable`", "is disable = false")},
        ),
        Scenario(
            "connections-disabled",
            "1.7",
            "NRI on but disable_connections = true",
            nri_section=NRI_ON + "  disable_connections = true\n",
            expected={"runtime.nri-enabled": P, "runtime.nri-socket": F, "nri.events": F},
            reasons={
                "nri.events": ("disable_connections = true",),
                "runtime.nri-socket": ("disable_connections = true",),
            },
        ),
        Scenario(
            "kata-handler-missing",
            "1.7",
            "NRI on, no Kata runtime handler",
            nri_section=NRI_ON,
            expected={"runtime.kata-handler": F, "runtime.kata-shim": F, "nri.events": P},
            reasons={"runtime.kata-handler": ("no runtime handler 'kata'",)},
        ),
        Scenario(
            "kata-only-1.7",
            "1.7",
            "issue 18.1: runtimes lists only the Kata handler; 1.7 drops runc, CRI refuses",
            nri_section=NRI_ON,
            kata=True,
            breaks_cri=True,
            expected={
                "runtime.config": F,
                "runtime.kata-handler": F,
                "runtime.nri-socket": F,
                "nri.events": F,
            },
            reasons={
                "runtime.kata-handler": ('default_runtime_name = "runc"',),
                "runtime.nri-socket": ("CRI plugin", "io.containerd.grpc.v1.cri"),
                "nri.events": ("CRI plugin", 'default_runtime_name = "runc"'),
            },
        ),
        Scenario(
            "kata-handler-ok",
            "2",
            "Kata handler (v3 section), shim present, GPU VFIO config",
            nri_section=NRI_SOCKET_ONLY,
            kata=True,
            expected={
                "runtime.kata-handler": P,
                "runtime.kata-shim": P,
                "runtime.kata-config": P,
                "runtime.kata-vfio": P,
                "runtime.kata-stale-keys": P,
                "nri.events": P,
            },
        ),
    )
}


def _cmd_list(args: argparse.Namespace) -> int:
    for s in SCENARIOS.values():
        exp = ", ".join(f"{k}={v}" for k, v in s.expected.items())
        print(f"{s.name:22} containerd {s.flavour:4} {s.description}\n{'':22} expects {exp}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    names = list(SCENARIOS) if args.scenario in (None, "all") else [args.scenario]
    rc = 0
    for n in names:
        if n not in SCENARIOS:
            print(f"unknown scenario {n!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
            return 2
        try:
            res = run_scenario(
                SCENARIOS[n], keep=args.keep, record=Path(args.record) if args.record else None
            )
        except LabUnavailable as exc:
            print(f"lab unavailable: {exc}", file=sys.stderr)
            return 2
        print(res.render())
        rc |= 0 if res.matches() else 1
        if args.report_dir:
            print(f"verdicts: {res.write_verdict(Path(args.report_dir) / n / 'verdict.json')}")
    return rc


def _cmd_up(args: argparse.Namespace) -> int:
    """Run one scenario's containerd until interrupted, for the conformance suites."""
    sc = SCENARIOS.get(args.scenario)
    if sc is None:
        print(f"unknown scenario {args.scenario!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    try:
        with lab_node(sc, keep=args.keep) as (inst, profile):
            out = write_profile(profile, Path(args.profile_out))
            print(f"containerd {sc.flavour} up: {inst.address} (log {inst.log_path})")
            print(f"profile: {out}")
            print(f"run: pytest conformance/runtime conformance/nri --profile {out}")
            print("Ctrl-C (SIGINT/SIGTERM) stops it.", flush=True)
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
    except LabUnavailable as exc:
        print(f"lab unavailable: {exc}", file=sys.stderr)
        return 2
    return 0


def register(subparsers: Any) -> None:
    """Add ``kgc lab containerd {list,run}``."""
    p = subparsers.add_parser("containerd", help="containerd 1.7/2.x NRI + Kata handler lab")
    sub = p.add_subparsers(dest="containerd_cmd", required=True)
    ls = sub.add_parser("list", help="list the scenarios and their documented verdicts")
    ls.set_defaults(func=_cmd_list)
    run = sub.add_parser("run", help="run one scenario (or all) against real containerd")
    run.add_argument("--scenario", default="all", help="scenario name or 'all'")
    run.add_argument("--keep", action="store_true", help="keep the temp dir (config, log)")
    run.add_argument("--report-dir", default=None,
                     help="write each scenario's verdict.json under DIR/<scenario>/")
    run.add_argument(
        "--record", default=None, help="save each scenario's evidence bundle + profile in this dir"
    )
    run.set_defaults(func=_cmd_run)
    up = sub.add_parser("up", help="start one scenario's containerd and write a profile for it")
    up.add_argument("--scenario", default="kata-handler-ok")
    up.add_argument("--profile-out", default="kgc-lab-profile.yaml")
    up.add_argument("--keep", action="store_true")
    up.set_defaults(func=_cmd_up)


ScenarioFn = Callable[[argparse.Namespace], int]


register_scenarios(*(
    LabScenario(s.name, "containerd", s.description, s.outcome) for s in SCENARIOS.values()
))
