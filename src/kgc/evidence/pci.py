"""PCI inventory and IOMMU group layout, shared by the iommu and vfio layers.

Pure parsing of a :class:`HostSnapshot`; the query below is merged into the node's one
batched collection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.core.hostfs import HostQuery, HostSnapshot
from kgc.core.profile import DeviceSelector, Profile

PCI = "/sys/bus/pci/devices"
GROUPS = "/sys/kernel/iommu_groups"

PCI_QUERY = HostQuery(
    files=(
        f"{PCI}/*/vendor",
        f"{PCI}/*/device",
        f"{PCI}/*/class",
        f"{PCI}/*/subsystem_vendor",
        f"{PCI}/*/subsystem_device",
        f"{PCI}/*/driver_override",
        f"{PCI}/*/numa_node",
        f"{GROUPS}/*/type",
    ),
    links=(f"{PCI}/*/driver", f"{PCI}/*/iommu_group"),
    dirs=(PCI, GROUPS, f"{GROUPS}/*/devices"),
)

# PCI-to-PCI and CardBus bridges (header type 1/2): vfio tolerates them in a group.
BRIDGE_CLASSES = ("0604", "0607", "0609")


def _hex(v: str | None) -> str | None:
    if v is None:
        return None
    v = v.strip().lower()
    if v.startswith("0x"):
        v = v[2:]
    return v or None


@dataclass(frozen=True)
class PciDevice:
    bdf: str
    vendor: str | None
    device: str | None
    pci_class: str | None  # 6 hex digits, e.g. "030200"
    subsystem_vendor: str | None = None
    subsystem_device: str | None = None
    driver: str | None = None
    driver_override: str | None = None
    iommu_group: str | None = None
    numa_node: str | None = None

    @property
    def is_bridge(self) -> bool:
        return (self.pci_class or "")[:4] in BRIDGE_CLASSES

    @property
    def ident(self) -> str:
        return f"{self.vendor or '????'}:{self.device or '????'}"

    def describe(self) -> str:
        drv = self.driver or "no driver"
        return f"{self.bdf} [{self.ident}] class {self.pci_class or '?'} ({drv})"

    def to_dict(self) -> dict[str, object]:
        return {
            "bdf": self.bdf,
            "id": self.ident,
            "class": self.pci_class,
            "driver": self.driver,
            "driver_override": self.driver_override,
            "iommu_group": self.iommu_group,
            "numa_node": self.numa_node,
        }

    def selected_by(self, sel: DeviceSelector) -> bool:
        return sel.matches(self.bdf, self.vendor, self.device, self.pci_class)


@dataclass(frozen=True)
class PciInventory:
    devices: Mapping[str, PciDevice] = field(default_factory=dict)
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    group_types: Mapping[str, str] = field(default_factory=dict)
    groups_dir_exists: bool = False
    unreadable: tuple[str, ...] = ()

    def matching(self, selectors: tuple[DeviceSelector, ...]) -> list[PciDevice]:
        return [d for d in self.devices.values() if any(d.selected_by(s) for s in selectors)]

    def targets(self, profile: Profile) -> list[PciDevice]:
        return self.matching(profile.host.passthrough.targets)

    def host_kept(self, profile: Profile) -> list[PciDevice]:
        return self.matching(profile.host.passthrough.host_keeps)

    def group_of(self, bdf: str) -> str | None:
        dev = self.devices.get(bdf)
        if dev is not None and dev.iommu_group is not None:
            return dev.iommu_group
        for g, members in self.groups.items():
            if bdf in members:
                return g
        return None

    def peers(self, bdf: str) -> list[PciDevice]:
        g = self.group_of(bdf)
        if g is None:
            return []
        return [self.devices[b] for b in self.groups.get(g, ()) if b != bdf and b in self.devices]

    def group_table(self) -> list[dict[str, Any]]:
        """The IOMMU group layout as evidence rows (group, type, devices)."""
        rows = []
        for g in sorted(self.groups, key=lambda x: (len(x), x)):
            rows.append(
                {
                    "group": g,
                    "type": self.group_types.get(g),
                    "devices": [
                        self.devices[b].describe() if b in self.devices else b
                        for b in self.groups[g]
                    ],
                }
            )
        return rows


def parse_pci(snap: HostSnapshot) -> PciInventory:
    """Never raises: what cannot be read is listed in ``unreadable``."""
    entries = snap.listdir(PCI) or ()
    devices: dict[str, PciDevice] = {}
    for bdf in entries:
        base = f"{PCI}/{bdf}"
        cls = _hex(snap.text(f"{base}/class"))
        override = snap.text(f"{base}/driver_override")
        devices[bdf] = PciDevice(
            bdf=bdf,
            vendor=_hex(snap.text(f"{base}/vendor")),
            device=_hex(snap.text(f"{base}/device")),
            pci_class=cls.rjust(6, "0") if cls else None,
            subsystem_vendor=_hex(snap.text(f"{base}/subsystem_vendor")),
            subsystem_device=_hex(snap.text(f"{base}/subsystem_device")),
            driver=snap.link_name(f"{base}/driver"),
            driver_override=None if override in (None, "", "(null)") else override,
            iommu_group=snap.link_name(f"{base}/iommu_group"),
            numa_node=snap.text(f"{base}/numa_node"),
        )
    groups: dict[str, tuple[str, ...]] = {}
    types: dict[str, str] = {}
    for g in snap.listdir(GROUPS) or ():
        groups[g] = tuple(sorted(snap.listdir(f"{GROUPS}/{g}/devices") or ()))
        t = snap.text(f"{GROUPS}/{g}/type")
        if t:
            types[g] = t
    unreadable = tuple(sorted(p for p in snap.errors if p.startswith((PCI, GROUPS))))
    return PciInventory(
        devices=devices,
        groups=groups,
        group_types=types,
        groups_dir_exists=snap.listdir(GROUPS) is not None,
        unreadable=unreadable,
    )
