"""The rebindability judgement (kgc.layers.common.judge_rebindable) shared by vfio.rebindable and
reboot.rebindable, the holder scan's parser (kgc.evidence.holders) and the reboot record's
new keys: every branch, a property (a holder of a target's node is never a pass), and a
table whose every row flips one condition of the rule, so that a mutant of any condition
fails a row. Pure: no tree, no collector (the collector runs in test_holders_collector.py
and test_dra_binding.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgc.core.model import EvidenceError, Status
from kgc.core.profile import DeviceSelector, Profile, load_profile
from kgc.evidence.holders import MAX_HOLDERS, MAX_UNREADABLE, DeviceUse, Holder, parse_output
from kgc.layers.common import RebindDev as Dev
from kgc.layers.common import judge_rebindable
from kgc.layers.reboot.checks import CHECKS as REBOOT
from kgc.layers.reboot.collect import RebootEvidence

GPU = "0000:3b:00.0"
AUDIO = "0000:3b:00.1"
BRIDGE = "0000:3a:00.0"
ALLOWED = ("vfio-pci",)


def gpu(driver: str | None = "nvidia", cls: str = "030200", group: str | None = "7") -> Dev:
    return Dev(GPU, "10de:2335", cls, driver, group)


def peer(driver: str | None, bdf: str = AUDIO, cls: str = "040300") -> Dev:
    return Dev(bdf, "10de:22a3", cls, driver, "7")


def use(*holders: Holder, minors: dict[str, int] | None = None, **kw: Any) -> DeviceUse:
    return DeviceUse(holders=tuple(holders), scanned=40, uid="0",
                     minors={GPU: 0} if minors is None else minors, **kw)


def run(target: Dev, peers: tuple[Dev, ...] = (), u: DeviceUse | None = None,
        host: str = "nvidia") -> Any:
    groups = {"7": [target, *peers]} if target.group else {}
    return judge_rebindable([target], groups, use() if u is None else u, host_driver=host,
                        allowed=ALLOWED)


PERSISTENCED = Holder(812, "nvidia-persiste", "/dev/nvidia0", 3)


# -- every branch ----------------------------------------------------------------------------
def test_on_its_host_driver_with_nothing_holding_it_passes() -> None:
    out = run(gpu(), (peer(None), Dev(BRIDGE, "8086:2030", "060400", "pcieport", "7")))
    assert out.status is Status.PASS, out.reason
    assert f"{GPU} on nvidia" in out.reason and "40 processes scanned" in out.reason


def test_held_by_nvidia_persistenced_fails_naming_pid_comm_and_the_fix() -> None:
    out = run(gpu(), u=use(PERSISTENCED))
    assert out.status is Status.FAIL
    assert "/dev/nvidia0 is held open by pid 812 (nvidia-persiste)" in out.reason
    assert "WaitForGPUFree" in out.reason
    assert "systemctl disable --now nvidia-persistenced" in out.remediation
    assert f"nvidia-smi -i {GPU} -pm 0" in out.remediation


def test_another_holder_is_named_with_its_own_fix() -> None:
    out = run(gpu(), u=use(Holder(99, "python3", "/run/nvidia/driver/dev/nvidia0", 9)))
    assert out.status is Status.FAIL and "pid 99 (python3)" in out.reason
    assert "systemctl status 99" in out.remediation and "persistenced" not in out.remediation


def test_a_holder_of_another_gpu_or_of_nvidiactl_only_does_not_block() -> None:
    """The driver checks /dev/nvidia<minor> of the GPU it rebinds, nothing else."""
    out = run(gpu(), u=use(Holder(5, "x", "/dev/nvidia1"), Holder(6, "y", "/dev/nvidiactl"),
                           Holder(7, "z", "/dev/nvidia-uvm")))
    assert out.status is Status.PASS, out.reason


def test_an_unknown_minor_counts_every_gpu_node() -> None:
    out = run(gpu(), u=use(Holder(5, "x", "/dev/nvidia3"), minors={}))
    assert out.status is Status.FAIL and "its minor is unknown" in out.reason


def test_a_peer_on_a_host_driver_makes_the_group_non_viable() -> None:
    out = run(gpu(), (peer(None), Dev("0000:3c:00.0", "15b3:1021", "020000", "mlx5_core", "7")))
    assert out.status is Status.FAIL
    assert "peer 0000:3c:00.0 [15b3:1021] is on host driver mlx5_core" in out.reason
    assert "echo 0000:3c:00.0 > /sys/bus/pci/devices/0000:3c:00.0/driver/unbind" in \
        out.remediation


@pytest.mark.parametrize("driver", [None, "vfio-pci", "pci-stub"])
def test_a_viable_peer_passes(driver: str | None) -> None:
    assert run(gpu(), (peer(driver),)).status is Status.PASS


def test_the_audio_function_of_a_vga_gpu_goes_with_it_only_when_linked() -> None:
    vga, linked = gpu(cls="030000"), use(aux={GPU: (AUDIO,)})
    assert run(vga, (peer("snd_hda_intel"),), linked).status is Status.PASS
    assert run(vga, (peer("snd_hda_intel"),), use()).status is Status.FAIL
    # a 3D controller has no graphics auxiliary function in go-nvlib's sense
    assert run(gpu(cls="030200"), (peer("snd_hda_intel"),), linked).status is Status.FAIL


def test_nouveau_fails_saying_it_is_not_nvidia() -> None:
    out = run(gpu("nouveau"))
    assert out.status is Status.FAIL
    assert "is on nouveau, not nvidia" in out.reason and "NVML" in out.reason
    assert "blacklist nouveau" in out.remediation


@pytest.mark.parametrize("driver", ["amdgpu", None])
def test_another_driver_or_none_fails(driver: str | None) -> None:
    out = run(gpu(driver))
    assert out.status is Status.FAIL
    assert ("has no driver" if driver is None else "is on amdgpu") in out.reason
    assert (f"modprobe nvidia; echo {GPU} > /sys/bus/pci/drivers_probe" if driver is None
            else "/sys/bus/pci/drivers/nvidia/bind") in out.remediation


def test_on_vfio_pci_it_passes_and_a_vfio_holder_is_a_caution() -> None:
    assert run(gpu("vfio-pci")).status is Status.PASS
    out = run(gpu("vfio-pci"), u=use(Holder(77, "qemu-system-x86", "/dev/vfio/7")))
    assert out.status is Status.WARN and "pid 77 (qemu-system-x86)" in out.reason


def test_no_iommu_group_fails() -> None:
    assert run(gpu(group=None)).status is Status.FAIL


@pytest.mark.parametrize("gap", [
    {"error": "the snapshot holds no dev_holders record"},
    {"unreadable": (1, 2), "unreadable_count": 2, "uid": "1000"},
    {"truncated": 3},
])
def test_missing_or_partial_holder_evidence_is_an_error_never_a_pass(gap: dict[str, Any]) -> None:
    u = dataclasses.replace(use(), **gap)
    out = run(gpu(), u=u)
    assert out.status is Status.ERROR
    assert u.gap() in out.reason
    if "uid" in gap:
        assert "could not be checked" in out.reason and "uid 1000" in out.reason
    # a failure found anyway is still a failure, and names the gap too
    bad = run(gpu("nouveau"), u=u)
    assert bad.status is Status.FAIL and u.gap() in bad.reason


# -- the property ---------------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(minor=st.integers(0, 15), pid=st.integers(1, 4 * 10**6),
       comm=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=15),
       prefix=st.sampled_from(["", "/run/nvidia/driver", "/host"]),
       known=st.booleans(), extra=st.lists(st.sampled_from(
           ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/vfio/9"]), max_size=3))
def test_any_holder_of_a_targets_node_is_never_a_pass(minor: int, pid: int, comm: str,
                                                      prefix: str, known: bool,
                                                      extra: list[str]) -> None:
    holders = [Holder(pid, comm, f"{prefix}/dev/nvidia{minor}"),
               *(Holder(pid + 1, "o", p) for p in extra)]
    u = use(*holders, minors={GPU: minor} if known else {})
    out = run(gpu(), u=u)
    assert out.status is Status.FAIL
    assert f"pid {pid} ({comm})" in out.reason


# -- one condition flipped per row: a mutant of any condition fails a row ----------------------
MUTANTS = [
    ("baseline", gpu(), (), use(), Status.PASS),
    ("host driver -> other", gpu("e1000"), (), use(), Status.FAIL),
    ("host driver -> vfio", gpu("vfio-pci"), (), use(), Status.PASS),
    ("host driver -> none", gpu(None), (), use(), Status.FAIL),
    ("lab host driver", gpu("e1000"), (), use(), Status.PASS),  # host_driver=e1000 below
    ("peer driverless", gpu(), (peer(None),), use(), Status.PASS),
    ("peer on host", gpu(), (peer("snd_hda_intel"),), use(), Status.FAIL),
    ("peer a bridge", gpu(), (peer("pcieport", BRIDGE, "060400"),), use(), Status.PASS),
    ("peer not a bridge", gpu(), (peer("pcieport", BRIDGE, "060000"),), use(), Status.FAIL),
    ("holder of its minor", gpu(), (), use(PERSISTENCED), Status.FAIL),
    ("holder of another minor", gpu(), (), use(Holder(1, "a", "/dev/nvidia2")), Status.PASS),
    ("minor unknown, a gpu node held", gpu(), (), use(Holder(1, "a", "/dev/nvidia2"),
                                                      minors={}), Status.FAIL),
    ("minor unknown, ctl held", gpu(), (), use(Holder(1, "a", "/dev/nvidiactl"), minors={}),
     Status.PASS),
    ("held but on vfio", gpu("vfio-pci"), (), use(PERSISTENCED), Status.PASS),
    ("vfio group held", gpu("vfio-pci"), (), use(Holder(1, "q", "/dev/vfio/7")), Status.WARN),
    ("other vfio group held", gpu("vfio-pci"), (), use(Holder(1, "q", "/dev/vfio/17")),
     Status.PASS),
    ("scan incomplete", gpu(), (), use(unreadable_count=1), Status.ERROR),
]


@pytest.mark.parametrize(("name", "target", "peers", "u", "want"), MUTANTS,
                         ids=[m[0] for m in MUTANTS])
def test_one_condition_flipped(name: str, target: Dev, peers: tuple[Dev, ...], u: DeviceUse,
                               want: Status) -> None:
    host = "e1000" if name == "lab host driver" else "nvidia"
    assert run(target, peers, u, host=host).status is want


# -- the holder scan's record ---------------------------------------------------------------
def test_a_record_parses_and_round_trips() -> None:
    u = parse_output("I 0\nH 812 3 /dev/nvidia0\nC 812 nvidia-persiste\nU 9\nN 50 1 1 2\n")
    assert u.holders == (Holder(812, "nvidia-persiste", "/dev/nvidia0", 3),)
    assert (u.unreadable, u.unreadable_count, u.scanned, u.uid) == ((9,), 1, 50, "0")
    assert not u.complete and "pid 9" in u.gap()
    again = DeviceUse.from_dict(json.loads(json.dumps(u.to_dict())), "x")
    assert again == u


@pytest.mark.parametrize(("text", "says"), [
    ("I 0\nH 1 2 /dev/nvidia0\n", "no summary line"),
    ("I 0\nrm -rf /\nN 1 0 0 0\n", "malformed at line 2"),
    ("I 0\nN 1 0 0 0\nH 1 2 /dev/nvidia0\n", "after the summary line"),
    ("H 1 2 /dev/nvidia0\nH 1 3 /dev/nvidia1\nN 1 1 0 0\n", "more holders"),
    ("I 0\n" + "H 1 2 /dev/nvidia0\n" * (MAX_HOLDERS * 3) + "N 1 1 0 0\n", "more than the "
     "collector prints"),
    ("KGC-NO-PROC no /proc/<pid>/fd under /mnt/img/\n", "no process table"),
])
def test_a_malformed_or_huge_record_is_an_error_naming_it(text: str, says: str) -> None:
    u = parse_output(text)
    assert u.error is not None and says in u.error and not u.holders


@pytest.mark.parametrize(("doc", "says"), [
    ({"holders": [{"pid": 1, "comm": "a", "path": "/dev/nvidia0"}] * (MAX_HOLDERS + 1)},
     "over the collector's bound"),
    ({"unreadable": list(range(MAX_UNREADABLE + 1))}, "over the collector's bound"),
    ({"holders": [{"pid": "1", "comm": "a", "path": "/dev/nvidia0"}]}, "holders[0].pid"),
    ({"minors": {GPU: "0"}}, "minors"),
    ({"bogus": 1}, "unknown field"),
])
def test_a_malformed_recorded_value_is_refused_in_one_line(doc: dict[str, Any],
                                                           says: str) -> None:
    with pytest.raises(EvidenceError, match=None) as exc:
        DeviceUse.from_dict(doc, "reboot.use_after")
    assert says in str(exc.value) and "\n" not in str(exc.value)


# -- reboot.rebindable --------------------------------------------------------------------------
def _profile(binding: str = "dra") -> Profile:
    base = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml")
    g = base.platform.gpu.model_copy(update={"binding": binding})
    pt = base.host.passthrough.model_copy(update={"targets": (DeviceSelector(vendor="10de",
                                                                             device="2335"),)})
    return base.model_copy(update={"platform": base.platform.model_copy(update={"gpu": g}),
                                   "host": base.host.model_copy(update={"passthrough": pt})})


def row(driver: str | None, cls: str = "0x030200", group: str = "7") -> dict[str, Any]:
    return {"vendor": "10de", "device": "2335", "class": cls.removeprefix("0x"), "driver": driver,
            "driver_override": None, "iommu_group": group}


def record(after: str | None, u: DeviceUse | None = None, prebound: Any = None,
           **kw: Any) -> RebootEvidence:
    return RebootEvidence("done", "rebooted", boot_id_before="a", boot_id_after="b",
                          before={GPU: row("nvidia")}, after={GPU: row(after)},
                          use_after=use() if u is None else u, prebound=prebound, **kw)


def judge_reboot(ev: RebootEvidence, binding: str = "dra") -> Any:
    return REBOOT.get("reboot.rebindable").judge(ev, _profile(binding), "node")


def test_reboot_back_on_its_host_driver_and_free_passes() -> None:
    v = judge_reboot(record("nvidia", settled="running"))
    assert v.status is Status.PASS and "after the reboot" in v.reason and "running" in v.reason


def test_reboot_back_pre_bound_fails_naming_where() -> None:
    src = "modprobe: /etc/modprobe.d/vfio.conf: options vfio-pci ids=10de:2335"
    v = judge_reboot(record("vfio-pci", prebound={GPU: (src,)}))
    assert v.status is Status.FAIL and "pre-bound to vfio-pci" in v.reason
    assert "/etc/modprobe.d/vfio.conf" in v.reason
    assert "remove the ID from `options vfio-pci ids=10de:2335` in /etc/modprobe.d/vfio.conf" \
        in v.remediation
    v = judge_reboot(record("vfio-pci", prebound={GPU: ()}))
    assert v.status is Status.FAIL and "no boot-time configuration recorded" in v.reason


def test_reboot_holder_after_the_boot_fails() -> None:
    v = judge_reboot(record("nvidia", use(PERSISTENCED)))
    assert v.status is Status.FAIL and "pid 812 (nvidia-persiste)" in v.reason


def test_reboot_record_without_the_scan_is_an_error_and_boot_skips() -> None:
    old = dataclasses.replace(record("nvidia"), use_after=None)
    assert judge_reboot(old).status is Status.ERROR
    v = judge_reboot(record("nvidia"), "boot")
    assert v.status is Status.SKIP and "reboot.binding-persists judges" in v.reason
    persists = REBOOT.get("reboot.binding-persists").judge(record("nvidia"), _profile(), "n")
    assert persists.status is Status.SKIP and "reboot.rebindable" in persists.reason


def test_the_reboot_record_round_trips_and_older_records_stay_as_they_were() -> None:
    ev = record("nvidia", use(PERSISTENCED), prebound={GPU: ("driverctl: x: vfio-pci",)},
                settled="degraded")
    again = RebootEvidence.from_dict(json.loads(json.dumps(ev.to_dict())))
    assert again == ev
    old = RebootEvidence("done", "rebooted", boot_id_before="a", boot_id_after="b")
    assert set(old.to_dict()) == {"status", "message", "boot_id_before", "boot_id_after",
                                  "before", "after", "waited_s", "timeout_s", "console_tail"}
    with pytest.raises(EvidenceError, match=r"^reboot\.use_after\.holders"):
        RebootEvidence.from_dict(ev.to_dict() | {"use_after": {"holders": "x"}})
