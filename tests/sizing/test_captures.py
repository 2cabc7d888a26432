"""The sizing evaluator on real guests: recorded QEMU captures (fixtures/guest/sizing, made by
``python -m kgc_lab.guests record``) and the H200 Firecracker capture.

Each capture is a VM booted at the size the model predicts for a shape under a shipped Kata
configuration. The evaluator must pass it, and must fail it when the VM is off by one vCPU
or by one memory block (the smallest step a Kata hot-plug can make), either way.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kgc.core.hostfs import HostSnapshot
from kgc.core.model import Status
from kgc.layers.sizing.checks import judge_guest
from kgc.layers.sizing.evidence import GuestSize
from kgc.layers.sizing.model import KATA_PRESETS, VmSize, expected_vm
from kgc.layers.sizing.profile import MemTotalTolerance, shape_pod

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "guest"
CAPTURES = sorted((FIXTURES / "sizing").glob("*.bundle.json"))
TOL = MemTotalTolerance()


def load(path: Path) -> tuple[dict[str, Any], GuestSize]:
    doc = json.loads(path.read_text())
    return doc, GuestSize.from_snapshot(HostSnapshot.from_dict(doc["host"]))


def predicted(doc: dict[str, Any]) -> VmSize:
    spec = doc["capture"]["spec"]
    return expected_vm(shape_pod(spec["shape"]), KATA_PRESETS[spec["preset"]])


def test_there_are_captures_of_every_kind() -> None:
    docs = [json.loads(p.read_text()) for p in CAPTURES]
    sizes = {(d["capture"]["vm"]["vcpus"], d["capture"]["vm"]["memory_mib"]) for d in docs}
    assert len(CAPTURES) >= 6
    assert any(m >= 10240 for _, m in sizes), "a large VM"
    assert any(v >= 3 for v, _ in sizes), "a multi-vCPU VM"
    assert any(d["capture"]["vm"]["hotplugged"] for d in docs), "a hot-plugged (Go dynamic) VM"
    modes = {predicted(d).mode for d in docs}
    assert {"Go dynamic", "Go static", "runtime-rs static"} <= modes


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.removesuffix(".bundle.json"))
def test_capture_was_booted_at_the_predicted_size(path: Path) -> None:
    doc, _ = load(path)
    vm = predicted(doc)
    rec = doc["capture"]["vm"]
    assert (rec["vcpus"], rec["memory_mib"]) == (vm.vcpus, vm.memory_mib)
    assert doc["capture"]["predicted"]["vcpus"] == vm.vcpus


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.removesuffix(".bundle.json"))
def test_sizing_evaluator_passes_each_capture(path: Path) -> None:
    doc, g = load(path)
    vm = predicted(doc)
    j = judge_guest(vm, g, TOL)
    assert j.status is Status.PASS, j.reason
    assert j.reason.startswith(f"expected {vm.vcpus} vCPU / {vm.memory_mib} MiB ({vm.mode}, ")
    assert f"found {g.vcpus} / " in j.reason
    assert j.basis.startswith("guest RAM")


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.removesuffix(".bundle.json"))
@pytest.mark.parametrize("delta", [-1, 1])
def test_off_by_one_vcpu_fails(path: Path, delta: int) -> None:
    doc, g = load(path)
    vm = predicted(doc)
    j = judge_guest(replace(vm, vcpus=vm.vcpus + delta), g, TOL)
    assert j.status is Status.FAIL
    assert f"{g.vcpus} vCPUs instead of {vm.vcpus + delta}" in j.reason


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.removesuffix(".bundle.json"))
@pytest.mark.parametrize("blocks", [-1, 1])
def test_off_by_one_memory_block_fails(path: Path, blocks: int) -> None:
    doc, g = load(path)
    vm = predicted(doc)
    assert g.block_mib == 128
    n = vm.memory_mib + blocks * g.block_mib
    j = judge_guest(replace(vm, memory_mib=n, boot_memory_mib=min(vm.boot_memory_mib, n)), g, TOL)
    assert j.status is Status.FAIL, j.reason
    assert f"MiB {'less' if blocks > 0 else 'more'} RAM than predicted" in j.reason


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: p.name.removesuffix(".bundle.json"))
def test_memtotal_only_window_holds_the_real_kernel(path: Path) -> None:
    """Without /proc/zoneinfo, MemTotal must still land in the struct-page window: the real
    Debian kernel's reservations (82-546 MiB here, swiotlb included) are inside it."""
    doc, g = load(path)
    vm = predicted(doc)
    j = judge_guest(vm, replace(g, present_kib=None, managed_kib=None), TOL)
    assert j.status is Status.PASS, j.reason
    assert j.basis.startswith("MemTotal only")


# -- the H200 Firecracker capture (16 vCPUs, a 128 GiB VM, MemTotal only) ----------------------
H200 = VmSize(16, 131072, "Firecracker microVM (recorded)", "the device machine's VM",
              settings="16 vCPU, 131072 MiB", boot_vcpus=16, boot_memory_mib=131072)


def h200() -> GuestSize:
    return load(FIXTURES / "h200-firecracker.bundle.json")[1]


def test_h200_capture_parses() -> None:
    g = h200()
    assert (g.vcpus, g.cpuinfo_processors, g.memtotal_kib) == (16, 16, 131981020)
    assert g.ram_mib is None and g.block_size_bytes is None  # older collector: no zoneinfo


def test_h200_capture_passes_at_16_vcpus_128_gib() -> None:
    j = judge_guest(H200, h200(), TOL)
    assert j.status is Status.PASS, j.reason
    assert "found 16 / 128887 MiB" in j.reason
    assert j.basis.startswith("MemTotal only")


@pytest.mark.parametrize("delta", [-1, 1])
def test_h200_off_by_one_vcpu_fails(delta: int) -> None:
    assert judge_guest(replace(H200, vcpus=16 + delta), h200(), TOL).status is Status.FAIL


@pytest.mark.parametrize("delta_mib", [-2048, -1024, -256, 128, 1024, 2048])
def test_h200_memory_off_fails(delta_mib: int) -> None:
    """x86 uses 1-2 GiB memory blocks above 64 GiB of RAM; with MemTotal alone the window
    resolves 256 MiB below and 128 MiB above (the kernel's fixed part, 136 MiB here, is what
    MemTotal cannot separate from a smaller VM)."""
    n = 131072 + delta_mib
    j = judge_guest(replace(H200, memory_mib=n, boot_memory_mib=n), h200(), TOL)
    assert j.status is Status.FAIL, j.reason
