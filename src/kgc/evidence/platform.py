"""Is the node a virtual machine? (CPU ``hypervisor`` flag, DMI system identity.)

Shared by the host layers so a remedy fits the node: a VM has no VT-d/AMD-Vi BIOS setting;
its IOMMU is a virtual one the hypervisor must provide.
"""

from __future__ import annotations

from dataclasses import dataclass

from kgc.core.hostfs import HostQuery, HostSnapshot

DMI = "/sys/class/dmi/id"
CPU_CMD = (
    'f="$R/proc/cpuinfo"; [ -r "$f" ] || { echo KGC-UNREADABLE; exit 2; }; '
    "grep -m4 -E '^(vendor_id|flags|Features|CPU implementer)[[:space:]]*:' \"$f\""
)
PLATFORM_QUERY = HostQuery(
    files=(f"{DMI}/sys_vendor", f"{DMI}/product_name", f"{DMI}/board_vendor"),
    commands=(("cpu", CPU_CMD),),
)

# DMI sys_vendor / product_name strings of hypervisors (matched case-insensitively)
_VM_DMI = (
    "qemu", "kvm", "vmware", "virtualbox", "innotek", "xen", "bochs", "bhyve", "parallels",
    "openstack", "cloud hypervisor", "google compute engine", "virtual machine", "hvm domu",
)


@dataclass(frozen=True)
class VmFacts:
    vm: bool
    why: str  # what says so ("" when not a VM)
    dmi: str  # "sys_vendor / product_name" as read


def vm_facts(snap: HostSnapshot) -> VmFacts:
    cpu = snap.command("cpu")
    flag = False
    if cpu is not None:
        for line in cpu.output.splitlines():
            key, _, val = line.partition(":")
            if key.strip() == "flags" and "hypervisor" in val.split():
                flag = True
    vendor = snap.text(f"{DMI}/sys_vendor") or ""
    product = snap.text(f"{DMI}/product_name") or ""
    dmi = " / ".join(x for x in (vendor, product) if x)
    low = dmi.lower()
    dmi_vm = any(k in low for k in _VM_DMI) and "metal" not in low
    whys = []
    if flag:
        whys.append("the CPU reports the hypervisor flag")
    if dmi_vm:
        whys.append(f"DMI says {dmi}")
    return VmFacts(bool(whys), " and ".join(whys), dmi)


def vm_iommu_fix(vendor: str | None, why: str) -> str:
    dev = "amd-iommu" if vendor == "amd" else "intel-iommu,intremap=on,caching-mode=on"
    model = "amd" if vendor == "amd" else "intel"
    return (
        f"This node is a virtual machine ({why}): it has no VT-d/AMD-Vi firmware setting of its "
        "own; its IOMMU is a virtual IOMMU the hypervisor must provide. On the hypervisor: "
        f"QEMU/KVM `-machine q35,kernel-irqchip=split -device {dev}`; libvirt "
        f"`<iommu model='{model}'><driver intremap='on' caching_mode='on'/></iommu>` with "
        "`<ioapic driver='qemu'/>`; a cloud VM: an instance type that offers device "
        "passthrough with an IOMMU. The hypervisor host needs its own IOMMU on to assign a GPU "
        "to this VM. Then reboot the VM."
    )
