"""Recorded evidence of the wrong shape is refused with one clear ``EvidenceError`` line that
names the field -- never a TypeError/AttributeError/KeyError -- and every loader and parser
is total under fuzzing (issue 9, "crashes on bad input")."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import CommandResult, HostSnapshot, StatResult
from kgc.core.model import EvidenceError
from kgc.core.profile import load_profile
from kgc.evidence.containerd import parse_toml, parse_version, redact_containerd_config
from kgc.evidence.pci import parse_pci
from kgc.evidence.vfio_config import (
    parse_boot_config,
    parse_driverctl,
    parse_initramfs,
    parse_modalias_drivers,
    parse_modprobe,
    parse_modules_load,
    parse_udev_overrides,
)
from kgc.layers import iommu, persistence, runtime, vfio
from kgc.layers.nri.collect import NriEvidence
from kgc.layers.reboot.collect import RebootEvidence

PROFILE = load_profile()

# -- HostSnapshot.from_dict -------------------------------------------------------------------
BAD_SNAPSHOTS: list[tuple[Any, str]] = [
    ([], "host"),
    ("text", "host"),
    ({"files": None}, "files"),
    ({"files": []}, "files"),
    ({"files": {"/proc/cmdline": 3}}, "files['/proc/cmdline']"),
    ({"files": {"/proc/cmdline": None}}, "files['/proc/cmdline']"),
    ({"links": {"/x": ["a"]}}, "links['/x']"),
    ({"dirs": {"/sys": None}}, "dirs['/sys']"),
    ({"dirs": {"/sys": "abc"}}, "dirs['/sys']"),
    ({"dirs": {"/sys": ["a", 1]}}, "dirs['/sys']"),
    ({"stats": {"/s": None}}, "stats['/s']"),
    ({"stats": {"/s": {"kind": "socket"}}}, "stats['/s']"),
    ({"stats": {"/s": {"kind": 1, "mode": "600", "owner": "root", "group": "root",
                       "size": 0}}}, "stats['/s'].kind"),
    ({"stats": {"/s": {"kind": "socket", "mode": "600", "owner": "root", "group": "root",
                       "size": "big"}}}, "stats['/s'].size"),
    ({"stats": {"/s": {"kind": "socket", "mode": "600", "owner": "root", "group": "root",
                       "size": 0, "bogus": 1}}}, "stats['/s']"),
    ({"commands": {"cpu": None}}, "commands['cpu']"),
    ({"commands": {"cpu": {"rc": "0", "output": ""}}}, "commands['cpu'].rc"),
    ({"commands": {"cpu": {"rc": 0, "output": 5}}}, "commands['cpu'].output"),
    ({"commands": {"cpu": {"rc": True, "output": ""}}}, "commands['cpu'].rc"),
    ({"errors": {"/x": 1}}, "errors['/x']"),
    ({"complete": "false"}, "complete"),
    ({"complete": None}, "complete"),
    # an unknown field's name is the recorder's text: quoted, so a newline in it cannot split
    # the one-line error (what made the fuzz test below fail now and then)
    ({"stats": {"/s": {"kind": "socket", "mode": "600", "owner": "root", "group": "root",
                       "size": 0, "bo\ngus": 1}}}, "stats['/s']"),
    ({"commands": {"cpu": {"rc": 0, "output": "", "x\ny": 1}}}, "commands['cpu']"),
]


@pytest.mark.parametrize(("doc", "field"), BAD_SNAPSHOTS)
def test_snapshot_of_the_wrong_shape_is_one_named_evidence_error(doc: Any, field: str) -> None:
    with pytest.raises(EvidenceError) as exc:
        HostSnapshot.from_dict(doc)
    msg = str(exc.value)
    assert "\n" not in msg and field in msg, msg


def test_incomplete_snapshot_keeps_its_flag() -> None:
    snap = HostSnapshot.from_dict({"files": {"/a": "x\n"}, "complete": False})
    assert snap.complete is False
    assert HostSnapshot.from_dict(snap.to_dict()).complete is False
    assert HostSnapshot.from_dict({}).complete is True


def test_snapshot_round_trips_link_target_stats() -> None:
    s = HostSnapshot(stats={"/usr/bin/x": StatResult("symbolic link", "777", "root", "root", 9,
                                                      "missing", None, None)},
                     commands={"c": CommandResult(0, "")})
    assert HostSnapshot.from_dict(json.loads(json.dumps(s.to_dict()))) == s


# -- NriEvidence / RebootEvidence -----------------------------------------------------------
BAD_NRI: list[tuple[Any, str]] = [
    ({}, "socket_path"),
    ([], "nri"),
    ({"socket_path": None}, "socket_path"),
    ({"socket_path": 3}, "socket_path"),
    ({"socket_path": "/s", "events": None}, "events"),
    ({"socket_path": "/s", "events": [1]}, "events[0]"),
    ({"socket_path": "/s", "events": "x"}, "events"),
    ({"socket_path": "/s", "handshake": []}, "handshake"),
    ({"socket_path": "/s", "pod": None}, "pod"),
    ({"socket_path": "/s", "socket_exists": "yes"}, "socket_exists"),
    ({"socket_path": "/s", "latencies_ms": {"a": "fast"}}, "latencies_ms"),
    ({"socket_path": "/s", "cleanup_errors": [None]}, "cleanup_errors[0]"),
    ({"socket_path": "/s", "waited_s": "1"}, "waited_s"),
    ({"socket_path": "/s", "connect_error": 1}, "connect_error"),
    ({"socket_path": "/s", "events": [{"event": 1}]}, "events[0].event"),
    ({"socket_path": "/s", "events": [{"event": "X", "pod_labels": []}]},
     "events[0].pod_labels"),
]


@pytest.mark.parametrize(("doc", "field"), BAD_NRI)
def test_nri_evidence_of_the_wrong_shape_is_one_named_evidence_error(doc: Any,
                                                                     field: str) -> None:
    with pytest.raises(EvidenceError) as exc:
        NriEvidence.from_dict(doc)
    msg = str(exc.value)
    assert "\n" not in msg and field in msg, msg


def test_nri_evidence_round_trips() -> None:
    ev = NriEvidence(socket_path="/s", events=[{"event": "RUN_POD_SANDBOX",
                                                 "pod_labels": {"a": "b"}, "via": "x"}],
                     handshake={"plugin": "p", "handshake_ms": 1.5}, waited_s=2)
    assert NriEvidence.from_dict(json.loads(json.dumps(ev.to_dict()))) == ev


BAD_REBOOT: list[tuple[Any, str]] = [
    ({}, "status"),
    ("done", "reboot"),
    ({"status": 1}, "status"),
    ({"status": "done", "before": []}, "before"),
    ({"status": "done", "before": {"0000:00:01.0": "vfio-pci"}}, "before['0000:00:01.0']"),
    ({"status": "done", "after": {"x": {"driver": 3}}}, "after['x'].driver"),
    ({"status": "done", "boot_id_before": 7}, "boot_id_before"),
    ({"status": "done", "waited_s": "10"}, "waited_s"),
    ({"status": "done", "timeout_s": [1]}, "timeout_s"),
    ({"status": "done", "message": None}, "message"),
    ({"status": "done", "console_tail": 5}, "console_tail"),
]


@pytest.mark.parametrize(("doc", "field"), BAD_REBOOT)
def test_reboot_record_of_the_wrong_shape_is_one_named_evidence_error(doc: Any,
                                                                      field: str) -> None:
    with pytest.raises(EvidenceError) as exc:
        RebootEvidence.from_dict(doc)
    msg = str(exc.value)
    assert "\n" not in msg and field in msg, msg


def test_reboot_record_round_trips() -> None:
    ev = RebootEvidence("done", "rebooted", "a", "b", {"x": {"driver": "vfio-pci"}},
                        {"x": {"driver": None}}, 12.5, 600.0, None)
    assert RebootEvidence.from_dict(json.loads(json.dumps(ev.to_dict()))) == ev


# -- fuzzing: loaders never crash (EvidenceError is the only exception), parsers are total ---
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=False),
                      st.text(max_size=20))
json_any = st.recursive(json_leaf, lambda k: st.one_of(
    st.lists(k, max_size=3), st.dictionaries(st.text(max_size=8), k, max_size=4)),
    max_leaves=15)
snap_keys = st.sampled_from(["files", "links", "dirs", "stats", "commands", "errors",
                             "complete", "extra"])


@given(doc=st.one_of(json_any, st.dictionaries(snap_keys, json_any, max_size=7)))
@example(doc={"stats": {"": {"\n": None}}})  # the input the random search found only rarely
@example(doc={"commands": {"": {"\r\n": 0}}})
@settings(max_examples=300, deadline=None)
def test_snapshot_loader_raises_only_evidence_error(doc: Any) -> None:
    try:
        snap = HostSnapshot.from_dict(doc)
    except EvidenceError as exc:
        assert "\n" not in str(exc)
        return
    assert HostSnapshot.from_dict(snap.to_dict()) == snap


nri_keys = st.sampled_from(sorted(NriEvidence.__dataclass_fields__) + ["junk"])


@given(doc=st.one_of(json_any, st.dictionaries(nri_keys, json_any, max_size=8)))
@settings(max_examples=300, deadline=None)
def test_nri_loader_raises_only_evidence_error(doc: Any) -> None:
    try:
        NriEvidence.from_dict(doc)
    except EvidenceError as exc:
        assert "\n" not in str(exc)


reboot_keys = st.sampled_from(["status", "message", "boot_id_before", "boot_id_after",
                               "before", "after", "waited_s", "timeout_s", "console_tail"])


@given(doc=st.one_of(json_any, st.dictionaries(reboot_keys, json_any, max_size=9)))
@settings(max_examples=300, deadline=None)
def test_reboot_loader_raises_only_evidence_error(doc: Any) -> None:
    try:
        RebootEvidence.from_dict(doc)
    except EvidenceError as exc:
        assert "\n" not in str(exc)


# Snapshots with arbitrary contents at the paths the parsers read.
PATHS = [
    "/proc/cmdline", "/etc/default/grub", "/etc/default/grub.d/x.cfg", "/boot/grub/grub.cfg",
    "/etc/kernel/cmdline", "/boot/loader/entries/a.conf", "/etc/modprobe.d/vfio.conf",
    "/lib/modprobe.d/x.conf", "/etc/modules-load.d/v.conf", "/etc/modules",
    "/etc/driverctl.d/pci-0000:01:00.0", "/etc/driverctl.d/pci-",
    "/sys/bus/pci/devices/0000:01:00.0/vendor", "/sys/bus/pci/devices/0000:01:00.0/class",
    "/sys/bus/pci/devices/0000:01:00.0/device", "/sys/kernel/iommu_groups/1/type",
    "/etc/containerd/config.toml", "/etc/kata-containers/configuration.toml",
    "/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name",
]
CMDS = ["pci_modalias_drivers", "initramfs_list", "udev_driver_override", "cpu", "kconfig",
        "irq_remap", "dmesg", "containerd_version", "containerd_config_dump", "kata_shim_path",
        "containerd_package"]
line_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=120)
structured = st.lists(st.one_of(
    line_text,
    st.sampled_from(["D 0000:01:00.0 pci:v1", "A pci:v1 e1000 vfio_pci", "# image /boot/x",
                     "options vfio-pci ids=10de:2331,", "softdep nvidia pre: vfio-pci",
                     "blacklist nouveau", "install x /bin/false", 'GRUB_CMDLINE_LINUX="a=\'b',
                     "linux /vmlinuz root=/ vfio-pci.ids=1:2:3:4:5", "options vfio_pci.ids=",
                     "/etc/udev/rules.d/a.rules:ATTR{driver_override}=\"vfio-pci\"",
                     'KERNEL=="0000:*", ATTRS{vendor}=="0x10de"', "x.ko.zst", "KGC-NO-MODPROBE",
                     "level=warning msg=\"Ignoring unknown key\" key=a plugin=b", "\\",
                     "[plugins.\"io.containerd.nri.v1.nri\"]", "disable = false"])),
    max_size=12).map("\n".join)


@given(files=st.dictionaries(st.sampled_from(PATHS), structured, max_size=8),
       cmds=st.dictionaries(st.sampled_from(CMDS),
                            st.tuples(st.integers(-2, 130), structured), max_size=6),
       dirs=st.dictionaries(st.sampled_from(["/sys/bus/pci/devices", "/sys/kernel/iommu_groups",
                                             "/sys/kernel/iommu_groups/1/devices",
                                             "/sys/class/iommu", "/dev/vfio", "/sys/module"]),
                            st.lists(st.sampled_from(["0000:01:00.0", "1", "", "..", "vfio"]),
                                     max_size=3).map(tuple), max_size=4))
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_host_parsers_and_evaluators_are_total(files, cmds, dirs) -> None:  # type: ignore[no-untyped-def]
    snap = HostSnapshot(files=files, dirs=dirs,
                        commands={k: CommandResult(rc, out) for k, (rc, out) in cmds.items()})
    parse_pci(snap)
    parse_modprobe(snap)
    parse_modules_load(snap)
    parse_boot_config(snap).ids()
    parse_driverctl(snap)
    parse_udev_overrides(snap)
    parse_initramfs(snap).modules()
    parse_modalias_drivers(snap)
    for layer in (iommu, vfio, persistence):
        ev = layer.parse(snap)
        for chk in layer.LAYER.checks:
            v = chk.judge(ev, PROFILE, "fuzz")
            assert not v.reason.startswith("evaluator crashed"), (chk.id, v.reason)
    rev = runtime.parse(snap, PROFILE)
    for chk in runtime.LAYER.checks:
        v = chk.judge(rev, PROFILE, "fuzz")
        assert not v.reason.startswith("evaluator crashed"), (chk.id, v.reason)


@given(raw=st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_parse_version_is_total(raw: str) -> None:
    v = parse_version(raw)
    assert v.known == (v.major is not None)
    str(v)


@given(text=st.text(max_size=600))
@settings(max_examples=300, deadline=None)
def test_redaction_and_toml_parse_are_total(text: str) -> None:
    out = redact_containerd_config(text)
    assert isinstance(out, str)
    parse_toml("/x.toml", out)


def test_meminfo_parser_is_total() -> None:
    from kgc.evidence.guest import meminfo_kib

    @given(st.one_of(st.none(), st.text(max_size=300)))
    @settings(max_examples=200, deadline=None)
    def inner(text: str | None) -> None:
        v = meminfo_kib(text)
        assert v is None or isinstance(v, int)

    inner()


@pytest.mark.parametrize("bad", [None, {}, [], "host", 3])
def test_layer_parsers_refuse_anything_but_a_snapshot(bad: Any) -> None:
    for layer in (iommu, vfio, persistence):
        with pytest.raises(EvidenceError) as exc:
            layer.parse(bad)
        assert "\n" not in str(exc.value) and layer.LAYER.name in str(exc.value)
    with pytest.raises(EvidenceError):
        runtime.parse(bad, PROFILE)


@pytest.mark.parametrize(("kw", "field"), [
    ({"files": {"/proc/cmdline": 3}}, "files['/proc/cmdline']"),
    ({"files": None}, "files"),
    ({"dirs": {"/sys": ["a"]}}, "dirs['/sys']"),
    ({"stats": {"/s": {"kind": "socket"}}}, "stats['/s']"),
    ({"commands": {"c": ("0", "")}}, "commands['c']"),
    ({"complete": "yes"}, "complete"),
])
def test_a_snapshot_of_the_wrong_shape_cannot_be_built(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(EvidenceError) as exc:
        HostSnapshot(**kw)
    assert field in str(exc.value)
