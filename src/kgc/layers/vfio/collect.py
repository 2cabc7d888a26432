"""VFIO binding evidence: parsed from the node's one batched snapshot (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kgc.core.hostfs import HostSnapshot, require_snapshot
from kgc.evidence.holders import QUERY as HOLDERS_QUERY
from kgc.evidence.holders import DeviceUse, parse_device_use
from kgc.evidence.pci import PCI_QUERY, PciInventory, parse_pci
from kgc.evidence.vfio_config import (
    CONFIG_QUERY,
    BootBinding,
    InitramfsListing,
    ModprobeConfig,
    modalias_error,
    parse_boot_binding,
    parse_modalias_drivers,
)

QUERY = PCI_QUERY | CONFIG_QUERY | HOLDERS_QUERY


@dataclass(frozen=True)
class VfioEvidence:
    pci: PciInventory
    vfio_nodes: tuple[str, ...] | None  # /dev/vfio entries (None: directory absent)
    iommufd_nodes: tuple[str, ...] | None  # /dev/vfio/devices entries
    vfio_dev: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # bdf -> vfioN
    loaded_modules: frozenset[str] | None = None
    candidates: Mapping[str, tuple[str, ...]] | None = None  # bdf -> modalias modules
    modprobe: ModprobeConfig = ModprobeConfig()
    iommu_units: tuple[str, ...] = ()
    candidates_error: str = ""  # why `candidates` is None
    initramfs: InitramfsListing = InitramfsListing(None, (), "not collected")
    # what binds each device at the next boot (modprobe.d, boot loader, driverctl, udev):
    # a device on a host driver whose binding is configured is "pending reboot"
    binding: BootBinding = BootBinding()
    # who holds the GPU device nodes open (vfio.rebindable, binding: dra); an older snapshot
    # without the holder scan says so in its ``error``
    use: DeviceUse = DeviceUse(error="not collected")

    @property
    def iommu_on(self) -> bool:
        return bool(self.pci.groups)


def parse(snap: HostSnapshot, profile: object = None) -> VfioEvidence:
    """The layer's evidence from the node's snapshot (the profile is not needed here)."""
    snap = require_snapshot(snap, "vfio")
    pci = parse_pci(snap)
    vfio_dev = {}
    for p in snap.glob("/sys/bus/pci/devices/*/vfio-dev"):
        bdf = p.split("/")[-2]
        vfio_dev[bdf] = snap.listdir(p) or ()
    mods = snap.listdir("/sys/module")
    binding = parse_boot_binding(snap)
    return VfioEvidence(
        pci=pci,
        vfio_nodes=snap.listdir("/dev/vfio"),
        iommufd_nodes=snap.listdir("/dev/vfio/devices"),
        vfio_dev=vfio_dev,
        loaded_modules=None if mods is None else frozenset(mods),
        candidates=parse_modalias_drivers(snap),
        modprobe=binding.modprobe,
        iommu_units=snap.listdir("/sys/class/iommu") or (),
        candidates_error=modalias_error(snap),
        initramfs=binding.initramfs,
        binding=binding,
        use=parse_device_use(snap),
    )
