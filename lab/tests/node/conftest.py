"""The node lab's shared session fixture: every scenario runs once per session, on first use.

``node_lab.get(names)`` returns the results of ``names``; the first call runs *all* the
scenarios (``run_scenarios``: cached image variants, scenarios sharing a VM on one boot, the
costliest VM groups first, ``KGC_LAB_PARALLEL`` at a time), so test files that each need some
of them (test_node_lab.py: all; test_node_dra.py: the binding: dra ones) share one pool of
VMs and no VM waits for another file's. On the ``good`` scenario's VM, after its scenario,
the session also runs the whole-filesystem no-writes proof (test_node_no_writes.py) and then
the never-returning reboot (test_node_lab.py), so neither boots a VM of its own.

Each property is proven live once (issue 17): a real reboot for each binding mechanism
(``Scenario.reboot``: kernel command line ``amd-iommu``, driverctl, runtime-only
``runtime-bind-only``, dra ``dra-rebindable``; modprobe.d ids: the ``good`` image's reboot in
test_node_certify.py, ``kgc lab certify --stage node``); the other scenarios'
real reboots were recorded (fixtures/bundles) and are judged offline (tests/node/
test_bundles.py, ``recorded_reboot`` below). ``KGC_LAB_REBOOT_ALL=1`` (and a bundle refresh,
``KGC_LAB_BUNDLE_DIR``) reboots every scenario."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from kgc.core.engine import Context
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc_lab.node.lab import NodeVM
from kgc_lab.node.nowrites import whole_filesystem_run
from kgc_lab.node.runner import ScenarioResult, lab_profile, replay, run_scenarios
from kgc_lab.node.scenarios import SCENARIO_SPECS, Scenario

MISSING = [t for t in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4", "ssh")
           if shutil.which(t) is None]
BUNDLES = Path(__file__).resolve().parents[3] / "fixtures" / "bundles"

# what the good scenario's VM runs after its scenario, in this order (the last one freezes it)
GoodVMHook = Callable[[NodeVM], Any]


class NodeLabRuns:
    def __init__(self, out: Path, hooks: list[tuple[str, GoodVMHook]]) -> None:
        self.out = out
        keep = os.environ.get("KGC_LAB_BUNDLE_DIR")  # set to fixtures/bundles to refresh them
        self.bundle_dir = Path(keep) if keep else out / "bundles"
        self.parallel = int(os.environ.get("KGC_LAB_PARALLEL", "2"))
        self.reboot_all = bool(keep) or os.environ.get("KGC_LAB_REBOOT_ALL") == "1"
        self.hooks = hooks
        self.hook_results: dict[str, Any] = {}
        self.results: dict[str, ScenarioResult] = {}

    def _after(self, vm: NodeVM, group: list[Scenario]) -> None:
        if group[0].name != "good":
            return
        for name, hook in self.hooks:
            try:
                self.hook_results[name] = hook(vm)
            except Exception as exc:  # noqa: BLE001 -- reported by the test that reads it
                self.hook_results[name] = exc

    def get(self, names: Iterable[str]) -> dict[str, ScenarioResult]:
        names = list(names)
        if not self.results:
            self.results.update(run_scenarios(
                list(SCENARIO_SPECS), out_dir=self.out, bundle_dir=self.bundle_dir,
                parallel=self.parallel, after=self._after, reboot_all=self.reboot_all))
        return {n: self.results[n] for n in names}

    def hook(self, name: str) -> Any:
        """What the good VM's hook ``name`` returned (re-raised if it raised)."""
        self.get(["good"])
        if name not in self.hook_results:
            pytest.fail(f"the good scenario's VM never ran {name!r}")
        got = self.hook_results[name]
        if isinstance(got, BaseException):
            raise got
        return got


def rebooted(res: ScenarioResult) -> bool:
    return res.reboot_s is not None


def recorded_reboot(name: str) -> list[dict[str, Any]]:
    """The reboot verdicts of scenario ``name``'s recorded real reboot, judged offline from
    fixtures/bundles/<name>.json (what the lab tier uses where it does not reboot it)."""
    path = BUNDLES / f"{name}.json"
    assert path.exists(), f"{path} missing: capture it (KGC_LAB_BUNDLE_DIR=fixtures/bundles)"
    got = [v for v in replay(path) if v["check"].startswith("reboot.")]
    assert got, f"{path} holds no reboot record"
    return got


def reboot_verdicts(res: ScenarioResult) -> list[dict[str, Any]]:
    """The scenario's reboot verdicts: live when the lab tier rebooted it, else recorded."""
    if rebooted(res):
        return [v for v in res.verdicts if v["check"].startswith("reboot.")]
    return recorded_reboot(res.name)


# ------------------------------------------------------------------ the good VM's hooks

def _no_writes(vm: NodeVM) -> Any:
    return whole_filesystem_run(vm)


class FreezingTarget(NodeTarget):
    """A live SSH target whose node freezes (QEMU `stop`) right after it accepts the
    reboot: the node never comes back, as a hung firmware or kernel would."""

    vm: NodeVM | None = None

    def run(self, script: str, limit_s: int | None = None) -> tuple[int, str, str]:
        res = super().run(script, limit_s)
        if "kgc-reboot-scheduled" in res[1] and self.vm is not None:
            self.vm.monitor("stop")
        return res


def _hang(vm: NodeVM) -> Any:
    t = FreezingTarget(vm.spec, ssh_config=str(vm.ssh_config), timeout_s=10)
    t.vm = vm
    ctx = Context(target=t, profile=lab_profile(), layers=load_layers(),
                  options={"allow_reboot": True, "reboot_timeout_s": 20,
                           "console_log": str(vm.console_log)})
    return ctx.judge_all(["reboot"])


@pytest.fixture(scope="session")
def node_lab(tmp_path_factory: pytest.TempPathFactory) -> NodeLabRuns:
    if MISSING or os.geteuid() != 0:
        pytest.fail(f"the node lab needs root and {', '.join(MISSING) or 'its tools'}: run "
                    "scripts/bootstrap.d/10-node-lab.sh as root")
    return NodeLabRuns(tmp_path_factory.mktemp("node-lab"),
                       hooks=[("no-writes", _no_writes), ("hang", _hang)])
