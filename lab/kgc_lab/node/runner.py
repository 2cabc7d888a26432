"""Run lab scenarios: boot, set up over SSH, judge the host layers, prove no writes, reboot,
write verdict.json + an evidence bundle, tear down.

Scenarios that share an image variant and hardware may share one booted VM (``share``):
they run in order, each separated by its own *real* reboot, which resets the runtime state
the previous scenario set up (runtime bindings do not survive it -- that is what the reboot
test proves), or, where the lab tier does not reboot it (``Scenario.reboot``, ``reboot_all``
False), by its ``reset`` script. Only the last scenario of a shared group may persist
configuration.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgc.core.bundle import load_bundle, write_bundle
from kgc.core.engine import Context
from kgc.core.layer import Scope
from kgc.core.profile import Profile, load_profile, profiles_dir
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc_lab import procs
from kgc_lab.common import LabError
from kgc_lab.node.lab import NodeVM, build_variant
from kgc_lab.node.scenarios import SCENARIO_SPECS, VARIANTS, Scenario
from kgc_lab.scenarios import write_scenario_verdict

HOST_LAYERS = ("iommu", "vfio", "persistence")
LAB_PROFILE = profiles_dir() / "lab.yaml"

# What a host run could change: every file under /etc and /boot (path, size, mtime, mode)
# and each PCI device's binding state. Hashed before and after the host layers run.
FINGERPRINT = r"""
find /etc /boot -xdev \( -type f -o -type l \) -printf '%p %s %T@ %m %l\n' 2>/dev/null | sort
for d in /sys/bus/pci/devices/*; do
  printf 'pci %s driver=%s override=%s\n' "${d##*/}" \
    "$(basename "$(readlink "$d/driver" 2>/dev/null)" 2>/dev/null)" "$(cat "$d/driver_override")"
done
ls /sys/bus/pci/drivers/vfio-pci 2>/dev/null | sed 's/^/vfio-pci-dir /'
"""


@dataclass
class ScenarioResult:
    name: str
    verdicts: list[dict[str, Any]]
    verdict_path: Path
    bundle_path: Path
    expected: dict[str, str]
    mismatches: dict[str, str]
    round_trips: int
    host_run_s: float
    boot_s: float | None
    reboot_s: float | None
    no_writes: bool
    writes_diff: list[str] = field(default_factory=list)


def lab_profile() -> Profile:
    return load_profile(LAB_PROFILE)


def profile_path(sc: Scenario) -> Path:
    """The profile a scenario is judged with: its own (``Scenario.profile``, e.g. the
    binding: dra variant lab-dra.yaml) or profiles/lab.yaml."""
    return sc.profile or LAB_PROFILE


def scenario_profile(sc: Scenario) -> Profile:
    return load_profile(profile_path(sc))


def fingerprint(vm: NodeVM) -> list[str]:
    # 600 s: on 2 busy cores a TCG guest listed /etc and /boot in more than 120 s (a soft
    # lockup on its console at the same time), and the whole node lab errored on it
    return vm.ssh(FINGERPRINT, timeout=600).stdout.splitlines()


def _diff(a: list[str], b: list[str]) -> list[str]:
    sa, sb = set(a), set(b)
    return [f"- {x}" for x in sorted(sa - sb)] + [f"+ {x}" for x in sorted(sb - sa)]


def compare(verdicts: Iterable[dict[str, Any]], expected: dict[str, str]) -> dict[str, str]:
    got = {v["check"]: v["status"] for v in verdicts}
    return {c: f"expected {s}, got {got.get(c, 'nothing')}" for c, s in expected.items()
            if got.get(c) != s}


def qemu_cpu_s(vm: NodeVM) -> float | None:
    """CPU seconds the VM's QEMU has used so far (user + system), None once it is gone:
    where a lab run's cores go (the scenario verdicts carry it per phase)."""
    pid = vm.pid()
    st = procs.proc_stat(pid) if pid is not None else None
    return None if st is None else round(st.cpu_ticks / os.sysconf("SC_CLK_TCK"), 2)


def run_on_vm(vm: NodeVM, sc: Scenario, out_dir: Path, bundle_dir: Path | None,
              reboot_timeout_s: float = 600, flat: bool = False,
              reboot: bool = True) -> ScenarioResult:
    """One scenario on a booted VM; ``reboot`` False: the host layers only (the scenario's
    reboot.* expectations are then not asserted here but on its recorded bundle, and its
    ``reset`` undoes its runtime state for the next scenario on the VM)."""
    profile = scenario_profile(sc)
    cpu: dict[str, float | None] = {"start": qemu_cpu_s(vm)}
    if sc.setup.strip():
        vm.ssh(sc.setup, timeout=600)
    cpu["setup"] = qemu_cpu_s(vm)
    before = fingerprint(vm)
    cpu["fingerprint"] = qemu_cpu_s(vm)
    layers = load_layers()
    target = NodeTarget(vm.spec, ssh_config=str(vm.ssh_config), timeout_s=30)
    ctx = Context(target=target, profile=profile, layers=layers,
                  options={"allow_reboot": True, "reboot_timeout_s": reboot_timeout_s,
                           "console_log": str(vm.console_log)})
    t0 = time.monotonic()
    host_verdicts = ctx.judge_all([n for n in HOST_LAYERS if n in layers])
    host_s = time.monotonic() - t0
    cpu["host_run"] = qemu_cpu_s(vm)
    trips = target.round_trips
    after = fingerprint(vm)
    cpu["fingerprint_after"] = qemu_cpu_s(vm)
    diff = _diff(before, after)
    reboot_s: float | None = None
    reboot_verdicts = []
    expect = dict(sc.expect)
    if reboot:
        t1 = time.monotonic()
        reboot_verdicts = ctx.judge_all(["reboot"])
        reboot_s = time.monotonic() - t1
        cpu["reboot"] = qemu_cpu_s(vm)
    else:
        expect = {c: s for c, s in expect.items() if not c.startswith("reboot.")}
        if sc.reset.strip():
            vm.ssh(sc.reset, timeout=600)
    verdicts = [v.to_dict() for v in [*host_verdicts, *reboot_verdicts]]
    sc_dir = out_dir if flat else out_dir / sc.name
    bundle_path = (bundle_dir or sc_dir) / f"{sc.name}.json"
    write_bundle(bundle_path, scope=Scope.NODE, target=target.name, host=ctx.host(),
                 parts={"reboot": ctx.evidence("reboot").to_dict()} if reboot else {},
                 meta={"lab_scenario": sc.name, "lab_profile": profile_path(sc).name,
                       "live_verdicts": sorted([list(verdict_key(v)) for v in verdicts])})
    mism = compare(verdicts, expect)
    if diff:
        mism["no-writes"] = f"host layers changed the node: {diff[:10]}"
    vpath = write_scenario_verdict(
        sc_dir / "verdict.json", "node", sc.name, sc.doc, verdicts, expect, mism,
        layers=[*(n for n in HOST_LAYERS if n in layers), *(["reboot"] if reboot else [])],
        target=target.name,
        profile=str(profile_path(sc)), round_trips_host_run=trips,
        host_run_s=round(host_s, 2),
        reboot_test_s=None if reboot_s is None else round(reboot_s, 1),
        boot_to_ssh_s=None if vm.boot_s is None else round(vm.boot_s, 1),
        host_layers_wrote_nothing=not diff, writes_diff=diff[:50],
        qemu_cpu_s=cpu,
    )
    return ScenarioResult(sc.name, verdicts, vpath, bundle_path, expect, mism, trips,
                          host_s, vm.boot_s, reboot_s, not diff, diff)


def _groups(names: list[str]) -> list[list[Scenario]]:
    shared: dict[str, list[Scenario]] = {}
    out: list[list[Scenario]] = []
    for n in names:
        sc = SCENARIO_SPECS[n]
        if sc.share:
            if sc.share not in shared:
                shared[sc.share] = []
                out.append(shared[sc.share])
            shared[sc.share].append(sc)
        else:
            out.append([sc])
    return out


AfterGroup = Callable[[NodeVM, list[Scenario]], None]


def _run_group(group: list[Scenario], out_dir: Path, bundle_dir: Path | None,
               keep: bool, after: AfterGroup | None = None,
               flat: bool = False, reboot_all: bool = True) -> dict[str, ScenarioResult]:
    first = group[0]
    img = build_variant(VARIANTS[first.variant])
    # unique per process: several runs (agents, CI jobs) may share one cache directory
    vm_name = f"sc-{first.share or first.name}-{os.getpid()}"
    vm = NodeVM(vm_name, img, first.hardware)
    results: dict[str, ScenarioResult] = {}
    try:
        vm.start()
        for sc in group:
            results[sc.name] = run_on_vm(vm, sc, out_dir, bundle_dir, flat=flat,
                                         reboot=reboot_all or sc.reboot)
            vm.boot_s = None  # later scenarios on this VM start from a reboot, not a boot
        if after is not None:
            after(vm, group)
    finally:
        if not keep:
            vm.stop()
    return results


def group_cost(group: list[Scenario], reboot_all: bool = True) -> int:
    """Boots plus real reboots a group costs (each is about one TCG boot)."""
    return 1 + sum(1 for sc in group if reboot_all or sc.reboot)


def run_scenarios(names: Iterable[str], out_dir: Path, bundle_dir: Path | None = None,
                  keep: bool = False, parallel: int = 2,
                  after: AfterGroup | None = None,
                  flat: bool = False, reboot_all: bool = True) -> dict[str, ScenarioResult]:
    """Run scenarios; ``flat``: one scenario, its verdict.json directly in ``out_dir``;
    ``reboot_all`` False: only the scenarios whose reboot proves their binding mechanism
    (``Scenario.reboot``) are rebooted (the lab tier; the others' reboots are judged from
    their recorded bundles)."""
    names = list(names)
    unknown = [n for n in names if n not in SCENARIO_SPECS]
    if unknown:
        raise LabError(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIO_SPECS)}")
    # stable order inside a shared VM: runtime-only scenarios first, persistent ones last
    order = list(SCENARIO_SPECS)
    names.sort(key=order.index)
    groups = _groups(names)
    # build images first, sequentially (they share the base tree and the CPU)
    for g in groups:
        build_variant(VARIANTS[g[0].variant])
    # the costliest groups first, so the last VM to finish is a short one
    groups.sort(key=lambda g: -group_cost(g, reboot_all))
    results: dict[str, ScenarioResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        for part in pool.map(lambda g: _run_group(g, out_dir, bundle_dir, keep, after, flat,
                                                  reboot_all), groups):
            results.update(part)
    return results


def bundle_scenario(bundle: Path) -> Scenario | None:
    """The lab scenario a bundle was recorded by (its ``lab_scenario``, top level in the
    older captures, under ``meta`` in write_bundle's), None when it names none we know."""
    doc = json.loads(Path(bundle).read_text())
    name = doc.get("lab_scenario") or (doc.get("meta") or {}).get("lab_scenario")
    return SCENARIO_SPECS.get(name) if isinstance(name, str) else None


def replay(bundle: Path, profile: Profile | None = None) -> list[dict[str, Any]]:
    """Judge a recorded bundle offline with the same layers (no I/O to a node), with the
    profile its scenario was judged with (``profile`` overrides it)."""
    if profile is None:
        sc = bundle_scenario(bundle)
        profile = scenario_profile(sc) if sc is not None else lab_profile()
    layers = load_layers()
    ctx = Context(target=load_bundle(bundle, layers), profile=profile, layers=layers)
    doc = json.loads(bundle.read_text())
    # a capture whose scenario was not rebooted (the lab tier) holds no reboot record
    rebooted = "reboot" in doc or "reboot" in (doc.get("layers") or {})
    names = [n for n in (*HOST_LAYERS, *(["reboot"] if rebooted else [])) if n in layers]
    return [v.to_dict() for v in ctx.judge_all(names)]


def verdict_key(v: dict[str, Any]) -> tuple[str, str, str]:
    return (v["check"], v["status"], v["reason"])


def digest(verdicts: Iterable[dict[str, Any]]) -> str:
    rows = sorted(verdict_key(v) for v in verdicts)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


@contextlib.contextmanager
def certify_stage(work: Path) -> Iterator[list[str]]:
    """``kgc lab certify`` stage: one lab node (image variant ``good``), the host suites and
    the live reboot test run against it over SSH by pytest, exactly as a user would."""
    vm = NodeVM(f"certify-{os.getpid()}", build_variant(VARIANTS["good"]))
    vm.start()
    try:
        yield ["-m", "host or reboot", "conformance/iommu", "conformance/vfio",
               "conformance/persistence", "conformance/reboot", "--profile", str(LAB_PROFILE),
               f"--hosts={vm.spec}", f"--ssh-config={vm.ssh_config}", "--allow-reboot"]
    finally:
        vm.stop()
