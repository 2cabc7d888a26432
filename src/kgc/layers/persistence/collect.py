"""Persistence evidence: the PCI inventory plus every boot-time binding mechanism's
configuration, parsed from the node's one batched snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kgc.core.hostfs import HostSnapshot, require_snapshot
from kgc.evidence.pci import PCI_QUERY, PciInventory, parse_pci
from kgc.evidence.vfio_config import (
    BOOT_CONFIGS,
    CMDLINE_FILES,
    CONFIG_QUERY,
    BootBinding,
    BootConfig,
    IdRule,
    InitramfsListing,
    ModprobeConfig,
    UdevOverride,
    cmdline_words,
    modalias_error,
    parse_boot_config,
    parse_driverctl,
    parse_initramfs,
    parse_modalias_drivers,
    parse_modprobe,
    parse_modules_load,
    parse_udev_overrides,
    vfio_ids_in,
)

QUERY = PCI_QUERY | CONFIG_QUERY


@dataclass(frozen=True)
class PersistenceEvidence:
    pci: PciInventory
    modprobe: ModprobeConfig
    modules_load: Mapping[str, str]
    boot: BootConfig
    proc_cmdline: str | None
    driverctl: Mapping[str, tuple[str, str]]
    udev: tuple[UdevOverride, ...]
    initramfs: InitramfsListing
    candidates: Mapping[str, tuple[str, ...]] | None = None
    initramfs_modules_conf: str | None = None
    extra: Mapping[str, object] = field(default_factory=dict)
    candidates_error: str = ""  # why `candidates` is None
    boot_files_read: tuple[str, ...] = ()  # boot loader config files the node had
    # the files a command line fix edits (CMDLINE_FILES): file -> text (None: not there)
    boot_files: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def binding(self) -> BootBinding:
        return BootBinding(self.modprobe, self.boot, self.driverctl, self.udev,
                           self.proc_cmdline, self.initramfs, self.boot_files)

    def running_ids(self) -> tuple[IdRule, ...]:
        return vfio_ids_in(cmdline_words(self.proc_cmdline or ""))


def parse(snap: HostSnapshot, profile: object = None) -> PersistenceEvidence:
    """The layer's evidence from the node's snapshot (the profile is not needed here)."""
    snap = require_snapshot(snap, "persistence")
    return PersistenceEvidence(
        pci=parse_pci(snap),
        modprobe=parse_modprobe(snap),
        modules_load=parse_modules_load(snap),
        boot=parse_boot_config(snap),
        proc_cmdline=snap.text("/proc/cmdline"),
        driverctl=parse_driverctl(snap),
        udev=tuple(parse_udev_overrides(snap)),
        initramfs=parse_initramfs(snap),
        candidates=parse_modalias_drivers(snap),
        initramfs_modules_conf=snap.read("/etc/initramfs-tools/modules"),
        candidates_error=modalias_error(snap),
        boot_files_read=tuple(sorted(p for pat in BOOT_CONFIGS for p in snap.glob(pat)
                                     if p in snap.files)),
        boot_files={f: snap.read(f) for f in CMDLINE_FILES},
    )


