"""The cluster lab's sizing chooser serves recorded real guests only: the capture whose own
recorded VM is the size Kata gives the pod (a table worked out by hand, never kgc's model),
re-encoded losslessly as collector output — or a failing pod whose log says that the table
does not know the pod's limits or no capture has that size."""

from __future__ import annotations

import pytest

from kgc.core.hostfs import parse_output
from kgc.core.profile import load_profile, profiles_dir
from kgc.layers.sizing.collect import guest_from_log
from kgc.layers.sizing.evidence import GuestSize
from kgc.layers.sizing.model import expected_vm
from kgc.layers.sizing.profile import DEFAULT_SHAPES, PROBE_SHAPE, shape_pod
from kgc_lab.cluster import sim_sizing
from kgc_lab.cluster.shape import shape_of

KATA = ("kata",)


@pytest.mark.parametrize("cap", sim_sizing.captures(), ids=lambda c: c.name)
def test_the_served_log_is_the_recorded_snapshot_exactly(cap: sim_sizing.Capture) -> None:
    log = sim_sizing.capture_log(cap)
    assert parse_output(log, sim_sizing.boundary_for(cap)) == cap.snapshot
    g, why = guest_from_log(log)
    assert not why and g == GuestSize.from_snapshot(cap.snapshot)


@pytest.mark.parametrize("shape", [PROBE_SHAPE.name, *(s.name for s in DEFAULT_SHAPES)])
def test_every_default_shape_gets_the_capture_of_its_predicted_vm(shape: str) -> None:
    pod = shape_pod(shape, runtime_class="kata")
    c = sim_sizing.decide(pod, KATA)
    vm = expected_vm(pod, sim_sizing.LAB_KATA)
    assert c.exit_code == 0, c.text
    assert c.capture is not None and (c.capture.vcpus, c.capture.memory_mib) == (vm.vcpus,
                                                                               vm.memory_mib)
    assert c.capture.name in c.note and "recorded QEMU guest" in c.note


def test_limits_the_hand_worked_table_does_not_know_fail_the_pod_saying_so() -> None:
    pod = shape_pod("one-container", runtime_class="kata")
    pod["spec"]["containers"][0]["resources"]["limits"]["memory"] = "5Gi"
    c = sim_sizing.decide(pod, KATA)
    assert c.exit_code == 1 and c.capture is None
    assert c.text.startswith("kgc lab: no hand-worked VM size for a pod with limits "
                             "[('app', '2', '5Gi')]")
    assert "LAB_VMS" in c.text and "one-container [('app', '2', '2Gi')]" in c.text


def test_no_capture_of_the_worked_out_size_fails_the_pod_saying_so() -> None:
    pod = shape_pod("one-container", runtime_class="kata")
    others = tuple(c for c in sim_sizing.captures() if c.size != (3, 10240, 3, 10240))
    c = sim_sizing.decide(pod, KATA, pool=others)
    assert c.exit_code == 1 and c.capture is None
    assert c.text.startswith("kgc lab: no recorded guest capture of a 3 vCPU / 10240 MiB VM "
                             "(one-container: ceil(1 + 2) = 3, 8192 + 2048 = 10240 MiB) "
                             "recorded for qemu-nvidia-gpu")
    assert "python -m kgc_lab.guests record" in c.text


@pytest.mark.parametrize("vm", sim_sizing.LAB_VMS, ids=lambda v: v.shape)
def test_the_hand_worked_table_matches_the_captures_own_record(vm: sim_sizing.LabVm) -> None:
    """Each table row is the limits of the lab's shape, and the capture it serves was
    recorded for that shape under the lab's Kata configuration at that very size."""
    from kgc.layers.sizing.profile import shape_by_name

    pod = shape_pod(vm.shape, runtime_class="kata")
    assert sim_sizing.pod_limits(pod) == tuple(sorted(vm.limits, key=str))
    assert sim_sizing.lab_vm(pod) == vm
    c = sim_sizing.decide(pod, KATA)
    assert c.capture is not None and c.vm == vm
    assert (c.capture.shape, c.capture.preset) == (vm.shape, sim_sizing.LAB_KATA_PRESET)
    assert c.capture.size == vm.size
    assert vm.shape == shape_by_name(vm.shape).name
    assert vm.rule in c.note and "not by kgc's model" in c.note


def test_the_table_covers_the_lab_profiles_matrix() -> None:
    prof = load_profile(profiles_dir() / "lab.yaml")
    shapes = {s.name for s in prof.cluster.sizing.shapes} | {PROBE_SHAPE.name}
    assert shapes == {v.shape for v in sim_sizing.LAB_VMS}


def test_only_captures_booted_as_kata_would_boot_match() -> None:
    """A Go dynamic VM (booted small, hot-plugged) never gets a cold-booted capture of the
    same final size, nor the other way round."""
    from kgc.layers.sizing.model import KATA_PRESETS

    pod = shape_pod("one-container", runtime_class="kata")
    dyn = expected_vm(pod, KATA_PRESETS["qemu"])
    assert (dyn.boot_vcpus, dyn.boot_memory_mib) == (1, 2048)
    hit = sim_sizing.matching(dyn)
    assert hit is not None and hit.name == "go-qemu-one-container-3x4096-hotplug"
    from dataclasses import replace

    assert sim_sizing.matching(replace(dyn, boot_vcpus=3, boot_memory_mib=4096)) is None


@pytest.mark.parametrize(("mutate", "text"), [
    (lambda p: p["spec"].update(runtimeClassName="runc"),
     "kgc lab: runtimeClassName 'runc' is not one of the lab's Kata RuntimeClasses"),
    (lambda p: p["spec"]["containers"][0]["resources"]["limits"].update(memory="2.5.5Gi"),
     "kgc lab: no hand-worked VM size for a pod with limits [('app', '2', '2.5.5Gi')]"),
    (lambda p: p["spec"].update(containers=[]),
     "kgc lab: no hand-worked VM size for a pod with limits []"),
])
def test_unsizable_or_non_kata_pods_fail_with_the_reason(mutate, text: str) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
    pod = shape_pod("one-container", runtime_class="kata")
    mutate(pod)
    c = sim_sizing.decide(pod, KATA)
    assert c.exit_code == 1 and c.text.startswith(text), c.text


def test_the_lab_profile_describes_the_kata_the_simulated_nodes_run() -> None:
    prof = load_profile(profiles_dir() / "lab.yaml")
    lab = sim_sizing.LAB_KATA
    rcs = shape_of(prof.cluster).kata_runtime_classes  # the lab's own shape
    assert sim_sizing._lab_kata_classes() == tuple(rcs)
    assert prof.platform.kata.runtime_class in rcs  # every shape's class, GPU shapes too
    for rc in rcs:
        k = prof.cluster.sizing.kata[rc].to_sizing("x")
        assert (k.runtime, k.static, k.default_vcpus, k.default_memory) == (
            lab.runtime, lab.static, lab.default_vcpus, lab.default_memory)
    assert prof.cluster.simulated is True
