"""runtime.* verdicts that must not be wrong (issue 9): the Kata shim is judged by what the
file really is, the Kata handler by what the containerd binary really loads (recorded
``config dump`` output of the REAL containerd 1.7.24 and 2.1.9 in tests/nri/data), an
offline tree's containerd version comes from its package database or the profile, and the
remedies fit the evidence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgc.core.hostfs import CommandResult, HostSnapshot, StatResult
from kgc.core.model import Status
from kgc.core.target import NodeTarget
from kgc.evidence.containerd import containerd_warnings
from kgc.layers.runtime import parse, query_for
from kgc.layers.runtime.checks import CHECKS
from systree import kata_handler_profile

DATA = Path(__file__).parent / "data"
PROFILE = kata_handler_profile()  # the configs below name the handler `kata`
SHIM = "containerd-shim-kata-v2"


def judge(snap: HostSnapshot, profile=PROFILE):  # type: ignore[no-untyped-def]
    ev = parse(snap, profile)
    return {c.id: c.judge(ev, profile, "t") for c in CHECKS}


def collect(root: Path, profile=PROFILE) -> HostSnapshot:  # type: ignore[no-untyped-def]
    return NodeTarget("local://", root=str(root)).collect(query_for(profile.runtime))


def write(root: Path, rel: str, text: str, mode: int = 0o644) -> Path:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    p.chmod(mode)
    return p


# -- runtime.kata-shim: what the file is, not only that a name exists ---------------------
def test_zero_byte_non_executable_shim_fails(tmp_path: Path) -> None:
    write(tmp_path, f"/usr/local/bin/{SHIM}", "", 0o644)
    v = judge(collect(tmp_path))["runtime.kata-shim"]
    assert v.status is Status.FAIL, v.reason
    assert "empty" in v.reason and "not executable" in v.reason
    assert f"/usr/local/bin/{SHIM}" in v.reason


def test_dangling_shim_link_fails(tmp_path: Path) -> None:
    (tmp_path / "usr/local/bin").mkdir(parents=True)
    os.symlink(f"/opt/kata/bin/{SHIM}", tmp_path / f"usr/local/bin/{SHIM}")
    v = judge(collect(tmp_path))["runtime.kata-shim"]
    assert v.status is Status.FAIL, v.reason
    assert "dangling" in v.reason and f"/opt/kata/bin/{SHIM}" in v.reason, v.reason


def test_link_into_the_tree_to_an_executable_shim_passes(tmp_path: Path) -> None:
    write(tmp_path, f"/opt/kata/bin/{SHIM}", "\x7fELF...", 0o755)
    (tmp_path / "usr/local/bin").mkdir(parents=True)
    os.symlink(f"/opt/kata/bin/{SHIM}", tmp_path / f"usr/local/bin/{SHIM}")
    v = judge(collect(tmp_path))["runtime.kata-shim"]
    assert v.status is Status.PASS, v.reason


def test_executable_shim_passes_and_a_non_executable_one_fails(tmp_path: Path) -> None:
    p = write(tmp_path, f"/usr/bin/{SHIM}", "\x7fELF...", 0o755)
    assert judge(collect(tmp_path))["runtime.kata-shim"].status is Status.PASS
    p.chmod(0o644)
    v = judge(collect(tmp_path))["runtime.kata-shim"]
    assert v.status is Status.FAIL and "not executable" in v.reason, v.reason


def test_bundle_stat_without_link_details_is_not_a_pass() -> None:
    """An old-format stat of a link (no target recorded) proves nothing about the shim."""
    snap = HostSnapshot(stats={f"/usr/local/bin/{SHIM}": StatResult(
        "symbolic link", "777", "root", "root", 28)})
    assert judge(snap)["runtime.kata-shim"].status is not Status.PASS


# -- runtime.kata-handler: judged against what the binary loads ---------------------------
def _live(config: str, dump: str, version: str) -> HostSnapshot:
    return HostSnapshot(
        files={"/etc/containerd/config.toml": config},
        commands={"containerd_config_dump": CommandResult(0, dump),
                  "containerd_version": CommandResult(0, version)})


def test_v2_config_on_containerd_2_with_the_handler_in_the_v2_section_passes() -> None:
    """Real containerd 2.1.9 migrates the version-2 file and loads the handler (its dump,
    recorded in tests/nri/data, has it under io.containerd.cri.v1.runtime)."""
    snap = _live((DATA / "v2-kata.toml").read_text(),
                 (DATA / "containerd-2.1.9-v2-kata.dump").read_text(),
                 (DATA / "containerd-2.1.9.version").read_text())
    v = judge(snap)
    h = v["runtime.kata-handler"]
    assert h.status is Status.PASS, h.reason
    assert "io.containerd.cri.v1.runtime" in h.reason
    # containerd's own warning about the tutorial key is kept as evidence
    ign = v["runtime.nri-ignored-keys"]
    assert ign.status is Status.WARN
    assert any("enable_nri" in w for w in ign.evidence["containerd_says"]), ign.evidence


def test_v2_kata_only_config_on_containerd_1_7_breaks_cri() -> None:
    """Issue 18.1: this file lists only the Kata handler; on the real containerd 1.7.24 its
    runtimes table replaces the default runc entry and the CRI plugin refuses to load
    (fixtures/containerd/1.7.24/kata-only: `ctr plugins ls -d` of that binary). The dump
    still shows the handler, so the handler check used to PASS."""
    snap = _live((DATA / "v2-kata.toml").read_text(),
                 (DATA / "containerd-1.7.24-v2-kata.dump").read_text(),
                 (DATA / "containerd-1.7.24.version").read_text())
    v = judge(snap)
    h = v["runtime.kata-handler"]
    assert h.status is Status.FAIL, h.reason
    assert 'default_runtime_name = "runc"' in h.reason
    assert "runtimes.runc]" in h.remediation and "io.containerd.runc.v2" in h.remediation
    assert v["runtime.config"].status is Status.FAIL


def test_misplaced_handler_on_containerd_2_cites_containerds_own_warning() -> None:
    snap = _live((DATA / "v3-misplaced-kata.toml").read_text(),
                 (DATA / "containerd-2.1.9-v3-misplaced-kata.dump").read_text(),
                 (DATA / "containerd-2.1.9.version").read_text())
    h = judge(snap)["runtime.kata-handler"]
    assert h.status is Status.FAIL, h.reason
    assert "io.containerd.grpc.v1.cri" in h.reason
    assert "Ignoring unknown key" in h.reason and "containerd runtimes kata" in h.reason
    assert "io.containerd.cri.v1.runtime" in h.remediation


def test_containerd_warnings_are_parsed() -> None:
    text = (DATA / "containerd-2.1.9-v3-misplaced-kata.dump").read_text()
    ws = containerd_warnings(text)
    assert [w.key for w in ws] == ["containerd", "containerd runtimes", "containerd runtimes kata"]
    assert all(w.plugin == "io.containerd.grpc.v1.cri" and w.level == "warning" for w in ws)


@pytest.mark.parametrize(("version", "section", "status"), [
    ("containerd x 2.1.9", 'io.containerd.grpc.v1.cri', Status.PASS),     # migrated
    ("containerd x 2.1.9", 'io.containerd.cri.v1.runtime', Status.PASS),  # 2.x reads v3 names
    # 1.7: the kata-only runtimes table replaces runc, so CRI does not load (issue 18.1)
    ("containerd x 1.7.24", 'io.containerd.grpc.v1.cri', Status.FAIL),
    ("containerd x 1.7.24", 'io.containerd.cri.v1.runtime', Status.FAIL),  # 1.7: no such plugin
])
def test_file_only_placement_follows_the_binary_version(version: str, section: str,
                                                        status: Status) -> None:
    """No dump (it failed): the v2 file is judged by what that containerd version loads,
    as the real binaries do (tests/nri/test_runtime_lab_placement.py)."""
    cfg = (f'version = 2\n[plugins."{section}".containerd.runtimes.kata]\n'
           '  runtime_type = "io.containerd.kata.v2"\n')
    snap = HostSnapshot(files={"/etc/containerd/config.toml": cfg},
                        commands={"containerd_config_dump": CommandResult(1, "boom"),
                                  "containerd_version": CommandResult(0, version)})
    h = judge(snap)["runtime.kata-handler"]
    assert h.status is status, h.reason


# -- offline trees: the version the image will run ----------------------------------------
DPKG_STATUS = """Package: adduser
Status: install ok installed
Version: 3.134

Package: containerd
Status: install ok installed
Priority: optional
Version: 1.7.24~ds1-6+deb13u1
Description: daemon to control runC

Package: zlib1g
Status: install ok installed
Version: 1:1.3.dfsg-3.1
"""


def test_offline_tree_without_a_running_containerd_is_judged_not_failed(tmp_path: Path) -> None:
    write(tmp_path, "/etc/containerd/config.toml", "version = 2\n")
    v = judge(collect(tmp_path))
    sock = v["runtime.nri-socket"]
    assert sock.status is not Status.FAIL, sock.reason
    assert "does not exist" not in sock.reason


def test_offline_version_from_the_package_database_decides_nri_default(tmp_path: Path) -> None:
    write(tmp_path, "/etc/containerd/config.toml", "version = 2\n")
    write(tmp_path, "/var/lib/dpkg/status", DPKG_STATUS)
    v = judge(collect(tmp_path))
    ver = v["runtime.containerd-version"]
    assert ver.status is Status.PASS, ver.reason
    assert "1.7.24" in ver.reason and "dpkg" in ver.reason
    nri = v["runtime.nri-enabled"]
    assert nri.status is Status.FAIL and "1.7 is disable = true" in nri.reason, nri.reason
    assert v["runtime.nri-socket"].status is not Status.PASS


def test_offline_version_from_the_profile(tmp_path: Path) -> None:
    write(tmp_path, "/etc/containerd/config.toml", "version = 2\n")
    prof = PROFILE.model_copy(update={"runtime": PROFILE.runtime.model_copy(
        update={"containerd_version": "2.1"})})
    v = judge(collect(tmp_path, prof), prof)
    assert v["runtime.containerd-version"].status is Status.PASS
    assert "runtime.containerd_version" in v["runtime.containerd-version"].reason
    nri = v["runtime.nri-enabled"]
    assert nri.status is Status.PASS and "2.1 is disable = false" in nri.reason, nri.reason
    sock = v["runtime.nri-socket"]
    assert sock.status is Status.SKIP and "offline" in sock.reason, sock.reason


# -- remedies that fit the evidence ------------------------------------------------------
def test_socket_missing_with_nri_on_says_containerd_is_not_running() -> None:
    cfg = '[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n'
    snap = HostSnapshot(files={"/etc/containerd/config.toml": "version = 2\n" + cfg},
                        commands={"containerd_version": CommandResult(0, "containerd x 1.7.24")})
    sock = judge(snap)["runtime.nri-socket"]
    assert sock.status is Status.FAIL
    assert "containerd is not running" in sock.reason
    assert "/run/containerd/containerd.sock" in sock.reason
    assert "Enable NRI" not in sock.remediation and "disable = false" not in sock.remediation
    assert "start containerd" in sock.remediation.lower()


# -- the world-writable bit of runtime.nri-socket (a surviving mutant in issue 9) ---------
@pytest.mark.parametrize(("mode", "owner", "status"), [
    ("600", "root", Status.PASS), ("660", "root", Status.PASS), ("640", "root", Status.PASS),
    ("604", "root", Status.PASS), ("605", "root", Status.PASS), ("755", "root", Status.PASS),
    ("602", "root", Status.FAIL), ("606", "root", Status.FAIL), ("777", "root", Status.FAIL),
    ("1666", "root", Status.FAIL), ("600", "nobody", Status.FAIL), ("6x0", "root", Status.FAIL),
])
def test_nri_socket_mode_and_owner(mode: str, owner: str, status: Status) -> None:
    cfg = ('version = 2\n[plugins."io.containerd.nri.v1.nri"]\n  disable = false\n')
    snap = HostSnapshot(
        files={"/etc/containerd/config.toml": cfg},
        stats={"/var/run/nri/nri.sock": StatResult("socket", mode, owner, "root", 0)},
        commands={"containerd_version": CommandResult(0, "containerd x 1.7.24")})
    v = judge(snap)["runtime.nri-socket"]
    assert v.status is status, (mode, owner, v.reason)
    if status is Status.FAIL:
        assert f"mode {mode}" in v.reason and owner in v.reason
