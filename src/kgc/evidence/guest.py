"""Parse what the in-guest collector (:mod:`kgc.guest`) printed: the evidence the GPU-pod
and VM-sizing layers judge.

Two entry points, one result shape (:class:`GuestEvidence`):

- :func:`parse_guest_output` reads the collector's raw output (a pod's log): it finds the
  record boundary itself, so the caller needs nothing but the text;
- :func:`parse_guest` reads an already split snapshot (a recorded ``kgc-bundle/1`` file from
  ``python3 -m kgc.guest --out``, as in ``fixtures/guest/``).

Pure and total: malformed input yields ``None`` fields and entries in ``problems``, never an
exception; inputs are bounded (:data:`MAX_OUTPUT_CHARS`, :data:`MAX_XML_CHARS`) so a hostile
or runaway pod cannot make the parser hang. The nvidia-smi XML goes through ``defusedxml``:
no entity expansion, no DTD or external resource is ever fetched.

``GuestEvidence.to_dict`` / ``from_dict`` record and replay it; ``from_dict`` raises
:class:`kgc.core.model.EvidenceError` (one line, naming the field) on malformed input.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from xml.etree.ElementTree import Element, ParseError

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import fromstring as _safe_fromstring

from kgc.core.hostfs import FileNotRead, HostSnapshot, parse_output
from kgc.core.model import EvidenceError

PCI = "/sys/bus/pci/devices"
IOMMU_GROUPS = "/sys/kernel/iommu_groups"

# A pod log is at most a few hundred KiB (nvidia-smi -q -x is ~25 KiB per GPU); anything
# beyond these bounds is cut, and the cut is reported in ``problems``.
MAX_OUTPUT_CHARS = 8 * 1024 * 1024
MAX_XML_CHARS = 2 * 1024 * 1024
MAX_TEXT_CHARS = 4096  # free-text fields kept in the evidence (error lines, cmdline)

_BOUNDARY_V = re.compile(r"^(@@KGC-[0-9a-f]{8,64}@@) V \S+$", re.M)

# IORESOURCE_* flag bits (include/linux/ioport.h) as sysfs `resource` prints them
IORESOURCE_IO = 0x100
IORESOURCE_MEM = 0x200
IORESOURCE_PREFETCH = 0x2000
IORESOURCE_MEM_64 = 0x100000
ROM_INDEX = 6


# --------------------------------------------------------------------------- strict dicts
T = TypeVar("T")


class Fields:
    """Typed reads from a recorded dict; every failure is one :class:`EvidenceError` line
    naming the field path (``pods[0].guest.vcpus: expected int, got str``)."""

    def __init__(self, d: Any, where: str) -> None:
        if not isinstance(d, Mapping):
            raise EvidenceError(f"{where or 'evidence'}: expected an object, got {_tn(d)}")
        self.d = d
        self.where = where

    def _path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str, optional: bool) -> Any:
        if key not in self.d:
            if optional:
                return None
            raise EvidenceError(f"{self._path(key)}: missing")
        return self.d[key]

    def _typed(self, key: str, types: tuple[type, ...], name: str, optional: bool) -> Any:
        v = self._get(key, optional)
        if v is None:
            if optional:
                return None
            raise EvidenceError(f"{self._path(key)}: expected {name}, got null")
        if isinstance(v, bool) and bool not in types:
            raise EvidenceError(f"{self._path(key)}: expected {name}, got bool")
        if not isinstance(v, types):
            raise EvidenceError(f"{self._path(key)}: expected {name}, got {_tn(v)}")
        return v

    def text(self, key: str) -> str:
        return self._typed(key, (str,), "string", False)

    def opt_str(self, key: str) -> str | None:
        return self._typed(key, (str,), "string", True)

    def integer(self, key: str) -> int:
        return self._typed(key, (int,), "int", False)

    def opt_int(self, key: str) -> int | None:
        return self._typed(key, (int,), "int", True)

    def opt_float(self, key: str) -> float | None:
        v = self._typed(key, (int, float), "number", True)
        return None if v is None else float(v)

    def flag(self, key: str) -> bool:
        return self._typed(key, (bool,), "bool", False)

    def opt_flag(self, key: str) -> bool | None:
        return self._typed(key, (bool,), "bool", True)

    def str_map(self, key: str, optional: bool = False) -> dict[str, str]:
        v = self._typed(key, (dict,), "object", optional)
        if v is None:
            return {}
        for k, x in v.items():
            if not isinstance(x, str):
                raise EvidenceError(f"{self._path(key)}.{k}: expected string, got {_tn(x)}")
        return dict(v)

    def strs(self, key: str) -> tuple[str, ...]:
        v = self._typed(key, (list, tuple), "list", False)
        for i, x in enumerate(v):
            if not isinstance(x, str):
                raise EvidenceError(f"{self._path(key)}[{i}]: expected string, got {_tn(x)}")
        return tuple(v)

    def opt_strs(self, key: str) -> tuple[str, ...] | None:
        if self._get(key, True) is None:
            return None
        return self.strs(key)

    def objs(self, key: str, build: Callable[[Any, str], T]) -> tuple[T, ...]:
        v = self._typed(key, (list, tuple), "list", False)
        return tuple(build(x, f"{self._path(key)}[{i}]") for i, x in enumerate(v))

    def opt_objs(self, key: str, build: Callable[[Any, str], T]) -> tuple[T, ...] | None:
        if self._get(key, True) is None:
            return None
        return self.objs(key, build)

    def obj(self, key: str, build: Callable[[Any, str], T]) -> T:
        v = self._get(key, False)
        if v is None:
            raise EvidenceError(f"{self._path(key)}: expected an object, got null")
        return build(v, self._path(key))

    def opt_obj(self, key: str, build: Callable[[Any, str], T]) -> T | None:
        v = self._get(key, True)
        return None if v is None else build(v, self._path(key))

    def opt_json_obj(self, key: str) -> dict[str, Any] | None:
        return self._typed(key, (dict,), "object", True)


def _tn(v: Any) -> str:
    return "null" if v is None else type(v).__name__


def clip(text: str | None, n: int = MAX_TEXT_CHARS) -> str | None:
    if text is None:
        return None
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"


# --------------------------------------------------------------------------- nvidia-smi

def _unless_default(d: dict[str, Any]) -> dict[str, Any]:
    """The fields added with MIG/health/NVML-message judging, left out while at their
    defaults (None, {}, no messages): recordings made before them, and every one that has
    none, dump back to the same JSON (tests/test_record.py). An empty MIG device list ([]:
    the report says None) is not a default and stays."""
    return {k: v for k, v in d.items()
            if v is not None and v != {} and not (k == "smi_messages" and v == [])}

MAX_HEALTH_FIELDS = 128  # health leaves kept per GPU (a report carries about 60)
MAX_MIG_DEVICES = 16  # an H100 has at most 7 MIG devices
MAX_SMI_MESSAGES = 20  # nvidia-smi's own diagnostic lines kept

# The subtrees of a ``<gpu>`` (and of a ``<mig_device>``) that say whether the GPU is healthy;
# kept verbatim as "path: text" and judged by kgc.layers.gpu.smi (gpu.health). Of the clock
# event ("throttle" before driver 535) reasons only the slowdowns are health; page lists and
# per-process data are not kept.
_HEALTH_TREES = ("ecc_mode", "ecc_errors", "retired_pages", "remapped_rows",
                 "clocks_event_reasons", "clocks_throttle_reasons", "gpu_recovery_action",
                 "ecc_error_count")
_SLOWDOWN = re.compile(r"(hw_slowdown|hw_thermal_slowdown|hw_power_brake_slowdown|"
                       r"sw_thermal_slowdown)$")
# lines nvidia-smi prints about NVML/driver failures, beside or instead of its report
SMI_MESSAGE = re.compile(r"^\s*(WARNING:|Unable to determine the device handle|Failed to "
                         r"initialize NVML|NVML library version|No devices were found|"
                         r"NVIDIA-SMI has failed|Unable to)", re.I)


@dataclass(frozen=True)
class SmiMigDevice:
    """One ``<mig_device>`` of a GPU in MIG mode: a slice the workload may get."""

    index: int | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    memory_total_mib: int | None
    multiprocessors: int | None = None
    health: Mapping[str, str] = field(default_factory=dict)  # ecc_error_count/...

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "gpu_instance_id": self.gpu_instance_id,
                "compute_instance_id": self.compute_instance_id,
                "memory_total_mib": self.memory_total_mib,
                "multiprocessors": self.multiprocessors, "health": dict(self.health)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "mig_device") -> SmiMigDevice:
        f = Fields(d, where)
        return cls(index=f.opt_int("index"), gpu_instance_id=f.opt_int("gpu_instance_id"),
                   compute_instance_id=f.opt_int("compute_instance_id"),
                   memory_total_mib=f.opt_int("memory_total_mib"),
                   multiprocessors=f.opt_int("multiprocessors"),
                   health=f.str_map("health", optional=True))

    def describe(self) -> str:
        mem = f"{self.memory_total_mib} MiB" if self.memory_total_mib is not None else "? MiB"
        sms = f", {self.multiprocessors} SMs" if self.multiprocessors is not None else ""
        return (f"MIG device {self.index if self.index is not None else '?'} (GI "
                f"{self.gpu_instance_id if self.gpu_instance_id is not None else '?'}, CI "
                f"{self.compute_instance_id if self.compute_instance_id is not None else '?'}"
                f", {mem}{sms})")


@dataclass(frozen=True)
class SmiGpu:
    bus_id: str | None
    product_name: str | None
    uuid: str | None
    memory_total_mib: int | None
    pci_device_id: str | None  # e.g. "233510DE" as nvidia-smi prints it
    virtualization_mode: str | None = None  # "Pass-Through" inside a VM with a VFIO GPU
    mig_current: str | None = None  # mig_mode/current_mig: Enabled, Disabled, N/A
    mig_pending: str | None = None  # mig_mode/pending_mig (after the next GPU reset)
    # the MIG devices listed (() when the report says None); None: no <mig_devices> at all
    mig_devices: tuple[SmiMigDevice, ...] | None = None
    # the health fields as the report printed them ("ecc_errors/volatile/dram_uncorrectable":
    # "0", "remapped_rows/remapped_row_failure": "No", ...); {}: the report carries none
    health: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "bus_id": self.bus_id,
            "product_name": self.product_name,
            "uuid": self.uuid,
            "memory_total_mib": self.memory_total_mib,
            "pci_device_id": self.pci_device_id,
            "virtualization_mode": self.virtualization_mode,
            **_unless_default({
                "mig_current": self.mig_current,
                "mig_pending": self.mig_pending,
                "mig_devices": (None if self.mig_devices is None
                                else [m.to_dict() for m in self.mig_devices]),
                "health": dict(self.health),
            }),
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "smi_gpu") -> SmiGpu:
        f = Fields(d, where)
        return cls(
            bus_id=f.opt_str("bus_id"),
            product_name=f.opt_str("product_name"),
            uuid=f.opt_str("uuid"),
            memory_total_mib=f.opt_int("memory_total_mib"),
            pci_device_id=f.opt_str("pci_device_id"),
            virtualization_mode=f.opt_str("virtualization_mode"),
            mig_current=f.opt_str("mig_current"),
            mig_pending=f.opt_str("mig_pending"),
            mig_devices=f.opt_objs("mig_devices", SmiMigDevice.from_dict),
            health=f.str_map("health", optional=True),
        )

    @property
    def mig_enabled(self) -> bool:
        return (self.mig_current or "").strip().lower() == "enabled"

    @property
    def name(self) -> str:
        """How a verdict names this GPU: its UUID, else its bus id."""
        return self.uuid or self.bus_id or "?"

    def describe(self) -> str:
        mem = f"{self.memory_total_mib} MiB" if self.memory_total_mib is not None else "? MiB"
        return f"{self.product_name or '?'} ({self.uuid or 'no UUID'}, {self.bus_id or '?'}, {mem})"


@dataclass(frozen=True)
class NvidiaSmi:
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[SmiGpu, ...]
    attached_gpus: int | None = None
    source: str = "xml"  # "xml" (nvidia-smi -q -x) or "csv" (the query fallback)

    def to_dict(self) -> dict[str, Any]:
        return {
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "attached_gpus": self.attached_gpus,
            "source": self.source,
            "gpus": [g.to_dict() for g in self.gpus],
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "smi") -> NvidiaSmi:
        f = Fields(d, where)
        return cls(
            driver_version=f.opt_str("driver_version"),
            cuda_version=f.opt_str("cuda_version"),
            gpus=f.objs("gpus", SmiGpu.from_dict),
            attached_gpus=f.opt_int("attached_gpus"),
            source=f.text("source"),
        )


@dataclass(frozen=True)
class SmiRead:
    """What ``nvidia-smi -q -x`` printed: its report (None when there is none or it is
    malformed), what is wrong with it, and nvidia-smi's own lines outside the report (NVML
    errors such as ``Unable to determine the device handle for GPU ...: GPU is lost``)."""

    report: NvidiaSmi | None
    error: str | None = None  # the report is there but unusable: why
    messages: tuple[str, ...] = ()


def _mib(text: str | None) -> int | None:
    m = re.match(r"\s*(\d{1,12})\s*MiB", text or "")
    return int(m.group(1)) if m else None


def _int_text(text: str | None) -> int | None:
    t = (text or "").strip()
    return int(t) if t.isdigit() and len(t) <= 12 else None


def _text(el: Element, path: str) -> str | None:
    t = el.findtext(path)
    if t is None:
        return None
    t = t.strip()
    return clip(t, 256) if t else None


def _health(el: Element) -> dict[str, str]:
    """The health subtrees of a ``<gpu>``/``<mig_device>`` as {"a/b/c": "text"}: leaves only,
    in document order, bounded."""
    out: dict[str, str] = {}

    def walk(node: Element, path: str) -> None:
        kids = list(node)
        if not kids:
            if len(out) < MAX_HEALTH_FIELDS and (not path.startswith("clocks_")
                                                 or _SLOWDOWN.search(path)):
                out[clip(path, 200) or ""] = clip(" ".join((node.text or "").split()), 64) or ""
            return
        for k in kids:
            if "pagelist" not in k.tag:
                walk(k, f"{path}/{k.tag}")

    for tree in _HEALTH_TREES:
        for node in el.findall(tree):
            walk(node, tree)
    return out


def _mig_devices(g: Element) -> tuple[SmiMigDevice, ...] | None:
    box = g.find("mig_devices")
    if box is None:
        return None
    return tuple(
        SmiMigDevice(
            index=_int_text(m.findtext("index")),
            gpu_instance_id=_int_text(m.findtext("gpu_instance_id")),
            compute_instance_id=_int_text(m.findtext("compute_instance_id")),
            memory_total_mib=_mib(m.findtext("fb_memory_usage/total")),
            multiprocessors=_int_text(m.findtext("device_attributes/shared/"
                                                 "multiprocessor_count")),
            health=_health(m),
        )
        for m in box.findall("mig_device")[:MAX_MIG_DEVICES]
    )


def smi_messages(text: str | None) -> tuple[str, ...]:
    """nvidia-smi's diagnostic lines (:data:`SMI_MESSAGE`) in any of its outputs."""
    lines = (ln.strip() for ln in (text or "")[:MAX_XML_CHARS].splitlines())
    return tuple(clip(ln, 300) or "" for ln in lines if SMI_MESSAGE.match(ln))[:MAX_SMI_MESSAGES]


_REPORT = re.compile(r"(<\?xml[^>]{0,200}>\s*)?(<!DOCTYPE[^>\[]{0,512}>\s*)?<nvidia_smi_log\b")


def read_nvidia_smi_xml(text: str | None) -> SmiRead:
    """``nvidia-smi -q -x`` output -> :class:`SmiRead`. Never raises.

    The report is cut out of the output (nvidia-smi may print NVML errors before or after
    it; they are kept in ``messages``). A report that is there but cannot be used --
    not well-formed, over :data:`MAX_XML_CHARS`, declaring entities, another root -- is
    ``report=None`` with ``error`` naming what is wrong, never a partial report.

    Hardened: defusedxml refuses entity declarations (no billion laughs) and never fetches
    the external DTD the report names.
    """
    if not text:
        return SmiRead(None)
    m = _REPORT.search(text[:MAX_XML_CHARS])
    if m is None:
        return SmiRead(None, None, smi_messages(text))
    if len(text) > MAX_XML_CHARS:
        return SmiRead(None, f"the report is {len(text)} characters, over the "
                             f"{MAX_XML_CHARS} kgc reads", smi_messages(text[:m.start()]))
    if re.search(r"<!(DOCTYPE[^>]*\[|ENTITY)", text[:m.start()]):
        return SmiRead(None, "refused: the document declares its own DTD or entities (a "
                             "genuine report only names nvsmi_device_vNN.dtd)",
                       smi_messages(text[:m.start()]))
    end = text.find("</nvidia_smi_log>", m.start())
    stop = len(text) if end < 0 else end + len("</nvidia_smi_log>")
    outside = smi_messages(text[:m.start()] + "\n" + text[stop:])
    # nvidia-smi names an external DTD (SYSTEM "nvsmi_device_vNN.dtd"); drop the declaration
    # so that even a parser configured to forbid DTDs accepts the genuine report.
    body = text[m.start():stop]
    body = re.sub(r"<!DOCTYPE[^>\[]{0,512}>", "", body, count=1)
    try:
        root = _safe_fromstring(body, forbid_dtd=True, forbid_entities=True,
                                forbid_external=True)
    except ParseError as exc:
        why = "cut short (no </nvidia_smi_log>)" if end < 0 else "not well-formed XML"
        return SmiRead(None, f"{why}: {exc}", outside)
    except DefusedXmlException as exc:
        return SmiRead(None, f"refused by the hardened XML parser: {type(exc).__name__}",
                       outside)
    except ValueError as exc:
        return SmiRead(None, f"not readable XML: {exc}", outside)
    if root.tag != "nvidia_smi_log":
        return SmiRead(None, f"the document's root is <{clip(root.tag, 40)}>, not "
                             "<nvidia_smi_log>", outside)
    gpus = []
    for g in root.findall("gpu"):
        gpus.append(
            SmiGpu(
                bus_id=clip(g.get("id"), 64),
                product_name=_text(g, "product_name"),
                uuid=_text(g, "uuid"),
                memory_total_mib=_mib(g.findtext("fb_memory_usage/total")),
                pci_device_id=_text(g, "pci/pci_device_id"),
                virtualization_mode=_text(g, "gpu_virtualization_mode/virtualization_mode"),
                mig_current=_text(g, "mig_mode/current_mig"),
                mig_pending=_text(g, "mig_mode/pending_mig"),
                mig_devices=_mig_devices(g),
                health=_health(g),
            )
        )
    report = NvidiaSmi(
        driver_version=_text(root, "driver_version"),
        cuda_version=_text(root, "cuda_version"),
        gpus=tuple(gpus),
        attached_gpus=_int_text(root.findtext("attached_gpus")),
        source="xml",
    )
    return SmiRead(report, None, outside)


def parse_nvidia_smi_xml(text: str | None) -> NvidiaSmi | None:
    """``nvidia-smi -q -x`` -> :class:`NvidiaSmi`; None when it is not such a report (or
    :func:`read_nvidia_smi_xml` says what is wrong with it)."""
    return read_nvidia_smi_xml(text).report


def parse_nvidia_smi_csv(text: str | None) -> NvidiaSmi | None:
    """The ``--query-gpu=name,uuid,pci.bus_id,memory.total,driver_version --format=csv``
    fallback (no CUDA version in it). None unless it has that header."""
    if not text or len(text) > MAX_XML_CHARS:
        return None
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines or not lines[0].replace(" ", "").startswith("name,uuid,pci.bus_id,memory.total"):
        return None
    gpus = []
    drivers = set()
    for row in csv.reader(io.StringIO("\n".join(lines[1:])), skipinitialspace=True):
        if len(row) < 5:
            continue
        name, uuid, bus, mem, drv = (c.strip() for c in row[:5])
        gpus.append(SmiGpu(bus or None, clip(name, 256) or None, uuid or None, _mib(mem), None))
        if drv:
            drivers.add(drv)
    driver = drivers.pop() if len(drivers) == 1 else None
    return NvidiaSmi(driver, None, tuple(gpus), len(gpus), source="csv")


# --------------------------------------------------------------------------- PCI
@dataclass(frozen=True)
class Bar:
    """One line of a PCI function's sysfs ``resource`` file (index 0-5 BARs, 6 the ROM)."""

    index: int
    start: int
    size: int
    flags: int

    @property
    def is_mem(self) -> bool:
        return bool(self.flags & IORESOURCE_MEM)

    @property
    def is_io(self) -> bool:
        return bool(self.flags & IORESOURCE_IO)

    @property
    def prefetch(self) -> bool:
        return bool(self.flags & IORESOURCE_PREFETCH)

    @property
    def mem64(self) -> bool:
        return bool(self.flags & IORESOURCE_MEM_64)

    @property
    def assigned(self) -> bool:
        return self.start != 0 and self.size > 0

    def describe(self) -> str:
        name = "ROM" if self.index == ROM_INDEX else f"BAR{self.index}"
        kind = "io" if self.is_io else ("mem64" if self.mem64 else "mem")
        pf = " pref" if self.prefetch else ""
        where = f"@{self.start:#x}" if self.assigned else " unassigned"
        return f"{name} {human_size(self.size)} {kind}{pf}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "start": self.start, "size": self.size, "flags": self.flags}

    @classmethod
    def from_dict(cls, d: Any, where: str = "bar") -> Bar:
        f = Fields(d, where)
        return cls(f.integer("index"), f.integer("start"), f.integer("size"), f.integer("flags"))


def human_size(n: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def parse_resource(text: str | None) -> tuple[Bar, ...] | None:
    """sysfs ``resource``: ``start end flags`` in hex per line. Absent lines (all zero) are
    dropped; None when the file is missing or not in that format."""
    if text is None:
        return None
    bars = []
    for i, line in enumerate(text.splitlines()[:ROM_INDEX + 1]):
        parts = line.split()
        if len(parts) != 3:
            return None
        try:
            start, end, flags = (int(p, 16) for p in parts)
        except ValueError:
            return None
        if start == 0 and end == 0 and flags == 0:
            continue
        size = end - start + 1 if end >= start else 0
        bars.append(Bar(i, start, size, flags))
    return tuple(bars)


@dataclass(frozen=True)
class GuestPciFunction:
    bdf: str
    vendor: str | None
    device: str | None
    pci_class: str | None  # 6 hex digits, e.g. "030200"
    subsystem_vendor: str | None = None
    subsystem_device: str | None = None
    driver: str | None = None
    bars: tuple[Bar, ...] | None = None  # None: the resource file was not read

    @property
    def ident(self) -> str:
        return f"{self.vendor or '????'}:{self.device or '????'}"

    @property
    def is_nvidia_gpu(self) -> bool:
        """NVIDIA (10de) display-class function: a GPU, not its audio or USB function."""
        return self.vendor == "10de" and (self.pci_class or "").startswith("03")

    def describe(self) -> str:
        return (f"{self.bdf} [{self.ident}] class {self.pci_class or '?'} "
                f"({self.driver or 'no driver'})")

    def to_dict(self) -> dict[str, Any]:
        return {
            "bdf": self.bdf,
            "vendor": self.vendor,
            "device": self.device,
            "class": self.pci_class,
            "subsystem_vendor": self.subsystem_vendor,
            "subsystem_device": self.subsystem_device,
            "driver": self.driver,
            "bars": None if self.bars is None else [b.to_dict() for b in self.bars],
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "pci") -> GuestPciFunction:
        f = Fields(d, where)
        return cls(
            bdf=f.text("bdf"),
            vendor=f.opt_str("vendor"),
            device=f.opt_str("device"),
            pci_class=f.opt_str("class"),
            subsystem_vendor=f.opt_str("subsystem_vendor"),
            subsystem_device=f.opt_str("subsystem_device"),
            driver=f.opt_str("driver"),
            bars=f.opt_objs("bars", Bar.from_dict),
        )


def _hex(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip().lower().removeprefix("0x")
    return v if v and len(v) <= 8 and all(c in "0123456789abcdef" for c in v) else None


def _pci_functions(snap: HostSnapshot) -> tuple[GuestPciFunction, ...]:
    out = []
    for bdf in snap.listdir(PCI) or ():
        base = f"{PCI}/{bdf}"
        cls = _hex(snap.text(f"{base}/class"))
        drv = snap.link_name(f"{base}/driver")
        out.append(
            GuestPciFunction(
                bdf=bdf,
                vendor=_hex(snap.text(f"{base}/vendor")),
                device=_hex(snap.text(f"{base}/device")),
                pci_class=cls.rjust(6, "0") if cls else None,
                subsystem_vendor=_hex(snap.text(f"{base}/subsystem_vendor")),
                subsystem_device=_hex(snap.text(f"{base}/subsystem_device")),
                driver=drv or None,
                bars=parse_resource(snap.read(f"{base}/resource")),
            )
        )
    return tuple(out)


# --------------------------------------------------------------------------- confidential
MAX_CC_TEXT = 1000  # a CC command's output kept in the evidence
CC_DEVICES = ("/dev/sev-guest", "/dev/tdx_guest", "/sys/kernel/config/tsm/report")
_CC_STATUS = re.compile(r"^\s*CC status:\s*(\S+)\s*$", re.M | re.I)
_CC_READY = re.compile(r"^\s*Confidential Compute GPUs Ready state:\s*(\S+)\s*$", re.M | re.I)
_VIA = re.compile(r"^via (curl|wget) rc (\d{1,3})(?: http (\d{3}))?(?: bytes (\d{1,9}))?\s*$")


@dataclass(frozen=True)
class GuestCc:
    """What the guest showed of confidential computing (collector ``kgc-guest/4``: the
    ``cc_tee``, ``cc_mode``, ``cc_ready`` and, when a resource was named, ``cc_attest``
    records). Raw outputs are kept (cut at :data:`MAX_CC_TEXT`); the evaluators read them
    through :func:`cc_mode_state`, :func:`cc_ready_state` and :func:`cc_attest_result`."""

    devices: tuple[str, ...]  # the CC_DEVICES present in the guest
    log: str | None  # where the kernel log came from: dmesg | kmsg | none (None: unknown)
    kernel_lines: tuple[str, ...]  # "Memory Encryption Features active: ..." lines
    tdx_flag: bool  # /proc/cpuinfo flags carry tdx_guest
    tee_output: str | None = None  # cc_tee's output when it did not parse (else None)
    mode_rc: int | None = None
    mode_output: str | None = None  # None: not recorded
    ready_rc: int | None = None
    ready_output: str | None = None
    attest_rc: int | None = None
    attest_output: str | None = None  # None: no resource was fetched

    def to_dict(self) -> dict[str, Any]:
        return {"devices": list(self.devices), "log": self.log,
                "kernel_lines": list(self.kernel_lines), "tdx_flag": self.tdx_flag,
                "tee_output": self.tee_output, "mode_rc": self.mode_rc,
                "mode_output": self.mode_output, "ready_rc": self.ready_rc,
                "ready_output": self.ready_output, "attest_rc": self.attest_rc,
                "attest_output": self.attest_output}

    @classmethod
    def from_dict(cls, d: Any, where: str = "cc") -> GuestCc:
        f = Fields(d, where)
        return cls(devices=f.strs("devices"), log=f.opt_str("log"),
                   kernel_lines=f.strs("kernel_lines"), tdx_flag=f.flag("tdx_flag"),
                   tee_output=f.opt_str("tee_output"), mode_rc=f.opt_int("mode_rc"),
                   mode_output=f.opt_str("mode_output"), ready_rc=f.opt_int("ready_rc"),
                   ready_output=f.opt_str("ready_output"), attest_rc=f.opt_int("attest_rc"),
                   attest_output=f.opt_str("attest_output"))

    @property
    def snp(self) -> bool:
        return "/dev/sev-guest" in self.devices or any("SEV-SNP" in ln
                                                        for ln in self.kernel_lines)

    @property
    def tdx(self) -> bool:
        return (self.tdx_flag or "/dev/tdx_guest" in self.devices
                or any("TDX" in ln for ln in self.kernel_lines))


def cc_mode_state(text: str | None) -> str | None:
    """``nvidia-smi conf-compute -f`` -> "ON" / "OFF" / "DEVTOOLS" (upper case), None when
    the output holds no single "CC status: X" line."""
    found = {m.group(1).upper() for m in _CC_STATUS.finditer((text or "")[:MAX_CC_TEXT])}
    return found.pop() if len(found) == 1 else None


def cc_ready_state(text: str | None) -> str | None:
    """``nvidia-smi conf-compute -grs`` -> "ready" / "not-ready" (lower case), None when the
    output holds no single "Confidential Compute GPUs Ready state: X" line."""
    found = {m.group(1).lower() for m in _CC_READY.finditer((text or "")[:MAX_CC_TEXT])}
    return found.pop() if len(found) == 1 else None


@dataclass(frozen=True)
class AttestResult:
    client: str  # curl | wget
    rc: int  # the client's exit status
    http: int | None  # the HTTP status (curl; None with wget)
    length: int | None  # bytes of the released resource (its content is never recorded)
    body: str  # an error's body (the CDH's / KBS's refusal), "" on success
    detail: str  # the client's own error lines

    @property
    def released(self) -> bool:
        ok_http = self.http is None or 200 <= self.http < 300
        return self.rc == 0 and ok_http and bool(self.length)


def cc_attest_result(text: str | None) -> AttestResult | None:
    """The ``cc_attest`` record -> :class:`AttestResult`; None when no "via" line parses."""
    lines = (text or "")[:MAX_CC_TEXT * 4].splitlines()
    via = [(i, m) for i, ln in enumerate(lines) if (m := _VIA.match(ln.strip()))]
    if len(via) != 1:
        return None
    i, m = via[0]
    body = "\n".join(ln.strip().removeprefix("body").strip() for ln in lines[i + 1:]).strip()
    detail = "; ".join(ln.strip() for ln in lines[:i] if ln.strip()
                       and not ln.startswith("url "))
    return AttestResult(client=m.group(1), rc=int(m.group(2)),
                        http=int(m.group(3)) if m.group(3) else None,
                        length=int(m.group(4)) if m.group(4) else None,
                        body=clip(body, 240) or "", detail=clip(detail, 240) or "")


def _cc_text(out: str) -> str:
    return clip(out.strip(), MAX_CC_TEXT) or ""


def parse_cc(snap: HostSnapshot, flags: list[str]) -> GuestCc | None:
    """The CC records of a snapshot; None when the collector recorded none (before
    kgc-guest/4). Never raises."""
    tee = snap.command("cc_tee")
    if tee is None:
        return None
    devices: list[str] = []
    log = None
    lines: list[str] = []
    odd = False
    for ln in tee.output.splitlines():
        word, _, rest = ln.partition(" ")
        if word == "present" and rest in CC_DEVICES:
            devices.append(rest)
        elif word == "absent" and rest in CC_DEVICES:
            pass
        elif word == "log" and rest in ("dmesg", "kmsg", "none"):
            log = rest
        elif word == "kmsg" and len(lines) < 4:
            lines.append(clip(rest.strip(), 300) or "")
        elif ln.strip():
            odd = True
    mode, ready, att = snap.command("cc_mode"), snap.command("cc_ready"), snap.command("cc_attest")
    return GuestCc(
        devices=tuple(dict.fromkeys(devices)), log=log, kernel_lines=tuple(lines),
        tdx_flag="tdx_guest" in flags,
        tee_output=_cc_text(tee.output) if odd or log is None else None,
        mode_rc=mode.rc if mode else None, mode_output=_cc_text(mode.output) if mode else None,
        ready_rc=ready.rc if ready else None,
        ready_output=_cc_text(ready.output) if ready else None,
        attest_rc=att.rc if att else None,
        attest_output=_cc_text(att.output) if att else None,
    )


# --------------------------------------------------------------------------- the guest
@dataclass(frozen=True)
class GuestEvidence:
    """What one guest (a GPU pod's microVM, or a machine the collector ran on) showed."""

    kernel: str | None  # uname -r
    hypervisor_flag: bool  # /proc/cpuinfo flags carry "hypervisor" (x86 under a hypervisor)
    gvisor: bool  # gVisor reports kernel 4.4.0 and is a sandbox, not a VM
    vcpus: int | None  # nproc --all (or the processor lines of /proc/cpuinfo)
    memtotal_kib: int | None
    cmdline: str | None
    pci: tuple[GuestPciFunction, ...] = ()
    pci_listed: bool = False  # /sys/bus/pci/devices was listed at all
    iommu_groups: tuple[str, ...] | None = None  # None: /sys/kernel/iommu_groups absent
    smi: NvidiaSmi | None = None
    smi_rc: int | None = None  # exit status of `nvidia-smi -q -x` (127: not found)
    smi_error: str | None = None  # what nvidia-smi printed when it failed
    # the XML report is there but unusable (malformed, cut short, refused): why
    smi_xml_error: str | None = None
    # nvidia-smi's own diagnostic lines beside its report or table (NVML errors, warnings)
    smi_messages: tuple[str, ...] = ()
    dev_nvidia: tuple[str, ...] = ()
    cuda_check: dict[str, Any] | None = None  # the torch probe's JSON (see kgc.guest)
    dmesg: tuple[str, ...] | None = None  # guest kernel lines about BARs/vfio/NVRM
    collector: str | None = None  # "kgc-guest/3"; None for older captures
    complete: bool = True  # the output ended with the collector's END record
    problems: tuple[str, ...] = field(default_factory=tuple)
    cc: GuestCc | None = None  # confidential-computing records (None: not recorded)

    @property
    def is_vm(self) -> bool:
        return self.hypervisor_flag and not self.gvisor

    @property
    def nvidia_pci(self) -> tuple[GuestPciFunction, ...]:
        return tuple(d for d in self.pci if d.vendor == "10de")

    @property
    def nvidia_gpus(self) -> tuple[GuestPciFunction, ...]:
        return tuple(d for d in self.pci if d.is_nvidia_gpu)

    @property
    def gpu_uuids(self) -> tuple[str, ...]:
        return tuple(g.uuid for g in (self.smi.gpus if self.smi else ()) if g.uuid)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "hypervisor_flag": self.hypervisor_flag,
            "gvisor": self.gvisor,
            "vcpus": self.vcpus,
            "memtotal_kib": self.memtotal_kib,
            "cmdline": self.cmdline,
            "pci": [p.to_dict() for p in self.pci],
            "pci_listed": self.pci_listed,
            "iommu_groups": None if self.iommu_groups is None else list(self.iommu_groups),
            "smi": None if self.smi is None else self.smi.to_dict(),
            "smi_rc": self.smi_rc,
            "smi_error": self.smi_error,
            **_unless_default({"smi_xml_error": self.smi_xml_error,
                               "smi_messages": list(self.smi_messages)}),
            "dev_nvidia": list(self.dev_nvidia),
            "cuda_check": self.cuda_check,
            "dmesg": None if self.dmesg is None else list(self.dmesg),
            "collector": self.collector,
            "complete": self.complete,
            "problems": list(self.problems),
            **({} if self.cc is None else {"cc": self.cc.to_dict()}),
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "guest") -> GuestEvidence:
        f = Fields(d, where)
        cuda = f.opt_json_obj("cuda_check")
        return cls(
            kernel=f.opt_str("kernel"),
            hypervisor_flag=f.flag("hypervisor_flag"),
            gvisor=f.flag("gvisor"),
            vcpus=f.opt_int("vcpus"),
            memtotal_kib=f.opt_int("memtotal_kib"),
            cmdline=f.opt_str("cmdline"),
            pci=f.objs("pci", GuestPciFunction.from_dict),
            pci_listed=f.flag("pci_listed"),
            iommu_groups=f.opt_strs("iommu_groups"),
            smi=f.opt_obj("smi", NvidiaSmi.from_dict),
            smi_rc=f.opt_int("smi_rc"),
            smi_error=f.opt_str("smi_error"),
            smi_xml_error=f.opt_str("smi_xml_error"),
            smi_messages=f.opt_strs("smi_messages") or (),
            dev_nvidia=f.strs("dev_nvidia"),
            cuda_check=None if cuda is None else dict(cuda),
            dmesg=f.opt_strs("dmesg"),
            collector=f.opt_str("collector"),
            complete=f.flag("complete"),
            problems=f.strs("problems"),
            cc=f.opt_obj("cc", GuestCc.from_dict),
        )


def meminfo_kib(text: str | None, key: str = "MemTotal") -> int | None:
    for line in (text or "").splitlines():
        k, _, v = line.partition(":")
        if k.strip() == key:
            m = re.match(r"\s*(\d{1,15})\s*kB", v)
            return int(m.group(1)) if m else None
    return None


def _first_line(text: str) -> str:
    for ln in text.splitlines():
        if ln.strip():
            return clip(ln.strip(), 300) or ""
    return ""


def parse_guest(snap: HostSnapshot) -> GuestEvidence:
    """A split snapshot -> :class:`GuestEvidence`. Never raises."""
    problems: list[str] = []
    cpuinfo = snap.read("/proc/cpuinfo") or ""
    flags = next((ln.split(":", 1)[1].split() for ln in cpuinfo.splitlines()
                  if ln.startswith("flags") and ":" in ln), [])
    kernel = snap.text("/proc/sys/kernel/osrelease")
    ur = snap.command("uname_r")
    if not kernel and ur is not None and ur.rc == 0 and ur.output.strip():
        kernel = ur.output.strip().splitlines()[0]
    kernel = clip(kernel, 256) if kernel else None

    vcpus = None
    np_ = snap.command("nproc")
    if np_ is not None and np_.rc == 0 and np_.output.split():
        word = np_.output.split()[0]
        if word.isdigit() and len(word) < 7:
            vcpus = int(word)
        else:
            problems.append(f"nproc printed {np_.output[:40]!r}")
    if vcpus is None:
        procs = sum(1 for ln in cpuinfo.splitlines() if re.match(r"processor\s*:", ln))
        if procs:
            vcpus = procs
    mem = meminfo_kib(snap.read("/proc/meminfo"))
    if mem is None:
        problems.append("no MemTotal in /proc/meminfo")

    smi_cmd = snap.command("nvidia_smi_xml")
    read = read_nvidia_smi_xml(smi_cmd.output if smi_cmd else None)
    smi = read.report
    smi_error = None
    table = snap.command("nvidia_smi")
    messages = tuple(dict.fromkeys(read.messages + smi_messages(table.output if table else None)))
    if read.error is not None:
        problems.append(f"nvidia-smi -q -x printed an unusable report: {read.error[:160]}")
    if smi_cmd is not None and smi_cmd.rc != 0:
        smi_error = _first_line(smi_cmd.output) or f"exit {smi_cmd.rc}, no output"
        problems.append(f"nvidia-smi -q -x exited {smi_cmd.rc}: {smi_error[:120]}")
    elif smi_cmd is not None and smi is None and read.error is None:
        # no report at all (not a malformed one: that is judged as such, never replaced)
        csv_cmd = snap.command("nvidia_smi_csv")
        smi = parse_nvidia_smi_csv(csv_cmd.output if csv_cmd and csv_cmd.rc == 0 else None)
        problems.append("nvidia-smi -q -x printed no report"
                        + ("; used the CSV query instead" if smi else ""))

    cc = snap.command("cuda_check")
    cuda: dict[str, Any] | None = None
    if cc is not None and cc.output.strip():
        try:
            loaded = json.loads(cc.output.strip().splitlines()[-1])
            cuda = loaded if isinstance(loaded, dict) else None
        except ValueError:
            cuda = None
        if cuda is None:
            problems.append(f"compute probe printed no JSON (exit {cc.rc}): "
                            f"{_first_line(cc.output)[:120]}")
            cuda = {"error": f"no JSON (exit {cc.rc}): {_first_line(cc.output)}"}
        elif cc.rc not in (0, None):
            cuda = {**cuda, "exit": cc.rc}

    dm = snap.command("dmesg_pci")
    dmesg = None
    if dm is not None and dm.rc == 0:
        dmesg = tuple(clip(ln, 300) or "" for ln in dm.output.splitlines() if ln.strip())[-200:]

    dev = snap.command("dev_nvidia")
    dev_nvidia = tuple(sorted({ln.strip() for ln in (dev.output if dev else "").splitlines()
                               if ln.strip()}))[:256]
    col = snap.command("collector")
    collector = col.output.strip() if col is not None and col.rc == 0 else None

    return GuestEvidence(
        kernel=kernel,
        hypervisor_flag="hypervisor" in flags,
        gvisor=(kernel or "").startswith("4.4.0"),
        vcpus=vcpus,
        memtotal_kib=mem,
        cmdline=clip(snap.text("/proc/cmdline")),
        pci=_pci_functions(snap),
        pci_listed=snap.listdir(PCI) is not None,
        iommu_groups=snap.listdir(IOMMU_GROUPS),
        smi=smi,
        smi_rc=smi_cmd.rc if smi_cmd else None,
        smi_error=smi_error,
        smi_xml_error=read.error,
        smi_messages=messages[:MAX_SMI_MESSAGES],
        dev_nvidia=dev_nvidia,
        cuda_check=cuda,
        dmesg=dmesg,
        collector=clip(collector, 64) if collector else None,
        complete=snap.complete,
        problems=tuple(problems),
        cc=parse_cc(snap, flags),
    )


def find_boundary(text: str) -> str | None:
    """The record boundary the collector chose, from its ``V`` line (pod logs may carry
    other lines before it)."""
    m = _BOUNDARY_V.search(text[:65536])
    return m.group(1) if m else None


def parse_guest_output(text: str) -> GuestEvidence:
    """The collector's raw output (a pod log) -> :class:`GuestEvidence`. Never raises."""
    problems = []
    if len(text) > MAX_OUTPUT_CHARS:
        problems.append(f"collector output cut at {MAX_OUTPUT_CHARS} of {len(text)} characters")
        text = text[:MAX_OUTPUT_CHARS]
    boundary = find_boundary(text)
    if boundary is None:
        return GuestEvidence(
            kernel=None, hypervisor_flag=False, gvisor=False, vcpus=None, memtotal_kib=None,
            cmdline=None, complete=False,
            problems=(*problems, "no kgc collector output found (no @@KGC-…@@ V record)"),
        )
    try:
        ev = parse_guest(parse_output(text, boundary))
    except FileNotRead as exc:
        # a file the evidence needs was over the collector's limit (or not a regular file):
        # nothing is judged from part of it -- the pod's output is unusable, and says why
        return GuestEvidence(
            kernel=None, hypervisor_flag=False, gvisor=False, vcpus=None, memtotal_kib=None,
            cmdline=None, complete=False, problems=(*problems, f"{exc.path}: {exc.why}"))
    if not ev.complete:
        problems.append("collector output ends before its END record (truncated or killed)")
    if problems:
        ev = GuestEvidence(**{**ev.__dict__, "problems": (*ev.problems, *problems)})
    return ev
