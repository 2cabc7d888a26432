"""Build directory trees shaped like a node's /sys, /proc and /boot for self-tests.

The trees are read through the real collection code (``NodeTarget('local://', root=tree)``):
the same shell script, the same transport, the same parser as on a node. Layout follows the
kernel's: ``/sys/bus/pci/devices/<bdf>`` are links into ``/sys/devices/pci0000:00``,
``driver`` and ``iommu_group`` are links, ``/sys/kernel/iommu_groups/<n>/devices/<bdf>`` are
links back to the devices.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

INTEL_CPUINFO = (
    "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R)\n"
    "flags\t\t: fpu vme de pse msr pae mce cx8 apic vmx ssse3 x2apic\n"
    "vmx flags\t: vnmi preemption_timer\n\n"
)
AMD_CPUINFO = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC\n"
    "flags\t\t: fpu vme de pse msr pae mce cx8 apic svm x2apic\n\n"
)

GOOD_KCONFIG = """CONFIG_IOMMU_SUPPORT=y
CONFIG_INTEL_IOMMU=y
# CONFIG_INTEL_IOMMU_DEFAULT_ON is not set
CONFIG_AMD_IOMMU=y
CONFIG_IRQ_REMAP=y
# CONFIG_IOMMU_DEFAULT_PASSTHROUGH is not set
CONFIG_VFIO=m
CONFIG_VFIO_PCI=m
"""


@dataclass
class SysTree:
    root: Path
    kernel: str = "6.1.0-test-amd64"

    def __post_init__(self) -> None:
        for d in (
            "sys/bus/pci/devices",
            "sys/bus/pci/drivers",
            "sys/devices/pci0000:00",
            "sys/kernel/iommu_groups",
            "sys/firmware/acpi/tables",
            "sys/class/iommu",
            "proc/sys/kernel/random",
            "boot",
            "etc",
            "dev/vfio",
        ):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        self.write("proc/sys/kernel/osrelease", self.kernel + "\n")
        self.write("proc/sys/kernel/random/boot_id", "3f1c2d9e-0000-4000-8000-000000000001\n")
        self.write("etc/os-release", 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n')
        self.write("proc/interrupts", "           CPU0\n  0:   10  IO-APIC   2-edge  timer\n")
        self.write("proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro quiet\n")
        self.write("proc/cpuinfo", INTEL_CPUINFO)

    # -- primitives ------------------------------------------------------------------
    def write(self, rel: str, text: str) -> Path:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p

    def link(self, rel: str, target: str) -> None:
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink() or p.exists():
            p.unlink()
        os.symlink(target, p)

    # -- node facts -------------------------------------------------------------------
    def cmdline(self, text: str) -> SysTree:
        self.write("proc/cmdline", text.strip() + "\n")
        return self

    def cpu(self, vendor: str) -> SysTree:
        self.write("proc/cpuinfo", AMD_CPUINFO if vendor == "amd" else INTEL_CPUINFO)
        return self

    def acpi(self, *tables: str) -> SysTree:
        for t in tables:
            self.write(f"sys/firmware/acpi/tables/{t}", "")
        return self

    def kconfig(self, text: str = GOOD_KCONFIG) -> SysTree:
        self.write(f"boot/config-{self.kernel}", text)
        return self

    def irq_remap(self) -> SysTree:
        self.write(
            "proc/interrupts",
            "           CPU0\n  0:   10  IR-IO-APIC   2-edge  timer\n"
            " 24:   99  IR-PCI-MSI-0000:00:02.0   0-edge  eth0\n",
        )
        return self

    def iommu_unit(self, name: str, *bdfs: str) -> SysTree:
        d = self.root / "sys/class/iommu" / name / "devices"
        d.mkdir(parents=True, exist_ok=True)
        for b in bdfs:
            self.link(f"sys/class/iommu/{name}/devices/{b}", f"../../../../devices/pci0000:00/{b}")
        return self

    def group(self, g: str, type_: str = "DMA") -> SysTree:
        (self.root / f"sys/kernel/iommu_groups/{g}/devices").mkdir(parents=True, exist_ok=True)
        self.write(f"sys/kernel/iommu_groups/{g}/type", type_ + "\n")
        return self

    def pci(
        self,
        bdf: str,
        vendor: str,
        device: str,
        cls: str,
        driver: str | None = None,
        group: str | None = None,
        driver_override: str | None = None,
    ) -> SysTree:
        dev = f"sys/devices/pci0000:00/{bdf}"
        self.write(f"{dev}/vendor", f"0x{vendor}\n")
        self.write(f"{dev}/device", f"0x{device}\n")
        self.write(f"{dev}/class", f"0x{cls}\n")
        self.write(f"{dev}/subsystem_vendor", f"0x{vendor}\n")
        self.write(f"{dev}/subsystem_device", "0x0000\n")
        self.write(f"{dev}/numa_node", "-1\n")
        self.write(f"{dev}/driver_override", (driver_override or "(null)") + "\n")
        self.link(f"sys/bus/pci/devices/{bdf}", f"../../../devices/pci0000:00/{bdf}")
        if driver:
            (self.root / f"sys/bus/pci/drivers/{driver}").mkdir(parents=True, exist_ok=True)
            self.link(f"{dev}/driver", f"../../../bus/pci/drivers/{driver}")
        if group is not None:
            if not (self.root / f"sys/kernel/iommu_groups/{group}").exists():
                self.group(group)
            self.link(f"{dev}/iommu_group", f"../../../kernel/iommu_groups/{group}")
            self.link(
                f"sys/kernel/iommu_groups/{group}/devices/{bdf}",
                f"../../../../devices/pci0000:00/{bdf}",
            )
            if driver in ("vfio-pci",):
                self.write(f"dev/vfio/{group}", "")
        return self


def intel_good(root: Path) -> SysTree:
    """A healthy Intel GPU node: VT-d on, IR on, passthrough mode, one NVIDIA GPU + audio."""
    t = SysTree(root)
    t.cpu("intel").acpi("DMAR", "APIC", "FACP").kconfig().irq_remap()
    t.cmdline("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on iommu=pt")
    t.iommu_unit("dmar0", "0000:00:00.0", "0000:41:00.0", "0000:41:00.1")
    t.group("0", "identity").pci("0000:00:00.0", "8086", "1237", "060000", None, "0")
    t.group("1", "identity").pci("0000:00:1f.0", "8086", "2918", "060100", "lpc_ich", "1")
    t.group("7", "identity")
    t.pci("0000:41:00.0", "10de", "2331", "030200", "vfio-pci", "7")
    t.pci("0000:41:00.1", "10de", "22a3", "040300", "vfio-pci", "7")
    return t


def kata_handler_profile(handler: str = "kata") -> Any:
    """The default profile with the platform's Kata handler ``handler``: the runtime-layer
    tests' containerd configs name the handler ``kata``, while the generic profile's is
    kata-deploy's ``kata-qemu-nvidia-gpu`` (platform.kata.handler)."""
    from kgc.core.profile import Profile, load_profile

    doc = load_profile().model_dump(mode="json", by_alias=True, exclude={"source"})
    doc["platform"]["kata"]["handler"] = handler
    return Profile.model_validate(doc)
