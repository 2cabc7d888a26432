"""Property (issue 18.2): for every config-fixable host check, applying the verdict's fix
(``evidence["fix"]``: edits of the lines that are there, or commands whose effect on the
configuration is documented) to the recorded configuration gives a configuration the check
then passes -- and never a duplicate line the tool would ignore.

The configurations are drawn over the shapes real setups have (modprobe.d layouts from the
Arch wiki "PCI passthrough via OVMF" and the setup scripts cited in test_pending_reboot.py:
``options vfio-pci ids=...``, ``softdep <driver> pre: vfio-pci``, package-owned files under
/usr/lib/modprobe.d, a softdep line for the host driver that does not name vfio-pci).
modprobe's own rules decide what counts: only the first softdep line of a module is used
(libkmod kmod_module_get_softdeps), /etc hides a same-named /usr/lib file, and of several
``ids=`` only the last one read takes effect, a ``vfio-pci.ids=`` on the kernel command line
(here GRUB_CMDLINE_LINUX in /etc/default/grub) coming after every modprobe.d line (libkmod
kmod_module_get_options and kmod_config_new; vfio-pci's ``ids`` is a module_param_string,
each assignment replacing the previous one: see test_vfio_ids_last_assignment.py).

``driverctl set-override <BDF> <driver>`` is applied as driverctl documents it: it writes
the override to /etc/driverctl.d/pci-<BDF> (driverctl(8), "set-override ... persistent").
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from fakehost import FakeHost, lab_devices
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import HostSnapshot
from kgc.core.model import Status
from kgc.core.profile import Profile, load_profile
from kgc.evidence.vfio_config import apply_edits, parse_modprobe
from kgc.layers import persistence, vfio

LAB = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml")
IDS = ("1234:11e8", "8086:100e", "10de:2331")
FILES = ("/etc/modprobe.d/vfio.conf", "/etc/modprobe.d/10-gpu.conf",
         "/usr/lib/modprobe.d/50-e1000.conf")


def only(profile: Profile, *mechanisms: str) -> Profile:
    pers = profile.host.persistence.model_copy(update={"accepted_mechanisms": mechanisms})
    return profile.model_copy(update={"host": profile.host.model_copy(
        update={"persistence": pers})})


def _lines() -> st.SearchStrategy[str]:
    ids = st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True)
    pre = st.lists(st.sampled_from(["vfio-pci", "crc32c", "i2c_dev"]), max_size=2, unique=True)
    return st.one_of(
        ids.map(lambda x: f"options vfio-pci ids={','.join(x)}"),
        ids.map(lambda x: f"options vfio-pci disable_vga=1 ids={','.join(x)}"),
        pre.map(lambda p: "softdep e1000 pre: " + " ".join(p) if p
                else "softdep e1000 post: crc32c"),
        st.just("blacklist nouveau"),
        st.just("# vfio for the lab"),
    )


CONFIGS = st.dictionaries(st.sampled_from(FILES), st.lists(_lines(), max_size=3), max_size=3)
# the next boot's command line: none, or GRUB_CMDLINE_LINUX with vfio-pci.ids= (which
# shadows every modprobe.d ids=)
GRUB = st.none() | st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True)


def _base(tmp_path_factory: Any, drivers: dict[str, str | None]) -> HostSnapshot:
    host = FakeHost(tmp_path_factory.mktemp("node"), lab_devices(**drivers),
                    vfio_nodes=("2", "3"), modules_loaded=("e1000",))
    return host.collect(persistence.QUERY | vfio.QUERY)


def _with(snap: HostSnapshot, files: dict[str, str]) -> HostSnapshot:
    keep = {p: t for p, t in snap.files.items() if not p.startswith(("/etc/", "/usr/lib/"))}
    return dataclasses.replace(snap, files={**keep, **files})


def _apply(files: dict[str, str], steps: list[dict[str, Any]]) -> dict[str, str]:
    out = apply_edits(files, steps)
    for s in steps:
        words = s.get("run", "").split()
        if words[:2] == ["driverctl", "set-override"]:
            out[f"/etc/driverctl.d/pci-{words[2]}"] = words[3] + "\n"
    return out


def _etc(cfg: dict[str, list[str]], modules_load: bool,
         grub: list[str] | None = None) -> dict[str, str]:
    files = {f: "".join(ln + "\n" for ln in lines) for f, lines in cfg.items()}
    if modules_load:
        files["/etc/modules-load.d/vfio.conf"] = "vfio-pci\n"
    if grub is not None:
        ids = ",".join(grub)
        files["/etc/default/grub"] = f'GRUB_CMDLINE_LINUX="iommu=pt vfio-pci.ids={ids}"\n'
    return files


def _softdeps(files: dict[str, str], snap: HostSnapshot) -> int:
    return sum(1 for _f, c, m, _ln in parse_modprobe(_with(snap, files)).lines
               if c == "softdep" and m == "e1000")


SHADOWED = "the kernel keeps only the last assignment"
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
BOUND = {"accel0": "vfio-pci", "gpu0": "vfio-pci", "gpu0_fn1": "vfio-pci"}


@SETTINGS
@given(cfg=CONFIGS, modules_load=st.booleans(), by_id=st.booleans(), grub=GRUB)
# found by this property in a clean-clone `make test`: the effective ids= line stands twice
# in its file, and an edit naming it by its text changed the first, shadowed copy
@example(cfg={"/etc/modprobe.d/vfio.conf": ["options vfio-pci ids=1234:11e8",
                                            "options vfio-pci ids=1234:11e8"]},
         modules_load=False, by_id=True, grub=None)
def test_persistence_fixes_make_the_check_pass(  # type: ignore[no-untyped-def]
        tmp_path_factory, cfg, modules_load, by_id, grub) -> None:
    base = _base(tmp_path_factory, BOUND)
    profile = only(LAB, "modprobe", "cmdline") if by_id else LAB
    files = _etc(cfg, modules_load, grub)
    for check in ("persistence.load-order", "persistence.coverage"):
        c = persistence.LAYER.checks.get(check)
        v = c.judge(persistence.parse(_with(base, files)), profile, "node")
        if v.status not in (Status.FAIL, Status.WARN):
            continue
        steps = v.evidence.get("fix")
        assert steps, (check, v.reason, "a config-fixable failure without a machine fix")
        fixed = _apply(files, steps)
        again = c.judge(persistence.parse(_with(base, fixed)), profile, "node")
        assert again.status is Status.PASS, (check, files, steps, again.reason)
        # never a second softdep line when the one modprobe uses (the first) is in /etc: it
        # would be ignored; a first line in a package file gets an /etc file read before it
        first = parse_modprobe(_with(base, files)).line_of("softdep", "e1000")
        if first is not None and first[0].startswith("/etc/"):
            assert _softdeps(fixed, base) == _softdeps(files, base), (files, fixed)


@SETTINGS
@given(cfg=CONFIGS, grub=GRUB)
def test_vfio_fixes_leave_only_the_reboot(  # type: ignore[no-untyped-def]
        tmp_path_factory, cfg, grub) -> None:
    """gpu0/gpu0_fn1 still on e1000: after the edits of vfio.driver's fix, every configured
    device's story is "pending reboot" (nothing else wrong), and vfio.competing-driver's
    edits leave nothing unguarded. A device whose only ids= rule is shadowed (a later ids=,
    or vfio-pci.ids= on the command line) gets its id added to the rule that takes effect,
    and is then pending reboot too."""
    base = _base(tmp_path_factory, {"accel0": "vfio-pci", "gpu0": "e1000",
                                    "gpu0_fn1": "e1000"})
    files = _etc(cfg, True, grub)
    drv = vfio.LAYER.checks.get("vfio.driver")
    v = drv.judge(vfio.parse(_with(base, files)), LAB, "node")
    assert v.status is Status.FAIL
    fixed = apply_edits(files, v.evidence["fix"])
    again = drv.judge(vfio.parse(_with(base, fixed)), LAB, "node")
    if "its binding is configured" in v.reason or SHADOWED in v.reason:
        assert "but" not in again.reason.split("configured", 1)[1], again.reason
        assert "pending reboot" in again.reason
    comp = vfio.LAYER.checks.get("vfio.competing-driver")
    cv = comp.judge(vfio.parse(_with(base, files)), LAB, "node")
    after = comp.judge(vfio.parse(_with(base, apply_edits(files, cv.evidence.get("fix", [])))),
                       LAB, "node")
    assert "no softdep/blacklist" not in after.reason, (files, after.reason)


def test_a_second_softdep_line_is_ignored_and_the_first_is_edited(  # type: ignore[no-untyped-def]
        tmp_path_factory) -> None:
    """modprobe reads /etc/modprobe.d/10-gpu.conf before vfio.conf and uses only its softdep
    line for e1000 (libkmod: "find only the first command"): the later
    ``softdep e1000 pre: vfio-pci`` does nothing, so load order is not guarded, and the fix
    edits the line that counts instead of appending a third."""
    base = _base(tmp_path_factory, BOUND)
    files = {"/etc/modprobe.d/10-gpu.conf": "softdep e1000 pre: crc32c\n",
             "/etc/modprobe.d/vfio.conf": "options vfio-pci ids=1234:11e8,8086:100e\n"
                                          "softdep e1000 pre: vfio-pci\n",
             "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}
    c = persistence.LAYER.checks.get("persistence.load-order")
    v = c.judge(persistence.parse(_with(base, files)), LAB, "node")
    assert v.status is Status.FAIL, v.reason
    assert {"file": "/etc/modprobe.d/10-gpu.conf", "old": "softdep e1000 pre: crc32c",
            "new": "softdep e1000 pre: vfio-pci crc32c"} in v.evidence["fix"]
    fixed = apply_edits(files, v.evidence["fix"])
    assert c.judge(persistence.parse(_with(base, fixed)), LAB, "node").status is Status.PASS


def test_two_ids_lines_get_the_id_in_the_line_that_counts(  # type: ignore[no-untyped-def]
        tmp_path_factory) -> None:
    """gpu0's 8086:100e is listed only in 10-gpu.conf's ids=, which vfio.conf (read later)
    sets again: the kernel keeps the last assignment, so nothing binds gpu0 at boot. The
    fix adds the id to vfio.conf's line (the one that counts), and then the check passes;
    a fix extending the first line would change nothing."""
    base = _base(tmp_path_factory, BOUND)
    files = {"/etc/modprobe.d/10-gpu.conf": "options vfio-pci ids=1234:11e8,8086:100e\n",
             "/etc/modprobe.d/vfio.conf": "options vfio-pci ids=1234:11e8\n"
                                          "softdep e1000 pre: vfio-pci\n",
             "/etc/modules-load.d/vfio.conf": "vfio-pci\n"}
    profile = only(LAB, "modprobe", "cmdline")
    c = persistence.LAYER.checks.get("persistence.coverage")
    v = c.judge(persistence.parse(_with(base, files)), profile, "node")
    assert v.status is Status.FAIL, v.reason
    assert SHADOWED in v.reason, v.reason
    assert {"file": "/etc/modprobe.d/vfio.conf", "old": "options vfio-pci ids=1234:11e8",
            "new": "options vfio-pci ids=1234:11e8,8086:100e"} in v.evidence["fix"]
    fixed = _apply(files, v.evidence["fix"])
    assert c.judge(persistence.parse(_with(base, fixed)), profile, "node").status is Status.PASS
