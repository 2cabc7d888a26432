"""The reboot test's collection under binding: dra (kgc.layers.reboot.collect): after the new
boot_id it waits for the boot to finish, then records the PCI bindings and the holder scan
from after the reboot, and the boot-time vfio-pci bindings configured before it; the record
replays to the same verdict. The node is a stand-in whose snapshots come from /sys- and
/proc-shaped trees read by the real collector (FakeHost)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakehost import FakeHost, lab_devices
from test_dra_binding import LAB, dra

from kgc.core.engine import host_query
from kgc.core.model import Status
from kgc.core.registry import load_layers
from kgc.layers.reboot import collect
from kgc.layers.reboot.checks import CHECKS
from kgc.layers.reboot.collect import BOOT_ID, RebootEvidence

IDS = "/etc/modprobe.d/kgc-vfio.conf"


class _Node:
    name = "node-dra"

    def __init__(self, after: FakeHost) -> None:
        self.after, self.scripts = after, []  # type: ignore[var-annotated]

    def reboot_refusal(self) -> None:
        return None

    def run(self, script: str, limit_s: int | None = None) -> tuple[int, str, str]:
        self.scripts.append(script)
        return (0, "running\n", "") if "is-system-running" in script else \
            (0, "kgc-reboot-scheduled\n", "")

    def collect(self, query: Any) -> Any:
        return self.after.collect(query)


def _host(root: Path, boot_id: str, procs: dict[int, Any], **kw: Any) -> FakeHost:
    devs = lab_devices(accel0="vfio-pci", gpu0="e1000", gpu0_fn1=None)
    files = {BOOT_ID: boot_id + "\n", **kw.pop("files", {})}
    return FakeHost(root, devs, files=files, vfio_nodes=("2",), procs=procs, **kw)


@pytest.mark.parametrize("held", [False, True], ids=["free", "persistenced"])
def test_under_dra_the_reboot_records_what_rebindability_needs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: bool) -> None:
    prof = dra(LAB)
    before = _host(tmp_path / "before", "old", {1: ("systemd", {})},
                   files={IDS: "options vfio-pci ids=1234:11e8\n"})
    pre = before.collect(host_query(load_layers(), prof))
    procs = {1: ("systemd", {}), **({812: ("nvidia-persiste", {3: "/dev/nvidia0"})}
                                    if held else {})}
    # after the reboot: accel0 came back on vfio-pci (its ids line), gpu0 on e1000
    node = _Node(_host(tmp_path / "after", "new", procs))
    monkeypatch.setattr(collect, "NodeTarget", _Node)
    ctx = SimpleNamespace(target=node, options={"reboot_timeout_s": 30}, host=lambda: pre,
                          profile=prof)
    ev = collect.gather(ctx)  # type: ignore[arg-type]
    assert ev.status == "done" and ev.settled == "running"
    assert any("is-system-running --wait" in s for s in node.scripts)
    assert ev.use_after is not None and ev.use_after.complete
    assert ev.prebound == {"0000:00:04.0": (f"modprobe: {IDS}: options vfio-pci ids=1234:11e8",),
                           "0000:01:01.0": ()}
    v = CHECKS.get("reboot.rebindable").judge(ev, prof, "node-dra")
    assert v.status is Status.FAIL
    assert "0000:00:04.0 (vfio-pci -> vfio-pci): pre-bound by modprobe" in v.reason
    assert ("pid 812 (nvidia-persiste)" in v.reason) is held
    # the record replays to the same verdict
    again = RebootEvidence.from_dict(json.loads(json.dumps(ev.to_dict())))
    assert again == ev
    assert CHECKS.get("reboot.rebindable").judge(again, prof, "n").reason == v.reason


def test_under_boot_the_reboot_records_nothing_new(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    before = _host(tmp_path / "before", "old", {1: ("systemd", {})})
    pre = before.collect(host_query(load_layers(), LAB))
    node = _Node(_host(tmp_path / "after", "new", {1: ("systemd", {})}))
    monkeypatch.setattr(collect, "NodeTarget", _Node)
    ctx = SimpleNamespace(target=node, options={"reboot_timeout_s": 30}, host=lambda: pre,
                          profile=LAB)
    ev = collect.gather(ctx)  # type: ignore[arg-type]
    assert ev.status == "done" and ev.use_after is None and ev.prebound is None
    assert not any("is-system-running" in s for s in node.scripts)
