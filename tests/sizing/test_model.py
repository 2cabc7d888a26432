"""The sizing model against Kata's own tests and source, vector by vector.

Every vector names the file (and test or function) of kata-containers/kata-containers it was
taken from (main branch as fetched for this work, commit 7c6ba40c, Aug 2026). Go vectors
exercise the same function names the model mirrors (``go_calculate_sandbox_sizing`` =
``oci.CalculateSandboxSizing``, ...); the pod-level vectors run whole pod manifests through
the kubelet/containerd translation and Kata's rules.
"""

from __future__ import annotations

import math

import pytest

from kgc.layers.sizing.model import (
    ANN_CPU_PERIOD,
    ANN_CPU_QUOTA,
    ANN_CPU_SHARES,
    ANN_MEMORY,
    KATA_PRESETS,
    MIB,
    HostCaps,
    KataSizing,
    OciResources,
    PodShape,
    SizingInputError,
    cpu_millis,
    expected_vm,
    f32,
    go_calc_hotplug_mem_mib,
    go_calculate_container_sizing,
    go_calculate_cpus_f,
    go_calculate_sandbox_sizing,
    go_sandbox_cpus,
    go_sandbox_memory,
    memory_bytes,
    milli_cpu_to_quota,
    parse_quantity,
    pod_limits,
    rs_convert_memory_to_mb,
    rs_initial_size,
    rs_setup_config,
    sandbox_annotations,
)

GO_QEMU = KATA_PRESETS["qemu"]
GO_NV = KATA_PRESETS["qemu-nvidia-gpu"]
RS_QEMU = KATA_PRESETS["qemu-runtime-rs"]
RS_NV = KATA_PRESETS["qemu-nvidia-gpu-runtime-rs"]


def pod(*containers: dict, init: tuple[dict, ...] = (), annotations: dict | None = None,
        pod_resources: dict | None = None) -> dict:
    spec: dict = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    if pod_resources:
        spec["resources"] = pod_resources
    meta: dict = {"name": "p", "namespace": "ns"}
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec}


def ctr(name: str = "c", cpu: str | None = None, mem: str | None = None, *,
        req_cpu: str | None = None, req_mem: str | None = None, restart: str | None = None,
        **extra: str) -> dict:
    lim = {k: v for k, v in (("cpu", cpu), ("memory", mem)) if v is not None}
    lim.update(extra)
    req = {k: v for k, v in (("cpu", req_cpu), ("memory", req_mem)) if v is not None}
    c: dict = {"name": name, "resources": {}}
    if lim:
        c["resources"]["limits"] = lim
    if req:
        c["resources"]["requests"] = req
    if restart:
        c["restartPolicy"] = restart
    return c


# -- the reference's worked example ------------------------------------------------------------
@pytest.mark.parametrize(("preset", "vcpus", "mib"), [
    ("qemu", 3, 4096),  # Go dynamic: ceil(1 + 2), 2048 + 2048
    ("qemu-nvidia-gpu", 3, 10240),  # Go static: ceil(1 + 2), 8192 + 2048
    ("qemu-runtime-rs", 3, 2080),  # runtime-rs: ceil(0.2 + 2), 32 + 2048
    ("qemu-nvidia-gpu-runtime-rs", 3, 2560),  # runtime-rs NVIDIA: ceil(0.5 + 2), 512 + 2048
])
def test_worked_example_cpu2_mem2gi(preset: str, vcpus: int, mib: int) -> None:
    """shared/reference/kata-sizing-gpu.md, checked against src/runtime/Makefile (DEFVCPUS=1,
    DEFMEMSZ=2048, DEFAULTMEMORY_NV=8192, DEFSTATICRESOURCEMGMT_NV=true) and
    src/runtime-rs/Makefile (DEFOVERHEADVCPUS_QEMU=0.2, DEFOVERHEADMEMSZ_QEMU=32,
    DEFOVERHEADVCPUS_NV=0.5, DEFOVERHEADMEMSZ_NV=512, DEFSTATICRESOURCEMGMT_QEMU=true)."""
    vm = expected_vm(pod(ctr(cpu="2", mem="2Gi")), KATA_PRESETS[preset])
    assert (vm.vcpus, vm.memory_mib) == (vcpus, mib)
    assert vm.refusal == ""


def test_reason_text_names_mode_and_defaults() -> None:
    vm = expected_vm(pod(ctr(cpu="2", mem="2Gi")), GO_NV)
    assert vm.describe() == "3 vCPU / 10240 MiB (Go static, default_vcpus=1, default_memory=8192)"


# -- Go runtime: src/runtime/pkg/oci/utils_test.go ---------------------------------------------
def _ann(memory: str, quota: str, period: str, shares: str | None = None) -> dict[str, str]:
    a = {ANN_CPU_PERIOD: period, ANN_CPU_QUOTA: quota, ANN_MEMORY: memory}
    if shares is not None:
        a[ANN_CPU_SHARES] = shares
    return a


@pytest.mark.parametrize(("annotations", "cpu", "mem"), [
    (None, 0, 0),
    ({}, 0, 0),
    (_ann("1048576", "200", "100"), 2, 1),
    (_ann("1024", "200", "1"), 200, 0),
    (_ann("foobar", "200", "spaghetti"), 0, 0),
    (_ann("-1048576", "-100", "1"), 0, 0),
    (_ann("-1", "100", "1"), 100, 0),
    (_ann("4294967296", "400", "100"), 4, 4096),
    (_ann("1048576", "-1", "100", "2048"), 2, 1),  # cpuManagerPolicy=static: from shares
    (_ann("0", "-1", "100", "1536"), 2, 0),  # shares rounded up
    (_ann("0", "0", "100", "2"), 0, 0),  # BestEffort floor shares contribute nothing
    (_ann("0", "200", "100", "8192"), 2, 0),  # an explicit quota wins over shares
    (_ann("0", "-1", "100", "0"), 0, 0),
])
def test_go_calculate_sandbox_sizing(annotations: dict | None, cpu: float, mem: int) -> None:
    """src/runtime/pkg/oci/utils_test.go: TestCalculateSandboxSizing (every case)."""
    assert go_calculate_sandbox_sizing(annotations) == (cpu, mem)


def test_go_calculate_sandbox_sizing_comment_example() -> None:
    """src/runtime/pkg/oci/utils.go: CalculateSandboxSizing's comment — quota 220000 /
    period 100000 / memory 1048576 -> "1 (MB) for memory, and 3 for CPU (2200 mCPU rounded
    up to 3)"."""
    cpu, mem = go_calculate_sandbox_sizing(_ann("1048576", "220000", "100000"))
    assert (math.ceil(cpu), mem) == (3, 1)


@pytest.mark.parametrize(("res", "cpu", "mem"), [
    (None, 0, 0),
    (OciResources(), 0, 0),
    (OciResources(quota=200, period=100, memory_limit=1024 * 1024), 2, 1),
    (OciResources(quota=200, period=1, memory_limit=1024 ** 3), 200, 1024),
    (OciResources(quota=200, period=1, memory_limit=-(1024 ** 3)), 200, 0),
    (OciResources(quota=10, period=0, memory_limit=0), 0, 0),
    (OciResources(quota=10, period=1, memory_limit=-1), 10, 0),
])
def test_go_calculate_container_sizing(res: OciResources | None, cpu: float, mem: int) -> None:
    """src/runtime/pkg/oci/utils_test.go: TestCalculateContainerSizing (every case)."""
    assert go_calculate_container_sizing(res) == (cpu, mem)


@pytest.mark.parametrize(("quota", "period", "want"), [(1, 1, 1.0), (1, 0, 0.0), (-1, 1, 0.0),
                                                       (500, 1000, 0.5)])
def test_go_calculate_cpus_f(quota: int, period: int, want: float) -> None:
    """src/runtime/virtcontainers/utils/utils_test.go: TestCalculateCPUsF."""
    assert go_calculate_cpus_f(quota, period) == f32(want)


# -- Go runtime: src/runtime/virtcontainers/sandbox_test.go ------------------------------------
_UNC = OciResources()
_CON = OciResources(quota=4000, period=1000)
_CPUSET01 = OciResources(cpuset_count=2)
_CPUSET2 = OciResources(cpuset_count=1)
_CON_CPUSET07 = OciResources(quota=4000, period=1000, cpuset_count=8)


@pytest.mark.parametrize(("containers", "want"), [
    ([_UNC], 0),
    ([_UNC, _UNC], 0),
    ([_CON], 4),
    ([_CON, _CON], 8),
    ([_UNC, _CON, _CON], 8),
    ([_CON, _CON, _CON], 12),
    ([_UNC, _UNC, _CPUSET01], 2),
    ([_CPUSET01, _CPUSET2], 3),
    ([_CON_CPUSET07], 4),
])
def test_go_sandbox_cpus(containers: list[OciResources], want: float) -> None:
    """src/runtime/virtcontainers/sandbox_test.go: TestCalculateSandboxCPUs (every case)."""
    assert go_sandbox_cpus(containers) == want


@pytest.mark.parametrize(("containers", "want"), [
    ([_UNC], 0), ([_UNC, _UNC], 0), ([OciResources(memory_limit=4000)], 4000),
    ([OciResources(memory_limit=4000)] * 2, 8000),
    ([_UNC, OciResources(memory_limit=4000), OciResources(memory_limit=4000)], 8000),
    ([OciResources(memory_limit=4000)] * 3, 12000),
])
def test_go_sandbox_memory(containers: list[OciResources], want: int) -> None:
    """src/runtime/virtcontainers/sandbox_test.go: TestCalculateSandboxMem (every case)."""
    assert go_sandbox_memory(containers) == want


@pytest.mark.parametrize(("mem", "block", "want"), [(0, 128, 0), (1, 128, 128), (128, 128, 128),
                                                    (129, 128, 256), (500, 0, 500)])
def test_go_hotplug_rounds_to_memory_blocks(mem: int, block: int, want: int) -> None:
    """src/runtime/virtcontainers/qemu.go: calcHotplugMemMiBSize (ceil to the block size; a
    0 block size leaves the value as is)."""
    assert go_calc_hotplug_mem_mib(mem, block) == want


# -- runtime-rs: src/runtime-rs/crates/resource/src/cpu_mem/initial_size.rs --------------------
@pytest.mark.parametrize(("period", "quota", "memory", "vcpu_ceil", "mem_mb"), [
    (None, None, None, 0, 0),  # "no resource limit"
    (100_000, 220_000, 512 * MIB, 3, 512),  # "normal resource limit"
    (None, None, 513 * MIB, 0, 514),  # "Odd memory in resource limits"
])
def test_rs_initial_size(period: int | None, quota: int | None, memory: int | None,
                         vcpu_ceil: int, mem_mb: int) -> None:
    """initial_size.rs: get_test_data (test_initial_size_sandbox / _container)."""
    vcpu, mb = rs_initial_size(period, quota, memory)
    assert (math.ceil(vcpu), mb) == (vcpu_ceil, mem_mb)


def _rs(dv: float, ov: float, maxv: int, dm: int, om: int, maxm: int, static: bool,
        vcpu: float, mem: int):  # type: ignore[no-untyped-def]
    del maxv  # the tests' default_maxvcpus only matters through ceil(default_vcpus)
    return rs_setup_config(default_vcpus=dv, overhead_vcpus=ov, default_memory=dm,
                           overhead_memory=om, default_maxmemory=maxm, vcpu=f32(vcpu),
                           mem_mb=mem, static=static)


def test_rs_setup_config_tests() -> None:
    """initial_size.rs: test_setup_config_* (every named test)."""
    s = _rs(1.0, 0.5, 4, 256, 128, 4096, True, 1.2, 512)  # static_applies_vcpu_and_memory
    assert (s.vcpus_f, s.memory) == (f32(1.7), 640)
    s = _rs(1.0, 0.5, 4, 256, 128, 4096, False, 1.2, 512)  # non_static_does_not_apply
    assert (s.vcpus_f, s.memory) == (1.0, 256)
    s = _rs(1.0, 1.0, 2, 256, 128, 4096, True, 2.5, 0)  # clamps_maxvcpus
    assert (s.vcpus_f, s.maxvcpus) == (3.5, 4)
    s = _rs(1.0, 0.5, 8, 256, 128, 4096, True, 1.2, 0)  # reduces_maxvcpus_to_static_total
    assert (s.vcpus_f, s.maxvcpus) == (f32(1.7), 2)
    s = _rs(1.0, 0.5, 4, 256, 128, 300, True, 0.0, 512)  # clamps_maxmemory
    assert (s.memory, s.maxmemory) == (640, 640)
    s = _rs(2.0, 0.5, 8, 512, 128, 4096, True, 0.0, 0)  # static_without_limits_uses_toml_defaults
    assert (s.vcpus_f, s.memory) == (2.0, 512)
    with pytest.raises(SizingInputError, match="0 MiB"):  # static_errors_on_zero_memory
        _rs(1.0, 0.5, 8, 1024, 0, 4096, True, 1.0, 0)


@pytest.mark.parametrize(("dv", "ov", "dm", "om", "vcpu", "mem", "want_v", "want_m"), [
    (3.0, 0.75, 1024, 256, 1.25, 1024, 2.0, 1280),  # both_limits
    (3.0, 0.5, 1024, 128, 1.5, 0, 2.0, 128),  # cpu_only_limit
    (3.0, 0.5, 1024, 128, 0.0, 512, 1.0, 640),  # memory_only_limit
    (3.0, 0.0, 1024, 0, 1.25, 1024, 1.25, 1024),  # both_limits_zero_overhead
    (3.0, 0.0, 1024, 0, 0.0, 512, 1.0, 512),  # memory_only_zero_overhead
])
def test_rs_setup_config_requested_vs_defaults(dv: float, ov: float, dm: int, om: int,
                                               vcpu: float, mem: int, want_v: float,
                                               want_m: int) -> None:
    """initial_size.rs: test_setup_config_static_requested_vs_defaults (every rstest case)."""
    s = _rs(dv, ov, 8, dm, om, 4096, True, vcpu, mem)
    assert (s.vcpus_f, s.memory) == (f32(want_v), want_m)


@pytest.mark.parametrize(("mib", "want"), [(512, 512), (513, 514), (0, 0)])
def test_rs_convert_memory_to_mb(mib: int, want: int) -> None:
    """initial_size.rs: convert_memory_to_mb (odd MiB rounded up to even for hugepages)."""
    assert rs_convert_memory_to_mb(mib * MIB) == want
    assert rs_convert_memory_to_mb(-1) == 0


@pytest.mark.parametrize(("dv", "maxv", "host", "want"), [
    (0.0, 0, 8, 1.0),  # "all with default values": default_vcpus -> DEFAULT_GUEST_VCPUS
    (9999999.0, 9999999, 8, 8.0),  # "all with big values": host cores
    (-1.0, 1, 8, 1.0),  # "default_vcpus lager than default_maxvcpus": clamped to maxvcpus
    (0.0, 2, 8, 1.0),  # "overhead_vcpus explicitly set keeps value"
])
def test_rs_cpu_adjust_config(dv: float, maxv: int, host: int, want: float) -> None:
    """src/libs/kata-types/src/config/hypervisor/mod.rs: test_cpu_info_adjust_config: the
    default VM a limit-less pod gets under runtime-rs."""
    k = KataSizing("runtime-rs", True, default_vcpus=dv, default_maxvcpus=maxv,
                   default_memory=2048, overhead_vcpus=0.5, overhead_memory=128)
    vm = expected_vm(pod(ctr()), k, HostCaps(cpus=host))
    assert vm.vcpus == math.ceil(want)


# -- Kata's Kubernetes integration tests (tests/integration/kubernetes) ------------------------
@pytest.mark.parametrize(("default_vcpus", "cpu", "want"), [
    ("0", None, 1),  # vcpus-less-than-one-with-no-limits
    ("0.75", "0.25", 1),  # vcpus-less-than-one-with-limits
    ("0.75", "1.2", 2),  # vcpus-more-than-one-with-limits
])
def test_k8s_sandbox_vcpus_allocation(default_vcpus: str, cpu: str | None, want: int) -> None:
    """k8s-sandbox-vcpus-allocation.bats with runtimeclass_workloads/
    pod-sandbox-vcpus-allocation.yaml: `nproc --all` = 1, 1, 2 (Go QEMU, dynamic; the CI
    config enables the default_vcpus annotation)."""
    k = KataSizing("go", False, default_vcpus=1, default_memory=2048,
                   enable_annotations=("default_vcpus",))
    p = pod(ctr(cpu=cpu, mem="128Mi"),
            annotations={"io.katacontainers.config.hypervisor.default_vcpus": default_vcpus})
    assert expected_vm(p, k, HostCaps(cpus=8)).vcpus == want


def test_k8s_number_cpus_two_500m_containers() -> None:
    """k8s-number-cpus.bats with pod-number-cpu.yaml: two containers of 500m/128Mi -> exactly
    2 processors in /proc/cpuinfo."""
    vm = expected_vm(pod(ctr("c1", "500m", "128Mi"), ctr("c2", "500m", "128Mi")), GO_QEMU)
    assert vm.vcpus == 2


def test_k8s_cpu_ns_one_cpu_limit() -> None:
    """k8s-cpu-ns.bats with pod-cpu.yaml: limits cpu=1 (request 500m) -> total_cpus=2."""
    vm = expected_vm(pod(ctr("c", "1", "128Mi", req_cpu="500m", req_mem="64Mi")), GO_QEMU)
    assert vm.vcpus == 2


def test_cri_memory_update_sizes() -> None:
    """tests/integration/cri-containerd/integration-tests.sh: DoContainerMemoryUpdate — the
    Go QEMU VM is 2 GiB before and 4 GiB after a 2 GiB memory limit."""
    assert expected_vm(pod(ctr()), GO_QEMU).memory_mib == 2048
    assert expected_vm(pod(ctr(mem="2Gi")), GO_QEMU).memory_mib == 4096


def test_k8s_memory_request_above_limit_is_refused() -> None:
    """k8s-memory.bats with pod-memory-limit.yaml: a limit below the 700Mi request is
    rejected (by the API server, before Kata)."""
    with pytest.raises(SizingInputError, match="exceeds limits.memory"):
        expected_vm(pod(ctr(mem="50Mi", req_mem="700Mi")), GO_QEMU)


# -- init and sidecar containers ---------------------------------------------------------------
def test_init_container_go_static_uses_pod_effective_limits() -> None:
    """Static sizing reads containerd's sandbox annotations, i.e. the kubelet's PodLimits:
    max(largest init container, Σ app) (pkg/kubelet/kuberuntime/kuberuntime_sandbox_linux.go
    calculateSandboxResources; KEP-753)."""
    p = pod(ctr("app", "1", "1Gi"), init=(ctr("init", "4", "4Gi"),))
    vm = expected_vm(p, GO_NV)
    assert (vm.vcpus, vm.memory_mib) == (5, 8192 + 4096)


def test_init_container_go_dynamic_cpu_drops_memory_stays() -> None:
    """Dynamic sizing counts running containers only (sandbox.go calculateSandboxCPUs skips
    stopped ones: the init container's vCPUs are unplugged) but memory is never hot-removed
    (qemu.go hotplugMemory: "hot-remove VM memory not supported")."""
    p = pod(ctr("app", "1", "1Gi"), init=(ctr("init", "4", "4Gi"),))
    vm = expected_vm(p, GO_QEMU)
    assert (vm.vcpus, vm.memory_mib) == (2, 2048 + 4096)


def test_sidecar_counts_in_both_modes() -> None:
    p = pod(ctr("app", "1", "1Gi"), init=(ctr("side", "500m", "512Mi", restart="Always"),))
    assert pod_limits(PodShape.from_manifest(p)) == (1500, 1536 * MIB)
    assert (expected_vm(p, GO_NV).vcpus, expected_vm(p, GO_NV).memory_mib) == (3, 8192 + 1536)
    assert (expected_vm(p, GO_QEMU).vcpus, expected_vm(p, GO_QEMU).memory_mib) == (3, 3584)


def test_pod_level_resources_override_the_container_sum() -> None:
    p = pod(ctr("a", "1", "1Gi"), pod_resources={"limits": {"cpu": "3", "memory": "6Gi"}})
    vm = expected_vm(p, GO_NV)
    assert (vm.vcpus, vm.memory_mib) == (4, 8192 + 6144)


def test_dynamic_memory_rounds_to_the_guest_block() -> None:
    vm = expected_vm(pod(ctr(mem="500Mi")), GO_QEMU)
    assert vm.memory_mib == 2048 + 512  # 500 MiB hot-plugged as four 128 MiB blocks
    assert expected_vm(pod(ctr(mem="500Mi")), GO_NV).memory_mib == 8192 + 500


def test_runtime_rs_cpu_only_pod_gets_overhead_memory_only() -> None:
    """initial_size.rs rstest cpu_only_limit: a CPU limit alone replaces default_memory by
    overhead_memory + 0 — a 32 MiB VM under the shipped QEMU config."""
    vm = expected_vm(pod(ctr(cpu="2")), RS_QEMU)
    assert (vm.vcpus, vm.memory_mib) == (3, 32)
    assert any("only overhead_memory" in n for n in vm.notes)


# -- kubelet quantities and quota --------------------------------------------------------------
@pytest.mark.parametrize(("text", "millis"), [("2", 2000), ("500m", 500), ("250m", 250),
                                              ("1.2", 1200), ("0.1m", 1), ("1e3", 1_000_000),
                                              ("1E-3", 1), ("100u", 1)])
def test_cpu_millicores_round_up(text: str, millis: int) -> None:
    """apimachinery Quantity.MilliValue rounds up: "0.1m" is 1 millicore."""
    assert cpu_millis(text, "cpu") == millis


@pytest.mark.parametrize(("text", "nbytes"), [("2Gi", 2 << 30), ("2.5Gi", 2684354560),
                                              ("128Mi", 128 << 20), ("1e3", 1000),
                                              ("0.1m", 1), ("1k", 1000), ("8E", 8 * 10 ** 18)])
def test_memory_bytes_exact(text: str, nbytes: int) -> None:
    assert memory_bytes(text, "memory") == nbytes


@pytest.mark.parametrize("text", ["1K", " 1", "1 Gi", "NaN", "inf", "1_000", "\u0663", "1Gb",
                                  "", "1e", "Gi", "1.2.3", "1m5", "-1", "1e1.5", "0.5Ki.",
                                  "16E"])
def test_invalid_quantities_are_refused(text: str) -> None:
    """What the API server rejects (or a memory that overflows int64): the Python client's
    parse_quantity alone accepts several of these ("1K", " 1", "NaN", "1_000", "\u0663")."""
    with pytest.raises(SizingInputError):
        memory_bytes(text, "memory")


def test_quota_floor_and_annotations() -> None:
    """kubelet milliCPUToQuota: 1m -> quota 100, floored to 1000 (minQuotaPeriod)."""
    assert milli_cpu_to_quota(1) == 1000
    assert milli_cpu_to_quota(250) == 25000
    a = sandbox_annotations(PodShape.from_manifest(pod(ctr(cpu="250m", mem="256Mi"))))
    assert a == {ANN_CPU_PERIOD: "100000", ANN_CPU_QUOTA: "25000", ANN_CPU_SHARES: "256",
                 ANN_MEMORY: str(256 * MIB)}


# -- absurd configurations and bad input: a reason, never a crash ------------------------------
def test_default_memory_zero_go_falls_back_to_2048() -> None:
    """katautils/config.go defaultMemSz: below vc.MinHypervisorMemory (256) -> 2048."""
    vm = expected_vm(pod(ctr(cpu="1", mem="1Gi")), KataSizing("go", True, default_memory=0))
    assert vm.memory_mib == 2048 + 1024
    assert any("below Kata's 256 MiB minimum" in n for n in vm.notes)


def test_default_memory_below_rs_minimum_is_a_refusal() -> None:
    vm = expected_vm(pod(ctr()), KataSizing("runtime-rs", True, default_memory=32))
    assert "64 MiB" in vm.refusal


def test_maxvcpus_below_default_go_dynamic_is_a_refusal() -> None:
    vm = expected_vm(pod(ctr(cpu="1")), KataSizing("go", False, default_vcpus=4,
                                                   default_maxvcpus=2), HostCaps(cpus=16))
    assert "maxcpus=2" in vm.refusal


def test_maxvcpus_caps_dynamic_hotplug() -> None:
    vm = expected_vm(pod(ctr(cpu="8")), KataSizing("go", False, default_maxvcpus=4),
                     HostCaps(cpus=16))
    assert vm.vcpus == 4


def test_static_memory_above_maxmemory_is_a_refusal() -> None:
    vm = expected_vm(pod(ctr(mem="8Gi")), KataSizing("go", True, default_maxmemory=4096))
    assert "default_maxmemory" in vm.refusal


def test_huge_values_give_a_reason() -> None:
    with pytest.raises(SizingInputError, match="exceeds what Kubernetes can represent"):
        expected_vm(pod(ctr(mem="100Ei")), GO_QEMU)
    vm = expected_vm(pod(ctr(cpu="100000")), GO_NV)
    assert "240" in vm.refusal


@pytest.mark.parametrize("manifest", [
    None, [], {"metadata": {}}, {"metadata": {"name": "x"}, "spec": {"containers": []}},
    {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c",
                                                          "resources": {"limits": {"cpu": 2}}}]}},
    {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "resources": {
        "limits": {"memory": "2.5Gb"}}}]}},
    {"metadata": {"name": "x"}, "spec": {"containers": "c"}},
    {"metadata": {"name": "x"}, "spec": {"containers": [{"resources": {}}]}},
])
def test_malformed_pods_raise_sizing_input_error(manifest: object) -> None:
    try:
        vm = expected_vm(manifest, GO_QEMU)  # type: ignore[arg-type]
    except SizingInputError as exc:
        assert str(exc)
    else:  # an integer CPU limit is a valid quantity in JSON
        assert vm.vcpus == 3


def test_unsupported_modes_say_so() -> None:
    with pytest.raises(SizingInputError, match="runtime-rs with static_sandbox_resource_mgmt"):
        expected_vm(pod(ctr()), KataSizing("runtime-rs", False))
    with pytest.raises(SizingInputError, match="not modelled"):
        expected_vm(pod(ctr()), KataSizing("go", False, hypervisor="clh"))


def test_annotation_not_enabled_is_a_refusal() -> None:
    p = pod(ctr(), annotations={"io.katacontainers.config.hypervisor.default_memory": "4096"})
    assert "not enabled" in expected_vm(p, GO_QEMU).refusal
    k = KataSizing("go", False, enable_annotations=("default_memory",))
    assert expected_vm(p, k).memory_mib == 4096


def test_negative_default_vcpus_needs_the_host() -> None:
    with pytest.raises(SizingInputError, match="CPU count is unknown"):
        expected_vm(pod(ctr()), KataSizing("go", True, default_vcpus=-1))
    assert expected_vm(pod(ctr()), KataSizing("go", True, default_vcpus=-1),
                       HostCaps(cpus=6)).vcpus == 6


def test_parse_quantity_rejects_non_strings() -> None:
    for v in (None, 1.5, True, [], {}):
        with pytest.raises(SizingInputError):
            parse_quantity(v, "x")
