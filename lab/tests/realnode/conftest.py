"""The cluster lab with a real node, once per session: the control plane, KEDA, the kwok nodes
and the ``kube`` node image booted in QEMU with its kubelet joined (``Lab(with_node=True)``,
what ``kgc lab cluster up --with-node`` does). Torn down at the end, also when tests fail;
the teardown must leave no VM, process or port behind."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kgc import kube
from kgc_lab import cluster as labc
from kgc_lab import procs
from kgc_lab.cluster import realnode


@dataclass
class RealLab:
    run_dir: Path
    kubeconfig: Path
    state: dict[str, Any]
    kube: kube.Kube
    cluster: Any
    node: dict[str, Any]  # the real node's entry in the lab state

    @property
    def node_name(self) -> str:
        return str(self.node["name"])

    def ssh(self, script: str, timeout: float = 300) -> str:
        import subprocess

        res = subprocess.run([*realnode.guest_ssh(self.node), script], capture_output=True,
                             text=True, timeout=timeout, check=False)
        assert res.returncode == 0, f"{script}: {res.stderr[-2000:]}"
        return res.stdout


def _require_lab() -> None:
    missing = [str(p) for p in labc.binaries().missing(keda=True)]
    from kgc_lab.node.kube_image import containerd_deb, dra_plugin_binary, kubelet_binary

    for need in (kubelet_binary, dra_plugin_binary, containerd_deb):
        try:
            need()
        except labc.LabError as exc:
            missing.append(str(exc))
    tools = [t for t in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4")
             if shutil.which(t) is None]
    if missing or tools or os.geteuid() != 0:
        pytest.fail("the real node needs root, the node lab's tools "
                    f"({', '.join(tools) or 'present'}) and the cluster lab's binaries "
                    f"({'; '.join(missing) or 'present'}) — run scripts/bootstrap.sh")


@pytest.fixture(scope="session")
def real_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealLab]:
    _require_lab()
    run_dir = tmp_path_factory.mktemp("real-node-lab")
    # with KEDA: the keda layer measures real runc pods on the node (test_realnode_keda)
    lab = labc.Lab(run_dir, keda=True, die_with_parent=True, with_node=True)
    try:
        state = lab.up(say=lambda m: print(f"[real node lab] {m}", flush=True))
    except labc.LabError as exc:
        pytest.fail(f"kgc lab cluster up --with-node failed: {exc}", pytrace=False)
    node = state["nodes"][0]
    qemu = int(node["qemu_pid"])
    ports = [p for p in state["ports"].values() if isinstance(p, int)]
    try:
        yield RealLab(run_dir, Path(state["kubeconfig"]), state,
                      kube.connect(state["kubeconfig"]), lab.cluster, node)
    finally:
        report = labc.down(run_dir)
        assert not report["left"] and not report["listening"], report
        assert not procs.pid_alive(qemu), "the node VM survived `down`"
        assert procs.referencing(state["relay_dir"], realnode.RELAY_EXES) == [], \
            "a relay to the API server survived `down`"
        listening = procs.listening_ports()
        assert [p for p in ports if p in listening] == [], "a lab port still listens"
