"""A node file over the collector's limit is an error naming it, never a judgement on part of
it (issue 21: 300 KiB of comments before `options vfio-pci ids=` turned
persistence.over-capture from WARN into PASS, because the collector kept the first 256 KiB
and said nothing)."""

from __future__ import annotations

from pathlib import Path

from fakehost import FakeHost, lab_devices

from kgc.core.engine import Context
from kgc.core.hostfs import MAX_FILE_BYTES, HostQuery, HostSnapshot
from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.core.target import NodeTarget

PROFILE = load_profile(Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml")
CAPTURING = ("options vfio-pci ids=1234:11e8,8086:100e,8086:10d3\n"
             "softdep e1000 pre: vfio-pci\nsoftdep e1000e pre: vfio-pci\n")


class FakeTarget(NodeTarget):
    """The engine's view of a FakeHost: the real collector over its tree."""

    def __init__(self, host: FakeHost) -> None:
        super().__init__("local://", root=str(host.root))
        self.fake = host

    def collect(self, query: HostQuery) -> HostSnapshot:
        self.round_trips += 1
        return self.fake.collect(query)


def _host(tmp_path: Path, modprobe: str) -> FakeHost:
    devs = lab_devices(accel0="vfio-pci", gpu0="vfio-pci", gpu0_fn1="vfio-pci",
                       host_nic="vfio-pci")
    return FakeHost(tmp_path, devs, vfio_nodes=("2", "3", "4"),
                    files={"/etc/modprobe.d/vfio.conf": modprobe,
                           "/etc/modules-load.d/vfio.conf": "vfio-pci\n"})


def _comments(n_bytes: int) -> str:
    line = "# " + "x" * 97 + "\n"
    return line * (n_bytes // len(line))


def test_300_kib_of_comments_before_the_ids_line_is_an_error_naming_the_file(
        tmp_path: Path) -> None:
    text = _comments(300 * 1024) + CAPTURING
    assert len(text) > MAX_FILE_BYTES
    ctx = Context(target=FakeTarget(_host(tmp_path, text)), profile=PROFILE)
    v = ctx.judge("persistence.over-capture")
    assert v.status is Status.ERROR, (v.status, v.reason)
    assert "/etc/modprobe.d/vfio.conf" in v.reason and str(len(text)) in v.reason
    assert "/etc/modprobe.d/vfio.conf" in (v.remediation or "")
    # every persistence check rests on the same modprobe evidence: none is judged from part
    for chk in ctx.layers["persistence"].checks:
        assert ctx.judge(chk.id).status is Status.ERROR, chk.id


def test_the_same_file_under_the_limit_is_still_judged(tmp_path: Path) -> None:
    text = _comments(200 * 1024) + CAPTURING
    assert len(text) < MAX_FILE_BYTES
    ctx = Context(target=FakeTarget(_host(tmp_path, text)), profile=PROFILE)
    v = ctx.judge("persistence.over-capture")
    assert v.status is Status.WARN, v.reason
    assert "8086:10d3" in v.reason
