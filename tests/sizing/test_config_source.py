"""Where the Kata configuration comes from: the node (runtime layer evidence), the profile, or
measured by a limit-less probe pod — in that order, each named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from kgc.core.hostfs import HostSnapshot
from kgc.layers.runtime.collect import parse as parse_runtime
from kgc.layers.sizing.evidence import (
    SOURCE_MEASURED,
    SOURCE_NODE,
    SOURCE_NONE,
    SOURCE_PROFILE,
    GuestSize,
    ShapeObservation,
    kata_config_from_runtime,
    kata_sizing_from_toml,
    resolve_config,
)
from kgc.layers.sizing.model import KATA_PRESETS, SizingInputError, expected_vm
from kgc.layers.sizing.profile import KataSizingProfile, SizingProfile, shape_pod

NV_DIR = "/opt/kata/share/defaults/kata-containers/runtimes/qemu-nvidia-gpu"
NV_PATH = f"{NV_DIR}/configuration-qemu-nvidia-gpu.toml"
CONTAINERD = f"""version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata-qemu-nvidia-gpu]
  runtime_type = "io.containerd.kata.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata-qemu-nvidia-gpu.options]
  ConfigPath = "{NV_PATH}"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata-qemu]
  runtime_type = "io.containerd.kata.v2"
"""
# the sizing keys of src/runtime/config/configuration-qemu-nvidia-gpu.toml.in with the
# Makefile's values (DEFAULTVCPUS_NV=1, DEFAULTMEMORY_NV=8192, DEFSTATICRESOURCEMGMT_NV=true)
NV_TOML = """[hypervisor.qemu]
path = "/opt/kata/bin/qemu-system-x86_64"
default_vcpus = 1
default_maxvcpus = 0
default_memory = 8192
memory_slots = 10
default_maxmemory = 0
enable_annotations = ["enable_iommu", "virtio_fs_extra_args", "kernel_params"]

[runtime]
static_sandbox_resource_mgmt = true
sandbox_cgroup_only = true
"""
GO_QEMU_TOML = """[hypervisor.qemu]
default_vcpus = 1
default_memory = 2048
[runtime]
static_sandbox_resource_mgmt = false
"""
# src/runtime-rs/config/configuration-qemu-runtime-rs.toml.in, [runtime] name/hypervisor_name
RS_TOML = """[hypervisor.qemu]
default_vcpus = 1
overhead_vcpus = 0.2
default_memory = 2048
overhead_memory = 32
[runtime]
name = "virt_container"
hypervisor_name = "qemu"
static_sandbox_resource_mgmt = true
"""


def runtime_evidence(files: dict[str, str]):  # type: ignore[no-untyped-def]
    return parse_runtime(HostSnapshot(files={"/etc/containerd/config.toml": CONTAINERD, **files}))


def test_node_source_uses_the_handlers_config_path() -> None:
    ev = runtime_evidence({NV_PATH: NV_TOML})
    src = kata_config_from_runtime(ev, "kata-qemu-nvidia-gpu", "kata-qemu-nvidia-gpu")
    assert src.kind == SOURCE_NODE and src.usable, src
    assert NV_PATH in src.detail and "ConfigPath" in src.detail
    assert src.sizing is not None and src.sizing.mode == "Go static"
    vm = expected_vm(shape_pod("one-container"), src.sizing)
    assert (vm.vcpus, vm.memory_mib) == (3, 10240)


def test_node_source_merges_config_d_dropins() -> None:
    ev = runtime_evidence({NV_PATH: NV_TOML,
                           f"{NV_DIR}/config.d/50-memory.toml": "[hypervisor.qemu]\n"
                                                                "default_memory = 16384\n"})
    src = kata_config_from_runtime(ev, "kata-qemu-nvidia-gpu", "kata-qemu-nvidia-gpu")
    assert src.sizing is not None and src.sizing.default_memory == 16384
    assert "1 config.d drop-in" in src.detail


def test_node_source_standard_location_for_a_handler_without_config_path() -> None:
    ev = runtime_evidence({"/etc/kata-containers/configuration.toml": GO_QEMU_TOML})
    src = kata_config_from_runtime(ev, "kata-qemu", "kata")
    assert src.kind == SOURCE_NODE and src.sizing is not None
    assert src.sizing.mode == "Go dynamic"
    assert "/etc/kata-containers/configuration.toml (standard location)" in src.detail


def test_node_source_broken_toml_is_reported_not_skipped() -> None:
    ev = runtime_evidence({NV_PATH: "[hypervisor.qemu\ndefault_memory = 1"})
    src = kata_config_from_runtime(ev, "kata-qemu-nvidia-gpu", "gpu")
    assert src.kind == SOURCE_NODE and not src.usable and "invalid TOML" in src.error
    assert resolve_config("gpu", node=src).error == src.error


def test_node_source_wrong_type_names_the_key() -> None:
    ev = runtime_evidence({NV_PATH: NV_TOML.replace("default_memory = 8192",
                                                    'default_memory = "8192"')})
    src = kata_config_from_runtime(ev, "kata-qemu-nvidia-gpu", "gpu")
    assert "default_memory = '8192': Kata expects an integer" in src.error


def test_missing_handler_falls_through_to_the_profile_then_the_probe(tmp_path: Path) -> None:
    ev = runtime_evidence({})
    node = kata_config_from_runtime(ev, "kata-clh", "kata-clh")
    assert node.kind == SOURCE_NONE and "no runtime handler 'kata-clh'" in node.tried[0]
    entry = KataSizingProfile(preset="qemu-nvidia-gpu", default_memory=16384)
    src = resolve_config("kata-clh", node=node, profile_entry=entry)
    assert src.kind == SOURCE_PROFILE and src.detail == "profile cluster.sizing.kata.kata-clh"
    assert src.sizing is not None and (src.sizing.static, src.sizing.default_memory) == (True,
                                                                                        16384)
    assert "no runtime handler" in src.tried[0]
    # no profile entry: measured from the probe capture
    probe_doc = json.loads((Path(__file__).resolve().parents[2] / "fixtures/guest/sizing/"
                            "go-qemu-probe-1x2048.bundle.json").read_text())
    guest = GuestSize.from_snapshot(HostSnapshot.from_dict(probe_doc["host"]))
    probe = ShapeObservation("probe", shape_pod("probe"), "kata-clh", node="n1", guest=guest)
    m = resolve_config("kata-clh", node=node, probe=probe)
    assert m.kind == SOURCE_MEASURED and m.sizing is not None
    assert (m.sizing.default_vcpus, m.sizing.default_memory) == (1.0, 2048)
    assert "probe pod kgc-sizing-probe on n1: default VM 1 vCPU / 2048 MiB" in m.detail
    assert [t.split(":")[0] for t in m.tried] == ["node", "profile"]
    nothing = resolve_config("kata-clh", node=node)
    assert nothing.kind == SOURCE_NONE and not nothing.usable
    assert [t.split(":")[0] for t in nothing.tried] == ["node", "profile", "measured"]


def test_probe_without_zoneinfo_cannot_measure() -> None:
    probe = ShapeObservation("probe", shape_pod("probe"), "k",
                             guest=GuestSize(nproc_all=1, memtotal_kib=2012380))
    src = resolve_config("k", probe=probe)
    assert src.kind == SOURCE_NONE and "no /proc/zoneinfo" in src.tried[-1]


@pytest.mark.parametrize(("toml", "mode", "size"), [
    (NV_TOML, "Go static", (3, 10240)),
    (GO_QEMU_TOML, "Go dynamic", (3, 4096)),
    (RS_TOML, "runtime-rs static", (3, 2080)),
])
def test_toml_adapter_modes(toml: str, mode: str, size: tuple[int, int]) -> None:
    import tomllib

    k = kata_sizing_from_toml(tomllib.loads(toml), "/x.toml")
    assert k.mode == mode
    vm = expected_vm(shape_pod("one-container"), k)
    assert (vm.vcpus, vm.memory_mib) == size


def test_toml_adapter_refuses_ambiguous_hypervisors() -> None:
    with pytest.raises(SizingInputError, match="several hypervisor sections"):
        kata_sizing_from_toml({"hypervisor": {"qemu": {}, "clh": {}}}, "/x.toml")
    with pytest.raises(SizingInputError, match="no \\[hypervisor"):
        kata_sizing_from_toml({}, "/x.toml")


def test_profile_section_is_strict_and_presets_fill_in() -> None:
    sp = SizingProfile.model_validate(yaml.safe_load("""
kata:
  kata-qemu-nvidia-gpu: {preset: qemu-nvidia-gpu}
  kata-rs: {preset: qemu-runtime-rs, overhead_memory: 64}
memtotal: {kernel_fixed_reserve_max_mib: 300}
"""))
    assert sp.kata["kata-qemu-nvidia-gpu"].to_sizing("p").default_memory == 8192
    assert sp.kata["kata-rs"].to_sizing("p").overhead_memory == 64
    assert [s.name for s in sp.shapes] == ["one-container", "two-containers", "memory-only",
                                           "fractional-cpu", "gpu"]
    for bad in ({"kata": {"x": {"default_memroy": 1}}}, {"shapes": [{"name": "A_b",
                                                                     "containers": []}]},
                {"memtotal": {"firmware_reserved_max_mib": -1}}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            SizingProfile.model_validate(bad)


def test_presets_match_the_shipped_configs() -> None:
    nv = KATA_PRESETS["qemu-nvidia-gpu"]
    assert nv.static and nv.runtime == "go"
