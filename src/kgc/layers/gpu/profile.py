"""What a platform profile says about its GPU pods (``cluster.gpu`` in the profile YAML).

Strict like the rest of the profile: unknown keys are refused, every model is frozen.
Expectations about the GPU are minimums or patterns, never exact strings, where a newer
driver or a bigger card is just as good.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from kgc.core.profile import (
    DEFAULT_GPU_RESOURCES,
    DEFAULT_KATA_RUNTIME_CLASS,
    LABEL_KEY,
    GpuRequestPlatform,
    Strict,
)

_VERSION = re.compile(r"^\d{1,6}(\.\d{1,6}){0,3}$")
_QTY = re.compile(r"^\d+(\.\d+)?(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")

Quantity = Annotated[str, Field(pattern=_QTY.pattern)]


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """"580.159.04" -> (580, 159, 4); None when it is not a dotted number."""
    if not text:
        return None
    m = re.match(r"^\s*(\d{1,6}(?:\.\d{1,6}){0,3})", text)
    return tuple(int(p) for p in m.group(1).split(".")) if m else None


def _check_version(v: str | None) -> str | None:
    if v is not None and not _VERSION.match(v):
        raise ValueError("must be a dotted version number, e.g. '550.54' or '12.4'")
    return v


# a CDH resource path: <repository>/<type>/<tag> (confidential-containers guest-components,
# the KBS resource URI kbs:///<repository>/<type>/<tag>); no ".." segment, no query
_CDH_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
_CDH_RESOURCE = re.compile(rf"^{_CDH_SEGMENT}/{_CDH_SEGMENT}/{_CDH_SEGMENT}$")
_CDH_URL = re.compile(r"^http://(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}(/[A-Za-z0-9._/-]*)?$")
DEFAULT_CDH_URL = "http://127.0.0.1:8006/cdh/resource"


class GpuCcProfile(Strict):
    """``cluster.gpu.cc``: the GPU pods run as confidential GPUs (H100/H200 in CC mode inside
    a SEV-SNP or TDX Kata microVM, RuntimeClass kata-qemu-nvidia-gpu-snp / -tdx)."""

    tee: Literal["snp", "tdx"]  # the TEE the guest must be
    # a resource the pod must obtain from the guest's confidential data hub (released by the
    # KBS only when the attestation is affirming); None: attestation is not judged
    attestation_resource: str | None = None
    # the CDH's resource endpoint inside the guest (Kata's tests: 127.0.0.1:8006)
    cdh_url: str = DEFAULT_CDH_URL

    @field_validator("attestation_resource")
    @classmethod
    def _resource(cls, v: str | None) -> str | None:
        if v is not None and (not _CDH_RESOURCE.match(v) or ".." in v):
            raise ValueError(f"{v!r}: must be a CDH resource path <repository>/<type>/<tag>, "
                             "e.g. 'default/attestation-status/status'")
        return v

    @field_validator("cdh_url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not _CDH_URL.match(v) or ".." in v:
            raise ValueError(f"{v!r}: must be the guest-local CDH endpoint, "
                             f"e.g. {DEFAULT_CDH_URL!r}")
        return v.rstrip("/")

    @property
    def attestation_url(self) -> str | None:
        """The URL the in-guest collector fetches (None: no resource named)."""
        return None if self.attestation_resource is None else \
            f"{self.cdh_url}/{self.attestation_resource}"


class GpuProfile(Strict):
    """The GPU pod layer (gpu.*): which pods the run creates and what they must see."""

    # --- views of the platform (``platform.kata``, ``platform.gpu``; filled by the profile,
    # not keys of this section): the pods' RuntimeClass, its handler (None: its name), the
    # resources that mean "a GPU" (the first one a node advertises is requested) and the
    # device plugin's pods (their selector, None: not judged; their namespace)
    runtime_class: str = Field(default=DEFAULT_KATA_RUNTIME_CLASS, exclude=True)
    handler: str | None = Field(default=None, exclude=True)
    resources: tuple[str, ...] = Field(default=DEFAULT_GPU_RESOURCES, exclude=True)
    device_plugin_selector: str | None = Field(default=None, exclude=True)
    device_plugin_namespace: str | None = Field(default=None, exclude=True)
    # how pods request GPUs and how nodes bind them (``platform.gpu.request``/``binding``)
    request: GpuRequestPlatform = Field(default_factory=GpuRequestPlatform, exclude=True)
    binding: Literal["boot", "dra"] = Field(default="boot", exclude=True)
    # --- the pod
    # the RuntimeClass must carry overhead.podFixed (the VMM's own footprint)
    require_overhead: bool = True
    # any image with `sh`; nvidia-smi comes from the image or is injected into the guest
    image: str = Field(default="nvcr.io/nvidia/cuda:12.8.1-base-ubuntu24.04", min_length=1)
    count: int = Field(default=1, ge=1, le=16)  # GPUs per pod
    cpu: Quantity = "1"
    memory: Quantity = "4Gi"
    # pods per GPU node (bounded by what the node can hold); >= 2 proves UUID isolation
    pods_per_node: int = Field(default=1, ge=1, le=8)
    max_nodes: int = Field(default=4, ge=1, le=1000)  # node sample bound
    max_parallel: int = Field(default=4, ge=1, le=64)  # pods in flight at once
    # only nodes with these labels are GPU-pod targets (empty: every GPU node)
    node_selector: dict[str, str] = Field(default_factory=dict)
    # labels that say "this node has GPUs" ("key" or "key=value"), to find GPU nodes that
    # advertise no GPU resource (no device plugin)
    gpu_node_labels: tuple[str, ...] = (
        "nvidia.com/gpu.present=true",
        "feature.node.kubernetes.io/pci-10de.present=true",
    )
    # --- what the guest must see
    product_pattern: str | None = None  # regex searched in nvidia-smi's product name
    product_label: str = "nvidia.com/gpu.product"  # the node label GFD writes
    min_memory_mib: int | None = Field(default=None, ge=1)
    # what the pod's workload gets of each GPU: "whole" (MIG disabled, now and after the next
    # reset: the whole GPU and its memory) or "mig" (the GPU is in MIG mode and the pod works
    # on its MIG devices; min_memory_mib then holds for each MIG device)
    allocation: Literal["whole", "mig"] = "whole"
    min_driver: str | None = None  # e.g. "550.54"
    min_cuda: str | None = None  # e.g. "12.4"
    # --- budgets
    schedule_timeout_s: float = Field(default=300.0, gt=0, le=86400)
    start_timeout_s: float = Field(default=1200.0, gt=0, le=86400)  # Kata NVIDIA create timeout
    collector_timeout_s: int = Field(default=120, ge=5, le=3600)  # per command in the guest
    # --- confidential GPUs (None: CC is not asked; the gpu.cc-* checks skip)
    cc: GpuCcProfile | None = None

    @field_validator("min_driver", "min_cuda")
    @classmethod
    def _versions(cls, v: str | None) -> str | None:
        return _check_version(v)

    @field_validator("product_pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is None:
            return v
        try:
            re.compile(v)
        except re.error as exc:
            raise ValueError(f"not a valid regular expression: {exc}") from None
        return v

    @field_validator("gpu_node_labels")
    @classmethod
    def _labels(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for item in v:
            key, _, _val = item.partition("=")
            if not re.fullmatch(LABEL_KEY, key):
                raise ValueError(f"{item!r}: must be 'key' or 'key=value'")
        return v

    @model_validator(mode="after")
    def _budgets(self) -> GpuProfile:
        if self.start_timeout_s < self.schedule_timeout_s:
            raise ValueError("start_timeout_s must be >= schedule_timeout_s")
        return self

    @property
    def expected_handler(self) -> str:
        return self.handler or self.runtime_class

    def label_matches(self, labels: dict[str, str] | None) -> list[str]:
        """The ``gpu_node_labels`` entries these node labels satisfy."""
        out = []
        for item in self.gpu_node_labels:
            key, eq, val = item.partition("=")
            if key in (labels or {}) and (not eq or (labels or {})[key] == val):
                out.append(item)
        return out
