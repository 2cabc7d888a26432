"""Dynamic Resource Allocation preflight of the gpu layer: evidence and pure evaluators.

Where GPUs are allocated by DRA (``platform.gpu.request.mode`` ``dra-extended`` or
``claim``), the cluster offers them through ``resource.k8s.io/v1`` objects, not through a
device plugin's extended resource in ``status.allocatable``:

- **DeviceClasses** (cluster-scoped): ``spec.extendedResourceName`` lets a plain
  ``nvidia.com/gpu: 1`` request be served by DRA (KEP-5004, ``DRAExtendedResource`` GA in
  1.37), ``spec.selectors[].cel.expression`` picks the class's devices;
- **ResourceSlices** (cluster-scoped, one pool per node and driver): ``spec.driver``,
  ``spec.pool`` (``name``, ``generation``), ``spec.nodeName``, ``spec.devices[]`` with
  ``name``, ``attributes`` (``{"string"|"int"|"bool"|"version": value}``) and ``capacity``
  (``{"value": quantity}``) — the v1 shape of k8s.io/api ``resource/v1/types.go``.

NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu, ``cmd/gpu-kubelet-plugin/
deviceinfo.go``) publishes a whole GPU as ``gpu-<minor>`` with the attributes ``type``
(``gpu``), ``uuid``, ``productName``, ``brand``, ``architecture``,
``cudaComputeCapability``, ``driverVersion``, ``cudaDriverVersion``, the standard
``resource.kubernetes.io/pciBusID`` and ``resource.kubernetes.io/pcieRoot``, and the capacity
``memory``; in VFIO passthrough mode (``PassthroughSupport``) a ``gpu-vfio-<idx>`` twin of
``type`` ``vfio`` with ``uuid``, ``deviceID``, ``vendorID``, ``productName``, the PCI bus id
and the capacity ``addressableMemory``. The twins of one GPU share its PCI bus id, so this
module counts GPUs by PCI bus id, not by device.

Bounded: at most :data:`MAX_SLICES` slices and :data:`MAX_DEVICES` devices per slice are
kept; how many the API listed is recorded too, and more than kgc keeps (or more devices
than the API itself allows in one slice, :data:`API_MAX_DEVICES`) is an ``error`` naming the
object, never a pass on a partial view. Reading is total: a slice of the wrong shape keeps
its ``problems`` and is judged ``error``, never an exception.

The checks (``gpu.dra-api``, ``gpu.dra-device-class``, ``gpu.dra-slices``,
``gpu.dra-both-ways``) are registered on the gpu layer's registry by
:func:`kgc.layers.gpu.checks` (this module does not import it: the evidence here is part of
:class:`kgc.layers.gpu.evidence.ClusterGpuEvidence`). All four skip when the platform does
not use DRA (``platform.gpu.request.mode: device-plugin``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kgc.core.model import Outcome, Severity, Status, errored, failed, passed, skipped, warned
from kgc.core.profile import layer_section
from kgc.evidence.guest import clip
from kgc.evidence.record import OPTIONAL, Record, Rules
from kgc.layers.gpu.profile import GpuProfile

if TYPE_CHECKING:
    from kgc.layers.gpu.evidence import ClusterGpuEvidence, NodeInfo

GROUP = "resource.k8s.io"
VERSION = "v1"
MAX_SLICES = 500  # ResourceSlices kept (one list call with this limit)
MAX_DEVICES = 128  # devices kept per slice
API_MAX_DEVICES = 128  # resource/v1 ResourceSliceMaxDevices: the API refuses more in one slice
MAX_ATTRIBUTES = 64  # per device (the API allows 32 attributes + capacities)
MAX_CLASSES = 200
MAX_SELECTORS = 8
MAX_PROBLEMS = 20
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"  # the standard attribute (deviceattribute)
PCI_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
PRODUCT = "productName"
MEMORY = ("memory", "addressableMemory")  # a whole GPU's, a VFIO twin's
FIT_GO = ("the scheduler delegates an extended resource to DRA only where the node's "
          "allocatable for it is 0 (shouldDelegateResourceToDRA, kubernetes "
          "pkg/scheduler/framework/plugins/noderesources/fit.go)")

RULES = Rules(keys=OPTIONAL)


def _s(v: Any, n: int = 253) -> str | None:
    return clip(v, n) if isinstance(v, str) else None


def _m(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# --------------------------------------------------------------------------- evidence
@dataclass(frozen=True)
class DraDevice(Record):
    """One device of a ResourceSlice: its name (None: it had none) and its attributes and
    capacities as text (``{"string": "NVIDIA H200"}`` -> ``"NVIDIA H200"``)."""

    recorded_as = RULES

    name: str | None
    attributes: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, str] = field(default_factory=dict)

    def attribute(self, name: str, driver: str) -> str | None:
        """An attribute by its bare name or qualified by the driver's domain (the API
        reads a bare name as the driver's)."""
        v = self.attributes.get(name)
        return v if v is not None else self.attributes.get(f"{driver}/{name}")

    def pci_bus_id(self, driver: str) -> str | None:
        return self.attributes.get(PCI_BUS_ID) or self.attribute("pciBusID", driver)

    def memory(self, driver: str) -> str | None:
        for k in MEMORY:
            v = self.capacity.get(k) or self.capacity.get(f"{driver}/{k}")
            if v:
                return v
        return None


@dataclass(frozen=True)
class DraSlice(Record):
    """One ResourceSlice as the API served it (bounded), with what was wrong in it."""

    recorded_as = RULES

    name: str
    driver: str | None
    pool: str | None
    generation: int | None
    node: str | None  # spec.nodeName (None: allNodes / a nodeSelector, or missing)
    device_count: int  # how many devices the slice listed
    devices: tuple[DraDevice, ...] = ()  # the first MAX_DEVICES of them
    problems: tuple[str, ...] = ()  # the slice's malformations, as read


@dataclass(frozen=True)
class DeviceClassInfo(Record):
    recorded_as = RULES

    name: str
    extended_resource_name: str | None = None
    selectors: tuple[str, ...] = ()  # spec.selectors[].cel.expression


@dataclass(frozen=True)
class DraEvidence(Record):
    """What the cluster says about DRA. A ``None`` means it could not be read (or, for the
    lists, was not read because the API is not served); the reason is in ``errors``."""

    recorded_as = RULES

    # the versions of resource.k8s.io the API server serves (API discovery; () = none)
    api_versions: tuple[str, ...] | None
    device_classes: tuple[DeviceClassInfo, ...] | None = None
    slices: tuple[DraSlice, ...] | None = None
    # what the API listed (the lists keep at most MAX_CLASSES / MAX_SLICES); None: unknown
    class_count: int | None = None
    slice_count: int | None = None
    driver: str | None = None  # the driver the slices were listed for (field selector)
    errors: Mapping[str, str] = field(default_factory=dict)

    @property
    def served(self) -> bool:
        return VERSION in (self.api_versions or ())

    def device_class(self, name: str) -> DeviceClassInfo | None:
        return next((c for c in self.device_classes or () if c.name == name), None)


def _attr_text(v: Any) -> str | None:
    """A v1 DeviceAttribute (exactly one of int, bool, string, version) as text."""
    m = _m(v)
    vals = [(k, m[k]) for k in ("string", "version", "int", "bool") if k in m]
    if len(vals) != 1:
        return None
    k, x = vals[0]
    if k == "bool":
        return ("true" if x else "false") if isinstance(x, bool) else None
    if k == "int":
        return str(x) if _int(x) is not None else None
    return _s(x, 256)


def device_from_api(obj: Any, where: str, problems: list[str]) -> DraDevice:
    o = _m(obj)
    if not isinstance(obj, Mapping):
        problems.append(f"{where}: not an object")
    name = _s(o.get("name"), 128)
    if not name:
        problems.append(f"{where}: a device without a name")
    label = f"device {name}" if name else where
    attrs: dict[str, str] = {}
    raw = o.get("attributes")
    if raw is not None and not isinstance(raw, Mapping):
        problems.append(f"{label}: attributes is not a map")
    for k, v in list(_m(raw).items())[:MAX_ATTRIBUTES]:
        t = _attr_text(v)
        if not isinstance(k, str) or t is None:
            problems.append(f"{label}: attribute {str(k)[:64]!r} has no single "
                            "int/bool/string/version value")
            continue
        attrs[k[:128]] = t
    cap: dict[str, str] = {}
    raw = o.get("capacity")
    if raw is not None and not isinstance(raw, Mapping):
        problems.append(f"{label}: capacity is not a map")
    for k, v in list(_m(raw).items())[:MAX_ATTRIBUTES]:
        q = _m(v).get("value")
        if not isinstance(k, str) or not isinstance(q, str | int) or isinstance(q, bool):
            problems.append(f"{label}: capacity {str(k)[:64]!r} has no value")
            continue
        cap[k[:128]] = str(q)[:64]
    return DraDevice(name=name, attributes=attrs, capacity=cap)


def slice_from_api(obj: Any) -> DraSlice:
    """A ResourceSlice (the JSON the API served) -> :class:`DraSlice`. Total."""
    o = _m(obj)
    problems: list[str] = []
    name = _s(_m(o.get("metadata")).get("name")) or ""
    if not name:
        problems.append("a ResourceSlice without metadata.name")
    spec = o.get("spec")
    if not isinstance(spec, Mapping):
        problems.append("no spec")
    sp = _m(spec)
    pool = _m(sp.get("pool"))
    raw = sp.get("devices")
    devices: list[Any] = raw if isinstance(raw, list) else []
    if raw is not None and not isinstance(raw, list):
        problems.append("spec.devices is not a list")
    count = len(devices)  # counted without walking them: a huge list costs nothing here
    kept = tuple(device_from_api(d, f"spec.devices[{i}]", problems)
                 for i, d in enumerate(devices[:MAX_DEVICES]))
    names = [d.name for d in kept if d.name]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        problems.append(f"device name(s) listed twice: {', '.join(dup[:5])}")
    driver = _s(sp.get("driver"), 63)
    if not driver:
        problems.append("no spec.driver")
    return DraSlice(
        name=name, driver=driver, pool=_s(pool.get("name")),
        generation=_int(pool.get("generation")),
        node=_s(sp.get("nodeName")), device_count=count, devices=kept,
        problems=tuple(problems[:MAX_PROBLEMS])
        + ((f"... {len(problems) - MAX_PROBLEMS} more problem(s)",)
           if len(problems) > MAX_PROBLEMS else ()),
    )


def device_class_from_api(obj: Any) -> DeviceClassInfo:
    o = _m(obj)
    sp = _m(o.get("spec"))
    sels = sp.get("selectors")
    exprs = tuple(e for e in (_s(_m(_m(s).get("cel")).get("expression"), 2048)
                              for s in (sels if isinstance(sels, list) else [])[:MAX_SELECTORS])
                  if e is not None)
    return DeviceClassInfo(name=_s(_m(o.get("metadata")).get("name")) or "",
                           extended_resource_name=_s(sp.get("extendedResourceName")),
                           selectors=exprs)


def api_versions_from_discovery(doc: Any) -> tuple[str, ...]:
    """The versions of resource.k8s.io in an ``/apis`` APIGroupList (() when absent)."""
    for g in _m(doc).get("groups") or []:
        if _m(g).get("name") == GROUP:
            vs = _m(g).get("versions")
            return tuple(sorted({v for v in (_s(_m(x).get("version"), 32)
                                             for x in (vs if isinstance(vs, list) else []))
                                 if v}))
    return ()


def _remaining(doc: Any, items: list[Any]) -> int | None:
    meta = _m(_m(doc).get("metadata"))
    rest = _int(meta.get("remainingItemCount"))
    if rest is not None:
        return len(items) + max(rest, 0)
    return None if meta.get("continue") else len(items)


def evidence_from_api(discovery: Any, classes: Any, slices: Any, *, driver: str | None,
                      errors: Mapping[str, str] | None = None) -> DraEvidence:
    """The three API answers (``None``: that call failed, its reason in ``errors``) ->
    :class:`DraEvidence`."""
    errs = dict(errors or {})
    versions = None if discovery is None else api_versions_from_discovery(discovery)
    c_raw = None if classes is None else _m(classes).get("items")
    c_items = None if classes is None else [
        i for i in (c_raw if isinstance(c_raw, list) else []) if isinstance(i, Mapping)]
    s_raw = None if slices is None else _m(slices).get("items")
    s_items = None if slices is None else (s_raw if isinstance(s_raw, list) else [])
    return DraEvidence(
        api_versions=versions,
        device_classes=None if c_items is None else tuple(
            sorted((device_class_from_api(c) for c in c_items[:MAX_CLASSES]),
                   key=lambda c: c.name)),
        slices=None if s_items is None else tuple(
            sorted((slice_from_api(s) for s in s_items[:MAX_SLICES]),
                   key=lambda s: (s.node or "", s.name))),
        class_count=None if c_items is None else _remaining(classes, c_items),
        slice_count=None if s_items is None else _remaining(slices, s_items),
        driver=driver,
        errors=errs,
    )


# --------------------------------------------------------------------------- helpers
def settings(profile: Any) -> GpuProfile:
    return layer_section(profile, "gpu", GpuProfile)


NOT_DRA = ("platform.gpu.request.mode: device-plugin: GPUs are not allocated by DRA "
           "(set dra-extended or claim to judge DRA)")


def _not_judged(ev: ClusterGpuEvidence, gp: GpuProfile, *, lists: bool = True
                ) -> Outcome | DraEvidence:
    """The skip/error that applies before a DRA check can judge, or the evidence."""
    if not gp.request.dra:
        return skipped(NOT_DRA)
    d = ev.dra
    if d is None:
        return errored("no DRA evidence was recorded (a bundle from before kgc read "
                       "resource.k8s.io): nothing to judge",
                       "Record the bundle again with this kgc (`kgc snapshot --kubeconfig`).")
    if d.api_versions is None:
        return errored(f"API discovery failed: {d.errors.get('discovery', 'no reason')}",
                       "Check that the run's credentials may read /apis (discovery is "
                       "granted to every authenticated user by system:discovery).")
    if lists and not d.served:
        return skipped(f"{GROUP}/{VERSION} is not served (see gpu.dra-api)",
                       api_versions=list(d.api_versions))
    return d


def slices_of(d: DraEvidence, driver: str) -> list[DraSlice]:
    """The current slices of ``driver``: per pool, the highest generation only (older
    generations are being replaced, the scheduler ignores them)."""
    mine = [s for s in d.slices or () if s.driver == driver]
    top: dict[tuple[str | None, str | None], int] = {}
    for s in mine:
        k = (s.node, s.pool)
        top[k] = max(top.get(k, -1), s.generation if s.generation is not None else -1)
    return [s for s in mine
            if (s.generation if s.generation is not None else -1) == top[(s.node, s.pool)]]


def dra_gpu_nodes(ev: ClusterGpuEvidence, gp: GpuProfile) -> list[NodeInfo]:
    """The GPU nodes under DRA (inside ``node_selector``): labelled as GPU nodes, with an
    nvidia.com/* capacity, or publishing slices of the profile's driver."""
    d = ev.dra
    publishing = {s.node for s in slices_of(d, gp.request.driver)} if d is not None else set()
    out = []
    for n in ev.nodes or ():
        if any(n.labels.get(k) != v for k, v in gp.node_selector.items()):
            continue
        if gp.label_matches(dict(n.labels)) or n.gpu_resources() or n.name in publishing:
            out.append(n)
    return out


def node_gpus(d: DraEvidence, node: str, driver: str) -> dict[str, list[str]]:
    """PCI bus id (or device name without one) -> the devices of ``node`` that are it."""
    out: dict[str, list[str]] = {}
    for s in slices_of(d, driver):
        if s.node != node:
            continue
        for dev in s.devices:
            out.setdefault(dev.pci_bus_id(driver) or f"device {dev.name}", []).append(
                f"{s.name}/{dev.name}")
    return out


def requested_name(gp: GpuProfile, d: DraEvidence | None) -> str:
    """The extended resource a ``dra-extended`` pod requests. No node advertises a name to
    choose by (allocatable is 0 by design), so it is the one of ``platform.gpu.resources``
    that the profile's DeviceClass maps in ``spec.extendedResourceName``, else
    ``platform.gpu.resources[0]`` (and ``gpu.dra-device-class`` fails)."""
    dc = d.device_class(gp.request.device_class) if d is not None else None
    if dc is not None and dc.extended_resource_name in gp.resources:
        return dc.extended_resource_name
    return gp.resources[0]


# --------------------------------------------------------------------------- checks
def dra_api(ev: ClusterGpuEvidence, profile: Any) -> Outcome:
    gp = settings(profile)
    got = _not_judged(ev, gp, lists=False)
    if isinstance(got, Outcome):
        return got
    vs = list(got.api_versions or ())
    if not got.served:
        return failed(
            f"{GROUP}/{VERSION} is not served (the API server serves "
            f"{', '.join(f'{GROUP}/{v}' for v in vs) or f'no version of {GROUP}'})",
            "DRA is GA in resource.k8s.io/v1 since Kubernetes 1.34: upgrade the control plane "
            "(or enable the v1 API with --runtime-config=resource.k8s.io/v1=true), or set "
            "platform.gpu.request.mode: device-plugin if GPUs are not allocated by DRA.",
            expected=f"{GROUP}/{VERSION}", found=", ".join(vs) or "none", api_versions=vs)
    return passed(f"{GROUP}/{VERSION} is served", api_versions=vs)


def dra_device_class(ev: ClusterGpuEvidence, profile: Any) -> Outcome:
    gp = settings(profile)
    got = _not_judged(ev, gp)
    if isinstance(got, Outcome):
        return got
    want = gp.request.device_class
    if got.device_classes is None:
        return errored(f"DeviceClasses could not be listed: "
                       f"{got.errors.get('device_classes', 'no reason')}",
                       "Grant the run's ServiceAccount get/list on deviceclasses.resource.k8s.io "
                       "(kgc rbac certify).")
    names = [c.name for c in got.device_classes]
    dc = got.device_class(want)
    if dc is None and got.class_count is not None and got.class_count > len(names):
        return errored(f"the API lists {got.class_count} DeviceClasses, kgc keeps "
                       f"{len(names)}, and {want} is not among them", class_count=got.class_count)
    if dc is None:
        return failed(
            f"DeviceClass {want!r} does not exist (the cluster has: {', '.join(names) or 'none'})",
            f"Install the DRA driver of {gp.request.driver} (NVIDIA's chart creates DeviceClass "
            "gpu.nvidia.com, and vfio.gpu.nvidia.com with PassthroughSupport), or set "
            "platform.gpu.request.device_class to one of: " + (", ".join(names) or "(none)"),
            expected=f"DeviceClass {want}", found=", ".join(names) or "none",
            device_classes=names)
    dc_ev = dc.to_dict()
    if gp.request.mode == "dra-extended":
        name = requested_name(gp, got)
        mapped = [c.name for c in got.device_classes if c.extended_resource_name == name]
        if dc.extended_resource_name != name:
            # the classes that do map one of the profile's resources (the fix may be to point
            # platform.gpu.request.device_class at one of them), whichever resource it is
            maps = [f"{c.name} maps {c.extended_resource_name}" for c in got.device_classes
                    if c.name != dc.name and c.extended_resource_name in gp.resources]
            other = f"; {', '.join(maps)} instead" if maps else ""
            has = (f"has spec.extendedResourceName {dc.extended_resource_name!r}"
                   if dc.extended_resource_name else "has no spec.extendedResourceName")
            return failed(
                f"DeviceClass {dc.name} {has}, none of the resources a dra-extended pod "
                f"may request (platform.gpu.resources: {', '.join(gp.resources)}){other}",
                f"Set spec.extendedResourceName: {name} on DeviceClass {dc.name} (NVIDIA's "
                "chart sets nvidia.com/gpu on gpu.nvidia.com), or point "
                "platform.gpu.request.device_class / platform.gpu.resources at the pair the "
                "cluster uses. Without it the request is never served by DRA.",
                expected=f"extendedResourceName {name}",
                found=dc.extended_resource_name or "none", device_class=dc_ev)
        if len(mapped) > 1:
            return warned(
                f"DeviceClasses {', '.join(mapped)} all map {name}: which one serves a request "
                "is the scheduler's choice, not the profile's",
                f"Leave spec.extendedResourceName: {name} on {dc.name} only.", device_class=dc_ev)
        return passed(f"DeviceClass {dc.name} exists and maps the extended resource {name}",
                      device_class=dc_ev)
    return passed(f"DeviceClass {dc.name} exists ({len(dc.selectors)} CEL selector(s))",
                  device_class=dc_ev)


def _slice_errors(mine: list[DraSlice]) -> list[str]:
    out = []
    for s in mine:
        if s.device_count > API_MAX_DEVICES or s.device_count > len(s.devices):
            out.append(f"ResourceSlice {s.name or '?'} lists {s.device_count} devices "
                       f"(the API allows {API_MAX_DEVICES} per slice; kgc keeps {MAX_DEVICES})")
        out.extend(f"ResourceSlice {s.name or '?'}: {p}" for p in s.problems)
    return out


def _device_errors(s: DraSlice, driver: str) -> list[str]:
    out = []
    for dev in s.devices:
        if not dev.name:
            continue  # already a problem of the slice
        missing = []
        bus = dev.pci_bus_id(driver)
        if bus is None:
            missing.append(f"the PCI bus id ({PCI_BUS_ID})")
        elif not PCI_BDF.match(bus):
            out.append(f"ResourceSlice {s.name} device {dev.name}: PCI bus id {bus!r} is not "
                       "an extended BDF (dddd:bb:dd.f)")
        if not dev.attribute(PRODUCT, driver):
            missing.append(f"the product ({PRODUCT})")
        if dev.memory(driver) is None:
            missing.append(f"the memory (capacity {' or '.join(MEMORY)})")
        if missing:
            out.append(f"ResourceSlice {s.name} device {dev.name} lacks {', '.join(missing)}")
    return out


def dra_slices(ev: ClusterGpuEvidence, profile: Any) -> Outcome:  # noqa: PLR0911
    gp = settings(profile)
    got = _not_judged(ev, gp)
    if isinstance(got, Outcome):
        return got
    drv = gp.request.driver
    if got.slices is None:
        return errored(f"ResourceSlices could not be listed: "
                       f"{got.errors.get('slices', 'no reason')}",
                       "Grant the run's ServiceAccount get/list on "
                       "resourceslices.resource.k8s.io (kgc rbac certify).")
    if ev.nodes is None:
        return errored(f"nodes could not be listed: {ev.errors.get('nodes', 'no reason')}")
    if got.slice_count is None or got.slice_count > len(got.slices):
        return errored(
            f"the API lists {got.slice_count if got.slice_count is not None else 'more'} "
            f"ResourceSlices of {drv}; kgc keeps {MAX_SLICES} and judges none on a partial "
            "view", slice_count=got.slice_count)
    mine = slices_of(got, drv)
    bad = _slice_errors(mine)
    for s in mine:
        if not s.problems:
            bad.extend(_device_errors(s, drv))
    if bad:
        return errored(f"{len(bad)} malformed ResourceSlice entr(ies) of {drv}: "
                       + "; ".join(bad[:10]),
                       f"Read the DRA driver's kubelet plugin log on the node: {drv} must "
                       "publish every GPU with a name, its PCI bus id, product and memory.",
                       problems=bad[:50])
    nodes = dra_gpu_nodes(ev, gp)
    if not nodes:
        sel = f" matching {gp.node_selector}" if gp.node_selector else ""
        return failed(f"no GPU node{sel}: none is labelled "
                      f"({', '.join(gp.gpu_node_labels)}) or publishes ResourceSlices of {drv}",
                      f"Deploy the DRA driver {drv} (its kubelet plugin) on the GPU nodes.",
                      expected=f"ResourceSlices of {drv} on the GPU nodes", found="none")
    want = gp.request.devices_per_node
    rows: dict[str, int] = {}
    none_, few, many = [], [], []
    for n in nodes:
        gpus = node_gpus(got, n.name, drv)
        rows[n.name] = len(gpus)
        if not gpus:
            none_.append(n.name)
        elif want is not None and len(gpus) < want:
            few.append(f"{n.name} ({len(gpus)} of {want})")
        elif want is not None and len(gpus) > want:
            many.append(f"{n.name} ({len(gpus)}, the profile expects {want})")
    fix = (f"Check the DRA driver's kubelet plugin on the named node(s): it must run there and "
           f"publish one device per GPU in the node's ResourceSlice pool (driver {drv}).")
    if none_ or few:
        parts = ([f"no ResourceSlice device of {drv} on {', '.join(none_)}"] if none_ else []) \
            + ([f"too few GPUs on {', '.join(few)}"] if few else [])
        return failed("; ".join(parts), fix,
                      expected=f"{want or '>= 1'} GPU(s) per GPU node", found="; ".join(parts),
                      gpus=rows)
    if many:
        return warned(f"more GPUs than the profile expects: {', '.join(many)}",
                      "Set platform.gpu.request.devices_per_node to what the nodes hold.",
                      gpus=rows)
    return passed(f"{len(nodes)} GPU node(s) publish {drv} devices with PCI bus id, product and "
                  "memory: " + ", ".join(f"{k}={v}" for k, v in rows.items()), gpus=rows)


def both_ways_names(ev: ClusterGpuEvidence, gp: GpuProfile) -> list[str]:
    """The extended resources a node must not advertise while it publishes DRA devices:
    the DeviceClass's extendedResourceName, else the profile's resources."""
    dc = ev.dra.device_class(gp.request.device_class) if ev.dra is not None else None
    if dc is not None and dc.extended_resource_name:
        return [dc.extended_resource_name]
    return list(gp.resources)


def dra_both_ways(ev: ClusterGpuEvidence, profile: Any) -> Outcome:
    gp = settings(profile)
    got = _not_judged(ev, gp)
    if isinstance(got, Outcome):
        return got
    if got.slices is None:
        return errored(f"ResourceSlices could not be listed: "
                       f"{got.errors.get('slices', 'no reason')}")
    if ev.nodes is None:
        return errored(f"nodes could not be listed: {ev.errors.get('nodes', 'no reason')}")
    drv = gp.request.driver
    names = both_ways_names(ev, gp)
    both = []
    for n in dra_gpu_nodes(ev, gp):
        gpus = node_gpus(got, n.name, drv)
        adv = [f"{r}={n.allocatable[r]}" for r in names if (n.count(r) or 0) > 0]
        if gpus and adv:
            both.append(f"{n.name} (allocatable {', '.join(adv)} and {len(gpus)} DRA GPU(s) "
                        f"of {drv})")
    if both:
        return failed(
            f"{len(both)} node(s) advertise GPUs both ways: {'; '.join(both)}. {FIT_GO}, so "
            "there the request goes to the device plugin, and both allocators may hand out "
            "the same GPU",
            "Run one allocator per node: remove the device plugin (or its resource) from "
            f"nodes where {drv} publishes the GPUs, or stop the DRA driver there and set "
            "platform.gpu.request.mode: device-plugin.",
            expected=f"allocatable {' / '.join(names)} 0 where DRA publishes GPUs",
            found="; ".join(both), nodes=both)
    return passed(f"no node advertises {' or '.join(names)} in allocatable while publishing "
                  f"{drv} devices")


def nodes_advertise_dra(ev: ClusterGpuEvidence, gp: GpuProfile) -> Outcome:
    """``gpu.nodes-advertise`` in the DRA form: a GPU node offers its GPUs as ResourceSlice
    devices of the profile's driver; allocatable 0 for the resource is expected (FIT_GO)."""
    if ev.nodes is None:
        return errored(f"nodes could not be listed: {ev.errors.get('nodes', 'no reason')}",
                       "Grant the run's ServiceAccount list on nodes (see the RBAC manifest).")
    got = _not_judged(ev, gp)
    if isinstance(got, Outcome):
        if got.status is Status.SKIP:  # the API is not served: nothing can be offered by DRA
            return failed(f"{GROUP}/{VERSION} is not served, so no node offers GPUs by DRA "
                          "(see gpu.dra-api)", expected=f"{GROUP}/{VERSION}",
                          found=", ".join(ev.dra.api_versions or ()) if ev.dra else "none")
        return got
    if got.slices is None:
        return errored(f"ResourceSlices could not be listed: "
                       f"{got.errors.get('slices', 'no reason')}",
                       "Grant the run's ServiceAccount list on resourceslices.resource.k8s.io.")
    drv = gp.request.driver
    rows, none_ = {}, []
    nodes = dra_gpu_nodes(ev, gp)
    for n in nodes:
        gpus = node_gpus(got, n.name, drv)
        rows[n.name] = f"{len(gpus)} DRA GPU(s) of {drv}"
        if not gpus:
            none_.append(n.name)
    fix = (f"Deploy the DRA driver {drv} so that its kubelet plugin publishes the GPUs of "
           "every GPU node in ResourceSlices (see gpu.dra-slices).")
    if not nodes:
        return failed(f"no GPU node publishes {drv} devices or carries a GPU label "
                      f"({', '.join(gp.gpu_node_labels)}); {len(ev.nodes)} node(s) in the "
                      "cluster", fix, expected=f"ResourceSlices of {drv}", found="none")
    if none_:
        return failed(f"{len(none_)} GPU node(s) offer no GPU by DRA: {', '.join(none_)} "
                      f"publish no {drv} device", fix,
                      expected=f"{drv} devices on every GPU node", found=", ".join(none_),
                      nodes=rows)
    return passed(f"{len(nodes)} GPU node(s) offer GPUs by DRA ({gp.request.mode}; "
                  "allocatable 0 is expected): " + ", ".join(f"{k} {v}" for k, v in rows.items()),
                  nodes=rows)


def register(scoped: Callable[..., Any]) -> None:
    """Register the four checks with the gpu layer's ``_scoped`` (cluster scope)."""
    scoped("cluster", "gpu.dra-api",
           title="resource.k8s.io/v1 (Dynamic Resource Allocation) is served",
           remediation="Upgrade the control plane to a release that serves resource.k8s.io/v1.",
           severity=Severity.BLOCKER)(dra_api)
    scoped("cluster", "gpu.dra-device-class",
           title="The profile's DeviceClass exists (and maps the requested extended resource)",
           remediation="Install the DRA driver's DeviceClass (spec.extendedResourceName for "
           "dra-extended).", severity=Severity.BLOCKER)(dra_device_class)
    scoped("cluster", "gpu.dra-slices",
           title="Each GPU node publishes ResourceSlices with its GPUs (PCI bus id, product, "
           "memory)", remediation="Run the DRA driver's kubelet plugin on every GPU node.",
           severity=Severity.BLOCKER)(dra_slices)
    scoped("cluster", "gpu.dra-both-ways",
           title="No node advertises the GPU both in allocatable and as DRA devices",
           remediation="One allocator per node: the device plugin or the DRA driver.",
           severity=Severity.CRITICAL)(dra_both_ways)


DRA_CHECKS = ("gpu.dra-api", "gpu.dra-device-class", "gpu.dra-slices", "gpu.dra-both-ways")
