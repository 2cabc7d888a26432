"""Evidence the sizing layer judges, and the pure parsers that produce it.

* :data:`SIZING_GUEST_QUERY` — what a pod's in-guest collector must read for one shape
  (``nproc --all``, ``/proc/meminfo``, ``/proc/cpuinfo``, ``/proc/zoneinfo``, the memory-block
  size and the CPU lists). The same :class:`~kgc.core.hostfs.HostQuery` mechanism as every
  other collector: one batched POSIX sh script.
* :class:`GuestSize` — what one guest reported, parsed totally (malformed text gives ``None``
  fields and ``problems``, never an exception).
* :class:`KataConfigSource` — which Kata configuration the verdicts use and where it came from
  (the node's runtime evidence, the profile, or measured from a limit-less probe pod).
* :class:`ShapeObservation`, :class:`ClusterObjects`, :class:`SizingEvidence` — the layer's
  recorded evidence; ``to_dict``/``from_dict`` (:mod:`kgc.evidence.record`) round-trip it and
  ``from_dict`` raises :class:`~kgc.core.model.EvidenceError` naming the field path on
  malformed input.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kgc.core.hostfs import HostQuery, HostSnapshot
from kgc.core.profile import RuntimeProfile
from kgc.evidence.containerd import handlers, kata_config
from kgc.evidence.present import BlankIsMissing
from kgc.evidence.record import OPTIONAL, Record, Rules, key
from kgc.kube.origin import KWOK_ANNOTATION, stand_in_reason
from kgc.layers.sizing.model import MIB, KataSizing, SizingInputError

SYS_MEMORY = "/sys/devices/system/memory"
SYS_CPU = "/sys/devices/system/cpu"

SIZING_GUEST_QUERY = HostQuery(
    files=(
        "/proc/meminfo",
        "/proc/cpuinfo",
        "/proc/zoneinfo",
        "/proc/sys/kernel/osrelease",
        "/proc/cmdline",
        f"{SYS_MEMORY}/block_size_bytes",
        f"{SYS_CPU}/online",
        f"{SYS_CPU}/present",
        f"{SYS_CPU}/possible",
    ),
    dirs=(SYS_MEMORY,),
    commands=(("nproc", "nproc --all; nproc"),),
)
"""The per-shape in-guest collection (the ``nproc`` command matches :mod:`kgc.guest`'s)."""

_MAX_INT = 1 << 62  # anything above is nonsense for a VM and is reported, not used


# -- parsers (total) ---------------------------------------------------------------------------
def _int(s: str, base: int = 10) -> int | None:
    s = s.strip()
    if not s or len(s) > 24:
        return None
    try:
        v = int(s, base)
    except ValueError:
        return None
    if not s.isascii() or v < 0 or v > _MAX_INT:
        return None
    return v


def meminfo_kib(text: str | None, key: str = "MemTotal") -> int | None:
    """``MemTotal:  4006892 kB`` -> 4006892 (the first line with the key)."""
    for line in (text or "").splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip() == key:
            m = re.fullmatch(r"\s*([0-9]{1,20})\s*kB\s*", v)
            return _int(m.group(1)) if m else None
    return None


def cpuinfo_processors(text: str | None) -> int | None:
    """Number of ``processor : N`` lines (online CPUs), None when there are none."""
    n = sum(1 for ln in (text or "").splitlines()
            if re.match(r"processor\s*:\s*[0-9]+\s*$", ln))
    return n or None


def cpu_list_count(text: str | None) -> int | None:
    """``0-15`` -> 16, ``0,2-3`` -> 3; None for anything else (counted, never expanded)."""
    t = (text or "").strip()
    if not t or len(t) > 4096:
        return None
    total = 0
    for part in t.split(","):
        m = re.fullmatch(r"([0-9]{1,7})(?:-([0-9]{1,7}))?", part.strip())
        if not m:
            return None
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            return None
        total += hi - lo + 1
    return total


def zoneinfo_pages(text: str | None) -> tuple[int | None, int | None]:
    """Σ ``present`` and Σ ``managed`` pages over every zone of ``/proc/zoneinfo``.
    ``present`` counts the RAM pages the firmware handed the kernel (holes excluded);
    ``managed`` what the buddy allocator got after the kernel's boot reservations."""
    present = managed = 0
    seen_p = seen_m = False
    for line in (text or "").splitlines():
        m = re.fullmatch(r"\s+(present|managed)\s+([0-9]{1,20})\s*", line)
        if not m:
            continue
        v = _int(m.group(2))
        if v is None:
            return None, None
        if m.group(1) == "present":
            present += v
            seen_p = True
        else:
            managed += v
            seen_m = True
    return (present if seen_p else None), (managed if seen_m else None)


def nproc_output(text: str | None) -> tuple[int | None, int | None]:
    """``nproc --all; nproc`` -> (all, available)."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    vals = [_int(ln) for ln in lines[:2]]
    a = vals[0] if vals else None
    b = vals[1] if len(vals) > 1 else None
    return a, b


def page_kib(memtotal_kib: int | None, managed_pages: int | None) -> int | None:
    """The guest's base page size, from MemTotal = managed pages x page size (the kernel
    sets ``totalram_pages`` from the managed pages; 4 KiB on x86_64, 4/16/64 KiB on arm64)."""
    if not memtotal_kib or not managed_pages:
        return None
    ratio = memtotal_kib / managed_pages
    for size in (4, 16, 64):
        if abs(ratio - size) <= size * 0.02:
            return size
    return None


@dataclass(frozen=True)
class GuestSize(BlankIsMissing, Record):
    """The VM size one guest reports about itself."""

    recorded_as = Rules(closed=True)  # a key this version does not know is refused
    record_name = "guest"

    nproc_all: int | None = None  # configured CPUs (present), `nproc --all`
    nproc: int | None = None  # CPUs available to the collector
    cpuinfo_processors: int | None = None  # online CPUs
    cpus_online: int | None = None
    cpus_present: int | None = None
    memtotal_kib: int | None = None
    present_kib: int | None = None  # RAM the firmware gave the guest (Σ zone present)
    managed_kib: int | None = None
    block_size_bytes: int | None = None  # memory hot-plug block
    memory_blocks: int | None = None
    kernel: str | None = None
    problems: tuple[str, ...] = ()

    # -- derived -------------------------------------------------------------------------------
    @property
    def vcpus(self) -> int | None:
        """The vCPU count to judge: ``nproc --all``, else the present/online CPU lists."""
        for v in (self.nproc_all, self.cpus_present, self.cpuinfo_processors):
            if v is not None:
                return v
        return None

    @property
    def memtotal_mib(self) -> float | None:
        return None if self.memtotal_kib is None else self.memtotal_kib / 1024

    @property
    def ram_mib(self) -> float | None:
        """RAM the guest kernel was given (present pages), None when not collected."""
        return None if self.present_kib is None else self.present_kib / 1024

    @property
    def block_mib(self) -> int | None:
        if not self.block_size_bytes or self.block_size_bytes % MIB:
            return None
        return self.block_size_bytes // MIB

    @classmethod
    def from_snapshot(cls, snap: HostSnapshot) -> GuestSize:
        """Parse what the in-guest collector returned (``SIZING_GUEST_QUERY`` or
        :mod:`kgc.guest`'s larger query, which lacks zoneinfo and the block size)."""
        problems: list[str] = []
        np_all = np_avail = None
        cmd = snap.command("nproc")
        if cmd is not None:
            if cmd.rc == 0:
                np_all, np_avail = nproc_output(cmd.output)
                if np_all is None:
                    problems.append(f"nproc printed {cmd.output[:40]!r}")
            else:
                problems.append(f"nproc exited {cmd.rc}: {cmd.output.strip()[:80]}")
        meminfo = snap.read("/proc/meminfo")
        memtotal = meminfo_kib(meminfo)
        if meminfo is None:
            problems.append("/proc/meminfo was not collected")
        elif memtotal is None:
            problems.append("no MemTotal in /proc/meminfo")
        present_p, managed_p = zoneinfo_pages(snap.read("/proc/zoneinfo"))
        pk = page_kib(memtotal, managed_p)
        present_kib = managed_kib = None
        if present_p is not None and managed_p is not None:
            if pk is None:
                problems.append("cannot tell the page size: MemTotal is not a whole multiple "
                                "of /proc/zoneinfo's managed pages")
            else:
                present_kib, managed_kib = present_p * pk, managed_p * pk
        bs_text = snap.text(f"{SYS_MEMORY}/block_size_bytes")
        bs = _int(bs_text, 16) if bs_text else None
        if bs_text and not bs:
            problems.append(f"block_size_bytes is {bs_text[:30]!r}")
        listing = snap.listdir(SYS_MEMORY)
        blocks = (sum(1 for e in listing if re.fullmatch(r"memory[0-9]+", e))
                  if listing is not None else None)
        return cls(
            nproc_all=np_all,
            nproc=np_avail,
            cpuinfo_processors=cpuinfo_processors(snap.read("/proc/cpuinfo")),
            cpus_online=cpu_list_count(snap.read(f"{SYS_CPU}/online")),
            cpus_present=cpu_list_count(snap.read(f"{SYS_CPU}/present")),
            memtotal_kib=memtotal,
            present_kib=present_kib,
            managed_kib=managed_kib,
            block_size_bytes=bs or None,
            memory_blocks=blocks,
            kernel=snap.text("/proc/sys/kernel/osrelease"),
            problems=tuple(problems),
        )


# -- where the Kata configuration comes from ---------------------------------------------------
SOURCE_NODE = "node"
SOURCE_PROFILE = "profile"
SOURCE_MEASURED = "measured"
SOURCE_NONE = "none"
SOURCES = (SOURCE_NODE, SOURCE_PROFILE, SOURCE_MEASURED, SOURCE_NONE)


@dataclass(frozen=True)
class KataConfigSource(Record):
    """The Kata sizing configuration for one RuntimeClass and where it came from.

    ``kind`` is ``node`` (the runtime layer's parsed TOML), ``profile`` (the profile's
    ``sizing.kata`` entry), ``measured`` (derived from a limit-less probe pod's guest) or
    ``none``; ``detail`` names the file, profile key or probe; ``tried`` lists the sources
    that were looked at first and why they were not used."""

    recorded_as = Rules(keys=OPTIONAL)  # every key is required but ``sizing``'s null

    runtime_class: str
    kind: str = field(metadata=key(one_of=SOURCES))
    detail: str
    sizing: KataSizing | None = field(default=None, metadata=key(required=True))
    error: str = ""
    tried: tuple[str, ...] = ()
    # measured on a probe pod that rests on a stand-in: why ("" when real or not measured)
    stand_in: str = field(default="", metadata=key(optional=True, omit_if_default=True))

    @property
    def usable(self) -> bool:
        return self.sizing is not None and not self.error

    def describe(self) -> str:
        return f"{self.kind}: {self.detail}"


# -- live shapes -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShapeObservation(Record):
    """One pod shape run live: the pod as created (API JSON), where it ran, and what its
    guest reported. ``error`` says why there is no guest evidence (pod failed, timed out)."""

    shape: str
    pod: Mapping[str, Any]
    runtime_class: str
    node: str = ""
    guest: GuestSize | None = field(default=None, metadata=key(required=True))
    error: str = ""
    # the pod rests on a stand-in (kgc.kube.origin: its node is no real kubelet's, or its
    # events show its containers were played): ``stand_in_why`` says why ("" in older records)
    simulated: bool = False
    waited_s: float | None = None  # from the pod's creation to the end of waiting for it
    stand_in_why: str = field(default="", metadata=key(optional=True, omit_if_default=True))

    @property
    def stand_in(self) -> str | None:
        """Why this pod's evidence rests on a stand-in, or None."""
        if not self.simulated:
            return None
        return self.stand_in_why or "recorded as simulated"


# -- cluster objects ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ClusterObjects(Record):
    """The cluster objects the static checks read, as the API returns them (JSON):
    Pods (all namespaces), Nodes, RuntimeClasses."""

    pods: tuple[Mapping[str, Any], ...] = ()
    nodes: tuple[Mapping[str, Any], ...] = ()
    runtime_classes: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class SizingEvidence(Record):
    """Everything the sizing layer judges. A part that was not collected is ``None`` (its
    checks skip with that reason); ``configs`` maps RuntimeClass name -> its Kata config."""

    record_name = "sizing"

    configs: Mapping[str, KataConfigSource] = field(default_factory=dict)
    shapes: tuple[ShapeObservation, ...] | None = None
    cluster: ClusterObjects | None = None
    notes: tuple[str, ...] = ()
    # why a part could not be collected ("cluster": the objects, "pods": the live pods)
    errors: Mapping[str, str] = field(default_factory=dict)

    def stand_ins_for(self, check_id: str) -> list[str] | None:
        """For the engine's simulated mark, per check: the stand-ins its verdict rests on.
        ``sizing.vm-matches-limits`` judges the shape pods' guests against configurations;
        every check reads the Kata configurations (one measured on a stand-in probe pod is
        a stand-in's); ``sizing.node-overcommit`` also each Kata node's allocatable memory.
        [] when none is a stand-in; None when a node's origin cannot be told."""
        out = [f"Kata config of {rc}: {c.stand_in}" for rc, c in sorted(self.configs.items())
               if c.stand_in]
        if check_id == "sizing.vm-matches-limits":
            out += [f"shape {o.shape} (pod on {o.node or 'no node'}): {o.stand_in}"
                    for o in self.shapes or () if o.stand_in]
        if check_id == "sizing.node-overcommit" and self.cluster is not None:
            nodes = self.kata_node_stand_ins()
            if nodes is None:
                return None
            out += nodes
        return out

    def stand_ins(self) -> list[str] | None:
        return self.stand_ins_for("sizing.vm-matches-limits")

    def kata_node_stand_ins(self) -> list[str] | None:
        """The stand-ins among the nodes the cluster's Kata pods are placed on (a RuntimeClass
        with a known configuration); None when such a node was recorded without its
        kubelet version (older records): nothing tells real from simulated there."""
        if self.cluster is None:
            return []
        def sub(d: Any, k: str) -> Mapping[str, Any]:
            v = d.get(k) if isinstance(d, Mapping) else None
            return v if isinstance(v, Mapping) else {}

        placed = set()
        for pod in self.cluster.pods:
            spec = sub(pod, "spec")
            if spec.get("runtimeClassName") in self.configs \
                    and isinstance(spec.get("nodeName"), str):
                placed.add(spec["nodeName"])
        out = []
        for n in self.cluster.nodes:
            md = sub(n, "metadata")
            name = md.get("name")
            if name not in placed:
                continue
            if "nodeInfo" not in sub(n, "status") and KWOK_ANNOTATION not in sub(md, "annotations"):
                return None
            why = stand_in_reason(n)
            if why:
                out.append(f"node {name}: {why}")
        return out


# -- Kata configuration: from the node's TOML, the profile, or a probe -------------------------
def _toml_num(hv: Mapping[str, Any], key: str, where: str, default: float,
              integer: bool) -> Any:
    if key not in hv:
        return default
    v = hv[key]
    ok = (isinstance(v, int) if integer else isinstance(v, (int, float))) and \
        not isinstance(v, bool)
    if not ok or (isinstance(v, float) and not math.isfinite(v)):
        kind = "an integer" if integer else "a number"
        raise SizingInputError(f"{where} {key} = {v!r}: Kata expects {kind} (the runtime "
                               "cannot load this file)")
    return v


def kata_sizing_from_toml(data: Mapping[str, Any], path: str, source: str = "") -> KataSizing:
    """The sizing keys of a parsed Kata configuration (main file + config.d drop-ins merged).
    Go or runtime-rs is told by ``[runtime] name = "virt_container"`` / ``hypervisor_name``
    (runtime-rs only). Raises :class:`SizingInputError` on keys of the wrong type."""
    rt = data.get("runtime")
    rt = rt if isinstance(rt, Mapping) else {}
    hvs = data.get("hypervisor")
    hvs = {k: v for k, v in hvs.items() if isinstance(v, Mapping)} \
        if isinstance(hvs, Mapping) else {}
    is_rs = rt.get("name") == "virt_container" or "hypervisor_name" in rt
    if not hvs:
        raise SizingInputError(f"{path} has no [hypervisor.*] section")
    if is_rs and isinstance(rt.get("hypervisor_name"), str) and rt["hypervisor_name"] in hvs:
        name = rt["hypervisor_name"]
    elif len(hvs) == 1:
        name = next(iter(hvs))
    else:
        raise SizingInputError(f"{path} has several hypervisor sections ({', '.join(sorted(hvs))})"
                               " and no [runtime] hypervisor_name to choose one")
    hv = hvs[name]
    w = f"{path} [hypervisor.{name}]"
    static = rt.get("static_sandbox_resource_mgmt", False)
    if not isinstance(static, bool):
        raise SizingInputError(f"{path} [runtime] static_sandbox_resource_mgmt = {static!r}: "
                               "Kata expects true/false")
    virtio_mem = hv.get("enable_virtio_mem", False)
    if not isinstance(virtio_mem, bool):
        raise SizingInputError(f"{w} enable_virtio_mem = {virtio_mem!r}: Kata expects true/false")
    ann = hv.get("enable_annotations", [])
    if not isinstance(ann, list) or not all(isinstance(a, str) for a in ann):
        raise SizingInputError(f"{w} enable_annotations = {ann!r}: Kata expects a list of strings")
    default_mem = 2048 if not is_rs else 0
    return KataSizing(
        runtime="runtime-rs" if is_rs else "go",
        static=static,
        hypervisor=name,
        default_vcpus=float(_toml_num(hv, "default_vcpus", w, 1.0, integer=False)),
        default_memory=_toml_num(hv, "default_memory", w, default_mem, integer=True),
        default_maxvcpus=_toml_num(hv, "default_maxvcpus", w, 0, integer=True),
        default_maxmemory=_toml_num(hv, "default_maxmemory", w, 0, integer=True),
        overhead_vcpus=float(_toml_num(hv, "overhead_vcpus", w, 0.0, integer=False)),
        overhead_memory=_toml_num(hv, "overhead_memory", w, 0, integer=True),
        memory_slots=_toml_num(hv, "memory_slots", w, 10, integer=True),
        virtio_mem=virtio_mem,
        enable_annotations=tuple(ann),
        source=source or path,
    )


def kata_config_from_runtime(runtime_evidence: Any, handler: str, runtime_class: str,
                             search: tuple[str, ...] | None = None) -> KataConfigSource:
    """Adapter from the runtime layer's node evidence (``kgc.evidence.containerd.
    RuntimeEvidence``, what ``kgc.layers.runtime.collect.parse`` returns): the handler's
    ``ConfigPath`` (else the standard locations) and its ``config.d`` drop-ins, resolved by
    ``kgc.evidence.containerd.kata_config`` exactly as the runtime layer does, turned into
    sizing keys."""

    paths = search if search is not None else RuntimeProfile().kata_config_paths
    found, _ = handlers(runtime_evidence.effective, runtime_evidence.config_version)
    h = found.get(handler)
    if h is None:
        return KataConfigSource(runtime_class, SOURCE_NONE, "", tried=(
            f"node: containerd ({runtime_evidence.effective_source}) has no runtime handler "
            f"{handler!r}",))
    kc = kata_config(runtime_evidence, h, paths)
    if kc.path is None:
        return KataConfigSource(runtime_class, SOURCE_NONE, "", tried=(
            f"node: {kc.chosen_because}; searched {', '.join(kc.searched)}",))
    detail = kc.path + (f" + {len(kc.dropins)} config.d drop-in(s)" if kc.dropins else "") + \
        f" ({kc.chosen_because})"
    if kc.error:
        return KataConfigSource(runtime_class, SOURCE_NODE, detail, error=kc.error)
    try:
        sizing = kata_sizing_from_toml(kc.data, kc.path, source=f"node: {detail}")
    except SizingInputError as exc:
        return KataConfigSource(runtime_class, SOURCE_NODE, detail, error=str(exc))
    return KataConfigSource(runtime_class, SOURCE_NODE, detail, sizing)


def measured_from_probe(runtime_class: str, probe: ShapeObservation) -> KataConfigSource:
    """The default VM a limit-less probe pod got, as a configuration: default_vcpus = its
    vCPUs, default_memory = its RAM (rounded up to the MiB). Predictions then add the limits
    the Go runtime's way; a probe cannot see runtime-rs overheads or a fractional default."""
    name = (probe.pod.get("metadata") or {}).get("name", probe.shape) \
        if isinstance(probe.pod.get("metadata"), Mapping) else probe.shape
    where = f"probe pod {name}" + (f" on {probe.node}" if probe.node else "")
    g = probe.guest
    if probe.error or g is None:
        return KataConfigSource(runtime_class, SOURCE_NONE, "", tried=(
            f"measured: {where} gave no guest evidence ({probe.error or 'nothing reported'})",))
    if g.vcpus is None or g.ram_mib is None:
        return KataConfigSource(runtime_class, SOURCE_NONE, "", tried=(
            f"measured: {where} reported no vCPU count or no /proc/zoneinfo (the guest's RAM)",))
    mem = math.ceil(g.ram_mib - 1e-9)
    sizing = KataSizing(runtime="go", static=True, default_vcpus=float(g.vcpus),
                        default_memory=mem, memory_block_mib=g.block_mib,
                        source=f"measured: {where}")
    detail = (f"{where}: default VM {g.vcpus} vCPU / {mem} MiB"
              + (" (simulated)" if probe.simulated else "")
              + "; limits are added the Go runtime's way")
    return KataConfigSource(runtime_class, SOURCE_MEASURED, detail, sizing,
                            stand_in=f"probe pod {name}: {probe.stand_in}"
                            if probe.stand_in else "")


def resolve_config(
    runtime_class: str,
    *,
    node: KataConfigSource | None = None,
    profile_entry: Any = None,
    probe: ShapeObservation | None = None,
) -> KataConfigSource:
    """The configuration the sizing checks use for one RuntimeClass, in the issue's order:
    the node's own files (a broken file is reported, not skipped), the profile's
    ``cluster.sizing.kata.<runtime_class>`` entry, the default VM measured by a probe pod."""
    tried: list[str] = []
    if node is not None:
        if node.kind != SOURCE_NONE:
            return node
        tried.extend(node.tried or (f"node: {node.detail or 'nothing found'}",))
    else:
        tried.append("node: the runtime layer's evidence is not available")
    if profile_entry is not None:
        key = f"profile cluster.sizing.kata.{runtime_class}"
        return KataConfigSource(runtime_class, SOURCE_PROFILE, key,
                                profile_entry.to_sizing(key), tried=tuple(tried))
    tried.append(f"profile: no cluster.sizing.kata.{runtime_class} entry")
    if probe is not None:
        m = measured_from_probe(runtime_class, probe)
        return replace(m, tried=tuple(tried) + m.tried)
    tried.append("measured: no probe pod was run")
    return KataConfigSource(runtime_class, SOURCE_NONE, "no source", tried=tuple(tried))


__all__ = [
    "SIZING_GUEST_QUERY",
    "ClusterObjects",
    "GuestSize",
    "KataConfigSource",
    "ShapeObservation",
    "SizingEvidence",
    "SizingInputError",
    "kata_config_from_runtime",
    "kata_sizing_from_toml",
    "measured_from_probe",
    "resolve_config",
]
