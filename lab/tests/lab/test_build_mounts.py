"""The node lab's trees hold no mount when they are copied, imaged or marked built (issue
17: `cp -a` of a base tree with /proc still mounted copied /proc until the disk was full).
The check reads mountinfo through a pure parser; here it is fed a made-up table."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgc_lab import procs
from kgc_lab.common import LabError
from kgc_lab.node import lab as nodelab

TREE = "/kgc-test-cache/node/base-root-0123456789ab"
# mountinfo columns: id parent major:minor root mount-point options ... - fstype source
MOUNTINFO = f"""\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:5 / /proc rw,nosuid shared:12 - proc proc rw
41 22 0:40 / {TREE}/proc rw,relatime - proc proc rw
42 22 0:41 / {TREE}/sys rw,relatime - sysfs sys rw
43 22 0:6 / {TREE}/dev rw,nosuid - devtmpfs udev rw
44 43 0:24 / {TREE}/dev/pts rw,nosuid - devpts devpts rw
45 22 0:42 / {TREE}-other/proc rw - proc proc rw
46 22 0:43 / /tmp/with\\040blank/dir rw - tmpfs none rw
"""


def test_mounts_in_lists_every_mount_under_the_tree_deepest_first() -> None:
    assert procs.mounts_in(MOUNTINFO, TREE) == [
        f"{TREE}/dev/pts", f"{TREE}/dev", f"{TREE}/proc", f"{TREE}/sys"]
    # a sibling whose name starts with the tree's is not under it; a blank is unescaped
    assert procs.mounts_in(MOUNTINFO, TREE + "-other") == [f"{TREE}-other/proc"]
    assert procs.mounts_in(MOUNTINFO, "/tmp/with blank") == ["/tmp/with blank/dir"]
    assert procs.mounts_in(MOUNTINFO, "/nowhere") == []
    assert procs.mounts_in(MOUNTINFO, "") == []


def test_a_tree_with_a_mount_is_an_error_that_names_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procs, "mounts_under", lambda p: procs.mounts_in(MOUNTINFO, p))
    with pytest.raises(LabError) as err:
        nodelab.check_no_mounts(Path(TREE), "copying the base tree")
    msg = str(err.value)
    assert "copying the base tree" in msg and f"{TREE}/proc" in msg and f"{TREE}/dev/pts" in msg
    nodelab.check_no_mounts(Path("/kgc-test-cache/node/variants"), "imaging")  # none: fine


def test_the_variant_copy_never_crosses_a_mount_point() -> None:
    src = Path(nodelab.__file__).read_text()
    cp = next(line for line in src.splitlines() if '_run(["cp", "-a"' in line)
    assert "--one-file-system" in cp, cp


def test_one_builder_at_a_time_across_processes(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """On an empty cache the vm and rest sessions of `make test` build the same base tree
    and variants at once (a clean-clone run: `kgc lab cluster up --with-node` failed while
    the real-node suite built the same image). The build lock makes the second process
    wait for the first, which then finds the image built."""
    import multiprocessing
    import time

    monkeypatch.setattr(nodelab, "cache_root", lambda: tmp_path)
    log = tmp_path / "log"

    def hold(tag: str) -> None:
        with nodelab._build_lock("variant-x"):
            with open(log, "a") as fh:
                fh.write(f"{tag} in {time.monotonic()}\n")
            time.sleep(0.5)
            with open(log, "a") as fh:
                fh.write(f"{tag} out {time.monotonic()}\n")

    ctx = multiprocessing.get_context("fork")
    procs_ = [ctx.Process(target=hold, args=(t,)) for t in ("a", "b")]
    for p in procs_:
        p.start()
    for p in procs_:
        p.join(30)
    assert [p.exitcode for p in procs_] == [0, 0]
    events = [ln.split() for ln in log.read_text().splitlines()]
    # in, out, in, out: never both inside
    assert [e[1] for e in events] == ["in", "out", "in", "out"], events
    assert events[0][0] == events[1][0] and events[2][0] == events[3][0], events
