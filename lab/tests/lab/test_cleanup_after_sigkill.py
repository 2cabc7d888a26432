"""`kgc lab cleanup` after a SIGKILLed run of each lab: the run never reached its
teardown, so everything it started is still there — then cleanup leaves no process, port,
VM, mount or socket, sweeps the NRI probe pod it left in containerd, and forgets the lab.

Each lab runs through the one lab entry (``python -m kgc_lab.cli``) with a private record
directory (``private_cache``), so cleanup here never touches another session's labs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from kgc.kube import NotYet, wait_for
from kgc_lab import procs
from kgc_lab.ledger import LabRecord, records
from lab.conftest import lab_env

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def lab_cli(cache: Path, *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "kgc_lab.cli", *args], text=True,
                            env=lab_env(cache), **kw)


def cleanup_cli(cache: Path) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-m", "kgc_lab.cli", "cleanup", "--json",
                          "--grace", "5"], capture_output=True, text=True,
                         env=lab_env(cache), timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    return dict(json.loads(out.stdout))


def the_record(lab: str) -> LabRecord:
    recs, bad = records(lab)
    assert not bad and len(recs) == 1, (recs, bad)
    return recs[0]


def sigkill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def identities(rec: LabRecord) -> dict[int, int | None]:
    return {int(p["pid"]): p.get("start") for p in rec.processes}


def nothing_left(ids: dict[int, int | None]) -> None:
    assert [p for p, s in ids.items() if procs.is_same(p, s)] == []
    assert procs.group_members(set(ids)) == []


# --------------------------------------------------------------------------- cluster


def test_cluster_lab_killed_mid_up(private_cache: Path, tmp_path: Path) -> None:
    from kgc_lab import cluster as labc

    if labc.binaries().missing(keda=False):
        pytest.fail("cluster lab binaries not built — run scripts/bootstrap.d/30-cluster.sh")
    run_dir = tmp_path / "run"
    up = lab_cli(private_cache, "cluster", "up", "--no-keda", "--run-dir", str(run_dir),
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def started_kwok() -> Any:
        recs = records("cluster")[0]
        names = [p["name"] for r in recs for p in r.processes]
        return "kwok" in names or NotYet(names)

    try:
        wait_for("the cluster lab to start kwok", started_kwok, 120, 0.2)
    finally:
        sigkill(up)  # mid-up: no `down`, no teardown
    rec = the_record("cluster")
    ids = identities(rec)
    state = json.loads((run_dir / "state.json").read_text())
    ports = {k: v for k, v in state["ports"].items() if isinstance(v, int)}
    assert len(ids) >= 5 and all(procs.is_same(p, s) for p, s in ids.items())
    assert ports["apiserver"] in procs.listening_ports()

    rep = cleanup_cli(private_cache)

    nothing_left(ids)
    after = procs.listening_ports()
    assert [k for k, p in ports.items() if p in after and procs.port_owned_by(p, ids)] == []
    assert ports["apiserver"] not in after and ports["etcd"] not in after
    assert rec.id in rep["forgotten"] and records("cluster") == ([], [])
    assert {"etcd", "kube-apiserver", "kwok"} <= {s.split(": ")[1].split(" (")[0]
                                                 for s in rep["stopped"] if ": " in s}


def test_cluster_lab_with_a_real_node_killed_after_the_node_joined(private_cache: Path,
                                                                   tmp_path: Path) -> None:
    """`kgc lab cluster up --with-node` killed once the node's kubelet has registered
    through the VM's forwards: cleanup stops the control plane, powers the VM off, ends the
    relay processes QEMU runs per guest connection and frees every port."""
    from kgc_lab import cluster as labc
    from kgc_lab.node.kube_image import containerd_deb, dra_plugin_binary, kubelet_binary

    missing = [str(p) for p in labc.binaries().missing(keda=False)]
    try:
        kubelet_binary(), dra_plugin_binary(), containerd_deb()
    except labc.LabError as exc:
        missing.append(str(exc))
    if missing or shutil.which("qemu-system-x86_64") is None or os.geteuid() != 0:
        pytest.fail("the real node needs root, QEMU, the cluster binaries and the kubelet: "
                    f"{'; '.join(missing) or 'QEMU or root missing'} — run scripts/bootstrap.sh")
    run_dir = tmp_path / "run"
    up = lab_cli(private_cache, "cluster", "up", "--no-keda", "--with-node", "--run-dir",
                 str(run_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def registered() -> Any:
        # `up` may also finish on its own right after the join (a loaded host can miss the
        # window): the lab is then up with nobody to take it down — what a SIGKILL leaves
        exited = up.poll()
        if exited is not None and exited != 0:
            raise AssertionError(f"`kgc lab cluster up --with-node` failed ({exited})")
        try:
            state = json.loads((run_dir / "state.json").read_text())
        except (OSError, ValueError):
            state = None
        nodes = [n for n in (state or {}).get("nodes") or [] if n.get("ssh_port")]
        if not nodes:
            if exited is not None:
                raise AssertionError("`kgc lab cluster up --with-node` exited 0 without a "
                                     f"booted node ({(state or {}).get('phase')})")
            return NotYet(f"node VM not booted ({(state or {}).get('phase')})")
        from kgc import kube

        k = kube.connect(run_dir / "kubeconfig")
        try:
            names = [n.metadata.name for n in k.core.list_node().items]
        finally:
            k.close()
        return (state, nodes[0]) if nodes[0]["name"] in names else NotYet(names)

    try:
        state, node = wait_for("the real node's kubelet to register", registered, 1500, 3)
    except BaseException:
        # the lab never reached the state under test: still leave nothing behind
        sigkill(up)
        cleanup_cli(private_cache)
        raise
    finally:
        sigkill(up)  # no `down`, no teardown
    # facts first, judged after the cleanup: a failed assertion must not leave a VM behind
    try:
        recs = records("cluster")[0] + records("node")[0]
        ids = {p: s for r in recs for p, s in identities(r).items()}
        all_alive = all(procs.is_same(p, s) for p, s in ids.items())
        qemu = int(node["qemu_pid"])
        qemu_was_running = procs.is_same(qemu, procs.proc_start(qemu), "qemu-system-x86_64")
        state = json.loads((run_dir / "state.json").read_text())
        # QEMU starts a relay per guest connection in a session of its own (reparented to
        # init): only the lab's copy of relay.py in its run directory ties them to this lab
        relays = {p: procs.proc_start(p) for p in procs.referencing(state["relay_dir"],
                                                                      ["python*"])}
        ports = {k: v for k, v in state["ports"].items() if isinstance(v, int)}
        listening_before = set(procs.listening_ports())
    finally:
        rep = cleanup_cli(private_cache)

    assert sorted(r.lab for r in recs) == ["cluster", "node"], recs
    assert all_alive and qemu_was_running
    assert relays, "the kubelet's connections to the API server run through relay processes"
    assert {ports["apiserver"], ports[f"kubelet-{node['name']}"],
            ports[f"ssh-{node['name']}"]} <= listening_before
    nothing_left(ids)
    assert not procs.pid_alive(qemu)
    assert [p for p, s in relays.items() if procs.is_same(p, s)] == []
    after = procs.listening_ports()
    assert [k for k, p in ports.items() if p in after] == [], ports
    assert procs.referencing(node["vm_dir"], ["qemu-system-x86_64"]) == []
    assert not Path(node["vm_dir"]).exists()  # the VM's disk overlay went with it
    assert {r.id for r in recs} <= set(rep["forgotten"])
    assert records("cluster") == ([], []) and records("node") == ([], [])


# --------------------------------------------------------------------------- containerd


def test_containerd_lab_killed_with_a_probe_pod_running(private_cache: Path,
                                                        tmp_path: Path) -> None:
    from kgc.cri.client import CriClient, CriError, ProbePod
    from kgc.nri.probe import PROBE_LABEL
    from kgc_lab.containerd_instance import HELPER_EXES, LabUnavailable, bin_dir, require_lab
    from kgc_lab.images import PAUSE_IMAGE, PROBE_IMAGE

    try:
        require_lab()
        bin_dir("2")
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc}")
    up = lab_cli(private_cache, "containerd", "up", "--scenario", "containerd2-default",
                 "--profile-out", str(tmp_path / "profile.yaml"), stdout=subprocess.PIPE,
                 stderr=subprocess.STDOUT)
    try:
        assert up.stdout is not None
        line = ""
        for line in up.stdout:
            if " up: " in line:
                break
        assert " up: " in line, f"containerd lab did not come up: {line}"
        address = line.split(" up: ", 1)[1].split(" ", 1)[0]
        lab_dir = Path(address).parent
        # An NRI probe pod, as a probe killed mid-run leaves it: sandbox + container.
        with CriClient(address) as c:
            pod = ProbePod(c, PAUSE_IMAGE, PROBE_IMAGE, tmp_path / "podlogs",
                           labels={PROBE_LABEL: f"selftest-{uuid.uuid4().hex[:6]}"})
            # the CRI plugin learns of `ctr import`ed images asynchronously
            wait_for("the CRI plugin to see the imported sandbox image", pod.run_sandbox, 30,
                     0.5, retry_on=(CriError,))
            pod.create_container()
            pod.start_container()
    finally:
        sigkill(up)
    rec = the_record("containerd")
    ids = identities(rec)
    shims = procs.referencing(str(lab_dir), HELPER_EXES)
    containers = procs.descendants(shims)
    helpers = {p: procs.proc_start(p) for p in [*shims, *containers]}
    sockets = procs.unix_listeners([*ids, *shims])
    mounts = procs.mounts_under(str(lab_dir))
    assert all(procs.is_same(p, s) for p, s in ids.items()), "containerd died with its parent"
    assert shims and containers and mounts, (shims, containers, mounts)
    assert address in sockets and any(s.startswith("/run/containerd/s/") for s in sockets), \
        sockets

    rep = cleanup_cli(private_cache)

    assert any(pod.pod_id[:12] in s and "NRI probe pod" in s for s in rep["swept"]), rep
    nothing_left(ids)
    assert [p for p, s in helpers.items() if procs.is_same(p, s)] == []
    assert procs.mounts_under(str(lab_dir)) == []
    assert [s for s in sockets if os.path.lexists(s)] == []
    assert not lab_dir.exists()
    assert rec.id in rep["forgotten"] and records("containerd") == ([], [])


# --------------------------------------------------------------------------- node VM


def test_node_lab_killed_while_its_vm_boots(private_cache: Path) -> None:
    from kgc_lab.node.lab import build_variant, run_dir
    from kgc_lab.node.scenarios import VARIANTS

    missing = [t for t in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4")
               if shutil.which(t) is None]
    if missing or os.geteuid() != 0:
        pytest.fail(f"the node lab needs root and {', '.join(missing) or 'its tools'}: run "
                    "scripts/bootstrap.d/10-node-lab.sh as root")
    build_variant(VARIANTS["base"])  # cached; minutes only on an empty cache
    name = f"cleanup-{os.getpid()}"
    start = lab_cli(private_cache, "node", "start", name, "--variant", "base",
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    vm_dir = run_dir() / name

    def qemu_recorded() -> Any:
        recs = [r for r in records("node")[0] if r.data.get("name") == name]
        return any(p["name"] == "qemu" for r in recs for p in r.processes) or NotYet(recs)

    try:
        wait_for(f"QEMU of {name} to start", qemu_recorded, 120, 0.2)
    finally:
        sigkill(start)  # while it waits for SSH
    rec = the_record("node")
    ids = identities(rec)
    port = int(rec.data["info"]["port"])
    monitor = vm_dir / "monitor.sock"
    assert all(procs.is_same(p, s) for p, s in ids.items())
    assert port in procs.listening_ports() and monitor.exists()

    rep = cleanup_cli(private_cache)

    nothing_left(ids)
    assert port not in procs.listening_ports()
    assert not monitor.exists()
    assert procs.referencing(str(vm_dir), ["qemu-system-x86_64"]) == []
    assert rec.id in rep["forgotten"] and records("node") == ([], [])
    shutil.rmtree(vm_dir, ignore_errors=True)


def test_node_lab_killed_with_its_vm_up_and_an_ssh_master(private_cache: Path) -> None:
    """A run killed while its VM is up and an SSH ControlMaster (what testinfra's ssh
    backend keeps, ControlPersist) holds a connection and a control socket."""
    from kgc_lab.node.lab import run_dir

    if shutil.which("qemu-system-x86_64") is None or os.geteuid() != 0:
        pytest.fail("the node lab needs root and QEMU: run scripts/bootstrap.d/10-node-lab.sh")
    name = f"cleanup-ssh-{os.getpid()}"
    script = f"""
import subprocess, time
from kgc_lab.node.lab import NodeVM, build_variant
from kgc_lab.node.scenarios import VARIANTS
vm = NodeVM({name!r}, build_variant(VARIANTS["base"]))
vm.start()
subprocess.run(["ssh", "-F", str(vm.ssh_config), "-o", "ControlMaster=auto",
                "-o", "ControlPersist=300", "kgc-" + vm.name, "true"], check=True)
print(vm.port, flush=True)
time.sleep(900)
"""
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                           env=lab_env(private_cache))
    try:
        assert run.stdout is not None
        port = int(run.stdout.readline().strip() or 0)
        assert port, "the VM did not come up"
        masters = [p for p in procs.clients_of_port(port) if procs.exe_name(p) == "ssh"]
        control = [s for s in procs.unix_listeners(masters) if "/kgc-ssh-" in s]
    finally:
        sigkill(run)
    rec = the_record("node")
    ids = identities(rec)
    assert masters and control, (masters, control)
    starts = {p: procs.proc_start(p) for p in masters}

    rep = cleanup_cli(private_cache)

    nothing_left(ids)
    assert [p for p, s in starts.items() if procs.is_same(p, s)] == []
    assert [s for s in control if os.path.lexists(s)] == []
    assert port not in procs.listening_ports()
    assert any("ssh client" in s for s in rep["stopped"]), rep
    assert rec.id in rep["forgotten"] and records("node") == ([], [])
    shutil.rmtree(run_dir() / name, ignore_errors=True)
