"""Host IOMMU evidence: what the collector asks the node, and the pure parser."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kgc.core.hostfs import HostQuery, HostSnapshot, require_snapshot
from kgc.evidence.pci import PCI_QUERY, PciInventory, parse_pci
from kgc.evidence.platform import CPU_CMD, PLATFORM_QUERY, VmFacts, vm_facts
from kgc.evidence.vfio_config import CMDLINE_FILES

KCONFIG_KEYS = (
    "IOMMU_SUPPORT",
    "INTEL_IOMMU",
    "INTEL_IOMMU_DEFAULT_ON",
    "AMD_IOMMU",
    "ARM_SMMU",
    "ARM_SMMU_V3",
    "IRQ_REMAP",
    "IOMMU_DEFAULT_PASSTHROUGH",
    "IOMMU_DEFAULT_DMA_LAZY",
    "IOMMU_DEFAULT_DMA_STRICT",
    "VFIO",
    "VFIO_PCI",
    "IOMMUFD",
)

_KCONFIG_RE = "|".join(KCONFIG_KEYS)

# Where vfio-pci is shown built when no kernel config can be read: modules.builtin or the
# module file of the kernel that boots (the tree's own /lib/modules on an offline tree).
VFIO_MODULE_CMD = (
    'if [ -r "$R/proc/sys/kernel/osrelease" ]; then '
    'k=$(cat "$R/proc/sys/kernel/osrelease"); set -- "$R/lib/modules/$k"; '
    'elif [ -n "$R" ]; then set -- "$R"/lib/modules/*; else set -- "/lib/modules/$(uname -r)"; '
    'fi; for d in "$@"; do [ -d "$d" ] || continue; '
    "grep -m1 -E '/vfio[-_]pci[.]ko' \"$d/modules.builtin\" 2>/dev/null | "
    'while IFS= read -r l; do printf \'builtin %s\\n\' "$l"; done; '
    'for f in "$d"/kernel/drivers/vfio/pci/vfio-pci.ko* "$d"/kernel/drivers/vfio/pci/vfio_pci.ko*; '
    'do [ -e "$f" ] && printf \'module %s\\n\' "${f#"$R"}"; done; done; true'
)

QUERY = PCI_QUERY | PLATFORM_QUERY | HostQuery(
    files=(
        "/proc/cmdline",
        "/proc/sys/kernel/osrelease",
        "/proc/sys/kernel/random/boot_id",
        "/etc/os-release",
        *CMDLINE_FILES,  # where a command line fix goes (the boot loader's own file)
    ),
    dirs=("/sys/firmware/acpi/tables", "/sys/class/iommu", "/sys/class/iommu/*/devices",
          "/sys/bus/pci/drivers", "/sys/module"),
    commands=(
        ("cpu", CPU_CMD),
        ("vfio_pci_module", VFIO_MODULE_CMD),
        (
            "kconfig",
            'k=$(cat "$R/proc/sys/kernel/osrelease" 2>/dev/null); f="$R/boot/config-$k"; '
            f'if [ -r "$f" ]; then grep -E \'^(# )?CONFIG_({_KCONFIG_RE})[= ]\' "$f"; '
            f'elif [ -z "$R" ] && [ -r /proc/config.gz ]; then zcat /proc/config.gz | '
            f"grep -E '^(# )?CONFIG_({_KCONFIG_RE})[= ]'; else echo KGC-NO-KCONFIG; exit 3; fi",
        ),
        (
            "irq_remap",
            # exit 2 when /proc/interrupts cannot be read (unknown), not an empty answer
            'f="$R/proc/interrupts"; '
            '[ -r "$f" ] || { echo "KGC-UNREADABLE /proc/interrupts"; exit 2; }; '
            "grep -o -m8 -E 'IR-[A-Za-z0-9-]+' \"$f\" | sort -u",
        ),
        (
            "dmesg",
            # The kernel ring buffer of the running kernel only; an offline tree has none.
            'if [ -n "$R" ]; then echo KGC-NO-DMESG; exit 3; fi; '
            "dmesg 2>/dev/null | grep -i -E 'DMAR|AMD-Vi|IOMMU|SMMU|remapping' | tail -n 200",
        ),
    ),
)


@dataclass(frozen=True)
class CmdlineArgs:
    """The kernel command line, as the kernel sees it (last value of a key wins)."""

    raw: str
    params: Mapping[str, str | None] = field(default_factory=dict)

    def get(self, key: str) -> str | None:
        return self.params.get(key)

    def has(self, key: str) -> bool:
        return key in self.params

    def values(self, key: str) -> list[str]:
        """Comma-separated option values, e.g. iommu=pt,nopt -> ['pt', 'nopt']."""
        v = self.params.get(key)
        return [] if v is None else [x for x in v.split(",") if x]


def parse_cmdline(raw: str | None) -> CmdlineArgs:
    raw = raw or ""
    params: dict[str, str | None] = {}
    for tok in raw.split():
        if tok == "--":
            break
        key, eq, val = tok.partition("=")
        key = key.replace("-", "_")  # the kernel treats '-' and '_' in names alike
        params[key] = val.strip('"') if eq else None
    return CmdlineArgs(raw=raw.strip(), params=params)


def parse_kconfig(out: str | None) -> dict[str, str]:
    """``CONFIG_X=y`` -> {'X': 'y'}; ``# CONFIG_X is not set`` -> {'X': 'n'}."""
    cfg: dict[str, str] = {}
    for line in (out or "").splitlines():
        m = re.match(r"^CONFIG_([A-Z0-9_]+)=(.*)$", line.strip())
        if m:
            cfg[m.group(1)] = m.group(2).strip('"')
            continue
        m = re.match(r"^# CONFIG_([A-Z0-9_]+) is not set", line.strip())
        if m:
            cfg[m.group(1)] = "n"
    return cfg


@dataclass(frozen=True)
class IommuEvidence:
    cpu_vendor: str | None  # "intel" | "amd" | "arm" | None
    cpu_virt: str | None  # "vmx" | "svm" | None
    hypervisor: bool  # the node is itself a VM
    acpi_tables: tuple[str, ...] | None  # None: /sys/firmware/acpi/tables unreadable
    cmdline: CmdlineArgs
    kernel: str | None
    kconfig: Mapping[str, str] | None  # None: no kernel config found
    irq_remap_chips: tuple[str, ...] | None  # None: /proc/interrupts unreadable
    dmesg: tuple[str, ...] | None  # None: no dmesg (offline tree or not permitted)
    units: Mapping[str, tuple[str, ...]]  # /sys/class/iommu/<unit>/devices
    pci: PciInventory
    distro: str | None
    errors: Mapping[str, str] = field(default_factory=dict)
    cmdline_read: bool = True
    vm: VmFacts = VmFacts(False, "", "")
    vfio_pci_shown: str | None = None  # how vfio-pci is shown built (None: not shown)
    cpu_flags_read: bool = False  # the cpuinfo flags line was read (cpu_virt is meaningful)
    pvm: bool = False  # /sys/module/kvm_pvm: KVM by PVM, virtualization without VT-x/AMD-V
    boot_files: Mapping[str, str | None] = field(default_factory=dict)  # CMDLINE_FILES

    def no_hw_virt(self) -> str | None:
        """What shows this node is a VM its host runs without hardware virtualization and
        without an IOMMU (None: not shown). PVM (the pagetable-based virtual machine,
        virt-pvm/linux arch/x86/kvm/pvm) runs its guests at hardware CPL 3 with shadow
        paging (Documentation/virt/kvm/x86/pvm-spec.rst), which is what a host resorts to
        when it gives its VMs no VT-x/AMD-V."""
        if not (self.vm.vm and self.cpu_flags_read and self.cpu_virt is None
                and self.cpu_vendor in ("intel", "amd") and not self.groups and not self.units):
            return None
        parts = [f"it is a virtual machine ({self.vm.why})",
                 "its CPU has no hardware virtualization (no vmx/svm flag in /proc/cpuinfo)"]
        if self.pvm:
            parts.append("its KVM is PVM (/sys/module/kvm_pvm: software virtualization at "
                         "CPL 3, used where the host gives a VM no VT-x/AMD-V)")
        table = "DMAR" if self.cpu_vendor == "intel" else "IVRS"
        parts.append(f"and it has no IOMMU (no ACPI {table} table, /sys/class/iommu empty, no "
                     "IOMMU groups)")
        return ", ".join(parts)

    @property
    def groups(self) -> Mapping[str, tuple[str, ...]]:
        return self.pci.groups

    @property
    def firmware_table(self) -> str | None:
        for t in ("DMAR", "IVRS", "IORT"):
            if self.acpi_tables and any(x == t or x.startswith(t) for x in self.acpi_tables):
                return t
        return None


def _os_pretty(osrel: str | None) -> str | None:
    for line in (osrel or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def parse(snap: HostSnapshot, profile: object = None) -> IommuEvidence:
    """The layer's evidence from the node's snapshot (the profile is not needed here).
    Pure and total: any snapshot, however malformed, gives an evidence object."""
    snap = require_snapshot(snap, "iommu")
    cpu = snap.command("cpu")
    vendor = virt = None
    hypervisor = flags_read = False
    if cpu is not None:
        for line in cpu.output.splitlines():
            key, _, val = line.partition(":")
            key, val = key.strip(), val.strip()
            if key == "vendor_id":
                vendor = {
                    "GenuineIntel": "intel",
                    "AuthenticAMD": "amd",
                    "HygonGenuine": "amd",
                }.get(val, val.lower() or None)
            elif key == "flags":
                flags = set(val.split())
                flags_read = bool(flags)
                virt = "vmx" if "vmx" in flags else "svm" if "svm" in flags else None
                hypervisor = "hypervisor" in flags
            elif key == "CPU implementer":
                vendor = vendor or "arm"
    tables = snap.listdir("/sys/firmware/acpi/tables")
    kc = snap.command("kconfig")
    kconfig = parse_kconfig(kc.output) if kc is not None and kc.rc == 0 else None
    ir = snap.command("irq_remap")
    irq = (
        tuple(sorted({x for x in ir.output.split() if x.startswith("IR-")}))
        if ir is not None and ir.rc in (0, 1)
        else None
    )
    dm = snap.command("dmesg")
    dmesg = (
        tuple(line for line in dm.output.splitlines() if line.strip())
        if dm is not None and dm.rc == 0
        else None
    )
    units = {
        u: snap.listdir(f"/sys/class/iommu/{u}/devices") or ()
        for u in (snap.listdir("/sys/class/iommu") or ())
    }
    return IommuEvidence(
        cpu_vendor=vendor,
        cpu_virt=virt,
        hypervisor=hypervisor,
        acpi_tables=tables,
        cmdline=parse_cmdline(snap.read("/proc/cmdline")),
        kernel=snap.text("/proc/sys/kernel/osrelease"),
        kconfig=kconfig,
        irq_remap_chips=irq,
        dmesg=dmesg,
        units=units,
        pci=parse_pci(snap),
        distro=_os_pretty(snap.read("/etc/os-release")),
        errors=dict(snap.errors),
        cmdline_read=snap.read("/proc/cmdline") is not None,
        vm=vm_facts(snap),
        vfio_pci_shown=_vfio_pci_shown(snap),
        cpu_flags_read=flags_read,
        pvm="kvm_pvm" in (snap.listdir("/sys/module") or ()),
        boot_files={f: snap.read(f) for f in CMDLINE_FILES},
    )


def _vfio_pci_shown(snap: HostSnapshot) -> str | None:
    if "vfio-pci" in (snap.listdir("/sys/bus/pci/drivers") or ()):
        return "vfio-pci is registered as a PCI driver (/sys/bus/pci/drivers/vfio-pci)"
    if "vfio_pci" in (snap.listdir("/sys/module") or ()):
        return "module vfio_pci is loaded (/sys/module/vfio_pci)"
    res = snap.command("vfio_pci_module")
    for line in (res.output.splitlines() if res is not None else ()):
        kind, _, what = line.partition(" ")
        if kind == "builtin" and what:
            return f"vfio-pci is built in ({what} in modules.builtin)"
        if kind == "module" and what:
            return f"vfio-pci is built as a module ({what})"
    return None
