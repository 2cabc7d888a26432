"""Build a /sys-, /dev- and /etc-shaped tree in a temporary directory for the host layers.

The tree is read through the real collector (``NodeTarget("local://", root=tree)``), so the
same shell script, parser and evaluators run as on a node. Only the two command outputs
that depend on the machine's kernel module database and /boot (``pci_modalias_drivers``,
``initramfs_list``) are replaced by recorded outputs, as a node would have printed them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kgc.core.hostfs import CommandResult, HostQuery, HostSnapshot
from kgc.core.target import NodeTarget


@dataclass
class Dev:
    bdf: str
    vendor: str
    device: str
    cls: str
    driver: str | None = None
    group: str | None = None
    override: str | None = None
    modules: tuple[str, ...] = ()  # what `modprobe -R <modalias>` prints on the node


@dataclass
class FakeHost:
    root: Path
    devices: list[Dev] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    vfio_nodes: tuple[str, ...] = ()
    modules_loaded: tuple[str, ...] = ()
    initramfs: str | None = None  # lsinitramfs output (filtered), None: no image
    cmdline: str = "BOOT_IMAGE=/vmlinuz root=/dev/vda intel_iommu=on iommu=pt"
    # processes: pid -> (comm, {fd: what its /proc/<pid>/fd/<fd> link names}); None: the tree
    # has no process table (an offline tree)
    procs: Mapping[int, tuple[str, Mapping[int, str]]] | None = None
    consumers: Mapping[str, str] = field(default_factory=dict)  # bdf -> its consumer bdf

    def build(self) -> Path:
        r = self.root
        pci = r / "sys/bus/pci/devices"
        pci.mkdir(parents=True, exist_ok=True)
        (r / "sys/kernel/iommu_groups").mkdir(parents=True, exist_ok=True)
        for d in self.devices:
            dd = r / "sys/devices/pci0000:00" / d.bdf
            dd.mkdir(parents=True, exist_ok=True)
            (dd / "vendor").write_text(f"0x{d.vendor}\n")
            (dd / "device").write_text(f"0x{d.device}\n")
            (dd / "class").write_text(f"0x{d.cls}\n")
            (dd / "subsystem_vendor").write_text("0x1af4\n")
            (dd / "subsystem_device").write_text("0x1100\n")
            (dd / "driver_override").write_text(f"{d.override or '(null)'}\n")
            (dd / "modalias").write_text(f"pci:v0000{d.vendor.upper()}d0000{d.device.upper()}\n")
            if d.driver:
                drv = r / "sys/bus/pci/drivers" / d.driver
                drv.mkdir(parents=True, exist_ok=True)
                os.symlink(f"../../../bus/pci/drivers/{d.driver}", dd / "driver")
            if d.group is not None:
                g = r / "sys/kernel/iommu_groups" / d.group / "devices"
                g.mkdir(parents=True, exist_ok=True)
                (g.parent / "type").write_text("identity\n")
                os.symlink(f"../../../../devices/pci0000:00/{d.bdf}", g / d.bdf)
                os.symlink(f"../../../kernel/iommu_groups/{d.group}", dd / "iommu_group")
            os.symlink(f"../../../devices/pci0000:00/{d.bdf}", pci / d.bdf)
        (r / "dev").mkdir(exist_ok=True)
        if self.vfio_nodes:
            (r / "dev/vfio").mkdir(exist_ok=True)
            for n in self.vfio_nodes:
                (r / "dev/vfio" / n).write_text("")
        for m in self.modules_loaded:
            (r / "sys/module" / m).mkdir(parents=True, exist_ok=True)
        (r / "proc").mkdir(exist_ok=True)
        (r / "proc/cmdline").write_text(self.cmdline + "\n")
        for pid, (comm, fds) in (self.procs or {}).items():
            (r / f"proc/{pid}/fd").mkdir(parents=True, exist_ok=True)
            (r / f"proc/{pid}/comm").write_text(comm + "\n")
            for fd, target in fds.items():
                os.symlink(target, r / f"proc/{pid}/fd/{fd}")
        for bdf, peer in self.consumers.items():
            os.symlink(f"../{peer}", r / "sys/devices/pci0000:00" / bdf / f"consumer:pci:{peer}")
        for path, content in self.files.items():
            p = r / path.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content)
        return r

    def collect(self, query: HostQuery) -> HostSnapshot:
        if not (self.root / "proc/cmdline").exists():
            self.build()
        snap = NodeTarget("local://", root=str(self.root)).collect(query)
        cmds: dict[str, CommandResult] = dict(snap.commands)
        lines = []
        for d in self.devices:
            alias = f"pci:v0000{d.vendor.upper()}d0000{d.device.upper()}"
            lines += [f"D {d.bdf} {alias}", f"A {alias} {' '.join(d.modules)} "]
        cmds["pci_modalias_drivers"] = CommandResult(0, "\n".join(lines))
        cmds["initramfs_list"] = (
            CommandResult(3, "KGC-NO-INITRAMFS") if self.initramfs is None
            else CommandResult(0, "# image /boot/initrd.img-6.1.0-50-amd64\n" + self.initramfs))
        return dataclasses.replace(snap, commands=cmds)


def lab_devices(**drivers: str | None) -> list[Dev]:
    """The lab node's PCI layout (see kgc_lab.node) with the given drivers per role."""
    d = {"accel0": None, "gpu0": "e1000", "gpu0_fn1": "e1000", "host_nic": "e1000e"}
    d.update(drivers)
    return [
        Dev("0000:00:02.0", "1af4", "1000", "020000", "virtio-pci", "1", modules=("virtio_pci",)),
        Dev("0000:00:04.0", "1234", "11e8", "00ff00", d["accel0"], "2"),
        Dev("0000:00:05.0", "1b36", "000e", "060400", None, "3", modules=("shpchp",)),
        Dev("0000:01:01.0", "8086", "100e", "020000", d["gpu0"], "3", modules=("e1000",)),
        Dev("0000:01:02.0", "8086", "100e", "020000", d["gpu0_fn1"], "3", modules=("e1000",)),
        Dev("0000:00:06.0", "8086", "10d3", "020000", d["host_nic"], "4", modules=("e1000e",)),
    ]


def with_overrides(devs: list[Dev], overrides: Mapping[str, str]) -> list[Dev]:
    return [dataclasses.replace(x, override=overrides.get(x.bdf, x.override)) for x in devs]
