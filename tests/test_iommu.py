"""Host IOMMU layer on real directory trees, read through the real collector."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import judge_tree
from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.layers.iommu.collect import parse_cmdline, parse_kconfig
from systree import SysTree

IOMMU_CHECKS = {
    "iommu.platform",
    "iommu.kernel-support",
    "iommu.enabled",
    "iommu.cmdline",
    "iommu.mode",
    "iommu.interrupt-remapping",
    "iommu.targets-present",
    "iommu.targets-grouped",
}


def statuses(vs: dict) -> dict[str, str]:
    return {k: str(v.status) for k, v in vs.items()}


def test_healthy_intel_node_passes_every_check(good_tree, generic_profile) -> None:
    vs = judge_tree(good_tree.root, generic_profile)
    assert set(vs) == IOMMU_CHECKS
    assert statuses(vs) == dict.fromkeys(IOMMU_CHECKS, "pass"), {k: v.reason for k, v in vs.items()}
    grouped = vs["iommu.targets-grouped"]
    assert "0000:41:00.0 in group 7 with 1 peer(s)" in grouped.reason
    assert any(row["group"] == "7" for row in grouped.evidence["group_table"])
    assert vs["iommu.mode"].found == "passthrough"


def test_no_dmar_table_is_disabled_in_firmware(tree: SysTree, generic_profile) -> None:
    tree.kconfig().cmdline("ro intel_iommu=on")
    tree.pci("0000:41:00.0", "10de", "2331", "030200", "nvidia")
    vs = judge_tree(tree.root, generic_profile)
    assert vs["iommu.platform"].status is Status.FAIL
    assert "no ACPI DMAR table" in vs["iommu.platform"].reason
    assert "VT-d" in vs["iommu.platform"].remediation
    assert "disabled in firmware" in vs["iommu.enabled"].reason
    assert vs["iommu.targets-grouped"].status is Status.FAIL
    assert "not in any IOMMU group: 0000:41:00.0" in vs["iommu.targets-grouped"].reason


def test_missing_intel_iommu_on_is_not_enabled_on_the_command_line(tree, generic_profile) -> None:
    tree.acpi("DMAR").kconfig().cmdline("BOOT_IMAGE=/vmlinuz ro quiet")
    tree.pci("0000:41:00.0", "10de", "2331", "030200", "nvidia")
    vs = judge_tree(tree.root, generic_profile)
    assert vs["iommu.platform"].status is Status.PASS
    en = vs["iommu.enabled"]
    assert en.status is Status.FAIL
    assert "not enabled on the kernel command line" in en.reason
    assert "intel_iommu=on" in en.remediation
    assert vs["iommu.cmdline"].status is Status.FAIL


def test_driver_not_compiled_in(tree, generic_profile) -> None:
    tree.acpi("DMAR").cmdline("ro intel_iommu=on")
    tree.kconfig("CONFIG_IOMMU_SUPPORT=y\n# CONFIG_INTEL_IOMMU is not set\nCONFIG_VFIO_PCI=m\n")
    vs = judge_tree(tree.root, generic_profile)
    assert "not compiled into kernel" in vs["iommu.enabled"].reason
    assert vs["iommu.kernel-support"].status is Status.FAIL
    assert "not compiled in" in vs["iommu.kernel-support"].reason


def test_disabled_on_the_command_line(tree, generic_profile) -> None:
    tree.acpi("DMAR").kconfig().cmdline("ro intel_iommu=off")
    vs = judge_tree(tree.root, generic_profile)
    assert "disabled on the kernel command line (intel_iommu=off)" in vs["iommu.enabled"].reason
    assert "Remove `intel_iommu=off`" in vs["iommu.enabled"].remediation


def test_amd_iommu_on_is_called_a_no_op(tmp_path) -> None:
    t = SysTree(tmp_path / "amd").cpu("amd").acpi("IVRS").kconfig().irq_remap()
    t.cmdline("ro amd_iommu=on iommu=pt")
    t.group("3", "identity").pci("0000:c1:00.0", "10de", "2331", "030200", "vfio-pci", "3")
    vs = judge_tree(t.root, load_profile("generic-nvidia-passthrough"))
    assert vs["iommu.platform"].status is Status.PASS and vs["iommu.platform"].found == "IVRS"
    assert vs["iommu.cmdline"].status is Status.WARN
    assert "does nothing" in vs["iommu.cmdline"].reason
    assert vs["iommu.enabled"].status is Status.PASS


def test_mode_mismatch_and_missing_interrupt_remapping(good_tree, tmp_path) -> None:
    good_tree.write("proc/interrupts", "  0:  1  IO-APIC  2-edge timer\n")
    prof = tmp_path / "p.yaml"
    prof.write_text(
        "name: translated\nhost:\n  iommu: {mode: translated}\n  passthrough:\n"
        "    targets: [{vendor: '10de', class: '03'}]\n"
    )
    vs = judge_tree(good_tree.root, load_profile(prof))
    assert vs["iommu.mode"].status is Status.FAIL
    assert (vs["iommu.mode"].expected, vs["iommu.mode"].found) == ("translated", "passthrough")
    ir = vs["iommu.interrupt-remapping"]
    assert ir.status is Status.FAIL and "no IR-* interrupt chips" in ir.reason


def test_no_target_devices(tree, generic_profile) -> None:
    tree.acpi("DMAR").kconfig().cmdline("ro intel_iommu=on").irq_remap()
    tree.group("0").pci("0000:00:02.0", "8086", "46a6", "030000", "i915", "0")
    vs = judge_tree(tree.root, generic_profile)
    tp = vs["iommu.targets-present"]
    assert tp.status is Status.FAIL
    assert "0000:00:02.0 [8086:46a6]" in tp.reason  # names what display devices it did find
    assert vs["iommu.targets-grouped"].status is Status.SKIP


def test_unreadable_sysfs_is_an_explicit_failure_not_a_crash(tmp_path, generic_profile) -> None:
    root = tmp_path / "empty"
    root.mkdir()
    vs = judge_tree(root, generic_profile)
    assert set(vs) == IOMMU_CHECKS
    assert vs["iommu.targets-present"].status is Status.FAIL
    assert "no PCI devices could be read" in vs["iommu.targets-present"].reason
    assert all(v.status is not Status.PASS for v in vs.values())


def test_unreadable_files_are_error_verdicts_naming_the_path(good_tree, generic_profile) -> None:
    """A file that exists but cannot be read (here: a dangling link, read by the real
    collector) must give `error` naming it — never a pass, never a misleading fail."""
    import os

    (good_tree.root / "proc/cmdline").unlink()
    os.symlink("/nonexistent/cmdline", good_tree.root / "proc/cmdline")
    os.symlink("/nonexistent/vendor", good_tree.root / "sys/devices/pci0000:00/0000:41:00.0/x")
    (good_tree.root / "sys/devices/pci0000:00/0000:41:00.0/vendor").unlink()
    os.rename(
        good_tree.root / "sys/devices/pci0000:00/0000:41:00.0/x",
        good_tree.root / "sys/devices/pci0000:00/0000:41:00.0/vendor",
    )
    vs = judge_tree(good_tree.root, generic_profile)
    for cid in ("iommu.cmdline", "iommu.enabled"):
        assert vs[cid].status is Status.ERROR, vs[cid]
        assert "/proc/cmdline" in vs[cid].reason
    tp = vs["iommu.targets-present"]
    assert tp.status is Status.ERROR
    assert "/sys/bus/pci/devices/0000:41:00.0/vendor" in tp.reason


# -- properties ----------------------------------------------------------------------

group_ids = st.lists(st.integers(0, 40).map(str), unique=True, min_size=0, max_size=6)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    layout=st.lists(
        st.tuples(
            st.sampled_from(["030200", "030000", "020000", "040300"]),
            st.one_of(st.none(), st.integers(0, 5)),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_grouped_passes_exactly_when_every_target_has_a_group(tmp_path_factory, layout) -> None:
    t = SysTree(tmp_path_factory.mktemp("g")).acpi("DMAR").kconfig().irq_remap()
    t.cmdline("ro intel_iommu=on")
    for i, (cls, grp) in enumerate(layout):
        t.pci(
            f"0000:{i + 1:02x}:00.0",
            "10de",
            "2331",
            cls,
            "vfio-pci",
            None if grp is None else str(grp),
        )
    vs = judge_tree(t.root, load_profile("generic-nvidia-passthrough"))
    targets = [(c, g) for c, g in layout if c.startswith("03")]
    grouped = vs["iommu.targets-grouped"].status
    if not targets:
        assert grouped is Status.SKIP
    elif all(g is not None for _, g in targets):
        assert grouped is Status.PASS
    else:
        assert grouped is Status.FAIL
    assert (vs["iommu.enabled"].status is Status.PASS) == any(g is not None for _, g in layout)


cmd_tokens = st.sampled_from(
    [
        "intel_iommu=on",
        "intel_iommu=off",
        "intel-iommu=on",
        "iommu=pt",
        "iommu=off",
        "amd_iommu=on",
        "amd_iommu=off",
        "intremap=off",
        "quiet",
        "ro",
        "root=/dev/sda",
        "=",
        "x=",
        "--",
        "iommu=pt,off",
    ]
) | st.text(max_size=12)


@given(st.lists(cmd_tokens, max_size=12))
def test_cmdline_parser_is_total_and_last_value_wins(tokens) -> None:
    c = parse_cmdline(" ".join(tokens))
    kept = tokens[: tokens.index("--")] if "--" in tokens else tokens
    last: dict[str, str] = {}
    for tok in " ".join(kept).split():
        k, eq, v = tok.partition("=")
        if eq and k.replace("-", "_") == "intel_iommu":
            last["intel_iommu"] = v
    assert c.get("intel_iommu") == last.get("intel_iommu")


def test_cmdline_dashes_and_underscores_are_one_name() -> None:
    c = parse_cmdline("intel_iommu=off intel-iommu=on iommu=pt,nopt -- intel_iommu=off")
    assert c.get("intel_iommu") == "on"
    assert c.values("iommu") == ["pt", "nopt"]


@given(st.text(max_size=400))
def test_kconfig_parser_is_total(text) -> None:
    cfg = parse_kconfig(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cfg.items())


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    cmdline=st.lists(cmd_tokens, max_size=8).map(" ".join),
    vendor=st.sampled_from(["intel", "amd"]),
    tables=st.sets(st.sampled_from(["DMAR", "IVRS", "IORT", "APIC"])),
    kcfg=st.booleans(),
)
def test_iommu_evaluators_never_error_on_any_node(
    tmp_path_factory, cmdline, vendor, tables, kcfg
) -> None:
    t = SysTree(tmp_path_factory.mktemp("c")).cpu(vendor).acpi(*tables).cmdline(cmdline or "ro")
    if kcfg:
        t.kconfig()
    t.pci("0000:41:00.0", "10de", "2331", "030200", "vfio-pci", "4")
    vs = judge_tree(t.root, load_profile("generic-nvidia-passthrough"))
    for v in vs.values():
        assert v.status is not Status.ERROR, v.reason
        assert v.reason
        if v.status in (Status.FAIL, Status.WARN):
            assert v.remediation, v.check
