"""vfio-pci ``ids=``: only the last assignment binds anything (a union of every ``ids=``
line is a wrong PASS).

What the real components do:

* libkmod's ``kmod_module_get_options()`` (kmod-project/kmod, libkmod/libkmod-module.c)
  joins every ``options`` line for the module with a space, in the order the configuration
  was read (files sorted by basename across /etc, /run, /usr/lib and /lib modprobe.d, /etc
  hiding a same-named file); ``kmod_config_new()`` (libkmod/libkmod-config.c) calls
  ``kmod_config_parse_kcmdline()`` after parsing every file, so ``vfio-pci.ids=`` from the
  kernel command line comes last in that string.
* the kernel parses the module's parameters in order, and vfio-pci's ``ids`` is a
  ``module_param_string`` (drivers/vfio/pci/vfio_pci.c: ``static char ids[1024]
  __initdata; module_param_string(ids, ids, sizeof(ids), 0);``) set by
  ``param_set_copystring`` (kernel/params.c), which copies over the previous value.

So a.conf's ids are lost when b.conf (read later) sets ids= again, and a
``vfio-pci.ids=`` on the next boot's command line replaces every modprobe.d ids=.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from fakehost import Dev, FakeHost, lab_devices
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import HostSnapshot
from kgc.core.model import Status
from kgc.core.profile import Profile, load_profile
from kgc.evidence.pci import PciDevice
from kgc.evidence.vfio_config import (
    Edit,
    apply_edits,
    boot_mechanisms,
    ids_edit,
    parse_boot_binding,
    parse_modprobe,
    pending_boot,
)
from kgc.layers import persistence, vfio

GENERIC = load_profile("generic-nvidia-passthrough")
LAB = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml")
A = "/etc/modprobe.d/a.conf"
B = "/etc/modprobe.d/b.conf"
GPU = "0000:41:00.0"
RUNNING = "BOOT_IMAGE=/vmlinuz-6.1.0-50-amd64 root=/dev/sda1 ro quiet iommu=pt"
LAST_ONLY = "sets ids= again later and the kernel keeps only the last assignment"


def dev(ident: str, bdf: str = GPU) -> PciDevice:
    v, d = ident.split(":")
    return PciDevice(bdf, v, d, "030200")


def by_id(profile: Profile) -> Profile:
    pers = profile.host.persistence.model_copy(
        update={"accepted_mechanisms": ("modprobe", "cmdline")})
    return profile.model_copy(update={"host": profile.host.model_copy(
        update={"persistence": pers})})


def bound(files: dict[str, str], ident: str) -> list[tuple[str, str]]:
    return boot_mechanisms(parse_boot_binding(HostSnapshot(files=files)), dev(ident),
                           ["vfio-pci"])


# -- ModprobeConfig.vfio_ids / vfio_ids_shadowed --------------------------------------------
def test_only_the_last_ids_assignment_is_effective() -> None:
    m = parse_modprobe(HostSnapshot(files={
        A: "options vfio-pci ids=10de:2330\n",
        B: "options vfio_pci disable_vga=1 ids=10de:2331,10de:22bc\n"}))
    assert [(f, str(r)) for f, r in m.vfio_ids()] == [(B, "10de:2331"), (B, "10de:22bc")]
    assert [(f, str(r), g) for f, r, g in m.vfio_ids_shadowed()] == [(A, "10de:2330", B)]


def test_reading_order_is_by_basename_across_directories() -> None:
    """/usr/lib/modprobe.d/z-nvidia.conf sorts after /etc/modprobe.d/a.conf, so modprobe
    reads it later and its ids= wins; an /etc file of the same name hides it."""
    pkg = "/usr/lib/modprobe.d/z-nvidia.conf"
    files = {A: "options vfio-pci ids=10de:2330\n", pkg: "options vfio-pci ids=10de:2331\n"}
    m = parse_modprobe(HostSnapshot(files=files))
    assert [(f, str(r)) for f, r in m.vfio_ids()] == [(pkg, "10de:2331")]
    assert [(f, str(r), g) for f, r, g in m.vfio_ids_shadowed()] == [(A, "10de:2330", pkg)]
    masked = parse_modprobe(HostSnapshot(files={
        **files, "/etc/modprobe.d/z-nvidia.conf": "# masked\n"}))
    assert [(f, str(r)) for f, r in masked.vfio_ids()] == [(A, "10de:2330")]
    assert masked.vfio_ids_shadowed() == ()


def test_the_last_word_of_a_line_and_an_empty_assignment_count() -> None:
    one = parse_modprobe(HostSnapshot(files={
        A: "options vfio-pci ids=10de:2330 ids=10de:2331\n"}))
    assert [str(r) for _f, r in one.vfio_ids()] == ["10de:2331"]
    assert [(f, str(r), g) for f, r, g in one.vfio_ids_shadowed()] == [(A, "10de:2330", A)]
    # `ids=` with nothing after it is an assignment too: param_set_copystring copies ""
    empty = parse_modprobe(HostSnapshot(files={A: "options vfio-pci ids=10de:2330\n",
                                               B: "options vfio-pci ids=\n"}))
    assert empty.vfio_ids() == ()
    assert [(f, str(r), g) for f, r, g in empty.vfio_ids_shadowed()] == [(A, "10de:2330", B)]


# -- boot_mechanisms: what binds at the next boot -------------------------------------------
def test_a_shadowed_modprobe_rule_binds_nothing() -> None:
    files = {A: "options vfio-pci ids=10de:2330\n", B: "options vfio-pci ids=10de:2331\n"}
    assert bound(files, "10de:2330") == []
    assert bound(files, "10de:2331") == [("modprobe", f"{B}: options vfio-pci ids=10de:2331")]


def test_the_next_boot_command_line_shadows_every_modprobe_rule() -> None:
    files = {B: "options vfio-pci ids=10de:2330\n",
             "/etc/kernel/cmdline": "root=/ vfio-pci.ids=10de:2331\n"}
    assert bound(files, "10de:2330") == []
    assert bound(files, "10de:2331") == [("cmdline",
                                          "/etc/kernel/cmdline: vfio-pci.ids=10de:2331")]


def test_the_last_command_line_occurrence_wins() -> None:
    files = {"/etc/kernel/cmdline": "root=/ vfio-pci.ids=10de:2330 vfio_pci.ids=10de:2331\n"}
    assert bound(files, "10de:2330") == []
    assert [k for k, _w in bound(files, "10de:2331")] == ["cmdline"]


def test_disagreeing_boot_loader_files_claim_no_binding_from_a_shadowed_rule() -> None:
    """/etc/default/grub sets vfio-pci.ids= but the generated grub.cfg does not (update-grub
    not run): whether modprobe.d's ids= survives depends on which one the next boot uses, so
    no binding is claimed from it (persistence.cmdline reports the disagreement)."""
    files = {B: "options vfio-pci ids=10de:2330\n",
             "/etc/default/grub": 'GRUB_CMDLINE_LINUX="vfio-pci.ids=10de:2331"\n',
             "/boot/grub/grub.cfg": "menuentry x {\n  linux /vmlinuz root=/\n}\n"}
    assert bound(files, "10de:2330") == []
    b = parse_boot_binding(HostSnapshot(files=files))
    p = pending_boot(b, dev("10de:2330"), ["nvidia"], ["vfio-pci"])
    assert p is not None and "/etc/default/grub" in p.story(), p


# -- ids_edit: the remedy extends the line that takes effect ---------------------------------
def test_ids_edit_extends_the_effective_line_not_the_first() -> None:
    m = parse_modprobe(HostSnapshot(files={
        A: "options vfio-pci ids=10de:2330\n",
        B: "options vfio_pci disable_vga=1 ids=10de:2331\n"}))
    assert ids_edit(m, ["10de:2330"]) == Edit(
        B, "options vfio_pci disable_vga=1 ids=10de:2331,10de:2330",
        "options vfio_pci disable_vga=1 ids=10de:2331")
    assert ids_edit(m, ["10de:2331"]) is None


def test_ids_edit_overrides_an_effective_package_line_from_etc() -> None:
    """The effective ids= is in a package file (not edited): the new line goes to an /etc
    file read after it, with the ids that line had."""
    pkg = "/usr/lib/modprobe.d/z-nvidia.conf"
    files = {A: "options vfio-pci ids=10de:2330\n", pkg: "options vfio-pci ids=10de:2331\n"}
    e = ids_edit(parse_modprobe(HostSnapshot(files=files)), ["10de:2330"])
    assert e is not None and e.old is None and e.file.startswith("/etc/modprobe.d/")
    assert e.new == "options vfio-pci ids=10de:2331,10de:2330"
    fixed = parse_modprobe(HostSnapshot(files=apply_edits(files, [e.to_dict()])))
    assert sorted(str(r) for _f, r in fixed.vfio_ids()) == ["10de:2330", "10de:2331"]


# -- the checks ------------------------------------------------------------------------------
def _gpu(ident: str = "10de:2330", driver: str = "nvidia") -> Dev:
    v, d = ident.split(":")
    return Dev(GPU, v, d, "030200", driver, "7", modules=("nvidia",))


def _judge(tmp_path: Path, devices: list[Dev], files: dict[str, str], layer: Any,
           profile: Profile, check: str, **kw: Any) -> Any:
    h = FakeHost(tmp_path, devices, files=files, **kw)
    snap = h.collect(layer.QUERY)
    return snap, layer.LAYER.checks.get(check).judge(layer.parse(snap), profile, "node")


def _rejudge(snap: HostSnapshot, files: dict[str, str], layer: Any, profile: Profile,
             check: str) -> Any:
    keep = {p: t for p, t in snap.files.items() if not p.startswith("/etc/")}
    snap = dataclasses.replace(snap, files={**keep, **files})
    return layer.LAYER.checks.get(check).judge(layer.parse(snap), profile, "node")


def test_vfio_driver_names_the_shadowing_file_and_edits_the_effective_line(
        tmp_path: Path) -> None:
    files = {A: "options vfio-pci ids=10de:2330\nsoftdep nvidia pre: vfio-pci\n",
             B: "options vfio-pci ids=10de:22bc\n"}
    snap, v = _judge(tmp_path, [_gpu()], files, vfio, GENERIC, "vfio.driver",
                     cmdline=RUNNING, modules_loaded=("nvidia",))
    assert v.status is Status.FAIL
    assert "pending reboot" not in v.reason, v.reason
    assert f"{A} lists 10de:2330 in vfio-pci ids=, but {B} {LAST_ONLY}" in v.reason, v.reason
    assert {"file": B, "old": "options vfio-pci ids=10de:22bc",
            "new": "options vfio-pci ids=10de:22bc,10de:2330"} in v.evidence["fix"]
    assert "driverctl" not in v.remediation, v.remediation
    assert v.evidence["fix"][-1] == {"run": "reboot"}
    again = _rejudge(snap, apply_edits(files, v.evidence["fix"]), vfio, GENERIC, "vfio.driver")
    assert "pending reboot" in again.reason and LAST_ONLY not in again.reason, again.reason


def test_coverage_names_the_shadowed_rule_and_its_fix_passes(tmp_path: Path) -> None:
    """Every target is on vfio-pci now; gpu0's 8086:100e is only in the ids= that b.conf
    replaces: at the next boot nothing binds it (a union of the lines said "covered")."""
    files = {A: "options vfio-pci ids=1234:11e8,8086:100e\nsoftdep e1000 pre: vfio-pci\n",
             B: "options vfio-pci ids=1234:11e8\n",
             "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}
    devs = lab_devices(accel0="vfio-pci", gpu0="vfio-pci", gpu0_fn1="vfio-pci")
    prof = by_id(LAB)
    snap, v = _judge(tmp_path, devs, files, persistence, prof, "persistence.coverage",
                     vfio_nodes=("2", "3"), modules_loaded=("e1000",))
    assert v.status is Status.FAIL, v.reason
    assert "0000:01:01.0" in v.reason and "0000:00:04.0" not in v.reason, v.reason
    assert f"{A} lists 8086:100e in vfio-pci ids=, but {B} {LAST_ONLY}" in v.reason, v.reason
    assert {"file": B, "old": "options vfio-pci ids=1234:11e8",
            "new": "options vfio-pci ids=1234:11e8,8086:100e"} in v.evidence["fix"]
    again = _rejudge(snap, apply_edits(files, v.evidence["fix"]), persistence, prof,
                     "persistence.coverage")
    assert again.status is Status.PASS, again.reason


def test_coverage_when_the_command_line_shadows_modprobe(tmp_path: Path) -> None:
    grub = 'GRUB_CMDLINE_LINUX="iommu=pt vfio-pci.ids=1234:11e8"\n'
    files = {"/etc/default/grub": grub,
             A: "options vfio-pci ids=1234:11e8,8086:100e\nsoftdep e1000 pre: vfio-pci\n",
             "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}
    devs = lab_devices(accel0="vfio-pci", gpu0="vfio-pci", gpu0_fn1="vfio-pci")
    prof = by_id(LAB)
    snap, v = _judge(tmp_path, devs, files, persistence, prof, "persistence.coverage",
                     vfio_nodes=("2", "3"), modules_loaded=("e1000",))
    assert v.status is Status.FAIL, v.reason
    assert f"{A} lists 8086:100e in vfio-pci ids=, but the kernel command line" in v.reason
    assert "/etc/default/grub" in v.reason, v.reason
    assert any(s.get("file") == "/etc/default/grub" and "8086:100e" in s["new"]
               for s in v.evidence["fix"]), v.evidence["fix"]
    again = _rejudge(snap, apply_edits(files, v.evidence["fix"]), persistence, prof,
                     "persistence.coverage")
    assert again.status is Status.PASS, again.reason


def test_over_capture_counts_only_effective_rules(tmp_path: Path) -> None:
    """host-nic (8086:10d3) is listed only in a.conf's ids=, which b.conf replaces: it is
    captured by nothing, and the evidence names the shadowed rule."""
    files = {A: "options vfio-pci ids=1234:11e8,8086:100e,8086:10d3\n",
             B: "options vfio-pci ids=1234:11e8,8086:100e\n"}
    _snap, v = _judge(tmp_path / "a", lab_devices(), files, persistence, LAB,
                      "persistence.over-capture")
    assert v.status is Status.PASS, v.reason
    assert any("8086:10d3" in s and A in s and B in s for s in v.evidence["shadowed"]), \
        v.evidence
    assert "8086:10d3" not in " ".join(v.evidence["rules"])
    swapped = {A: files[B], B: files[A]}
    _snap, w = _judge(tmp_path / "b", lab_devices(), swapped, persistence, LAB,
                      "persistence.over-capture")
    assert w.status is Status.WARN and "8086:10d3" in w.reason and B in w.reason, w.reason


def test_over_capture_and_the_command_line(tmp_path: Path) -> None:
    """Every boot loader file sets vfio-pci.ids=: the modprobe.d rule naming host-nic is
    replaced and captures nothing. While they disagree (a loader entry without it), the
    rule may still apply at the next boot, so it still counts as capturing."""
    files = {A: "options vfio-pci ids=8086:10d3\n",
             "/etc/default/grub": 'GRUB_CMDLINE_LINUX="vfio-pci.ids=1234:11e8,8086:100e"\n'}
    _snap, v = _judge(tmp_path / "a", lab_devices(), files, persistence, LAB,
                      "persistence.over-capture")
    assert v.status is Status.PASS, v.reason
    assert any("8086:10d3" in s and "/etc/default/grub" in s for s in v.evidence["shadowed"])
    entry = {"/boot/loader/entries/debian.conf": "linux /vmlinuz\noptions root=/dev/vda\n"}
    _snap, w = _judge(tmp_path / "b", lab_devices(), {**files, **entry}, persistence, LAB,
                      "persistence.over-capture")
    assert w.status is Status.WARN and "8086:10d3" in w.reason, w.reason


# -- property: the product's effective ids are those of a reference model ------------------
IDS = ("10de:2330", "10de:2331", "10de:22bc", "8086:100e")
DIRS = ("/etc/modprobe.d", "/run/modprobe.d", "/usr/lib/modprobe.d", "/lib/modprobe.d")
NAMES = ("10-gpu.conf", "50-vfio.conf", "vfio.conf", "zz-local.conf")
_ids_value = st.lists(st.sampled_from(IDS), max_size=3).map(",".join)


def _options_line() -> st.SearchStrategy[str]:
    word = st.one_of(_ids_value.map(lambda v: f"ids={v}"), st.just("disable_vga=1"),
                     st.just("nointxmask=1"))
    return st.one_of(
        st.tuples(st.sampled_from(["vfio-pci", "vfio_pci"]), st.lists(word, max_size=3)).map(
            lambda t: " ".join(["options", t[0], *t[1]]) if t[1] else f"options {t[0]} x=1"),
        _ids_value.map(lambda v: f"options nvidia ids={v}"),  # another module's ids
        st.just("softdep nvidia pre: vfio-pci"),
        st.just("# options vfio-pci ids=10de:2330"),
    )


def _cmdline() -> st.SearchStrategy[list[str] | None]:
    word = st.one_of(
        st.tuples(st.sampled_from(["vfio-pci", "vfio_pci"]), _ids_value).map(
            lambda t: f"{t[0]}.ids={t[1]}"),
        _ids_value.map(lambda v: f"pci_stub.ids={v}"),
        st.just("iommu=pt"))
    return st.none() | st.lists(word, max_size=3)


def _model(files: dict[str, list[str]], cmdline: list[str] | None) -> set[str]:
    """Straight from the rule: modprobe reads the files sorted by basename (an earlier
    directory hiding a same-named file), joins every `options vfio_pci` line, then the
    command line's vfio_pci.* options; the kernel keeps the last ids= assignment."""
    chosen: dict[str, str] = {}
    for d in DIRS:
        for path in sorted(p for p in files if p.rsplit("/", 1)[0] == d):
            chosen.setdefault(path.rsplit("/", 1)[1], path)
    params: list[str] = []
    for base in sorted(chosen):
        for line in files[chosen[base]]:
            w = line.split()
            if w[0] == "options" and w[1].replace("-", "_") == "vfio_pci":
                params += w[2:]
    for w in cmdline or []:
        module, _, param = w.partition(".")
        if module.replace("-", "_") == "vfio_pci":
            params.append(param)
    value = ""
    for p in params:
        if p.startswith("ids="):
            value = p[len("ids="):]
    return {x for x in value.split(",") if x}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=st.dictionaries(st.builds(lambda d, n: f"{d}/{n}", st.sampled_from(DIRS),
                                       st.sampled_from(NAMES)),
                             st.lists(_options_line(), min_size=1, max_size=3), max_size=5),
       cmdline=_cmdline())
def test_effective_ids_equal_the_reference_model(files: dict[str, list[str]],
                                                 cmdline: list[str] | None) -> None:
    text = {p: "".join(ln + "\n" for ln in lines) for p, lines in files.items()}
    modprobe = parse_modprobe(HostSnapshot(files=text))
    assert {str(r) for _f, r in modprobe.vfio_ids()} == _model(files, None)
    if cmdline is not None:
        text["/etc/kernel/cmdline"] = " ".join(["root=/", *cmdline]) + "\n"
    b = parse_boot_binding(HostSnapshot(files=text))
    want = _model(files, cmdline)
    got = {i for i in IDS if any(k in ("modprobe", "cmdline")
                                 for k, _w in boot_mechanisms(b, dev(i), ["vfio-pci"]))}
    assert got == want, (text, got, want)
