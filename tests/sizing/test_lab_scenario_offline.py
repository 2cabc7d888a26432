"""The sizing lab scenario judges kgc's sizing model, it does not echo it (issue 21, item 8).

The lab's shape pods report recorded guests chosen by the size Kata gives each lab shape (a
table worked out by hand in :mod:`kgc_lab.cluster.sim_sizing`), not by the model the check
then applies. So with a deliberately wrong model (monkeypatched wherever kgc refers to it),
``sizing-good``'s ``sizing.vm-matches-limits`` fails; when the lab chose its guest with the
model, the same wrong model got the guest it expected and the scenario passed.

Fast: :func:`kgc_lab.cluster.scenarios_sizing.offline_shapes` is the scenario's shape-pod
path (plan, the lab's answer, observe) without the cluster; the lab run itself is in
test_lab_sizing.py / test_lab_scenario_cli.py.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from kgc.core.model import Status, Verdict
from kgc.core.profile import load_profile, profiles_dir
from kgc.layers.sizing import model
from kgc.layers.sizing.checks import CHECKS
from kgc.layers.sizing.model import PodShape
from kgc.layers.sizing.profile import shape_pod
from kgc_lab.cluster import sim_sizing
from kgc_lab.cluster.scenarios_sizing import SCENARIOS, mismatches, offline_shapes

CHECK = "sizing.vm-matches-limits"
LAB = load_profile(profiles_dir() / "lab.yaml")


def patch_model(monkeypatch: pytest.MonkeyPatch, fake: Callable[..., Any]) -> int:
    """Replace the model's ``expected_vm`` in every kgc module that holds it (the model
    itself, the checks, anything that imported it): the model is wrong everywhere."""
    real = model.expected_vm
    n = 0
    for mod in list(sys.modules.values()):
        if (getattr(mod, "__name__", "") or "").startswith("kgc."):
            for name, val in list(vars(mod).items()):
                if val is real:
                    monkeypatch.setattr(mod, name, fake)
                    n += 1
    return n


def memory_without_cpu_ignored(real: Callable[..., Any]) -> Callable[..., Any]:
    """A plausible model bug: a container's memory limit is dropped when it sets no CPU
    limit (the memory-only shape is then predicted as the default VM, 1 vCPU / 8192 MiB)."""
    def expected_vm(pod: Any, kata: Any, host: Any = None) -> Any:
        p = pod if isinstance(pod, PodShape) else PodShape.from_manifest(pod)
        p = replace(p, containers=tuple(replace(c, memory_limit=None)
                                        if c.cpu_limit_m is None else c
                                        for c in p.containers))
        return real(p, kata, host)

    return expected_vm


def one_vcpu_short(real: Callable[..., Any]) -> Callable[..., Any]:
    """Another: the default vCPU is not counted on top of the limits."""
    def expected_vm(pod: Any, kata: Any, host: Any = None) -> Any:
        vm = real(pod, kata, host)
        return replace(vm, vcpus=max(vm.vcpus - 1, 1))

    return expected_vm


def scenario_verdict() -> tuple[Verdict, dict[str, str]]:
    v = CHECKS.get(CHECK).judge(offline_shapes(LAB), LAB, "cluster")
    v = v.with_origin("live", "the cluster lab's simulated sizing pods")  # as the lab marks it
    good = SCENARIOS["sizing-good"]
    only = replace(good, expected={CHECK: good.expected[CHECK]},
                   reasons={CHECK: good.reasons[CHECK]})
    return v, mismatches(only, [v])


def test_the_scenario_passes_with_the_real_model() -> None:
    v, mm = scenario_verdict()
    assert v.status is Status.PASS, v.reason
    assert mm == {}
    assert len(v.evidence["shapes"]) == len(LAB.cluster.sizing.shapes)


@pytest.mark.parametrize("bug", [memory_without_cpu_ignored, one_vcpu_short],
                         ids=lambda b: b.__name__)
def test_a_wrong_model_makes_the_scenario_fail(monkeypatch: pytest.MonkeyPatch,
                                               bug: Callable[..., Any]) -> None:
    assert patch_model(monkeypatch, bug(model.expected_vm)) >= 2  # the model and the checks
    v, mm = scenario_verdict()
    assert v.status is Status.FAIL, (v.status, v.reason)
    assert CHECK in mm and "expected pass, got fail" in mm[CHECK]


def test_the_memory_bug_names_the_shape_and_the_extra_ram(monkeypatch: pytest.MonkeyPatch) -> None:
    patch_model(monkeypatch, memory_without_cpu_ignored(model.expected_vm))
    v, _ = scenario_verdict()
    assert v.reason.startswith("memory-only (simulated): expected 1 vCPU / 8192 MiB"), v.reason
    assert "MiB more RAM than predicted" in v.reason


def test_the_chooser_never_asks_the_sizing_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab tests the model, so it must not consult it: with every reference to the
    model's expected_vm broken, every lab shape still gets its capture."""
    def broken(*a: object, **k: object) -> object:
        raise AssertionError("the lab's chooser asked kgc's sizing model")

    patch_model(monkeypatch, broken)
    for vm in sim_sizing.LAB_VMS:
        c = sim_sizing.decide(shape_pod(vm.shape, runtime_class="kata"), ("kata",))
        assert c.exit_code == 0 and c.capture is not None, c.text
