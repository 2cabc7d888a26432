"""``chroot:///host?live=1&node=NAME``: a running node's root in a pod is live (not an
offline tree), named after the node, never rebooted from the pod; without ``live=1`` a
chroot stays an offline tree. The collector really runs under chroot of an absolute path
(testinfra's URL parser alone would lose it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgc.core.hostfs import HostQuery
from kgc.core.target import NodeTarget


def test_a_live_root_is_named_after_the_node_and_not_offline() -> None:
    t = NodeTarget("chroot:///host?node=gpu-a&live=1")
    assert t.name == "gpu-a" and not t.offline_tree and not t.sockets_reachable
    assert "from a pod" in (t.reboot_refusal() or "")
    off = NodeTarget("chroot:///host?node=gpu-a")
    assert off.name == "gpu-a" and off.offline_tree
    assert NodeTarget("chroot:///mnt/image").name == "chroot:/mnt/image"


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_the_collector_runs_under_chroot_of_an_absolute_path(tmp_path: Path) -> None:
    from kgc_lab.node.lab import base_root

    root = base_root()
    if not (root / ".kgc-base-done").exists():
        pytest.fail(f"the node lab's base tree is not built ({root})")
    t = NodeTarget(f"chroot://{root}?node=n1")
    snap = t.collect(HostQuery(files=("/etc/debian_version",)))
    assert snap.text("/etc/debian_version").startswith("12")
