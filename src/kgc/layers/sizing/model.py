"""How Kubernetes pod limits become a Kata microVM: a pure model of the VM size.

``expected_vm(pod, kata) -> VmSize`` answers "how many vCPUs and how much RAM will Kata give
this pod's VM", for the three ways Kata sizes a VM:

* **Go runtime, dynamic** (``static_sandbox_resource_mgmt = false``, the Go QEMU default on
  x86_64): the VM boots with ``default_vcpus`` / ``default_memory`` and every container
  create hot-plugs the difference (``virtcontainers/sandbox.go: updateResources``). vCPUs
  follow the *running* containers (stopped init containers drop out, vCPUs are hot-unplugged);
  memory is hot-plugged in guest memory-block multiples and never given back
  (``qemu.go: ResizeMemory``, ``calcHotplugMemMiBSize``).
* **Go runtime, static** (``static_sandbox_resource_mgmt = true``, the NVIDIA configs'
  default): sized once from the CRI sandbox annotations containerd derives from the pod's
  *effective* limits (``pkg/oci/utils.go: CalculateSandboxSizing`` + ``SandboxConfig``).
* **runtime-rs, static** (the shipped default for QEMU): ``overhead_* + workload`` when the
  pod has limits, else the configured defaults (``resource/src/cpu_mem/initial_size.rs``).

Every step mirrors the code path it names, including Go's float32 arithmetic, Kubernetes'
quota rounding and the init/sidecar container rules of the kubelet (KEP-753), so the test
vectors in ``tests/sizing/test_model.py`` can be taken verbatim from Kata's own tests.

Nothing here does I/O. Malformed input raises :class:`SizingInputError` (a ``ValueError``)
with a one-line message naming the field; evaluators turn it into a verdict reason.
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, Context, Decimal, InvalidOperation
from typing import Any, Literal

from kubernetes.utils.quantity import parse_quantity as _k8s_parse_quantity

from kgc.evidence.present import present
from kgc.evidence.record import OPTIONAL, Record, Rules

MIB = 1 << 20
# kubelet: quotaPeriod (pkg/kubelet/cm/helpers_linux.go) and minQuotaPeriod
CFS_PERIOD_US = 100_000
MIN_QUOTA_US = 1_000
# kubelet MilliCPUToShares bounds
MIN_SHARES, MAX_SHARES, SHARES_PER_CPU = 2, 262_144, 1024
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1
# Go runtime constants (src/runtime/virtcontainers/hypervisor.go, pkg/govmm/vmm_amd64.go,
# pkg/katautils/config-settings.go.in)
GO_MIN_MEMORY_MIB = 256  # vc.MinHypervisorMemory
GO_DEFAULT_MEMORY_MIB = 2048  # defaultMemSize
GO_DEFAULT_VCPUS = 1  # defaultVCPUCount
GO_QEMU_MAX_VCPUS = 240  # govmm.MaxVCPUs() on amd64
GO_DEFAULT_MEM_SLOTS = 10
GO_ACPI_HOTPLUG_FACTOR = 48  # sandbox.go acpiMemoryHotplugFactor
# runtime-rs constants (src/libs/kata-types/src/config/default.rs)
RS_DEFAULT_QEMU_MEMORY_MIB = 128
RS_MIN_QEMU_MEMORY_MIB = 64
# the guest memory-block size Kata hot-plugs in on x86_64 when the guest did not say
DEFAULT_BLOCK_MIB = 128

# CRI sandbox annotations containerd sets from the kubelet's pod-level resources
# (internal/cri/server/podsandbox/sandbox_run_linux.go)
ANN_CPU_PERIOD = "io.kubernetes.cri.sandbox-cpu-period"
ANN_CPU_QUOTA = "io.kubernetes.cri.sandbox-cpu-quota"
ANN_CPU_SHARES = "io.kubernetes.cri.sandbox-cpu-shares"
ANN_MEMORY = "io.kubernetes.cri.sandbox-memory"
KATA_HV_ANNOTATION = "io.katacontainers.config.hypervisor."

Runtime = Literal["go", "runtime-rs"]
ContainerKind = Literal["app", "init", "sidecar"]


class SizingInputError(ValueError):
    """The pod or the Kata configuration cannot be sized: a malformed quantity, an absurd
    setting, or a combination the model does not cover. ``str()`` is the verdict reason."""


# -- Kubernetes quantities ---------------------------------------------------------------------
# apimachinery/pkg/api/resource/quantity.go: <signedNumber><suffix>, ASCII only, no spaces;
# suffix: Ki..Ei | n u m "" k M G T P E | e/E<signed integer>
_QUANTITY = re.compile(
    r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?"
)


def parse_quantity(value: object, where: str) -> Decimal:
    """A Kubernetes quantity, exactly (``kubernetes.utils.quantity.parse_quantity`` after
    the API's own grammar check: the Python helper alone accepts "1K", " 1", "NaN", "1_000"
    and non-ASCII digits, which the API server rejects)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SizingInputError(f"{where}: {value!r} is not a Kubernetes quantity")
    text = str(value)
    if not _QUANTITY.fullmatch(text) or not text.isascii():
        raise SizingInputError(f"{where}: {text!r} is not a Kubernetes quantity")
    try:
        q = _k8s_parse_quantity(text)
    except (ValueError, InvalidOperation, ArithmeticError) as exc:
        raise SizingInputError(f"{where}: {text!r} is not a Kubernetes quantity ({exc})") from None
    if not q.is_finite():
        raise SizingInputError(f"{where}: {text!r} is not a finite quantity")
    if q < 0:
        raise SizingInputError(f"{where}: {text!r} is negative (the API server rejects it)")
    return q


# exact decimal arithmetic (a quantity is a few digits with any exponent; the default context
# rounds to 28 digits, overflows past 1e999999 and flushes tiny values to 0)
_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _ceil_int(q: Decimal) -> int:
    """``q`` rounded up to an integer (exactly: the context's precision does not apply);
    callers bound ``q`` first (a huge exponent would make a number of as many digits)."""
    return int(q.to_integral_value(rounding=ROUND_CEILING))


def cpu_millis(value: object, where: str) -> int:
    """``Quantity.MilliValue()``: rounds up to a whole millicore ("0.1m" -> 1)."""
    milli = _EXACT.multiply(parse_quantity(value, where), 1000)
    if milli > INT64_MAX // CFS_PERIOD_US:  # ceil(x) > n <=> x > n for an integer n
        raise SizingInputError(f"{where}: {value!r} is too large a CPU quantity to size")
    return _ceil_int(milli)


def memory_bytes(value: object, where: str) -> int:
    """``Quantity.Value()``: rounds up to a whole byte ("0.1m" -> 1, "2.5Gi" -> 2684354560)."""
    q = parse_quantity(value, where)
    if q > INT64_MAX:
        raise SizingInputError(f"{where}: {value!r} exceeds what Kubernetes can represent")
    return _ceil_int(q)


def fmt_mib(b: int) -> str:
    mib = b / MIB
    return f"{mib:.0f}" if mib == int(mib) else f"{mib:.1f}"


def fmt_cpu(m: int) -> str:
    return f"{m // 1000}" if m % 1000 == 0 else f"{m}m"


# -- kubelet: pod spec -> OCI / CRI resources --------------------------------------------------
def milli_cpu_to_quota(milli: int, period: int = CFS_PERIOD_US) -> int:
    """kubelet ``milliCPUToQuota`` (pkg/kubelet/kuberuntime/helpers_linux.go)."""
    if milli == 0:
        return 0
    return max((milli * period) // 1000, MIN_QUOTA_US)


def milli_cpu_to_shares(milli: int) -> int:
    """kubelet ``MilliCPUToShares`` (pkg/kubelet/cm/helpers_linux.go)."""
    if milli == 0:
        return MIN_SHARES
    return min(max((milli * SHARES_PER_CPU) // 1000, MIN_SHARES), MAX_SHARES)


@dataclass(frozen=True)
class Container:
    """One container's resources, already parsed (millicores, bytes)."""

    name: str
    kind: ContainerKind = "app"
    cpu_limit_m: int | None = None
    memory_limit: int | None = None
    cpu_request_m: int | None = None
    memory_request: int | None = None
    hugepages_limit: int = 0  # Σ hugepages-* limits, bytes


@dataclass(frozen=True)
class OciResources:
    """What the container's OCI spec carries (``linux.resources``) as Kata reads it."""

    quota: int | None = None
    period: int | None = None
    memory_limit: int | None = None
    cpuset_count: int = 0
    hugepages_limit: int = 0


def oci_resources(c: Container) -> OciResources:
    """kubelet ``calculateLinuxResources`` + containerd: a CPU limit becomes quota/period,
    a memory limit the OCI memory limit; an absent limit leaves the field unset."""
    quota = milli_cpu_to_quota(c.cpu_limit_m) if c.cpu_limit_m else 0
    return OciResources(
        quota=quota or None,
        period=CFS_PERIOD_US,
        memory_limit=c.memory_limit or None,
        hugepages_limit=c.hugepages_limit,
    )


def _kep753(pod: PodShape, attr: str) -> int | None:
    """``resourcehelper.PodLimits/PodRequests`` for one resource (KEP-753): Σ app + Σ
    sidecars, at least the largest init container plus the sidecars started before it.
    ``None`` when no container sets it."""
    total = 0
    seen = False
    sidecars = 0
    init_max = 0
    for c in pod.containers:
        v = getattr(c, attr)
        seen = seen or v is not None
        v = v or 0
        if c.kind == "app":
            total += v
        elif c.kind == "sidecar":
            total += v
            sidecars += v
            init_max = max(init_max, sidecars)
        else:
            init_max = max(init_max, v + sidecars)
    return max(total, init_max) if seen else None


def pod_limits(pod: PodShape) -> tuple[int | None, int | None]:
    """The pod's effective (cpu millicores, memory bytes) limits as the kubelet computes
    them for the sandbox (``calculateSandboxResources``, overhead excluded); pod-level
    ``spec.resources.limits`` override the container sum."""
    cpu = _kep753(pod, "cpu_limit_m")
    mem = _kep753(pod, "memory_limit")
    if pod.pod_cpu_limit_m is not None:
        cpu = pod.pod_cpu_limit_m
    if pod.pod_memory_limit is not None:
        mem = pod.pod_memory_limit
    return cpu, mem


def pod_requests(pod: PodShape) -> tuple[int | None, int | None]:
    """The pod's effective (cpu millicores, memory bytes) requests (what the scheduler
    reserves, overhead excluded)."""
    cpu = _kep753(pod, "cpu_request_m")
    mem = _kep753(pod, "memory_request")
    if pod.pod_cpu_request_m is not None:
        cpu = pod.pod_cpu_request_m
    if pod.pod_memory_request is not None:
        mem = pod.pod_memory_request
    return cpu, mem


def sandbox_annotations(pod: PodShape) -> dict[str, str]:
    """The CRI sandbox-sizing annotations containerd puts on the sandbox spec from the
    kubelet's pod-level resources (period, quota, shares, memory)."""
    cpu_lim, mem_lim = pod_limits(pod)
    cpu_req, _ = pod_requests(pod)
    if cpu_req is None and cpu_lim is not None:
        shares = milli_cpu_to_shares(cpu_lim)
    else:
        shares = milli_cpu_to_shares(cpu_req or 0)
    return {
        ANN_CPU_PERIOD: str(CFS_PERIOD_US),
        ANN_CPU_QUOTA: str(milli_cpu_to_quota(cpu_lim or 0)),
        ANN_CPU_SHARES: str(shares),
        ANN_MEMORY: str(mem_lim or 0),
    }


# -- Go float32 --------------------------------------------------------------------------------
_F32_MAX = 3.4028234663852886e38


def f32(x: float) -> float:
    """Round to IEEE single precision, as Go's ``float32(x)``."""
    if math.isnan(x) or math.isinf(x):
        return x
    if abs(x) > _F32_MAX:
        return math.copysign(math.inf, x)
    return float(struct.unpack("f", struct.pack("f", x))[0])


def go_calculate_cpus_f(quota: int, period: int) -> float:
    """``utils.CalculateCPUsF``: float32(quota)/float32(period), 0 when unconstrained."""
    if quota >= 0 and period != 0:
        return f32(f32(quota) / f32(period))
    return 0.0


def go_round_up_vcpus(cpus: float) -> int:
    """``RoundUpNumVCPUs``: uint32(math.Ceil(float64(cpus)))."""
    return int(math.ceil(cpus))


def _go_parse_int(s: str | None, unsigned: bool) -> int:
    """strconv.ParseInt/ParseUint(s, 10, 64); a failure is 0 (Kata logs and goes on)."""
    if s is None or not re.fullmatch(r"[+-]?[0-9]+" if not unsigned else r"\+?[0-9]+", s):
        return 0
    v = int(s)
    if unsigned:
        return v if 0 <= v < (1 << 64) else 0
    return v if -(1 << 63) <= v <= INT64_MAX else 0


def go_calculate_sandbox_sizing(annotations: Mapping[str, str] | None) -> tuple[float, int]:
    """``oci.CalculateSandboxSizing``: the workload (float32 vCPUs, MiB) the static Go
    runtime adds to its defaults."""
    if annotations is None:
        return 0.0, 0
    period = _go_parse_int(annotations.get(ANN_CPU_PERIOD), unsigned=True)
    quota = _go_parse_int(annotations.get(ANN_CPU_QUOTA), unsigned=False)
    shares = _go_parse_int(annotations.get(ANN_CPU_SHARES), unsigned=True)
    memory = _go_parse_int(annotations.get(ANN_MEMORY), unsigned=False)
    cpu, mem = go_calculate_vm_resources(period, quota, memory)
    if quota < 0 and cpu == 0 and shares > 0:
        cpu = f32(float(math.ceil(shares / 1024.0)))
    return cpu, mem


def go_calculate_vm_resources(period: int, quota: int, memory: int) -> tuple[float, int]:
    """``oci.calculateVMResources``: MiB is truncated (uint32 of an int64 division)."""
    cpu = go_calculate_cpus_f(quota, period)
    mem = 0 if memory < 0 else (memory // MIB) & UINT32_MAX
    return cpu, mem


def go_calculate_container_sizing(res: OciResources | None) -> tuple[float, int]:
    """``oci.CalculateContainerSizing`` (a standalone container's own spec)."""
    if res is None:
        return 0.0, 0
    quota = period = 0
    if res.quota is not None and res.period is not None:
        quota, period = res.quota, res.period
    return go_calculate_vm_resources(period, quota, res.memory_limit or 0)


def go_sandbox_cpus(containers: Sequence[OciResources]) -> float:
    """``Sandbox.calculateSandboxCPUs`` over the running containers (float32 sum; the
    cpuset count only when no container has a quota)."""
    total = 0.0
    cpuset = 0
    for c in containers:
        if c.period is not None and c.quota is not None:
            total = f32(total + go_calculate_cpus_f(c.quota, c.period))
        cpuset += c.cpuset_count
    if total == 0 and cpuset > 0:
        return float(cpuset)
    return total


def go_sandbox_memory(containers: Sequence[OciResources]) -> int:
    """``Sandbox.calculateSandboxMemory``: Σ positive memory limits + hugepage limits, bytes."""
    total = 0
    for c in containers:
        if c.memory_limit is not None and c.memory_limit > 0:
            total += c.memory_limit
        total += c.hugepages_limit
    return total


def go_calc_hotplug_mem_mib(mem: int, block_mib: int) -> int:
    """``calcHotplugMemMiBSize``: round a hot-plug up to whole guest memory blocks."""
    if block_mib == 0:
        return mem
    return math.ceil(mem / block_mib) * block_mib


# -- runtime-rs --------------------------------------------------------------------------------
def rs_convert_memory_to_mb(memory: int) -> int:
    """``convert_memory_to_mb``: truncated MiB, odd values rounded up to even."""
    if memory < 0:
        return 0
    mb = (memory // MIB) & UINT32_MAX
    return mb + 1 if mb % 2 else mb


def rs_initial_size(period: int | None, quota: int | None, memory: int | None) -> tuple[float, int]:
    """``InitialSize::try_from`` on the sandbox annotations: (f32 vCPUs, MiB)."""
    p = period or 0
    q = -1 if quota is None else quota
    vcpu = f32(q / p) if q >= 0 and p > 0 else 0.0
    return vcpu, rs_convert_memory_to_mb(memory or 0)


@dataclass(frozen=True)
class RsSized:
    vcpus_f: float
    memory: int
    maxvcpus: int
    maxmemory: int


def rs_setup_config(
    *,
    default_vcpus: float,
    overhead_vcpus: float,
    default_memory: int,
    overhead_memory: int,
    default_maxmemory: int,
    vcpu: float,
    mem_mb: int,
    static: bool,
) -> RsSized:
    """``InitialSizeManager::setup_config``; raises when the sandbox would get 0 MiB."""
    dv, dm, maxm = f32(default_vcpus), default_memory, default_maxmemory
    if static and (vcpu > 0 or mem_mb > 0):
        dv = max(f32(f32(overhead_vcpus) + f32(vcpu)), 1.0)
        dm = overhead_memory + mem_mb
        maxm = max(maxm, dm)
    if dm <= 0:
        raise SizingInputError(
            "computed sandbox memory is 0 MiB: set a memory limit or a non-zero "
            "default_memory/overhead_memory (runtime-rs refuses the sandbox)"
        )
    return RsSized(dv, dm, math.ceil(dv), maxm)


# -- the pod -----------------------------------------------------------------------------------
def _mapping(v: Any, where: str) -> Mapping[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, Mapping):
        raise SizingInputError(f"{where}: expected a mapping, got {type(v).__name__}")
    return v


def _list(v: Any, where: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise SizingInputError(f"{where}: expected a list, got {type(v).__name__}")
    return v


def _resources(res: Mapping[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    lim = _mapping(res.get("limits"), f"{where}.limits")
    req = _mapping(res.get("requests"), f"{where}.requests")
    if "cpu" in lim:
        out["cpu_limit_m"] = cpu_millis(lim["cpu"], f"{where}.limits.cpu")
    if "memory" in lim:
        out["memory_limit"] = memory_bytes(lim["memory"], f"{where}.limits.memory")
    if "cpu" in req:
        out["cpu_request_m"] = cpu_millis(req["cpu"], f"{where}.requests.cpu")
    if "memory" in req:
        out["memory_request"] = memory_bytes(req["memory"], f"{where}.requests.memory")
    for r in ("cpu", "memory"):
        lk, rk = f"{r}_limit_m" if r == "cpu" else "memory_limit", \
            f"{r}_request_m" if r == "cpu" else "memory_request"
        if lk in out and rk in out and out[rk] > out[lk]:
            raise SizingInputError(
                f"{where}: requests.{r} {req[r]!r} exceeds limits.{r} {lim[r]!r} (the API "
                "server rejects such a pod)")
    hp = 0
    for k, v in lim.items():
        if isinstance(k, str) and k.startswith("hugepages-"):
            hp += memory_bytes(v, f"{where}.limits.{k}")
    out["hugepages_limit"] = hp
    return out


@dataclass(frozen=True)
class PodShape:
    """A pod as the sizing model sees it: containers in kubelet start order (init and
    sidecar containers first, in spec order, then the app containers)."""

    name: str
    containers: tuple[Container, ...]
    namespace: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    runtime_class: str | None = None
    node: str | None = None
    phase: str | None = None
    pod_cpu_limit_m: int | None = None
    pod_memory_limit: int | None = None
    pod_cpu_request_m: int | None = None
    pod_memory_request: int | None = None
    overhead_cpu_m: int | None = None
    overhead_memory: int | None = None

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @property
    def app_containers(self) -> tuple[Container, ...]:
        return tuple(c for c in self.containers if c.kind == "app")

    @classmethod
    def from_manifest(cls, obj: Any) -> PodShape:
        """From a Pod object as the API returns it (camelCase JSON). Raises
        :class:`SizingInputError` naming the field on anything malformed."""
        o = _mapping(obj, "pod")
        meta = _mapping(o.get("metadata"), "metadata")
        spec = _mapping(o.get("spec"), "spec")
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise SizingInputError("metadata.name: missing")
        ns = meta.get("namespace") or ""
        if not isinstance(ns, str):
            raise SizingInputError("metadata.namespace: not a string")
        ann = _mapping(meta.get("annotations"), "metadata.annotations")
        for k, v in ann.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SizingInputError(f"metadata.annotations[{k!r}]: not a string")
        where0 = f"pod {ns + '/' if ns else ''}{name}"
        containers: list[Container] = []
        for key, default_kind in (("initContainers", "init"), ("containers", "app")):
            items = _list(spec.get(key), f"{where0}: spec.{key}")
            for i, c in enumerate(items):
                w = f"{where0}: spec.{key}[{i}]"
                cm = _mapping(c, w)
                cname = cm.get("name")
                if not isinstance(cname, str) or not cname:
                    raise SizingInputError(f"{w}.name: missing")
                kind: ContainerKind = default_kind  # type: ignore[assignment]
                rp = cm.get("restartPolicy")
                if key == "initContainers" and rp == "Always":
                    kind = "sidecar"
                res = _resources(_mapping(cm.get("resources"), f"{w}.resources"),
                                 f"{where0}: {cname}.resources")
                containers.append(Container(name=cname, kind=kind, **res))
        if not any(c.kind == "app" for c in containers):
            raise SizingInputError(f"{where0}: spec.containers is empty")
        podres = _resources(_mapping(spec.get("resources"), f"{where0}: spec.resources"),
                            f"{where0}: spec.resources")
        overhead = _mapping(spec.get("overhead"), f"{where0}: spec.overhead")
        ov_cpu = cpu_millis(overhead["cpu"], f"{where0}: spec.overhead.cpu") \
            if "cpu" in overhead else None
        ov_mem = memory_bytes(overhead["memory"], f"{where0}: spec.overhead.memory") \
            if "memory" in overhead else None
        rc = spec.get("runtimeClassName")
        node = spec.get("nodeName")
        status = _mapping(o.get("status"), f"{where0}: status")
        phase = status.get("phase")
        return cls(
            name=name,
            namespace=ns,
            containers=tuple(containers),
            annotations=dict(ann),
            runtime_class=present(rc),  # blank text is missing (kgc.evidence.present)
            node=present(node),
            phase=present(phase),
            pod_cpu_limit_m=podres.get("cpu_limit_m"),
            pod_memory_limit=podres.get("memory_limit"),
            pod_cpu_request_m=podres.get("cpu_request_m"),
            pod_memory_request=podres.get("memory_request"),
            overhead_cpu_m=ov_cpu,
            overhead_memory=ov_mem,
        )


# -- the Kata configuration --------------------------------------------------------------------
@dataclass(frozen=True)
class KataSizing(Record):
    """The sizing keys of one Kata configuration (as written in its TOML; the model applies
    Kata's own load-time adjustments). ``source`` says where the values came from.

    Recorded with the sizing evidence: every key but ``memory_block_mib`` must be there
    (a recorded configuration is never completed from these defaults)."""

    recorded_as = Rules(keys=OPTIONAL)

    runtime: Runtime = "go"
    static: bool = False  # [runtime] static_sandbox_resource_mgmt
    hypervisor: str = "qemu"
    default_vcpus: float = 1.0
    default_memory: int = 2048
    default_maxvcpus: int = 0
    default_maxmemory: int = 0
    overhead_vcpus: float = 0.0  # runtime-rs only
    overhead_memory: int = 0  # runtime-rs only
    memory_slots: int = GO_DEFAULT_MEM_SLOTS
    virtio_mem: bool = False
    enable_annotations: tuple[str, ...] = ()
    # the guest's memory-block size Kata hot-plugs in (from the guest when known)
    memory_block_mib: int | None = None
    source: str = ""

    @property
    def mode(self) -> str:
        if self.runtime == "go":
            return "Go static" if self.static else "Go dynamic"
        return "runtime-rs static" if self.static else "runtime-rs dynamic"

    def settings(self) -> str:
        s = f"default_vcpus={self.default_vcpus:g}, default_memory={self.default_memory}"
        if self.runtime == "runtime-rs":
            s += f", overhead_vcpus={self.overhead_vcpus:g}, overhead_memory={self.overhead_memory}"
        return s


# Shipped configurations (src/runtime/Makefile, src/runtime-rs/Makefile, x86_64).
KATA_PRESETS: dict[str, KataSizing] = {
    "qemu": KataSizing("go", False, default_vcpus=1, default_memory=2048,
                       source="preset: Go configuration-qemu.toml"),
    "qemu-nvidia-gpu": KataSizing("go", True, default_vcpus=1, default_memory=8192,
                                  source="preset: Go configuration-qemu-nvidia-gpu.toml"),
    "qemu-runtime-rs": KataSizing("runtime-rs", True, default_vcpus=1, default_memory=2048,
                                  overhead_vcpus=0.2, overhead_memory=32,
                                  source="preset: configuration-qemu-runtime-rs.toml"),
    "qemu-nvidia-gpu-runtime-rs": KataSizing(
        "runtime-rs", True, default_vcpus=1, default_memory=8192, overhead_vcpus=0.5,
        overhead_memory=512, source="preset: configuration-qemu-nvidia-gpu-runtime-rs.toml"),
}


@dataclass(frozen=True)
class HostCaps:
    """The node's CPUs and RAM, which resolve Kata's "0 = host" caps (None: unknown)."""

    cpus: int | None = None
    memory_mib: int | None = None


# -- the VM ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VmSize:
    vcpus: int
    memory_mib: int
    mode: str
    explanation: str
    settings: str = ""
    boot_vcpus: int = 0
    boot_memory_mib: int = 0  # cold-plugged at boot; the rest is hot-plugged
    refusal: str = ""  # non-empty: Kata would not create this sandbox, and why
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.vcpus} vCPU / {self.memory_mib} MiB ({self.mode}, {self.settings})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "vcpus": self.vcpus,
            "memory_mib": self.memory_mib,
            "mode": self.mode,
            "explanation": self.explanation,
            "settings": self.settings,
            "boot_vcpus": self.boot_vcpus,
            "boot_memory_mib": self.boot_memory_mib,
            "refusal": self.refusal,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class _Effective:
    dv: float
    dm: int
    maxv: int | None = None  # Go only: the caps and slots the hot-plug reads
    maxm: int | None = None
    slots: int = GO_DEFAULT_MEM_SLOTS
    notes: tuple[str, ...] = ()
    refusal: str = ""


def _effective(k: KataSizing, host: HostCaps) -> _Effective:
    """Kata's load-time adjustments of the TOML values (katautils/config.go for Go,
    kata-types CpuInfo/MemoryInfo::adjust_config + qemu.rs for runtime-rs)."""
    notes: list[str] = []
    for name in ("default_vcpus", "overhead_vcpus"):
        v = getattr(k, name)
        if not math.isfinite(v):
            raise SizingInputError(f"{name} = {v} is not a finite number")
    for name in ("default_memory", "default_maxmemory", "default_maxvcpus", "overhead_memory",
                 "memory_slots"):
        if getattr(k, name) < 0:
            raise SizingInputError(f"{name} = {getattr(k, name)} is negative")
    if k.overhead_vcpus < 0:
        raise SizingInputError(f"overhead_vcpus = {k.overhead_vcpus:g} is negative")
    hc = host.cpus
    if k.runtime == "go":
        host_v = min(hc, GO_QEMU_MAX_VCPUS) if hc is not None else None
        maxv = k.default_maxvcpus
        if maxv == 0 or (hc is not None and maxv >= hc):
            maxv_r = host_v
        else:
            maxv_r = min(maxv, GO_QEMU_MAX_VCPUS)
        dv = f32(k.default_vcpus)
        if dv < 0 or (host_v is not None and dv > host_v):
            if host_v is None:
                raise SizingInputError(
                    f"default_vcpus = {k.default_vcpus:g} means 'all host CPUs' but the node's "
                    "CPU count is unknown")
            notes.append(f"default_vcpus={k.default_vcpus:g} -> {host_v} (host CPUs)")
            dv = float(host_v)
        elif dv == 0:
            notes.append("default_vcpus=0 -> 1 (Go runtime default)")
            dv = float(GO_DEFAULT_VCPUS)
        dm = k.default_memory
        if dm < GO_MIN_MEMORY_MIB:
            notes.append(f"default_memory={dm} is below Kata's {GO_MIN_MEMORY_MIB} MiB minimum: "
                         f"the Go runtime uses {GO_DEFAULT_MEMORY_MIB}")
            dm = GO_DEFAULT_MEMORY_MIB
        maxm = k.default_maxmemory
        if maxm == 0 or (host.memory_mib is not None and maxm > host.memory_mib):
            maxm_r = host.memory_mib
        else:
            maxm_r = maxm
        slots = k.memory_slots or GO_DEFAULT_MEM_SLOTS
        return _Effective(dv, dm, maxv_r, maxm_r, slots, tuple(notes))
    # runtime-rs
    maxv = k.default_maxvcpus
    maxv_r = hc if (maxv == 0 or (hc is not None and maxv > hc)) else maxv
    dv = f32(k.default_vcpus)
    if dv < 0 or (hc is not None and dv > hc):
        if hc is None:
            raise SizingInputError(
                f"default_vcpus = {k.default_vcpus:g} means 'all host CPUs' but the node's CPU "
                "count is unknown")
        dv = float(hc)
    elif dv == 0:
        notes.append("default_vcpus=0 -> 1 (runtime-rs default)")
        dv = 1.0
    if maxv_r is not None and dv > maxv_r:
        notes.append(f"default_vcpus={dv:g} clamped to default_maxvcpus={maxv_r}")
        dv = float(maxv_r)
    dm = k.default_memory
    if dm == 0 and k.hypervisor == "qemu":
        notes.append(f"default_memory=0 -> {RS_DEFAULT_QEMU_MEMORY_MIB} (runtime-rs QEMU default)")
        dm = RS_DEFAULT_QEMU_MEMORY_MIB
    refusal = ""
    if k.hypervisor == "qemu" and dm < RS_MIN_QEMU_MEMORY_MIB:
        refusal = (f"default_memory={dm} is below runtime-rs' QEMU minimum of "
                   f"{RS_MIN_QEMU_MEMORY_MIB} MiB: the configuration does not load")
    if host.memory_mib is not None and dm > host.memory_mib:
        dm = host.memory_mib
    # a static runtime-rs VM is sized once: no cap or slot count is read after this, and
    # default_maxmemory does not bound it (setup_config raises max_mem to the sandbox memory)
    return _Effective(dv, dm, notes=tuple(notes), refusal=refusal)


def _annotation_overrides(pod: PodShape, k: KataSizing, eff: _Effective,
                          host: HostCaps) -> tuple[_Effective, str]:
    """Kata hypervisor annotations on the pod (``addAnnotations``): honoured only when the
    config's ``enable_annotations`` lists them; otherwise Kata refuses the sandbox."""
    keys = sorted(a for a in pod.annotations if a.startswith(KATA_HV_ANNOTATION))
    if not keys:
        return eff, ""
    for key in keys:
        short = key[len(KATA_HV_ANNOTATION):]
        if not any(_go_regexp_search(rx, short) for rx in k.enable_annotations):
            return eff, (f"annotation {key} is not enabled (enable_annotations = "
                         f"{list(k.enable_annotations)}): Kata refuses to create the sandbox")
    if k.runtime != "go":
        raise SizingInputError(
            f"Kata hypervisor annotations ({', '.join(keys)}) are not modelled for runtime-rs")
    dv, dm, maxv = eff.dv, eff.dm, eff.maxv
    notes = list(eff.notes)
    ann = pod.annotations
    if (v := ann.get(KATA_HV_ANNOTATION + "default_vcpus")) is not None:
        try:
            f = float(v)
        except ValueError:
            return eff, f"annotation default_vcpus={v!r} is not a number: Kata refuses the sandbox"
        if not math.isfinite(f) or f < 0:
            return eff, f"annotation default_vcpus={v!r} is invalid: Kata refuses the sandbox"
        if host.cpus is not None and f > host.cpus:
            return eff, (f"annotation default_vcpus={v} exceeds the node's {host.cpus} CPUs: "
                         "Kata refuses the sandbox")
        dv = f32(f)
        notes.append(f"annotation default_vcpus={v}")
    if (v := ann.get(KATA_HV_ANNOTATION + "default_memory")) is not None:
        if not v.isdigit():
            return eff, f"annotation default_memory={v!r} is not a number: Kata refuses the sandbox"
        if int(v) < GO_MIN_MEMORY_MIB:
            return eff, (f"annotation default_memory={v} is below {GO_MIN_MEMORY_MIB} MiB: Kata "
                         "refuses the sandbox")
        dm = int(v)
        notes.append(f"annotation default_memory={v}")
    if (v := ann.get(KATA_HV_ANNOTATION + "default_max_vcpus")) is not None:
        if not v.isdigit():
            return eff, f"annotation default_max_vcpus={v!r} is not a number: Kata refuses it"
        mv = int(v)
        if (host.cpus is not None and mv > host.cpus) or mv > GO_QEMU_MAX_VCPUS:
            return eff, f"annotation default_max_vcpus={v} exceeds the node's CPUs: Kata refuses it"
        maxv = mv
        notes.append(f"annotation default_max_vcpus={v}")
    return replace(eff, dv=dv, dm=dm, maxv=maxv, notes=tuple(notes)), ""


def _go_regexp_search(rx: str, s: str) -> bool:
    """Go's ``regexp.MatchString`` (unanchored) for the simple patterns Kata configs use."""
    try:
        return re.search(rx, s) is not None
    except re.error:
        return False


def _as_pod(pod: PodShape | Mapping[str, Any]) -> PodShape:
    if isinstance(pod, PodShape):
        return pod
    return PodShape.from_manifest(pod)


def expected_vm(
    pod: PodShape | Mapping[str, Any], kata: KataSizing, host: HostCaps | None = None
) -> VmSize:
    """The VM Kata gives ``pod`` under ``kata``'s configuration, once all app containers run.

    Raises :class:`SizingInputError` for a malformed pod or configuration, or a mode the
    model does not cover (runtime-rs dynamic, Go dynamic on a hypervisor other than QEMU).
    A configuration Kata itself would refuse yields a ``VmSize`` with ``refusal`` set.
    """
    p = _as_pod(pod)
    h = host or HostCaps()
    eff = _effective(kata, h)
    eff, refusal = _annotation_overrides(p, kata, eff, h)
    refusal = refusal or eff.refusal
    if kata.runtime == "go" and kata.static:
        vm = _go_static(p, kata, eff)
    elif kata.runtime == "go":
        if kata.hypervisor != "qemu":
            raise SizingInputError(
                f"Go runtime dynamic sizing on {kata.hypervisor} is not modelled (only QEMU's "
                "hot-plug rules are); set static_sandbox_resource_mgmt or size it by profile")
        vm = _go_dynamic(p, kata, eff)
    elif kata.static:
        vm = _rs_static(p, kata, eff)
    else:
        raise SizingInputError(
            "runtime-rs with static_sandbox_resource_mgmt = false is not modelled (the shipped "
            "runtime-rs QEMU configs are static)")
    notes = eff.notes + vm.notes
    return replace(vm, refusal=refusal or vm.refusal, notes=notes,
                   settings=_settings(kata, eff))


def _settings(k: KataSizing, eff: _Effective) -> str:
    s = f"default_vcpus={eff.dv:g}, default_memory={eff.dm}"
    if k.runtime == "runtime-rs":
        s += f", overhead_vcpus={k.overhead_vcpus:g}, overhead_memory={k.overhead_memory}"
    return s


def _go_static(p: PodShape, k: KataSizing, eff: _Effective) -> VmSize:
    ann = sandbox_annotations(p)
    w_cpu, w_mem = go_calculate_sandbox_sizing(ann)
    nf = f32(eff.dv + w_cpu)
    if nf == 0:  # validateHypervisorConfig: NumVCPUsF == 0 -> 1
        nf = 1.0
    vcpus = go_round_up_vcpus(nf)
    mem = (eff.dm + w_mem) & UINT32_MAX
    refusal = ""
    if vcpus > GO_QEMU_MAX_VCPUS:
        refusal = (f"{vcpus} vCPUs exceed QEMU's maximum of {GO_QEMU_MAX_VCPUS} (maxcpus is "
                   "clamped below cpus): the VM does not start")
    elif eff.maxm is not None and mem > eff.maxm:
        refusal = (f"{mem} MiB exceeds default_maxmemory ({eff.maxm} MiB, QEMU's maxmem): "
                   "the VM does not start")
    expl = (f"Go static: vCPUs = ceil({eff.dv:g} + {w_cpu:g}) = {vcpus}, memory = {eff.dm} + "
            f"{w_mem} = {mem} MiB, from the sandbox annotations quota={ann[ANN_CPU_QUOTA]}/"
            f"period={ann[ANN_CPU_PERIOD]}, memory={ann[ANN_MEMORY]} B (the pod's effective "
            "limits: init containers count as max(init, Σ app + sidecars))")
    return VmSize(vcpus, mem, k.mode, expl, boot_vcpus=vcpus, boot_memory_mib=mem,
                  refusal=refusal)


def _go_dynamic(p: PodShape, k: KataSizing, eff: _Effective) -> VmSize:
    block = k.memory_block_mib if k.memory_block_mib is not None else DEFAULT_BLOCK_MIB
    # newSandbox -> validateHypervisorConfig: a 0 default (an annotation "0") becomes 1 before
    # the VM boots, and updateResources adds that 1
    dv = eff.dv if eff.dv != 0 else 1.0
    boot_v = go_round_up_vcpus(dv)
    refusal = ""
    if eff.maxv is not None and boot_v > eff.maxv:
        refusal = (f"default_vcpus={dv:g} boots {boot_v} vCPUs but default_maxvcpus="
                   f"{eff.maxv}: QEMU refuses -smp {boot_v},maxcpus={eff.maxv}")
    if eff.maxm is not None and eff.dm > eff.maxm and not refusal:
        refusal = (f"default_memory={eff.dm} exceeds default_maxmemory={eff.maxm}: QEMU refuses "
                   f"-m {eff.dm}M,maxmem={eff.maxm}M")
    cur_v, cur_m = boot_v, eff.dm
    hotplugs = 0
    notes: list[str] = []
    running: list[tuple[Container, OciResources]] = []
    # kubelet order: init containers one at a time (sidecars keep running), then the apps
    steps: list[tuple[Container, bool]] = []
    for c in p.containers:
        if c.kind != "app":
            steps.append((c, c.kind == "sidecar"))
    for c in p.containers:
        if c.kind == "app":
            steps.append((c, True))
    for c, stays in steps:
        running.append((c, oci_resources(c)))
        oci = [r for _, r in running]
        # vCPUs: ceil(float32 Σ running + default), hot-plugged up to maxvcpus or unplugged
        want_v = go_round_up_vcpus(f32(go_sandbox_cpus(oci) + dv))
        if want_v > cur_v and eff.maxv is not None and want_v > max(eff.maxv, cur_v):
            capped = f"vCPUs capped at default_maxvcpus={eff.maxv} (wanted {want_v})"
            if capped not in notes:
                notes.append(capped)
            want_v = max(eff.maxv, cur_v)
        cur_v = max(want_v, boot_v)
        # memory: hot-plug only up, in guest memory blocks (virtio-mem: exact, both ways)
        need = eff.dm + (go_sandbox_memory(oci) >> 20)
        if k.virtio_mem:
            cur_m = min(need, eff.maxm) if eff.maxm is not None else need
        else:
            while need > cur_m:
                add = need - cur_m
                if add > cur_m * GO_ACPI_HOTPLUG_FACTOR:
                    add = cur_m * GO_ACPI_HOTPLUG_FACTOR
                if eff.maxm is not None and cur_m + add > eff.maxm:
                    add = eff.maxm - cur_m
                if add <= 0:
                    break
                add_r = go_calc_hotplug_mem_mib(add, block)
                hotplugs += 1
                if eff.maxm is not None and cur_m + add_r > eff.maxm and not refusal:
                    refusal = (f"hot-plugging {add_r} MiB (rounded up to {block} MiB blocks) "
                               f"passes default_maxmemory={eff.maxm} MiB: QEMU refuses it")
                cur_m += add_r
                if need <= cur_m or (eff.maxm is not None and cur_m >= eff.maxm):
                    break
        # below what the containers need only where default_maxmemory stopped the hot-plug
        # (whether the last hot-plug reached it exactly or none was left to make)
        capped_m = f"memory capped at default_maxmemory={eff.maxm} MiB (wanted {need})"
        if need > cur_m and capped_m not in notes:
            notes.append(capped_m)
        if not stays:
            running.pop()  # the init container exits: it no longer counts
    if hotplugs > eff.slots and not refusal:
        refusal = (f"{hotplugs} memory hot-plugs exceed memory_slots={eff.slots}: the last "
                   "container fails to start")
    apps = ", ".join(f"{c.name}={fmt_cpu(c.cpu_limit_m)}" for c in p.containers
                     if c.kind != "init" and c.cpu_limit_m) or "none with a CPU limit"
    added = cur_m - eff.dm
    expl = (f"Go dynamic: boots {boot_v} vCPU / {eff.dm} MiB, then hot-plugs; vCPUs = "
            f"ceil({dv:g} + Σ running containers' limits [{apps}]) = {cur_v}; memory = "
            f"{eff.dm} + {added} MiB (the peak Σ of memory limits, init containers included, "
            f"rounded up to {block} MiB blocks; never returned) = {cur_m} MiB")
    return VmSize(cur_v, cur_m, k.mode, expl, boot_vcpus=boot_v, boot_memory_mib=eff.dm,
                  refusal=refusal, notes=tuple(notes))


def _rs_static(p: PodShape, k: KataSizing, eff: _Effective) -> VmSize:
    ann = sandbox_annotations(p)
    # sandbox_annotations writes decimal integers >= 0, which runtime-rs parses as such
    period, quota, memory = (int(ann[a]) for a in (ANN_CPU_PERIOD, ANN_CPU_QUOTA, ANN_MEMORY))
    vcpu, mem_mb = rs_initial_size(period, quota, memory)
    try:
        sized = rs_setup_config(
            default_vcpus=eff.dv, overhead_vcpus=k.overhead_vcpus, default_memory=eff.dm,
            overhead_memory=k.overhead_memory, default_maxmemory=k.default_maxmemory,
            vcpu=vcpu, mem_mb=mem_mb, static=True)
    except SizingInputError as exc:
        return VmSize(0, 0, k.mode, str(exc), refusal=str(exc))
    vcpus = math.ceil(sized.vcpus_f)
    notes: list[str] = []
    if vcpu > 0 or mem_mb > 0:
        expl = (f"runtime-rs static: the pod has limits, so vCPUs = ceil(max({k.overhead_vcpus:g}"
                f" + {vcpu:g}, 1)) = {vcpus} and memory = {k.overhead_memory} + {mem_mb} = "
                f"{sized.memory} MiB (default_vcpus/default_memory are not used)")
        if mem_mb == 0:
            notes.append(f"no memory limit: the VM gets only overhead_memory={k.overhead_memory}"
                         " MiB")
    else:
        expl = (f"runtime-rs static: no limits, so the configured defaults: {vcpus} vCPU / "
                f"{sized.memory} MiB")
    return VmSize(vcpus, sized.memory, k.mode, expl, boot_vcpus=vcpus,
                  boot_memory_mib=sized.memory, notes=tuple(notes))
