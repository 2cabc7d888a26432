"""Real in-guest evidence (fixtures/guest, captured on a Firecracker microVM with an H200)
parses into what the GPU-pod and sizing layers need."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO
from kgc.core.hostfs import HostSnapshot
from kgc.evidence.guest import parse_guest, parse_nvidia_smi_xml
from kgc.guest import COMMANDS, script

FIX = REPO / "fixtures" / "guest"


def load(name: str) -> HostSnapshot:
    return HostSnapshot.from_dict(json.loads((FIX / name).read_text())["host"])


def test_h200_firecracker_guest() -> None:
    ev = parse_guest(load("h200-firecracker.bundle.json"))
    assert ev.is_vm and not ev.gvisor
    assert ev.vcpus == 16
    assert ev.memtotal_kib == 131981020  # a 128 GiB VM: 134217728 kB minus kernel reservations
    assert 134217728 - ev.memtotal_kib < 4 * 1024 * 1024
    [gpu] = ev.nvidia_pci
    assert (gpu.bdf, gpu.vendor, gpu.pci_class) == ("0000:00:06.0", "10de", "030200")
    assert ev.smi is not None and ev.smi.driver_version == "580.159.04"
    assert ev.smi.cuda_version == "13.0"
    [smi_gpu] = ev.smi.gpus
    assert smi_gpu.product_name == "NVIDIA H200"
    assert smi_gpu.memory_total_mib == 143771
    assert smi_gpu.bus_id and smi_gpu.bus_id.lower().endswith("00:06.0")
    assert smi_gpu.uuid and smi_gpu.uuid.startswith("GPU-")
    assert ev.cuda_check and ev.cuda_check["matmul_ok"] is True
    assert ev.problems == ()


def test_cpu_only_guest_has_no_gpu_and_says_why() -> None:
    ev = parse_guest(load("cpu-only-firecracker.bundle.json"))
    assert ev.nvidia_pci == () and ev.smi is None and ev.smi_rc == 127
    assert any("nvidia-smi -q -x exited 127" in p for p in ev.problems)
    assert ev.vcpus == 2


def test_raw_capture_reparses_to_the_bundle() -> None:
    """The raw output kept beside the bundle parses to the very same snapshot."""
    from kgc.core.hostfs import parse_output

    raw = (FIX / "h200-firecracker.raw.txt").read_text()
    boundary = raw.split(" ", 1)[0]
    assert parse_output(raw, boundary) == load("h200-firecracker.bundle.json")


def test_collector_script_covers_the_evidence_it_promises() -> None:
    text, boundary = script()
    assert boundary in text
    names = {n for n, _ in COMMANDS}
    assert {"nvidia_smi_xml", "nproc", "cuda_check"} <= names


@given(st.text(max_size=500))
def test_nvidia_smi_xml_parser_is_total(text: str) -> None:
    parse_nvidia_smi_xml("<nvidia_smi_log>" + text)
    parse_nvidia_smi_xml(text)
