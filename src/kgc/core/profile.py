"""Profiles: one YAML per certified platform, validated strictly.

Unknown keys are refused; every error names the file and the field path
(``host.passthrough.targets[0].vendr: unknown field``).
"""

from __future__ import annotations

import importlib.resources
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from kgc.core.policy import Policy

DEFAULT_PROFILE = "generic-nvidia-passthrough"


def profiles_dir() -> Path:
    """The built-in profiles: the repository's profiles/ folder, shipped in the wheel as the
    package ``kgc.profiles``."""
    return Path(str(importlib.resources.files("kgc.profiles")))


def builtin_profiles() -> list[str]:
    return sorted(p.stem for p in profiles_dir().glob("*.yaml"))

_HEX4 = re.compile(r"^[0-9a-f]{4}$")
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


class ProfileError(Exception):
    """A profile could not be loaded. ``str()`` is the whole user-facing message."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceSelector(Strict):
    """Matches PCI devices. All given fields must match.

    ``class`` is a hex prefix of the 24-bit class code: ``"03"`` = any display controller,
    ``"0302"`` = 3D controller, ``"030000"`` = VGA.
    """

    vendor: str | None = None
    device: str | None = None
    class_: str | None = Field(default=None, alias="class")
    address: str | None = None
    name: str | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("vendor", "device")
    @classmethod
    def _hex4(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.lower().removeprefix("0x")
        if not _HEX4.match(v):
            raise ValueError("must be 4 hex digits, e.g. '10de'")
        return v

    @field_validator("class_")
    @classmethod
    def _cls(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.lower().removeprefix("0x")
        if not re.fullmatch(r"[0-9a-f]{2}([0-9a-f]{2}([0-9a-f]{2})?)?", v):
            raise ValueError("must be 2, 4 or 6 hex digits of the PCI class code, e.g. '0302'")
        return v

    @field_validator("address")
    @classmethod
    def _bdf(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.lower()
        if re.fullmatch(r"[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", v):
            v = "0000:" + v
        if not _BDF.match(v):
            raise ValueError("must be a PCI address like '0000:41:00.0'")
        return v

    def matches(
        self, bdf: str, vendor: str | None, device: str | None, pci_class: str | None
    ) -> bool:
        if self.address is not None and bdf != self.address:
            return False
        if self.vendor is not None and vendor != self.vendor:
            return False
        if self.device is not None and device != self.device:
            return False
        if self.class_ is not None and not (pci_class or "").startswith(self.class_):
            return False
        return not (
            self.address is None
            and self.vendor is None
            and self.device is None
            and self.class_ is None
        )

    def describe(self) -> str:
        if self.name:
            return self.name
        parts = []
        if self.address:
            parts.append(self.address)
        if self.vendor or self.device:
            parts.append(f"{self.vendor or '*'}:{self.device or '*'}")
        if self.class_:
            parts.append(f"class {self.class_}*")
        return " ".join(parts) or "(empty selector)"


class IommuProfile(Strict):
    vendor: Literal["any", "intel", "amd", "arm"] = "any"
    mode: Literal["any", "passthrough", "translated"] = "any"
    require_interrupt_remapping: bool = True


class PassthroughProfile(Strict):
    targets: tuple[DeviceSelector, ...] = ()
    host_keeps: tuple[DeviceSelector, ...] = ()
    allowed_drivers: tuple[str, ...] = ("vfio-pci", "nvgrace_gpu_vfio_pci")
    # A profile for a fleet where some nodes have no GPU may allow zero targets.
    require_targets_present: bool = True


class PersistenceProfile(Strict):
    accepted_mechanisms: tuple[Literal["modprobe", "cmdline", "driverctl", "udev"], ...] = (
        "modprobe",
        "cmdline",
        "driverctl",
        "udev",
    )
    # GPU host drivers that compete with vfio-pci for the targets at boot.
    competing_drivers: tuple[str, ...] = ("nvidia", "nouveau", "snd_hda_intel", "amdgpu", "radeon")


class HostProfile(Strict):
    iommu: IommuProfile = IommuProfile()
    passthrough: PassthroughProfile = PassthroughProfile()
    persistence: PersistenceProfile = PersistenceProfile()


# -- paths a profile may make the collector read or stat ------------------------------------
# A profile names files the collector reads into evidence (and bundles). Each field may only
# point where that kind of file lives, so a profile cannot make kgc copy /etc/shadow or a
# private key into a bundle. Paths are absolute, clean (no `..`, `.`, `//`) and made of
# plain characters only (no `$`, blanks, quotes, globs or control characters).
# The operator (never a profile) may accept more: ``KGC_PATH_ROOTS``, a `:`-separated list
# of absolute path prefixes every path field also accepts (e.g. the private instance
# directories of a test installation, whose profiles name files there).
PATH_ROOTS_ENV = "KGC_PATH_ROOTS"
CONTAINERD_CONFIG_DIRS = (
    "/etc/containerd",
    "/var/lib/rancher/k3s/agent/etc/containerd",
    "/var/lib/rancher/rke2/agent/etc/containerd",
    "/etc/k0s",
    "/var/snap/microk8s/current/args",
)
KATA_CONFIG_DIRS = (
    "/etc/kata-containers",
    "/opt/kata",
    "/usr/share/defaults/kata-containers",
    "/usr/local/share/defaults/kata-containers",
)
SOCKET_DIRS = ("/run", "/var/run")
BIN_DIRS = (
    "/usr/local/bin",
    "/usr/bin",
    "/usr/local/sbin",
    "/usr/sbin",
    "/bin",
    "/sbin",
    "/opt/kata/bin",
    "/opt/kata",
    "/opt/bin",
    "/var/lib/rancher",
    "/snap/microk8s",
)
_CLEAN_PATH = re.compile(r"^(/[A-Za-z0-9_.:+,=@%-]+)+/?$")


def _clean_abs(v: str) -> str:
    if not isinstance(v, str) or not v.startswith("/"):
        raise ValueError(f"must be an absolute path, got {v!r}")
    if not _CLEAN_PATH.fullmatch(v):
        raise ValueError(
            f"{v!r}: only letters, digits and _.:+,=@%- are allowed in a path (no `$`, "
            "blanks, tabs, quotes, globs or control characters)"
        )
    parts = v.rstrip("/").split("/")[1:]
    if any(x in (".", "..") for x in parts):
        raise ValueError(f"{v!r}: `.` and `..` are not allowed in a path")
    return v.rstrip("/") or "/"


def extra_path_roots() -> tuple[str, ...]:
    """The prefixes ``$KGC_PATH_ROOTS`` adds (each absolute and clean, else refused: a typo
    must not widen what a profile may name)."""
    out = []
    for item in os.environ.get(PATH_ROOTS_ENV, "").split(":"):
        if item:
            try:
                out.append(_clean_abs(item))
            except ValueError as exc:
                raise ValueError(f"${PATH_ROOTS_ENV}: {exc}") from None
    return tuple(out)


def _under(v: str, prefixes: tuple[str, ...], what: str, suffix: str = "") -> str:
    v = _clean_abs(v)
    ok = (any(v.startswith(r) for r in extra_path_roots())
          or any(v == p or v.startswith(p + "/") for p in prefixes))
    if not ok:
        raise ValueError(f"{v!r}: {what} must be under {', '.join(prefixes)}")
    if suffix and not v.endswith(suffix):
        raise ValueError(f"{v!r}: {what} must be a {suffix} file")
    return v


# -- the platform: facts every layer reads, declared once ---------------------------------
# kata-deploy's RuntimeClass for NVIDIA GPU passthrough (its handler has the same name)
DEFAULT_KATA_RUNTIME_CLASS = "kata-qemu-nvidia-gpu"
# extended resources that mean "a GPU": passthrough (sandbox device plugin) and container stack
DEFAULT_GPU_RESOURCES = ("nvidia.com/pgpu", "nvidia.com/gpu")
DEFAULT_NAMESPACE_PREFIX = "kgc-"
DEFAULT_RUN_LABEL = "kgc.io/run"
# a Kubernetes equality-based label selector: key[=value][,key[=value]...] (also !=, ==)
LABEL_KEY = r"(?:[a-z0-9A-Z.\-]{1,253}/)?[a-zA-Z0-9](?:[a-zA-Z0-9_.\-]{0,61}[a-zA-Z0-9])?"
_LABEL_VAL = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9_.\-]{0,61}[a-zA-Z0-9])?)?"
_REQ = re.compile(rf"^\s*!?{LABEL_KEY}\s*(?:(?:==|=|!=)\s*{_LABEL_VAL}\s*)?$")
_RESOURCE = re.compile(r"[a-z0-9.\-]+/[A-Za-z0-9_.\-]+")
_NS_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*)?")


class KataPlatform(Strict):
    """The Kata RuntimeClass every layer's Kata pods run under, and its handler (the
    containerd runtime the node layer looks for and the RuntimeClass must name)."""

    runtime_class: str = Field(default=DEFAULT_KATA_RUNTIME_CLASS, min_length=1,
                               max_length=253)
    # the RuntimeClass' handler (containerd runtime name); None: same as its name
    handler: str | None = Field(default=None, min_length=1, max_length=253)

    @property
    def expected_handler(self) -> str:
        return self.handler or self.runtime_class


class DevicePluginPlatform(Strict):
    """The GPU device plugin's pods (None: not judged): a label selector, and the namespace
    they run in (None: every namespace)."""

    selector: str | None = None
    namespace: str | None = Field(default=None, min_length=1, max_length=63)

    @field_validator("selector")
    @classmethod
    def _selector(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.strip() or not all(_REQ.match(p) for p in v.split(",")):
            raise ValueError(
                "must be an equality-based label selector, e.g. "
                "'app=nvidia-sandbox-device-plugin-daemonset'"
            )
        return v


# the DeviceClass NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu) installs for
# whole GPUs, and the driver name its ResourceSlices carry
DEFAULT_DRA_DEVICE_CLASS = "gpu.nvidia.com"
DEFAULT_DRA_DRIVER = "gpu.nvidia.com"
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class GpuRequestPlatform(Strict):
    """How a GPU pod asks for a GPU (``platform.gpu.request``).

    * ``device-plugin``: an extended resource (``platform.gpu.resources``) a device plugin
      advertises in the node's allocatable — today's rule;
    * ``dra-extended``: the same extended-resource request, served by Dynamic Resource
      Allocation because ``device_class`` names it in ``spec.extendedResourceName``
      (KEP-5004, GA in 1.37): the node's allocatable for the name is 0 by design;
    * ``claim``: a ResourceClaim(Template) of ``device_class``, narrowed by ``selector`` (a CEL
      expression over the device's attributes, optional).
    """

    mode: Literal["device-plugin", "dra-extended", "claim"] = "device-plugin"
    # the DeviceClass (dra-extended, claim) and the DRA driver its ResourceSlices name
    device_class: str = Field(default=DEFAULT_DRA_DEVICE_CLASS, min_length=1, max_length=253)
    driver: str = Field(default=DEFAULT_DRA_DRIVER, min_length=1, max_length=63)
    selector: str | None = Field(default=None, min_length=1, max_length=10240)
    # devices each GPU node must publish in its ResourceSlices (None: at least one)
    devices_per_node: int | None = Field(default=None, ge=1, le=64)

    @field_validator("device_class", "driver")
    @classmethod
    def _dns(cls, v: str) -> str:
        if not _DNS_SUBDOMAIN.fullmatch(v):
            raise ValueError(f"{v!r}: must be a DNS subdomain, e.g. 'gpu.nvidia.com'")
        return v

    @model_validator(mode="after")
    def _selector_needs_claim(self) -> GpuRequestPlatform:
        if self.selector is not None and self.mode != "claim":
            raise ValueError("selector narrows a claim: it needs mode: claim")
        return self

    @property
    def dra(self) -> bool:
        """Whether DRA allocates the GPUs (no device plugin advertises them)."""
        return self.mode != "device-plugin"


class GpuPlatform(Strict):
    """How the platform's nodes offer GPUs."""

    # extended resources that mean "a GPU" (a GPU pod requests the first one its node
    # advertises; a layer that cannot choose per node requests the first)
    resources: tuple[str, ...] = Field(default=DEFAULT_GPU_RESOURCES, min_length=1)
    device_plugin: DevicePluginPlatform = DevicePluginPlatform()
    request: GpuRequestPlatform = GpuRequestPlatform()
    # how the nodes bind the GPUs meant for guests: ``boot`` (bound to vfio-pci at boot and
    # after every reboot — today's rule) or ``dra`` (the DRA driver rebinds a GPU between its
    # host driver and vfio-pci when a claim is prepared: at boot it may be on either, and
    # must be rebindable)
    binding: Literal["boot", "dra"] = "boot"
    # under ``binding: dra``: the host driver a GPU sits on between claims. NVIDIA's DRA driver
    # rebinds only from ``nvidia`` (kubernetes-sigs/dra-driver-nvidia-gpu,
    # cmd/gpu-kubelet-plugin/vfio-device.go, Configure); a lab stand-in names its own
    host_driver: str = Field(default="nvidia", min_length=1, max_length=64,
                             pattern=r"^[A-Za-z0-9_.-]+$")

    @field_validator("resources")
    @classmethod
    def _resources(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for r in v:
            if not _RESOURCE.fullmatch(r):
                raise ValueError(f"{r!r}: must be an extended resource like 'nvidia.com/gpu'")
        if len(set(v)) != len(v):
            raise ValueError("resources are listed twice")
        return v


class PlatformProfile(Strict):
    """``platform``: the facts of the platform that several layers need, declared once and
    read by every layer (the node's runtime layer, the gpu, sizing and keda layers, the
    fleet). A layer keeps its own setting only for a purpose of its own (the keda layer's
    baseline class, a sizing shape's own class)."""

    kata: KataPlatform = KataPlatform()
    gpu: GpuPlatform = GpuPlatform()
    # the run namespaces' name prefix and the label that marks every object of a run
    namespace_prefix: str = Field(default=DEFAULT_NAMESPACE_PREFIX, min_length=1,
                                  max_length=20)
    run_label: str = Field(default=DEFAULT_RUN_LABEL, min_length=1, max_length=316)

    @field_validator("namespace_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not _NS_PREFIX.fullmatch(v):
            raise ValueError("must start a namespace name (lower-case letters, digits, '-')")
        return v

    @field_validator("run_label")
    @classmethod
    def _label(cls, v: str) -> str:
        if not re.fullmatch(LABEL_KEY, v):
            raise ValueError("must be a label key, e.g. 'kgc.io/run'")
        return v

    def views(self) -> dict[str, dict[str, Any]]:
        """What each section reads of the platform (the section's own view fields, never
        given in YAML), by section: ``runtime``, ``cluster`` and the cluster layers'."""
        k, g = self.kata, self.gpu
        return {
            "runtime": {"kata_handler": k.expected_handler},
            "cluster": {"namespace_prefix": self.namespace_prefix, "label": self.run_label},
            "gpu": {"runtime_class": k.runtime_class, "handler": k.handler,
                    "resources": g.resources, "device_plugin_selector": g.device_plugin.selector,
                    "device_plugin_namespace": g.device_plugin.namespace,
                    "request": g.request, "binding": g.binding},
            "sizing": {"runtime_class": k.runtime_class, "gpu_resources": g.resources,
                       "gpu_request_mode": g.request.mode},
            "keda": {"runtime_class": k.runtime_class, "gpu_resource": g.resources[0],
                     "gpu_request_mode": g.request.mode},
        }


# where each former per-layer copy of a platform fact is declared now: a profile that still
# sets one is refused with this one line (two copies could disagree, as they did)
MOVED_TO_PLATFORM: dict[str, str] = {
    "runtime.kata_handler": "platform.kata.handler",
    "runtime.runtime_class": "platform.kata.runtime_class",
    "cluster.namespace_prefix": "platform.namespace_prefix",
    "cluster.label": "platform.run_label",
    "cluster.gpu.runtime_class": "platform.kata.runtime_class",
    "cluster.gpu.handler": "platform.kata.handler",
    "cluster.gpu.resources": "platform.gpu.resources",
    "cluster.gpu.device_plugin_selector": "platform.gpu.device_plugin.selector",
    "cluster.gpu.device_plugin_namespace": "platform.gpu.device_plugin.namespace",
    "cluster.sizing.runtime_class": "platform.kata.runtime_class",
    "cluster.sizing.gpu_runtime_class": "platform.kata.runtime_class",
    "cluster.sizing.gpu_resources": "platform.gpu.resources",
    "cluster.keda.runtime_class": "platform.kata.runtime_class",
    "cluster.keda.gpu.resource": "platform.gpu.resources",
}


def moved_key(raw: Any) -> str | None:
    """The first former per-layer key a raw profile mapping still sets, as the one-line
    error that names where it is declared now; None when it sets none."""
    for old, new in MOVED_TO_PLATFORM.items():
        node = raw
        for part in old.split("."):
            node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
        if node is not _ABSENT:
            return (f"{old}: moved to {new} (the platform's facts are declared once, in the "
                    "`platform` section every layer reads)")
    return None


_ABSENT = object()


class RuntimeProfile(Strict):
    """containerd + Kata handler expectations (layer ``runtime``)."""

    containerd_config: str = "/etc/containerd/config.toml"
    # the platform's Kata handler (``platform.kata``: a view the profile fills, not a key)
    kata_handler: str = Field(default=DEFAULT_KATA_RUNTIME_CLASS, exclude=True)
    require_nri: bool = True
    nri_socket: str = "/var/run/nri/nri.sock"
    kata_config_paths: tuple[str, ...] = (
        "/etc/kata-containers/configuration.toml",
        "/opt/kata/share/defaults/kata-containers/configuration.toml",
        "/usr/share/defaults/kata-containers/configuration.toml",
    )
    # containerd binary used for `--version` / `config dump` on the node (PATH lookup).
    containerd_bin: str = "containerd"
    # directories searched for the Kata shim (besides `command -v` on the node's PATH)
    shim_dirs: tuple[str, ...] = ("/usr/local/bin", "/usr/bin", "/opt/kata/bin", "/usr/sbin")
    # the containerd version the node runs, for offline trees whose package database does
    # not say it (a tarball install): "1.7", "2.1.9"... (NRI's default depends on it)
    containerd_version: str | None = None

    @field_validator("containerd_config")
    @classmethod
    def _cfg_path(cls, v: str) -> str:
        return _under(v, CONTAINERD_CONFIG_DIRS, "the containerd config", ".toml")

    @field_validator("kata_config_paths")
    @classmethod
    def _kata_paths(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_under(x, KATA_CONFIG_DIRS, "a Kata config", ".toml") for x in v)

    @field_validator("nri_socket")
    @classmethod
    def _sock(cls, v: str) -> str:
        return _under(v, SOCKET_DIRS, "the NRI socket")

    @field_validator("shim_dirs")
    @classmethod
    def _shim_dirs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(_under(x, BIN_DIRS, "a shim directory") for x in v)

    @field_validator("containerd_bin")
    @classmethod
    def _bin(cls, v: str) -> str:
        if v == "containerd":
            return v
        v = _clean_abs(v)
        if v.rsplit("/", 1)[-1] != "containerd":
            raise ValueError(f"{v!r}: must be `containerd` (looked up on PATH) or an absolute "
                             "path to a binary named containerd")
        return v

    @field_validator("containerd_version")
    @classmethod
    def _ver(cls, v: str | None) -> str | None:
        if v is None:
            return v
        v = v.strip().removeprefix("v")
        if not re.fullmatch(r"\d{1,3}\.\d{1,3}(\.\d{1,4})?", v):
            raise ValueError(f"{v!r}: must be a containerd version like '1.7' or '2.1.9'")
        return v


class NriProfile(Strict):
    """Live NRI probe settings (layer ``nri``)."""

    plugin_index: str = "99"
    plugin_name: str = "kgc-probe"
    event_timeout_s: float = 10.0
    allow_adjustment: bool = True
    # how the probe gets events: "cri" runs its own host-network probe pod through the
    # CRI socket; "passive" only waits for events from pods the cluster creates.
    trigger: Literal["cri", "passive"] = "cri"
    cri_socket: str = "/run/containerd/containerd.sock"
    # pause image for the probe pod (None: the runtime's configured sandbox image)
    sandbox_image: str | None = None
    # image for the probe container (needs /bin/sh and `env`); None: sandbox only, the
    # adjustment check is then skipped with that reason
    probe_image: str | None = None
    # warn when connect -> Synchronize answered takes longer (the runtime's limit is 2 s)
    handshake_budget_ms: float = 100.0


def _section(module: str, cls: str, v: Any) -> Any:
    """Validate a profile section a layer owns (its schema lives beside its checks),
    imported when a profile is validated — not when this module is, since the layer
    packages import the core."""
    model = getattr(importlib.import_module(module), cls)
    if isinstance(v, model):
        return v
    try:
        return model.model_validate({} if v is None else v)
    except ValidationError as exc:
        msgs = []
        for err in exc.errors():
            msg = ("unknown field (not in the profile schema)"
                   if err["type"] == "extra_forbidden" else err["msg"])
            msgs.append(f"{_loc(err['loc'])}: {msg}")
        raise ValueError("; ".join(msgs)) from None


class ClusterProfile(Strict):
    """Cluster layers (gpu, sizing, keda): each layer's own section (its schema lives with
    the layer). The platform's facts they share (the Kata RuntimeClass, the GPU resources,
    the run namespace prefix and label) are in ``platform``; the profile fills each
    section's view of them (``namespace_prefix``, ``label`` here)."""

    # views of platform.namespace_prefix / platform.run_label (filled by Profile, not keys)
    namespace_prefix: str = Field(default=DEFAULT_NAMESPACE_PREFIX, exclude=True)
    label: str = Field(default=DEFAULT_RUN_LABEL, exclude=True)
    simulated: bool = False
    gpu: Any = Field(default=None, validate_default=True)
    sizing: Any = Field(default=None, validate_default=True)
    keda: Any = Field(default=None, validate_default=True)

    @field_validator("gpu", mode="before")
    @classmethod
    def _gpu(cls, v: Any) -> Any:
        return _section("kgc.layers.gpu.profile", "GpuProfile", v)

    @field_validator("sizing", mode="before")
    @classmethod
    def _sizing(cls, v: Any) -> Any:
        return _section("kgc.layers.sizing.profile", "SizingProfile", v)

    @field_validator("keda", mode="before")
    @classmethod
    def _keda(cls, v: Any) -> Any:
        return _section("kgc.layers.keda.profile", "KedaProfile", v)


# the cluster sections (``cluster.<layer>``) named as their layers are
CLUSTER_LAYERS = ("gpu", "sizing", "keda")


class Profile(Strict):
    name: str
    description: str = ""
    host: HostProfile = HostProfile()
    platform: PlatformProfile = PlatformProfile()
    runtime: RuntimeProfile = RuntimeProfile()
    nri: NriProfile = NriProfile()
    cluster: ClusterProfile = Field(default_factory=ClusterProfile)
    # checks whose evidence comes from a stand-in on this platform (a lab's stub shim, a
    # simulated cluster): check-id glob -> why. Their verdicts carry simulated=true.
    simulated: dict[str, str] = Field(default_factory=dict)
    # release gating: what blocks, how warn/skip count, required layers (kgc.core.policy)
    policy: Policy = Policy()
    source: str = Field(default="", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _no_second_copy(cls, data: Any) -> Any:
        """A platform fact set in a layer's section too is refused, naming its one place."""
        if isinstance(data, dict) and (why := moved_key(data)):
            raise ValueError(why)
        return data

    @model_validator(mode="after")
    def _sections_read_the_platform(self) -> Profile:
        """Each section's view of the platform (:meth:`PlatformProfile.views`), so that a
        layer handed its own section alone still runs on the platform's class and resource;
        the layer sections are validated again with it (a cross-field rule such as keda's
        baseline-differs-from-Kata sees the platform's class)."""
        views = self.platform.views()
        layers: dict[str, Any] = {}
        for layer in CLUSTER_LAYERS:
            sec = getattr(self.cluster, layer)
            try:
                layers[layer] = type(sec).model_validate({**sec.model_dump(), **views[layer]})
            except ValidationError as exc:
                raise ValueError("; ".join(
                    f"cluster.{layer}" + (f".{_loc(e['loc'])}" if e["loc"] else "")
                    + f": {str(e['msg']).removeprefix('Value error, ')}"
                    for e in exc.errors())) from None
        object.__setattr__(self, "runtime", self.runtime.model_copy(update=views["runtime"]))
        object.__setattr__(self, "cluster", self.cluster.model_copy(
            update={**views["cluster"], **layers}))
        return self

    @model_validator(mode="after")
    def _required_layers_keep_a_subject(self) -> Profile:
        """A layer the policy requires must have something to judge: a cluster section whose
        ``no_subject()`` names why it would judge nothing (``cluster.sizing.shapes: []``) is
        refused, unless ``policy.require_layers`` leaves that layer out. Otherwise the run
        would certify a layer that measured nothing (its checks error, a gate cannot pass)."""
        required = self.policy.require_layers
        for layer in CLUSTER_LAYERS:
            no_subject = getattr(getattr(self.cluster, layer, None), "no_subject", None)
            why = no_subject() if callable(no_subject) else None
            if why and (required is None or layer in required):
                field, _, what = why.partition(": ")
                now = ("unset: every layer is required" if required is None
                       else "now: " + ", ".join(required))
                raise ValueError(
                    f"cluster.{layer}.{field}: {what}: the {layer} layer would judge nothing; "
                    f"give it a subject, or leave {layer!r} out of policy.require_layers "
                    f"({now})")
        return self


_S = TypeVar("_S", bound=BaseModel)


def layer_section(profile: Any, layer: str, model: type[_S]) -> _S:
    """The one accessor of a cluster layer's profile section (``cluster.<layer>``): the
    section itself when ``profile`` already is one, the profile's section, else the
    section's defaults on the profile's platform (or the default platform) — the same
    fallback for every layer, so no layer runs on other defaults than another."""
    if isinstance(profile, model):
        return profile
    sec = getattr(getattr(profile, "cluster", None), layer, None)
    if isinstance(sec, model):
        return sec
    platform = getattr(profile, "platform", None)
    views = (platform if isinstance(platform, PlatformProfile) else PlatformProfile()).views()
    return model.model_validate(views[layer])


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def resolve(name_or_path: str | Path) -> Path:
    """A built-in profile's name (``lab``) or a path to a YAML file."""
    text = str(name_or_path)
    p = Path(text)
    if p.suffix in (".yaml", ".yml") or "/" in text or p.is_file():
        return p
    return profiles_dir() / f"{text}.yaml"


def load_profile(name_or_path: str | Path = DEFAULT_PROFILE) -> Profile:
    path = resolve(name_or_path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        avail = ", ".join(builtin_profiles()) or "(none found)"
        raise ProfileError(f"profile not found: {path} (built-in profiles: {avail})") from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read profile: {exc.strerror or exc}") from None
    try:
        raw = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProfileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except (yaml.YAMLError, RecursionError) as exc:
        first = str(exc).strip().splitlines()
        raise ProfileError(f"{path}: not valid YAML: {' '.join(first[:3])[:300]}") from None
    if not isinstance(raw, dict):
        raise ProfileError(f"{path}: a profile must be a YAML mapping at the top level")
    try:
        prof = Profile.model_validate(raw)
    except ValidationError as exc:
        msgs = []
        for err in exc.errors():
            field = _loc(err["loc"])
            msg = (
                "unknown field (not in the profile schema)"
                if err["type"] == "extra_forbidden"
                else str(err["msg"]).removeprefix("Value error, ")
            )
            if err["type"] == "value_error" and ": " in msg and field.endswith(
                    ("sizing", "keda", "gpu", "(top level)")):
                sub, _, msg = msg.partition(": ")  # a layer section's own field path
                field = sub if field == "(top level)" else f"{field}.{sub}"
            msgs.append(f"{path}: {field}: {msg}")
        raise ProfileError("invalid profile\n  " + "\n  ".join(msgs)) from None
    return prof.model_copy(update={"source": str(path)})
