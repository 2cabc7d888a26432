"""Host IOMMU checks: pure evaluators over :class:`IommuEvidence`."""

from __future__ import annotations

from typing import Any

from kgc.core.model import (
    Outcome,
    Registry,
    Severity,
    Status,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from kgc.core.profile import Profile
from kgc.evidence.platform import vm_iommu_fix
from kgc.evidence.vfio_config import cmdline_edits, cmdline_fix_steps
from kgc.layers.iommu.collect import IommuEvidence

CHECKS = Registry()

TABLE = {"intel": "DMAR", "amd": "IVRS", "arm": "IORT"}
FIRMWARE_FIX = {
    "intel": 'Enable Intel VT-d ("Intel Virtualization Technology for Directed I/O") in the '
    "BIOS/UEFI setup, then reboot.",
    "amd": "Enable AMD-Vi / IOMMU in the BIOS/UEFI setup (often under NBIO or North Bridge "
    "configuration), then reboot.",
    "arm": "Boot with ACPI and an SMMU described in the IORT table (firmware setting), then "
    "reboot.",
}
CMDLINE_FIX = {
    "intel": "Add `intel_iommu=on iommu=pt` to the kernel command line (Debian/Ubuntu: "
    "GRUB_CMDLINE_LINUX in /etc/default/grub, then `update-grub`; RHEL: "
    "`grubby --update-kernel=ALL --args='intel_iommu=on iommu=pt'`), then reboot.",
    "amd": "Remove `amd_iommu=off` / `iommu=off` from the kernel command line (the AMD IOMMU is "
    "on by default when the IVRS table exists; add `iommu=pt` for passthrough mode), then "
    "reboot.",
    "arm": "Remove `iommu.passthrough`/`arm-smmu` disabling options from the kernel command "
    "line, then reboot.",
}
KCONFIG_DRIVER = {
    "intel": ("INTEL_IOMMU",),
    "amd": ("AMD_IOMMU",),
    "arm": ("ARM_SMMU_V3", "ARM_SMMU"),
}


def vendor_of(ev: IommuEvidence, profile: Profile) -> str | None:
    want = profile.host.iommu.vendor
    if want != "any":
        return want
    if ev.cpu_vendor in TABLE:
        return ev.cpu_vendor
    return {"DMAR": "intel", "IVRS": "amd", "IORT": "arm"}.get(ev.firmware_table or "")


def _groups_summary(ev: IommuEvidence) -> dict[str, Any]:
    return {"iommu_groups": len(ev.groups), "group_table": ev.pci.group_table()}


def unreadable(ev: IommuEvidence, *prefixes: str) -> Outcome | None:
    """An ``error`` verdict naming the paths that could not be read, if any matter here."""
    bad = sorted(p for p in ev.errors if p.startswith(prefixes))
    if not bad:
        return None
    shown = ", ".join(f"{p} ({ev.errors[p]})" for p in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    return errored(
        f"cannot decide: could not read {shown}{more}",
        "Run the suite as root (or with --sudo) on the node, and check the paths are readable.",
        unreadable=bad,
    )


def _active(ev: IommuEvidence) -> bool:
    return len(ev.groups) > 0


def firmware_fix(ev: IommuEvidence, bare_metal: str) -> str:
    """Turn the IOMMU on where it lives (vendor unknown): the firmware setup on bare metal,
    the hypervisor's virtual IOMMU in a VM (a VM has no VT-d/AMD-Vi BIOS setting)."""
    if ev.vm.vm:
        return vm_iommu_fix(None, ev.vm.why)
    return bare_metal


NO_PASSTHROUGH_FIX = (
    "No setting on this node can change it: it has neither VT-d/AMD-Vi firmware of its own nor "
    "a hypervisor that gives it an IOMMU or hardware virtualization. Run GPU passthrough nodes "
    "on bare metal with VT-d/AMD-Vi on, or on a VM instance type that is assigned the GPU "
    "with a virtual IOMMU and exposes VT-x/AMD-V to it; take this node out of the GPU pool."
)


def impossible_here(ev: IommuEvidence, **evidence: Any) -> Outcome | None:
    """The verdict every IOMMU check gives on a VM whose host virtualizes without VT-x/AMD-V
    and gives it no IOMMU (e.g. a PVM host): passthrough is impossible there, and a firmware
    or hypervisor-flag remedy would send the user after a setting that does not exist."""
    why = ev.no_hw_virt()
    if why is None:
        return None
    return failed(f"GPU passthrough is impossible on this node: {why}", NO_PASSTHROUGH_FIX,
                  no_passthrough=why, kvm_pvm=ev.pvm, cpu_virtualization=ev.cpu_virt,
                  **evidence)


def _where_vm(ev: IommuEvidence) -> str:
    return f" (this node is a virtual machine: {ev.vm.why})" if ev.vm.vm else ""


@CHECKS.check(
    "iommu.platform",
    title="The platform has an IOMMU described by firmware (ACPI DMAR / IVRS / IORT)",
    remediation=FIRMWARE_FIX["intel"],
    severity=Severity.BLOCKER,
)
def platform(ev: IommuEvidence, profile: Profile) -> Outcome:
    if bad := unreadable(ev, "/sys/firmware/acpi/tables", "/sys/class/iommu"):
        return bad
    vendor = vendor_of(ev, profile)
    evidence: dict[str, Any] = {
        "cpu_vendor": ev.cpu_vendor,
        "cpu_virtualization": ev.cpu_virt,
        "acpi_tables": list(ev.acpi_tables or ()),
        "iommu_units": sorted(ev.units),
        "running_in_vm": ev.vm.vm or ev.hypervisor,
        "vm_evidence": ev.vm.why or None,
        "dmi": ev.vm.dmi or None,
    }
    want = profile.host.iommu.vendor
    if want != "any" and ev.cpu_vendor in TABLE and ev.cpu_vendor != want:
        return failed(
            f"profile expects an {want} IOMMU but the CPU is {ev.cpu_vendor}",
            "Use the profile that matches this platform (kgc --profile ...).",
            **evidence,
        )
    if (out := impossible_here(ev, **{k: v for k, v in evidence.items()
                                      if k != "cpu_virtualization"})) is not None:
        return out
    if ev.acpi_tables is None and not ev.units:
        return failed(
            "/sys/firmware/acpi/tables is missing or unreadable and no IOMMU unit is listed "
            "under /sys/class/iommu",
            "Run as root (or with --sudo) so the ACPI table list can be read; on a platform "
            "without ACPI, check the device tree describes the IOMMU.",
            **evidence,
        )
    if vendor is None:
        if ev.firmware_table:
            return passed(f"ACPI {ev.firmware_table} table present", **evidence)
        return failed(
            f"CPU vendor {ev.cpu_vendor or 'unknown'} and no DMAR, IVRS or IORT table: no IOMMU "
            f"is described by firmware{_where_vm(ev)}",
            firmware_fix(ev, "Enable the IOMMU (VT-d / AMD-Vi / SMMU) in the firmware "
                         "setup, then reboot."),
            **evidence,
        )
    table = TABLE[vendor]
    if ev.firmware_table == table:
        return passed(
            f"ACPI {table} table present ({vendor} IOMMU described by firmware)",
            expected=table,
            found=table,
            **evidence,
        )
    if vendor == "arm" and ev.units:
        return passed(f"SMMU units present: {', '.join(sorted(ev.units))}", **evidence)
    if ev.vm.vm:
        return failed(
            f"no ACPI {table} table in /sys/firmware/acpi/tables: this node is a virtual "
            f"machine ({ev.vm.why}) and its hypervisor gives it no virtual {vendor} IOMMU",
            vm_iommu_fix(vendor, ev.vm.why),
            expected=table,
            found=ev.firmware_table or "none",
            **evidence,
        )
    return failed(
        f"no ACPI {table} table in /sys/firmware/acpi/tables: the {vendor} IOMMU is "
        "disabled in firmware or absent",
        FIRMWARE_FIX[vendor],
        expected=table,
        found=ev.firmware_table or "none",
        **evidence,
    )


@CHECKS.check(
    "iommu.kernel-support",
    title="The kernel has the IOMMU driver and vfio-pci built",
    remediation="Use a kernel built with CONFIG_INTEL_IOMMU / CONFIG_AMD_IOMMU, CONFIG_IRQ_REMAP "
    "and CONFIG_VFIO_PCI (any distribution kernel has them).",
    severity=Severity.BLOCKER,
)
def kernel_support(ev: IommuEvidence, profile: Profile) -> Outcome:
    out = _kernel_support(ev, profile)
    if out.status is not Status.PASS and (imp := impossible_here(ev, **out.evidence)):
        return imp  # a kernel rebuild would not help either: the VM has no IOMMU to drive
    return out


def _kernel_support(ev: IommuEvidence, profile: Profile) -> Outcome:
    vendor = vendor_of(ev, profile)
    if ev.kconfig is None:
        # without the config, each half must be shown by what the running kernel does
        iommu_shown = (f"{len(ev.groups)} IOMMU groups" if _active(ev) else
                       f"IOMMU units {', '.join(sorted(ev.units))}" if ev.units else None)
        evidence = {"kernel": ev.kernel, "iommu_driver": iommu_shown,
                    "vfio_pci": ev.vfio_pci_shown}
        if iommu_shown and ev.vfio_pci_shown:
            return passed(
                f"kernel {ev.kernel}: config not found, but the IOMMU driver is evidently "
                f"present ({iommu_shown}) and {ev.vfio_pci_shown}",
                **evidence,
            )
        missing = []
        if not iommu_shown:
            missing.append("the IOMMU driver (no IOMMU groups or units)")
        if not ev.vfio_pci_shown:
            missing.append("vfio-pci (not registered as a PCI driver, not loaded, not in "
                           "modules.builtin, no vfio-pci module file)")
        return warned(
            f"kernel {ev.kernel}: no kernel config found (/boot/config-{ev.kernel}, "
            f"/proc/config.gz), and {' nor '.join(missing)} is shown to be built",
            "Install the kernel's config file (it ships with the kernel package) so the suite "
            "can tell a missing driver from a disabled one"
            + ("; or load vfio-pci (`modprobe vfio-pci`) so it shows." if not ev.vfio_pci_shown
               else "."),
            **evidence,
        )
    keys = KCONFIG_DRIVER.get(vendor or "", ())
    relevant = {
        k: ev.kconfig.get(k, "absent") for k in (*keys, "IOMMU_SUPPORT", "VFIO_PCI", "IRQ_REMAP")
    }
    if keys and not any(ev.kconfig.get(k) == "y" for k in keys):
        return failed(
            f"kernel {ev.kernel} is not built with the {vendor} IOMMU driver "
            f"({' or '.join('CONFIG_' + k for k in keys)} = "
            f"{', '.join(ev.kconfig.get(k, 'absent') for k in keys)}): not compiled in",
            kernel=ev.kernel,
            kconfig=relevant,
        )
    if ev.kconfig.get("VFIO_PCI") not in ("y", "m"):
        return failed(
            f"kernel {ev.kernel} has no vfio-pci "
            f"(CONFIG_VFIO_PCI={ev.kconfig.get('VFIO_PCI', 'absent')})",
            kernel=ev.kernel,
            kconfig=relevant,
        )
    return passed(
        f"kernel {ev.kernel} has the {vendor or 'platform'} IOMMU driver and vfio-pci",
        kernel=ev.kernel,
        kconfig=relevant,
    )


def _cmdline_fix(ev: IommuEvidence, generic: str, add: tuple[str, ...] = (),
                 remove: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    """The command line remedy computed from the boot loader file the node has (the line
    that is there, edited), with its machine-applicable steps; the generic text when no
    such file is in the evidence."""
    edits = cmdline_edits(ev.boot_files, add, remove)
    if not edits:
        return generic, {}
    steps = cmdline_fix_steps(edits)
    text = "; ".join([e.describe() for e in edits] + [s["run"] for s in steps[len(edits):-1]])
    return f"{text[0].upper()}{text[1:]}; then reboot.", {"fix": steps}


def _disabled_on_cmdline(ev: IommuEvidence, vendor: str | None) -> str | None:
    c = ev.cmdline
    if "off" in c.values("iommu"):
        return "iommu=off"
    if vendor == "intel" and "off" in c.values("intel_iommu"):
        return "intel_iommu=off"
    if vendor == "amd" and "off" in c.values("amd_iommu"):
        return "amd_iommu=off"
    return None


@CHECKS.check(
    "iommu.enabled",
    title="The kernel has enabled the IOMMU (/sys/kernel/iommu_groups is populated)",
    remediation=CMDLINE_FIX["intel"],
    severity=Severity.BLOCKER,
)
def enabled(ev: IommuEvidence, profile: Profile) -> Outcome:
    if bad := unreadable(ev, "/sys/kernel/iommu_groups", "/proc/cmdline"):
        return bad
    vendor = vendor_of(ev, profile)
    evidence: dict[str, Any] = {
        "cmdline": ev.cmdline.raw,
        "kernel": ev.kernel,
        "dmesg": list(ev.dmesg or ())[-20:],
        **_groups_summary(ev),
    }
    if _active(ev):
        return passed(f"{len(ev.groups)} IOMMU groups present", **evidence)
    if not ev.pci.groups_dir_exists:
        where = "/sys/kernel/iommu_groups does not exist"
    else:
        where = "/sys/kernel/iommu_groups is empty"
    if (out := impossible_here(ev, **evidence)) is not None:
        return out
    table = TABLE.get(vendor or "")
    if table and ev.firmware_table != table and not ev.units:
        if ev.vm.vm:
            return failed(
                f"{where}: no ACPI {table} table, and this node is a virtual machine "
                f"({ev.vm.why}) without a virtual IOMMU",
                vm_iommu_fix(vendor, ev.vm.why),
                **evidence,
            )
        return failed(
            f"{where}: disabled in firmware (no ACPI {table} table)",
            FIRMWARE_FIX[vendor or "intel"],
            **evidence,
        )
    keys = KCONFIG_DRIVER.get(vendor or "", ())
    if ev.kconfig is not None and keys and not any(ev.kconfig.get(k) == "y" for k in keys):
        return failed(
            f"{where}: the {vendor} IOMMU driver is not compiled into kernel {ev.kernel}",
            "Boot a kernel built with " + " / ".join("CONFIG_" + k + "=y" for k in keys) + ".",
            **evidence,
        )
    off = _disabled_on_cmdline(ev, vendor)
    if off:
        fix, fix_ev = _cmdline_fix(
            ev, CMDLINE_FIX.get(vendor or "intel", CMDLINE_FIX["intel"]).replace(
                "Add", f"Remove `{off}` and add", 1),
            ("intel_iommu=on",) if vendor == "intel" else (), (off,))
        return failed(f"{where}: disabled on the kernel command line ({off})", fix,
                      **evidence, **fix_ev)
    if vendor == "intel" and "on" not in ev.cmdline.values("intel_iommu"):
        default_on = (ev.kconfig or {}).get("INTEL_IOMMU_DEFAULT_ON")
        fix, fix_ev = _cmdline_fix(ev, CMDLINE_FIX["intel"], ("intel_iommu=on",))
        return failed(
            f"{where}: not enabled on the kernel command line (no intel_iommu=on; "
            f"CONFIG_INTEL_IOMMU_DEFAULT_ON={default_on or 'unknown'})",
            fix,
            **evidence, **fix_ev,
        )
    return failed(
        f"{where} although firmware describes an IOMMU and the command line does not disable "
        "it; look at the kernel log for DMAR/AMD-Vi errors",
        "Check `dmesg | grep -i -e DMAR -e AMD-Vi -e IOMMU` for initialisation errors; update "
        "firmware if the table is reported broken.",
        **evidence,
    )


@CHECKS.check(
    "iommu.cmdline",
    title="The kernel command line is right for this IOMMU vendor",
    remediation=CMDLINE_FIX["intel"],
    severity=Severity.CRITICAL,
)
def cmdline(ev: IommuEvidence, profile: Profile) -> Outcome:
    if bad := unreadable(ev, "/proc/cmdline"):
        return bad
    if not ev.cmdline_read:
        return errored(
            "cannot decide: /proc/cmdline is missing from the evidence",
            "Collect from a running node (or a bundle taken from one): an offline image has "
            "no running kernel command line.",
        )
    vendor = vendor_of(ev, profile)
    c = ev.cmdline
    evidence: dict[str, Any] = {"cmdline": c.raw, "vendor": vendor}
    off = _disabled_on_cmdline(ev, vendor)
    if off:
        fix, fix_ev = _cmdline_fix(ev, CMDLINE_FIX.get(vendor or "intel", CMDLINE_FIX["intel"]),
                                   ("intel_iommu=on",) if vendor == "intel" else (), (off,))
        return failed(f"the command line disables the IOMMU ({off})", fix, **evidence, **fix_ev)
    if vendor == "intel":
        if "on" in c.values("intel_iommu"):
            return passed("intel_iommu=on is set", **evidence)
        if (ev.kconfig or {}).get("INTEL_IOMMU_DEFAULT_ON") == "y":
            return passed(
                "no intel_iommu=on, but the kernel enables VT-d by default "
                "(CONFIG_INTEL_IOMMU_DEFAULT_ON=y)",
                **evidence,
            )
        if _active(ev):
            return warned(
                "no intel_iommu=on: the IOMMU is active now only because this kernel enables "
                "it by default; a kernel built otherwise would boot without it",
                "Add `intel_iommu=on` to the kernel command line so the setting is explicit.",
                **evidence,
            )
        fix, fix_ev = _cmdline_fix(ev, CMDLINE_FIX["intel"], ("intel_iommu=on",))
        return failed("intel_iommu=on is missing from the kernel command line", fix,
                      **evidence, **fix_ev)
    if vendor == "amd":
        if "on" in c.values("amd_iommu"):
            fix, fix_ev = _cmdline_fix(ev, "Remove `amd_iommu=on` from the kernel command "
                                       "line; keep `iommu=pt` if you want passthrough mode.",
                                       remove=("amd_iommu=on",))
            return warned(
                "amd_iommu=on does nothing: it is not a valid value (the kernel logs "
                "\"AMD-Vi: Unknown option - 'on'\"); the AMD IOMMU is on by default when the "
                "IVRS table exists",
                fix,
                **evidence, **fix_ev,
            )
        return passed(
            "nothing on the command line disables the AMD IOMMU (on by default)", **evidence
        )
    if vendor == "arm":
        return passed("nothing on the command line disables the SMMU", **evidence)
    return skipped("the IOMMU vendor is unknown, so the command line cannot be judged", **evidence)


def _found_mode(ev: IommuEvidence) -> tuple[str, dict[str, int]]:
    counts: dict[str, int] = {}
    for t in ev.pci.group_types.values():
        counts[t] = counts.get(t, 0) + 1
    ident = counts.get("identity", 0)
    dma = sum(v for k, v in counts.items() if k.startswith("DMA"))
    if ident > dma:
        return "passthrough", counts
    if dma > 0:
        return "translated", counts
    c = ev.cmdline
    if "pt" in c.values("iommu") or c.get("iommu.passthrough") in ("1", "y", "on"):
        return "passthrough", counts
    return "translated", counts


@CHECKS.check(
    "iommu.mode",
    title="The IOMMU default domain mode matches the profile (passthrough vs translated)",
    remediation="For passthrough mode add `iommu=pt` to the kernel command line; for translated "
    "mode remove it. Reboot afterwards.",
    severity=Severity.NORMAL,
)
def mode(ev: IommuEvidence, profile: Profile) -> Outcome:
    want = profile.host.iommu.mode
    if (out := impossible_here(ev)) is not None:
        return out
    if not _active(ev):
        return failed(
            "the IOMMU is not active (no IOMMU groups), so no DMA domain mode applies; "
            "see iommu.enabled",
            "Enable the IOMMU first (see iommu.enabled).",
            expected=want,
        )
    found, counts = _found_mode(ev)
    evidence: dict[str, Any] = {"group_types": counts, "cmdline": ev.cmdline.raw}
    if want == "any" or want == found:
        return passed(
            f"default domains are {found} ({_counts(counts) or 'per command line'})",
            expected=want,
            found=found,
            **evidence,
        )
    return failed(
        f"profile expects {want} mode but host default domains are {found} ({_counts(counts)})",
        None,
        expected=want,
        found=found,
        **evidence,
    )


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))


@CHECKS.check(
    "iommu.interrupt-remapping",
    title="Interrupt remapping is enabled (safe device assignment)",
    remediation="Enable interrupt remapping / x2APIC in the firmware and do not pass "
    "`intremap=off` or `nointremap`; in a QEMU VM use `-device intel-iommu,intremap=on` with "
    "`-machine kernel-irqchip=split`.",
    severity=Severity.CRITICAL,
)
def interrupt_remapping(ev: IommuEvidence, profile: Profile) -> Outcome:
    required = profile.host.iommu.require_interrupt_remapping
    c = ev.cmdline
    evidence: dict[str, Any] = {
        "ir_interrupt_chips": list(ev.irq_remap_chips or ()),
        "dmesg": [x for x in (ev.dmesg or ()) if "remap" in x.lower()][-10:],
        "cmdline": c.raw,
    }
    dmesg_on = any(
        ("enabled irq remapping" in x.lower() or "interrupt remapping enabled" in x.lower())
        for x in (ev.dmesg or ())
    )
    if ev.irq_remap_chips or dmesg_on:
        return passed(
            "interrupt remapping is active ("
            + (", ".join(ev.irq_remap_chips or ()) or "kernel log says enabled")
            + ")",
            **evidence,
        )
    if (out := impossible_here(ev, **evidence)) is not None:
        return out
    off = "off" in c.values("intremap") or c.has("nointremap")
    why = "disabled on the command line (intremap=off/nointremap)" if off else "not active"
    if ev.irq_remap_chips is None and ev.dmesg is None:
        why = "cannot tell: /proc/interrupts and the kernel log were both unreadable"
        fix = "Run the suite as root (or --sudo) so /proc/interrupts and dmesg can be read."
        return failed(why, fix, **evidence) if required else warned(why, fix, **evidence)
    reason = f"interrupt remapping is {why}: no IR-* interrupt chips in /proc/interrupts"
    if not _active(ev):
        reason += " (the IOMMU itself is not active; see iommu.enabled)"
    if required:
        return failed(reason, None, **evidence)
    return warned(reason + " (the profile does not require it)", None, **evidence)


@CHECKS.check(
    "iommu.targets-present",
    title="The devices the profile names as passthrough targets are present",
    remediation="Check the profile's host.passthrough.targets selectors against `lspci -nn` "
    "(vendor:device and class), and that the GPUs are seated and powered.",
    severity=Severity.BLOCKER,
)
def targets_present(ev: IommuEvidence, profile: Profile) -> Outcome:
    if bad := unreadable(ev, "/sys/bus/pci/devices"):
        return bad
    pt = profile.host.passthrough
    targets = ev.pci.targets(profile)
    selectors = [s.describe() for s in pt.targets]
    if not ev.pci.devices:
        return failed(
            "no PCI devices could be read from /sys/bus/pci/devices",
            "Run the suite where /sys is mounted and readable (as root or with --sudo).",
            unreadable=list(ev.pci.unreadable),
        )
    if targets:
        return passed(
            f"{len(targets)} passthrough target(s): " + ", ".join(d.describe() for d in targets),
            selectors=selectors,
            targets=[d.to_dict() for d in targets],
        )
    display = [
        d.describe() for d in ev.pci.devices.values() if (d.pci_class or "").startswith("03")
    ]
    if not pt.targets:
        return failed(
            "the profile names no passthrough targets",
            "Add host.passthrough.targets to the profile (e.g. `- {vendor: '10de', class: '03'}`).",
            display_devices=display,
        )
    if pt.require_targets_present and (out := impossible_here(
            ev, selectors=selectors, display_devices=display)) is not None:
        return out
    if not pt.require_targets_present:
        return passed(
            "no device matches the passthrough targets, and the profile allows nodes without them",
            selectors=selectors,
            display_devices=display,
        )
    return failed(
        f"no PCI device matches the passthrough targets ({'; '.join(selectors)}); display "
        f"controllers found: {', '.join(display) or 'none'}",
        None,
        selectors=selectors,
        display_devices=display,
    )


@CHECKS.check(
    "iommu.targets-grouped",
    title="Every passthrough target sits in an IOMMU group",
    remediation="Enable the IOMMU (see iommu.enabled); a device outside any group cannot be "
    "assigned with VFIO.",
    severity=Severity.BLOCKER,
)
def targets_grouped(ev: IommuEvidence, profile: Profile) -> Outcome:
    if bad := unreadable(ev, "/sys/kernel/iommu_groups", "/sys/bus/pci/devices"):
        return bad
    targets = ev.pci.targets(profile)
    table = _groups_summary(ev)
    if not targets:
        return skipped("no passthrough target on this node (see iommu.targets-present)", **table)
    orphans = [d for d in targets if ev.pci.group_of(d.bdf) is None]
    if orphans and (out := impossible_here(ev, **table)) is not None:
        return out
    if orphans:
        why = "" if _active(ev) else " (the IOMMU is not active; see iommu.enabled)"
        return failed(
            "not in any IOMMU group: " + ", ".join(d.describe() for d in orphans) + why,
            None,
            **table,
        )
    return passed(
        "; ".join(
            f"{d.bdf} in group {ev.pci.group_of(d.bdf)} with {len(ev.pci.peers(d.bdf))} peer(s)"
            for d in targets
        ),
        **table,
    )
