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
