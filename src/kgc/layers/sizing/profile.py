"""The profile's ``sizing`` section (hooked in as ``cluster.sizing``): the pod-shape matrix the
live check runs, the Kata configuration per RuntimeClass when the node's own files are not
readable, and the MemTotal tolerance. Strict like the rest of the profile: unknown keys are
refused, values are frozen.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from kgc.core.profile import (
    DEFAULT_GPU_RESOURCES,
    DEFAULT_KATA_RUNTIME_CLASS,
    Strict,
    layer_section,
)
from kgc.layers.sizing.model import (
    KATA_PRESETS,
    KataSizing,
    SizingInputError,
    cpu_millis,
    memory_bytes,
)

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class ShapeContainer(Strict):
    """One container of a pod shape. ``cpu``/``memory`` are its limits (what Kata sizes
    from); requests default to the limits, as the API server does."""

    name: str = "main"
    cpu: str | None = None
    memory: str | None = None
    requests_cpu: str | None = None
    requests_memory: str | None = None
    gpus: int = Field(default=0, ge=0)
    kind: Literal["app", "init", "sidecar"] = "app"

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not _NAME.fullmatch(v) or len(v) > 63:
            raise ValueError("must be a DNS label (lower-case letters, digits, '-')")
        return v

    @field_validator("cpu", "requests_cpu")
    @classmethod
    def _cpu(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                cpu_millis(v, "cpu")
            except SizingInputError as exc:
                raise ValueError(str(exc).removeprefix("cpu: ")) from None
        return v

    @field_validator("memory", "requests_memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                memory_bytes(v, "memory")
            except SizingInputError as exc:
                raise ValueError(str(exc).removeprefix("memory: ")) from None
        return v


class PodShapeSpec(Strict):
    """A pod shape of the live matrix. ``runtime_class`` defaults to the platform's
    (``platform.kata.runtime_class``); a shape names its own only to measure another class."""

    name: str
    containers: tuple[ShapeContainer, ...]
    runtime_class: str | None = None

    @field_validator("name")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not _NAME.fullmatch(v) or len(v) > 40:
            raise ValueError("must be a short DNS label (lower-case letters, digits, '-')")
        return v

    @model_validator(mode="after")
    def _has_app(self) -> PodShapeSpec:
        if not any(c.kind == "app" for c in self.containers):
            raise ValueError("a shape needs at least one app container")
        names = [c.name for c in self.containers]
        if len(set(names)) != len(names):
            raise ValueError("container names must be unique")
        return self

    @property
    def gpus(self) -> int:
        return sum(c.gpus for c in self.containers)


def _c(name: str = "main", **kw: Any) -> ShapeContainer:
    return ShapeContainer(name=name, **kw)


DEFAULT_SHAPES: tuple[PodShapeSpec, ...] = (
    PodShapeSpec(name="one-container", containers=(_c(cpu="2", memory="2Gi"),)),
    PodShapeSpec(name="two-containers", containers=(
        _c("a", cpu="500m", memory="1Gi"), _c("b", cpu="500m", memory="1Gi"))),
    PodShapeSpec(name="memory-only", containers=(_c(memory="1Gi"),)),
    PodShapeSpec(name="fractional-cpu", containers=(_c(cpu="250m", memory="256Mi"),)),
    PodShapeSpec(name="gpu", containers=(_c(cpu="4", memory="16Gi", gpus=1),)),
)
PROBE_SHAPE = PodShapeSpec(name="probe", containers=(_c(),))
"""A pod without limits: Kata gives it exactly the default VM ("measured" source)."""


class KataSizingProfile(Strict):
    """A Kata configuration's sizing keys, for a RuntimeClass whose node files cannot be read.
    ``preset`` starts from a shipped configuration (qemu, qemu-nvidia-gpu, qemu-runtime-rs,
    qemu-nvidia-gpu-runtime-rs); keys given next to it override the preset."""

    preset: Literal["qemu", "qemu-nvidia-gpu", "qemu-runtime-rs",
                    "qemu-nvidia-gpu-runtime-rs"] | None = None
    runtime: Literal["go", "runtime-rs"] = "go"
    static_sandbox_resource_mgmt: bool = False
    hypervisor: str = "qemu"
    default_vcpus: float = Field(default=1.0, allow_inf_nan=False, ge=-1024, le=1024)
    default_memory: int = Field(default=2048, ge=0)
    default_maxvcpus: int = Field(default=0, ge=0)
    default_maxmemory: int = Field(default=0, ge=0)
    overhead_vcpus: float = Field(default=0.0, ge=0, le=1024, allow_inf_nan=False)
    overhead_memory: int = Field(default=0, ge=0)
    memory_slots: int = Field(default=10, ge=0)
    enable_virtio_mem: bool = False
    enable_annotations: tuple[str, ...] = ()
    memory_block_mib: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not data.get("preset"):
            return data
        p = KATA_PRESETS.get(data["preset"])
        if p is None:
            return data  # the Literal reports it
        base = {
            "runtime": p.runtime, "static_sandbox_resource_mgmt": p.static,
            "hypervisor": p.hypervisor, "default_vcpus": p.default_vcpus,
            "default_memory": p.default_memory, "default_maxvcpus": p.default_maxvcpus,
            "default_maxmemory": p.default_maxmemory, "overhead_vcpus": p.overhead_vcpus,
            "overhead_memory": p.overhead_memory,
        }
        return {**base, **data}

    def to_sizing(self, source: str) -> KataSizing:
        return KataSizing(
            runtime=self.runtime,
            static=self.static_sandbox_resource_mgmt,
            hypervisor=self.hypervisor,
            default_vcpus=self.default_vcpus,
            default_memory=self.default_memory,
            default_maxvcpus=self.default_maxvcpus,
            default_maxmemory=self.default_maxmemory,
            overhead_vcpus=self.overhead_vcpus,
            overhead_memory=self.overhead_memory,
            memory_slots=self.memory_slots,
            virtio_mem=self.enable_virtio_mem,
            enable_annotations=self.enable_annotations,
            memory_block_mib=self.memory_block_mib,
            source=source,
        )


class MemTotalTolerance(Strict):
    """How far what a guest reports may be from the VM's RAM.

    With ``/proc/zoneinfo`` (the sizing collector reads it) the guest's RAM is known to the
    page: it may sit at most ``firmware_reserved_max_mib`` below the VM's RAM (the BIOS/ACPI
    areas the firmware keeps: 0.5 MiB on QEMU q35). With MemTotal alone, the kernel's own
    reservation must be bounded instead: at least the struct-page array of the memory present
    at boot (``struct_page_bytes`` per 4 KiB page: 1/64), at most that share of all memory plus
    ``kernel_fixed_reserve_max_mib`` (kernel image, per-CPU areas, swiotlb, ACPI tables).
    """

    firmware_reserved_max_mib: float = Field(default=8.0, ge=0)
    kernel_fixed_reserve_max_mib: float = Field(default=256.0, ge=0)
    struct_page_bytes: int = Field(default=64, ge=0)
    page_bytes: int = Field(default=4096, ge=1024)

    def memmap_mib(self, ram_mib: float) -> float:
        return ram_mib * self.struct_page_bytes / self.page_bytes


class SizingProfile(Strict):
    """``cluster.sizing`` in a profile."""

    shapes: tuple[PodShapeSpec, ...] = DEFAULT_SHAPES
    # views of the platform (filled by the profile, not keys of this section): the shapes'
    # Kata RuntimeClass (``platform.kata.runtime_class``; a shape's own runtime_class wins)
    # and the resources that mean "a GPU" (``platform.gpu.resources``: a GPU shape requests
    # the first one its node advertises)
    runtime_class: str = Field(default=DEFAULT_KATA_RUNTIME_CLASS, exclude=True)
    gpu_resources: tuple[str, ...] = Field(default=DEFAULT_GPU_RESOURCES, exclude=True)
    # platform.gpu.request.mode: under dra-extended a GPU shape's extended request is served
    # by DRA (no node advertises the name); under claim a GPU shape is not measured
    gpu_request_mode: str = Field(default="device-plugin", exclude=True)
    # RuntimeClass name -> Kata sizing keys, used when the node's Kata files are not readable
    kata: dict[str, KataSizingProfile] = Field(default_factory=dict)
    memtotal: MemTotalTolerance = MemTotalTolerance()
    # on a cluster with no node access and no profile entry: run a limit-less probe pod
    measure_with_probe: bool = True
    # node over-commit: also count non-Kata pods' memory requests against allocatable
    overcommit_counts_other_pods: bool = True
    # --- the live pods (one per shape, plus a probe per Kata RuntimeClass when measured)
    # any image with `sh`: the pods run kgc's in-guest collector (kgc guest --script)
    image: str = Field(default="busybox:1.36", min_length=1, max_length=512)
    # bounded waits: until a pod is placed and its sandbox starts, then until it finishes
    schedule_timeout_s: float = Field(default=180.0, gt=0, le=3600)
    finish_timeout_s: float = Field(default=300.0, gt=0, le=3600)
    max_parallel: int = Field(default=4, ge=1, le=64)  # pods in flight at once
    # the collector's own bound on each command it runs in the guest (KGC_CMD_TIMEOUT)
    collector_timeout_s: int = Field(default=60, ge=1, le=600)

    @model_validator(mode="after")
    def _unique(self) -> SizingProfile:
        names = [s.name for s in self.shapes]
        if len(set(names)) != len(names):
            raise ValueError("shape names must be unique")
        if PROBE_SHAPE.name in names:
            raise ValueError(f"shape name {PROBE_SHAPE.name!r} is reserved for the probe pod")
        if self.finish_timeout_s < self.schedule_timeout_s:
            raise ValueError("finish_timeout_s counts from the pod's creation: it must be at "
                             "least schedule_timeout_s")
        return self

    def no_subject(self) -> str | None:
        """Why the layer would measure nothing (``field: why``), or None. The profile refuses
        it while the policy requires the layer (:class:`kgc.core.profile.Profile`)."""
        return None if self.shapes else "shapes: the pod-shape matrix is empty"


def sizing_profile(profile: Any) -> SizingProfile:
    """The ``cluster.sizing`` section (:func:`kgc.core.profile.layer_section`)."""
    return layer_section(profile, "sizing", SizingProfile)


def shape_manifest(
    shape: PodShapeSpec,
    *,
    runtime_class: str | None = None,
    gpu_resource: str = "nvidia.com/pgpu",
    pod_name: str | None = None,
    namespace: str = "",
    image: str = "busybox",
    command: tuple[str, ...] = ("sleep", "3600"),
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The Pod object (API JSON) for a shape: limits as given, requests = limits unless
    the shape sets them (as the API server defaults them)."""
    containers: list[dict[str, Any]] = []
    inits: list[dict[str, Any]] = []
    for c in shape.containers:
        lim: dict[str, str] = {}
        req: dict[str, str] = {}
        if c.cpu is not None:
            lim["cpu"] = c.cpu
        if c.memory is not None:
            lim["memory"] = c.memory
        if c.gpus:
            lim[gpu_resource] = str(c.gpus)
        req.update(lim)
        if c.requests_cpu is not None:
            req["cpu"] = c.requests_cpu
        if c.requests_memory is not None:
            req["memory"] = c.requests_memory
        body: dict[str, Any] = {"name": c.name, "image": image, "command": list(command)}
        res: dict[str, Any] = {}
        if lim:
            res["limits"] = lim
        if req:
            res["requests"] = req
        if res:
            body["resources"] = res
        if c.kind == "app":
            containers.append(body)
        else:
            if c.kind == "sidecar":
                body["restartPolicy"] = "Always"
            else:
                body["command"] = ["true"]
            inits.append(body)
    meta: dict[str, Any] = {"name": pod_name or f"kgc-sizing-{shape.name}"}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    spec: dict[str, Any] = {"containers": containers, "restartPolicy": "Never"}
    if inits:
        spec["initContainers"] = inits
    rc = shape.runtime_class or runtime_class
    if rc:
        spec["runtimeClassName"] = rc
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def shape_by_name(name: str, shapes: tuple[PodShapeSpec, ...] = DEFAULT_SHAPES) -> PodShapeSpec:
    if name == PROBE_SHAPE.name:
        return PROBE_SHAPE
    for s in shapes:
        if s.name == name:
            return s
    raise KeyError(f"no pod shape named {name!r}")


def shape_pod(name: str, **kw: Any) -> dict[str, Any]:
    """The manifest of a default shape (or ``probe``) by name."""
    return shape_manifest(shape_by_name(name), **kw)
