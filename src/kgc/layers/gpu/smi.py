"""What nvidia-smi's report means for a GPU pod (pure): NVML failures named, the GPU memory
the workload really gets (whole GPU or MIG slice), and the GPU's health fields judged.

The evidence is :class:`kgc.evidence.guest.NvidiaSmi` (parsed from ``nvidia-smi -q -x``) and
the diagnostic lines nvidia-smi printed beside it. The checks of :mod:`kgc.layers.gpu.checks`
(``gpu.smi-count``, ``gpu.mig``, ``gpu.memory``, ``gpu.health``) build their verdicts from
the findings here.

Sources of the texts and rules (tests cite them per case):

- NVML failure lines: as users pasted them from nvidia-smi in public issue threads (each
  :data:`NVML_FAILURES` entry names one);
- health rules: NVIDIA's "GPU Memory Error Management" (row remapping pending: remapped at
  the next GPU reset; failure: past the RMA threshold; recovery action flag), the NVML API
  reference (``nvmlRemappedRowsInfo``, ``nvmlEccSramErrorStatus``: ``bThresholdExceeded``
  is the field-diagnostic threshold) and nvidia-smi's own field names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kgc.core.model import Status
from kgc.evidence.guest import SmiGpu, SmiMigDevice


# --------------------------------------------------------------------------- NVML failures
@dataclass(frozen=True)
class SmiFailure:
    """A failure nvidia-smi names in one line of its output."""

    id: str
    pattern: re.Pattern[str]
    meaning: str  # what it means, in a verdict's words
    fix: str
    source: str  # a public thread where the line was seen as nvidia-smi printed it

    def match(self, line: str) -> re.Match[str] | None:
        return self.pattern.search(line)


_DMESG = "the guest's kernel log (dmesg: NVRM lines, Xid)"
NVML_FAILURES: tuple[SmiFailure, ...] = (
    SmiFailure(
        "nvml-version-mismatch",
        re.compile(r"Failed to initialize NVML: Driver/library version mismatch", re.I),
        "the NVIDIA user-space library (NVML) is another version than the guest's kernel "
        "driver",
        "In a Kata guest the kernel driver comes with the guest image and the NVIDIA container "
        "toolkit in the guest injects the matching user-space libraries into the container: "
        "an image that carries its own libnvidia-ml of another version shadows them. Use an "
        "image without NVIDIA driver libraries (e.g. the CUDA -base images) or rebuild the "
        "guest image so that its driver and libraries are one version (the line after the "
        "error, 'NVML library version: …', names the library's).",
        "https://github.com/intel/llvm/issues/17614",
    ),
    SmiFailure(
        "gpu-lost",
        re.compile(r"Unable to determine the device handle for GPU ?([0-9A-Fa-f:.]+): GPU is "
                   r"lost", re.I),
        "the GPU is lost: it stopped answering on the PCIe bus (NVRM Xid 79, 'GPU has fallen "
        "off the bus')",
        "The GPU needs a reset before any VM can use it: drain the node, reset the GPU on the "
        "host (unbind it from vfio-pci and reset it, or reboot the node) and read the host's "
        f"and {_DMESG} for the Xid. A GPU that is lost again points at power, cooling or the "
        "PCIe slot/riser.",
        "https://github.com/JosephKJ/OWOD/issues/81",
    ),
    SmiFailure(
        "device-handle-error",
        re.compile(r"Unable to determine the device handle for GPU ?([0-9A-Fa-f:.]+): "
                   r"(?!GPU is lost)(.+)", re.I),
        "NVML could not open a GPU the driver lists",
        "The driver did not initialize the passed-through device: read "
        f"{_DMESG} for 'RmInitAdapter failed' (BARs not assigned, see gpu.pci-function; GSP "
        "firmware not loaded) or a GPU that fell off the bus.",
        "https://github.com/kata-containers/runtime/issues/2546",
    ),
    SmiFailure(
        "no-devices",
        re.compile(r"^\s*No devices were found", re.I),
        "the NVIDIA driver is loaded but initialized no GPU",
        "The GPU did not reach the guest (see gpu.pci-function) or the driver could not "
        f"initialize it: read {_DMESG} (RmInitAdapter failed, GSP firmware load failed).",
        "https://github.com/NVIDIA/gpu-operator/issues/653",
    ),
    SmiFailure(
        "driver-not-loaded",
        re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                   r"driver", re.I),
        "the NVIDIA kernel driver is not loaded in the guest",
        "The guest image must load the NVIDIA kernel modules for the passed-through GPU (Kata's "
        f"NVIDIA guest images do): read {_DMESG} for why the module did not bind.",
        "https://github.com/cpnr/computing/issues/73",
    ),
    SmiFailure(
        "nvml-init-failed",
        re.compile(r"Failed to initialize NVML: (?!Driver/library version mismatch)(.+)", re.I),
        "NVML could not initialize",
        "NVML could not open the driver: the container needs /dev/nvidiactl and /dev/nvidia<N> "
        "(the NVIDIA container toolkit in the guest injects them) and its user-space "
        "libraries must match the driver.",
        "https://github.com/NVIDIA/nvidia-container-toolkit/issues/69",
    ),
)

# a warning nvidia-smi prints beside a report that is otherwise fine: judged by gpu.health
INFOROM = SmiFailure(
    "inforom-corrupted",
    re.compile(r"WARNING: infoROM is corrupted at gpu ?([0-9A-Fa-f:.]+)", re.I),
    "the GPU's infoROM (its persistent ECC and page-retirement records) is corrupted",
    "The GPU's error records cannot be trusted: NVIDIA support reflashes the infoROM or "
    "replaces the board (the GPU Operator's validator fails on nvidia-smi's return code 14).",
    "https://github.com/NVIDIA/gpu-operator/issues/20",
)


def named_failures(lines: Iterable[str | None]) -> list[tuple[SmiFailure, str]]:
    """(failure, the line that names it) for every line that names one, in order."""
    out = []
    for line in lines:
        for f in NVML_FAILURES:
            if line and f.match(line):
                out.append((f, line.strip()))
                break
    return out


# --------------------------------------------------------------------------- MIG
def workload_memory(g: SmiGpu) -> list[tuple[str, int | None]]:
    """(what, MiB) of the GPU memory a workload on this GPU gets: the whole GPU's total, or
    each MIG device's when the GPU is in MIG mode (a process gets one MIG device). A GPU in
    MIG mode with no MIG device gives none (an empty list)."""
    if g.mig_enabled:
        return [(f"{g.name} MIG device {m.index if m.index is not None else '?'} (GI "
                 f"{m.gpu_instance_id if m.gpu_instance_id is not None else '?'})",
                 m.memory_total_mib) for m in g.mig_devices or ()]
    return [(g.name, g.memory_total_mib)]


def mig_state(g: SmiGpu) -> str:
    """One phrase: 'MIG disabled', 'MIG enabled, 2 MIG devices', 'MIG N/A', ..."""
    cur = g.mig_current or "not reported"
    bits = [f"MIG {cur if cur in ('N/A', 'not reported') else cur.lower()}"]
    if g.mig_pending and g.mig_current and g.mig_pending != g.mig_current:
        bits.append(f"pending {g.mig_pending.lower()} after the next GPU reset")
    if g.mig_enabled:
        n = len(g.mig_devices or ())
        bits.append(f"{n} MIG device{'s' if n != 1 else ''}")
    return ", ".join(bits)


# --------------------------------------------------------------------------- health
@dataclass(frozen=True)
class Finding:
    status: Status  # FAIL or WARN
    gpu: str
    what: str
    fix: str


_RESET = ("Reset the GPU before it is handed to a VM: on the host, stop the pods using it, "
          "unbind it from vfio-pci and reset it (nvidia-smi -r, or reboot the node).")
_RMA = ("The GPU is past NVIDIA's field thresholds: drain the node and follow NVIDIA's RMA "
        "process for this board (run its field diagnostics first).")
_SLOW = ("Check the node's cooling and power delivery (hardware slowdown is the GPU's own "
         "protection against heat or a power-brake signal).")


def _num(v: str | None) -> int | None:
    m = re.match(r"\s*(\d{1,15})\b", v or "")
    return int(m.group(1)) if m else None


def _yes(v: str | None) -> bool:
    return (v or "").strip().lower() == "yes"


def _ecc_counts(h: Mapping[str, str]) -> dict[tuple[str, str], tuple[int, list[str]]]:
    """{(volatile|aggregate, uncorrectable|correctable): (sum, [paths with a count > 0])}
    from ``ecc_errors``: the Ampere+ fields (``dram_uncorrectable``, ``sram_uncorrectable_*``)
    and the older ``single_bit``/``double_bit`` groups (their ``total`` when printed).
    The per-source breakdown (``aggregate_uncorrectable_sram_sources``) is not counted twice."""
    groups_with_total = {p.rsplit("/", 1)[0] for p in h if p.endswith("/total")}
    out: dict[tuple[str, str], tuple[int, list[str]]] = {}
    for path, v in h.items():
        parts = path.split("/")
        if parts[0] != "ecc_errors" or len(parts) < 3 or "_sources" in path:
            continue
        n = _num(v)
        if n is None:
            continue
        parent = path.rsplit("/", 1)[0]
        if parent in groups_with_total and not path.endswith("/total"):
            continue
        scope = parts[1]
        if scope not in ("volatile", "aggregate"):
            continue
        leaf = "/".join(parts[2:])
        if "uncorrectable" in leaf or "double_bit" in leaf:
            kind = "uncorrectable"
        elif "correctable" in leaf or "single_bit" in leaf:
            kind = "correctable"
        else:
            continue
        total, where = out.get((scope, kind), (0, []))
        out[(scope, kind)] = (total + n, where + ([f"{path}={n}"] if n else []))
    return out


def health_findings(g: SmiGpu) -> tuple[list[Finding], list[str]]:
    """(problems, what was judged and found fine) for one GPU's health fields."""
    h, name = g.health, g.name
    bad: list[Finding] = []
    fine: list[str] = []

    def flag(path: str, status: Status, what: str, fix: str, ok: str) -> None:
        if path not in h or h[path] in ("N/A", ""):
            return
        if _yes(h[path]):
            bad.append(Finding(status, name, what, fix))
        else:
            fine.append(ok)

    cur, pend = h.get("ecc_mode/current_ecc"), h.get("ecc_mode/pending_ecc")
    if cur == "Disabled":
        bad.append(Finding(Status.WARN, name, "ECC is disabled: memory errors are neither "
                           "corrected nor counted", "Enable ECC on the host (nvidia-smi -e 1, "
                           "then reset the GPU)."))
    elif cur == "Enabled":
        fine.append("ECC enabled")
    if cur and pend and pend != cur and "N/A" not in (cur, pend):
        bad.append(Finding(Status.WARN, name, f"ECC mode {cur}, pending {pend} (takes effect "
                           "at the next GPU reset)", _RESET))

    counts = _ecc_counts(h)
    for scope, status in (("volatile", Status.FAIL), ("aggregate", Status.WARN)):
        n, where = counts.get((scope, "uncorrectable"), (0, []))
        if (scope, "uncorrectable") not in counts:
            continue
        if n:
            when = ("since the guest's driver loaded, i.e. during this pod"
                    if scope == "volatile" else "in the GPU's lifetime (aggregate)")
            bad.append(Finding(status, name, f"{n} uncorrectable ECC error(s) {when}: "
                               + ", ".join(where),
                               (_RESET + " Then read the row remapper / retired pages state; "
                                + _RMA) if scope == "volatile" else
                               "Check that the errors were contained (rows remapped or pages "
                               "retired, see below) and compare with NVIDIA's RMA thresholds."))
        else:
            fine.append(f"0 uncorrectable ECC errors ({scope})")
    corr = [counts[(s, "correctable")] for s in ("volatile", "aggregate")
            if (s, "correctable") in counts and counts[(s, "correctable")][0]]
    if corr:
        fine.append("correctable ECC errors " + ", ".join(", ".join(w) for _, w in corr))
    flag("ecc_errors/aggregate/sram_threshold_exceeded", Status.FAIL,
         "the SRAM uncorrectable error count is over NVIDIA's field-diagnostic threshold",
         _RMA, "SRAM error threshold not exceeded")
    flag("ecc_errors/unrepairable_memory", Status.FAIL,
         "the GPU reports unrepairable memory", _RMA, "no unrepairable memory")
    for what in ("channel_repair_pending", "tpc_repair_pending"):
        flag(f"ecc_errors/{what}", Status.WARN,
             f"a memory repair is pending ({what}: repaired at the next GPU reset)", _RESET,
             f"no {what.replace('_', ' ')}")

    pending = [p for p in ("retired_pages/pending_retirement", "retired_pages/pending_blacklist")
               if _yes(h.get(p))]
    if pending:
        bad.append(Finding(Status.WARN, name, "pages are pending retirement (" + ", ".join(
            p.split("/")[-1] for p in pending) + "): they are retired at the next driver "
            "reload", _RESET))
    elif any(h.get(p) == "No" for p in ("retired_pages/pending_retirement",
                                         "retired_pages/pending_blacklist")):
        fine.append("no page pending retirement")
    dbe = _num(h.get("retired_pages/double_bit_retirement/retired_count"))
    sbe = _num(h.get("retired_pages/multiple_single_bit_retirement/retired_count"))
    if dbe:
        bad.append(Finding(Status.WARN, name, f"{dbe} page(s) retired after double-bit "
                           "(uncorrectable) ECC errors", "Compare with NVIDIA's RMA threshold "
                           "for retired pages; a growing count means failing memory."))
    if dbe == 0 or sbe is not None:
        fine.append(f"retired pages: {dbe or 0} double-bit, {sbe or 0} single-bit")

    flag("remapped_rows/remapped_row_failure", Status.FAIL,
         "a row remapping failed (NVIDIA's RMA condition for the row remapper)", _RMA,
         "no row remapping failure")
    flag("remapped_rows/remapped_row_pending", Status.WARN,
         "a row remapping is pending: the row is remapped at the next GPU reset", _RESET,
         "no row remapping pending")
    unc = _num(h.get("remapped_rows/remapped_row_unc"))
    if unc:
        fine.append(f"{unc} row(s) remapped after uncorrectable errors")
    none_left = _num(h.get("remapped_rows/row_remapper_histogram/row_remapper_histogram_none"))
    if none_left:
        bad.append(Finding(Status.WARN, name, f"{none_left} memory bank(s) have no spare row "
                           "left: the next uncorrectable error there cannot be remapped",
                           _RMA))

    for path, v in h.items():
        if path.startswith("clocks_") and v.strip().lower() == "active":
            reason = path.rsplit("/", 1)[-1].split("reason_")[-1]
            bad.append(Finding(Status.WARN, name, f"clocks are slowed down now: {reason} is "
                               "Active", _SLOW))
    if any(p.startswith("clocks_") for p in h) and not any(
            f.what.startswith("clocks") for f in bad):
        fine.append("no hardware or thermal slowdown")

    action = h.get("gpu_recovery_action")
    if action and action not in ("None", "N/A"):
        bad.append(Finding(Status.FAIL, name, f"the driver asks for a recovery action: "
                           f"{action}", "Do what NVIDIA's recovery action says before the GPU "
                           "is used: Reset: reset the GPU; Reboot: reboot the node; Drain P2P / "
                           "Drain and Reset: stop peer-to-peer work, then reset."))
    elif action == "None":
        fine.append("recovery action None")

    for m in (g.mig_devices or ()) if g.mig_enabled else ():
        bad.extend(_mig_health(name, m))
    return bad, fine


def _mig_health(name: str, m: SmiMigDevice) -> list[Finding]:
    n = sum(_num(v) or 0 for p, v in m.health.items() if "uncorrectable" in p)
    if not n:
        return []
    return [Finding(Status.FAIL, name, f"{m.describe()}: {n} uncorrectable SRAM ECC error(s) "
                    "(volatile)", _RESET)]


def inforom_findings(messages: Iterable[str]) -> list[Finding]:
    return [Finding(Status.WARN, (m.group(1) if (m := INFOROM.match(line)) else "?"),
                    INFOROM.meaning, INFOROM.fix)
            for line in messages if INFOROM.match(line)]
