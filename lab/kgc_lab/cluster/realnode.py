"""A real node in the cluster lab ("kind-plus-VM"): the ``kube`` node image
(:mod:`kgc_lab.node.kube_image`) booted in QEMU, its kubelet joined to the lab's control
plane.

Network — QEMU user-mode networking with ``restrict=on``: the guest reaches nothing but the
forwards below, and every one of them ends on the host's loopback (no tap device, no bridge,
nothing leaves the machine):

* the kubelet -> API server: the guest dials ``10.0.2.100:6443``; a ``guestfwd`` rule runs
  :mod:`kgc_lab.node.relay` per connection, which connects to the API server on
  ``127.0.0.1`` (TLS end to end: the relay sees only ciphertext);
* the API server -> kubelet (logs, exec, port-forward): a ``hostfwd`` from
  ``127.0.0.1:P`` to the guest's ``P``; the kubelet listens on ``P`` and the Node reports
  ``InternalIP 127.0.0.1`` — the lab plays the external cloud provider
  (``--cloud-provider=external``): it sets the node's addresses and lifts the
  ``node.cloudprovider.kubernetes.io/uninitialized`` taint, as a cloud-controller-manager
  does;
* SSH for the lab itself (the node lab's pinned host key).

Identity — the lab PKI signs the kubelet a client certificate ``system:node:<name>`` in
``system:nodes`` (the API server authorizes it with the Node authorizer and
NodeRestriction: its own Node, its own pods) and a serving certificate; the kubelet
authenticates the API server's kubelet client certificate against the lab CA and asks the
API server (webhook) whether it may.

DRA — once the node is Ready the lab starts the node's DRA kubelet plugin (driver
``dra.kgc.io``, stand-in devices, CDI) and creates its DeviceClass
(:mod:`kgc_lab.cluster.realnode_dra`).

Placement — the node is labelled ``kgc.io/real-node=true`` and tainted
``kgc.io/real-node=true:NoSchedule``: only pods that ask for the real node land there, so
the simulated layers keep their kwok nodes. kwok manages only nodes annotated
``kwok.x-k8s.io/node=fake``; this node has no such annotation.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc_lab import procs
from kgc_lab.cluster import pki as cluster_pki
from kgc_lab.cluster import realnode_dra
from kgc_lab.common import LabError, free_port
from kgc_lab.ledger import LabRecord

REAL_NODE_LABEL = "kgc.io/real-node"
REAL_NODE_TAINT = {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"}
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"
DEFAULT_NODE = "kgc-node-0"
NODE_MEMORY_MIB = 2048
# One vCPU, as every node-lab VM: a 2-vCPU TCG guest on a starved host was seen to hang in
# early boot (RCU stalls, a blocked kworker, no progress for 10 minutes).
NODE_VCPUS = 1
GUEST_IP = "10.0.2.15"  # QEMU user networking's guest address (the node lab's udev rule)
RELAY = Path(__file__).resolve().parent.parent / "node" / "relay.py"
RELAY_EXES = ("python*",)


def placement() -> dict[str, Any]:
    """What a pod needs to run on the real node: ``nodeSelector`` + ``tolerations``
    (keyword arguments of :func:`kgc.kube.builders.pod`)."""
    return {"node_selector": {REAL_NODE_LABEL: "true"},
            "tolerations": [{"key": REAL_NODE_LABEL, "operator": "Equal", "value": "true",
                             "effect": "NoSchedule"}]}


def vm_name(run_dir: Path, node: str) -> str:
    """The node VM's name in the node lab: one per lab run directory and node."""
    return f"k-{hashlib.sha256(f'{run_dir.resolve()}:{node}'.encode()).hexdigest()[:10]}"


# --------------------------------------------------------------------------- configuration


def kubelet_config(port: int) -> dict[str, Any]:
    from kgc_lab.node.kube_image import CONTAINERD_SOCK

    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "0.0.0.0",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "tlsCertFile": "/etc/kubernetes/pki/kubelet.crt",
        "tlsPrivateKeyFile": "/etc/kubernetes/pki/kubelet.key",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
        },
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "systemd",
        "failCgroupV1": True,
        "failSwapOn": True,
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCK}",
        "clusterDomain": "cluster.local",
        "resolvConf": "",
        "registerNode": True,
        "registerWithTaints": [REAL_NODE_TAINT],
        "maxPods": 32,
        # a TCG guest is slow: generous CRI deadline; images are never collected (no
        # registry to pull them back from)
        "runtimeRequestTimeout": "15m",
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "makeIPTablesUtilChains": False,
        "shutdownGracePeriod": "0s",
        "serializeImagePulls": False,
    }


def kubelet_kubeconfig(node: str) -> dict[str, Any]:
    from kgc_lab.node.kube_image import API_GUEST_ADDR, API_GUEST_PORT

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kgc-lab", "cluster": {
            "server": f"https://{API_GUEST_ADDR}:{API_GUEST_PORT}",
            "certificate-authority": "/etc/kubernetes/pki/ca.crt",
            # the API server's certificate names its loopback address, not the forward's
            "tls-server-name": "localhost",
        }}],
        "users": [{"name": f"system:node:{node}", "user": {
            "client-certificate": "/etc/kubernetes/pki/kubelet-client.crt",
            "client-key": "/etc/kubernetes/pki/kubelet-client.key",
        }}],
        "contexts": [{"name": "kgc-lab", "context": {"cluster": "kgc-lab",
                                                     "user": f"system:node:{node}"}}],
        "current-context": "kgc-lab",
    }


def node_labels() -> dict[str, str]:
    from kgc_lab.cluster.manifests import GPU_NODE_LABEL

    return {REAL_NODE_LABEL: "true", GPU_NODE_LABEL: "false", "type": "qemu-tcg"}


def kubelet_args(node: str) -> list[str]:
    labels = ",".join(f"{k}={v}" for k, v in sorted(node_labels().items()))
    return ["--config=/etc/kubernetes/kubelet.yaml",
            "--kubeconfig=/etc/kubernetes/kubelet.kubeconfig",
            f"--hostname-override={node}", "--cloud-provider=external",
            f"--node-labels={labels}", "--v=1",
            # cAdvisor's per-container housekeeping is most of an idle kubelet's CPU; under
            # TCG every emulated cycle counts (the default is 10 s)
            "--housekeeping-interval=60s"]


def node_files(pki: cluster_pki.Pki, creds: Path, node: str, port: int) -> dict[str, bytes]:
    """Everything the lab writes into the guest before it starts the kubelet."""
    return {
        "etc/kubernetes/pki/ca.crt": pki.ca.cert.read_bytes(),
        "etc/kubernetes/pki/kubelet-client.crt": (creds / "kubelet-client.crt").read_bytes(),
        "etc/kubernetes/pki/kubelet-client.key": (creds / "kubelet-client.key").read_bytes(),
        "etc/kubernetes/pki/kubelet.crt": (creds / "kubelet.crt").read_bytes(),
        "etc/kubernetes/pki/kubelet.key": (creds / "kubelet.key").read_bytes(),
        "etc/kubernetes/kubelet.kubeconfig":
            yaml.safe_dump(kubelet_kubeconfig(node), sort_keys=False).encode(),
        "etc/kubernetes/kubelet.yaml": yaml.safe_dump(kubelet_config(port),
                                                      sort_keys=False).encode(),
        "etc/kubernetes/kubelet.env":
            (f"KUBELET_ARGS={shlex.quote(' '.join(kubelet_args(node)))}\n"
             # fewer garbage collections: the node has memory to spare, not CPU
             "GOGC=400\n").encode(),
        # the DRA kubelet plugin's arguments (kgc_lab.cluster.realnode_dra)
        "etc/kubernetes/kgc-dra.env": realnode_dra.plugin_env(node),
        "etc/hostname": f"{node}\n".encode(),
    }


def issue_credentials(pki: cluster_pki.Pki, node: str) -> Path:
    """The node's client certificate (Node authorization) and serving certificate."""
    creds = pki.directory / f"node-{node}"
    cluster_pki.issue(pki, creds, "kubelet-client", f"system:node:{node}", "system:nodes",
                      client=True)
    cluster_pki.issue(pki, creds, "kubelet", node, server=True,
                      dns=(node, "localhost"), ips=("127.0.0.1", GUEST_IP))
    return creds


def _tar(files: Mapping[str, bytes], secret: tuple[str, ...] = (".key",)) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mode = 0o600 if name.endswith(secret) else 0o644
            ti.mtime = int(time.time())
            tar.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


# --------------------------------------------------------------------------- kgc on the node


def _checkout() -> Path | None:
    import kgc

    root = Path(kgc.__file__).resolve().parents[2]
    return root if (root / "setup.py").is_file() and (root / "conformance").is_dir() else None


def _can_build_wheels() -> bool:
    import importlib.util

    return importlib.util.find_spec("wheel") is not None


def kgc_payload(dest: Path) -> Path:
    """kgc as the node gets it, unpacked into ``dest`` (site-packages layout, byte-compiled):
    the wheel built from this checkout, or — outside a checkout — the installed files."""
    import importlib.metadata as md

    from kgc_lab.node.kube_image import DIST

    dest.mkdir(parents=True, exist_ok=True)
    root = _checkout()
    if root is not None:
        with tempfile.TemporaryDirectory(prefix="kgc-wheel-") as wd:
            # without build isolation when this environment can build wheels (no index
            # needed); else pip fetches the build backend as usual
            tries = [["--no-build-isolation"], []] if _can_build_wheels() else [[]]
            for isolation in tries:
                res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                                      *isolation, "-w", wd, str(root)],
                                     capture_output=True, text=True, timeout=600, check=False)
                if res.returncode == 0:
                    break
            wheels = list(Path(wd).glob("kata_gpu_conformance-*.whl"))
            if res.returncode != 0 or not wheels:
                raise LabError(f"building kgc's wheel failed: {res.stderr.strip()[-2000:]}")
            with zipfile.ZipFile(wheels[0]) as z:
                z.extractall(dest)
    else:
        d = md.distribution(DIST)
        for f in d.files or []:
            src = Path(str(d.locate_file(f)))
            if ".." not in f.parts and src.is_file():
                (dest / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest / f)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(dest)], check=False,
                   capture_output=True)
    return dest


def kgc_tarball() -> bytes:
    """kgc's payload as a gzipped tar (what :func:`install_kgc` sends)."""
    with tempfile.TemporaryDirectory(prefix="kgc-payload-") as td:
        payload = kgc_payload(Path(td) / "site")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
            tar.add(payload, arcname=".")
    return buf.getvalue()


def install_kgc(vm: Any, tarball: bytes | None = None,
                say: Callable[[str], None] = lambda _m: None) -> float:
    """Put this kgc into the node's ``/opt/kgc`` venv (its dependencies are in the image).
    Returns the seconds it took."""
    from kgc_lab.node.kube_image import SITE

    t0 = time.monotonic()
    res = subprocess.run([*vm.ssh_base(), f"tar -xz -C {SITE} --no-same-owner"],
                         input=tarball if tarball is not None else kgc_tarball(),
                         capture_output=True, timeout=300, check=False)
    if res.returncode != 0:
        raise LabError(f"installing kgc on the node failed: "
                       f"{res.stderr.decode(errors='replace')[-1000:]}")
    say(f"kgc installed on the node ({time.monotonic() - t0:.1f} s)")
    return time.monotonic() - t0


# --------------------------------------------------------------------------- joining


def _node_registered(api: kube.Kube, node: str) -> Any:
    try:
        return api.call("get", "nodes", api.core.read_node, node)
    except ApiException as exc:
        if exc.status == 404:
            return kube.NotYet(f"node {node} not registered yet")
        raise


def _node_ready(api: kube.Kube, node: str) -> Any:
    n: Any = api.call("get", "nodes", api.core.read_node, node)
    conds = {c.type: (c.status, c.reason) for c in (n.status.conditions or [])}
    if conds.get("Ready", ("", ""))[0] != "True":
        return kube.NotYet(f"node {node} not Ready: {conds}")
    extra = [t.key for t in (n.spec.taints or []) if t.key != REAL_NODE_LABEL]
    if extra:
        return kube.NotYet(f"node {node} still tainted: {extra}")
    return n


STAND_IN_GPU = "nvidia.com/gpu"


def drop_stand_in_gpu(api: kube.Kube, node: str, timeout_s: float = 120) -> None:
    """Take back a stand-in GPU a test patched into the node's capacity, and wait until the
    API no longer shows it. Capacity alone is not enough at once: the kubelet drops an
    extended resource from ``allocatable`` only on its next status sync (when it is no
    longer in capacity), and a later test judging the node (DRA's "advertised both ways")
    would see the stale allocatable."""
    api.core.patch_node_status(node, {"status": {
        "capacity": {STAND_IN_GPU: None}, "allocatable": {STAND_IN_GPU: None}}})

    def gone() -> Any:
        st: Any = api.core.read_node(node).status
        left = [k for k, m in (("capacity", st.capacity), ("allocatable", st.allocatable))
                if STAND_IN_GPU in (m or {})]
        return kube.NotYet(f"{node} still lists {STAND_IN_GPU} in {left}") if left else True

    kube.wait_for(f"{STAND_IN_GPU} to leave {node}", gone, timeout_s, 1)


def initialize_node(api: kube.Kube, node: str) -> None:
    """The lab as external cloud provider: the node's addresses (the API server reaches the
    kubelet on loopback, through the VM's port forward) and the uninitialized taint off."""
    api.core.patch_node_status(node, {"status": {"addresses": [
        {"type": "InternalIP", "address": "127.0.0.1"},
        {"type": "Hostname", "address": node},
    ]}})
    n: Any = api.core.read_node(node)
    taints = [t for t in (n.spec.taints or []) if t.key != UNINITIALIZED_TAINT]
    if len(taints) != len(n.spec.taints or []):
        api.core.patch_node(node, {"spec": {"taints": [
            {k: v for k, v in (("key", t.key), ("value", t.value), ("effect", t.effect))
             if v is not None} for t in taints]}})


def join(run_dir: Path, state: dict[str, Any], *, node: str = DEFAULT_NODE,
         record: LabRecord | None = None, save: Callable[[], None] = lambda: None,
         say: Callable[[str], None] = lambda _m: None, timeout_s: float = 900.0,
         with_kgc: bool = True) -> dict[str, Any]:
    """Boot the kube node image and join its kubelet to the lab whose ``state`` (a running
    lab's state.json content) is given. Adds the VM to ``state`` (processes, ports,
    ``nodes``) as soon as it exists, so ``down`` and ``kgc lab cleanup`` stop it whatever
    happens next. Returns the node's entry."""
    from kgc_lab.node.kube_image import kube_variant
    from kgc_lab.node.lab import Hardware, NodeVM, build_variant

    t0 = time.monotonic()
    timings: dict[str, float] = {}
    variant = kube_variant()
    img = build_variant(variant)
    timings["image_s"] = round(time.monotonic() - t0, 2)
    pki = cluster_pki.Pki(run_dir / "pki")
    creds = issue_credentials(pki, node)
    api_port = int(state["ports"]["apiserver"])
    # QEMU runs the relay per guest connection in a session of its own, reparented to init:
    # the lab's own copy of it names the lab's run directory, which is how `down` and
    # `kgc lab cleanup` find the relays of this lab (and no other lab's)
    relays = run_dir / "relay"
    relays.mkdir(parents=True, exist_ok=True)
    shutil.copy2(RELAY, relays / RELAY.name)
    state["relay_dir"] = str(relays)
    if record is not None:
        record.add_owned(relays, list(RELAY_EXES))
    relay_cmd = f"{sys.executable} -I {relays / RELAY.name} {api_port}"
    if "," in relay_cmd:
        raise LabError(f"the relay command may not contain a comma (QEMU's option syntax): "
                       f"{relay_cmd}")
    from kgc_lab.node.kube_image import API_GUEST_ADDR, API_GUEST_PORT

    name = vm_name(run_dir, node)
    # kgc's wheel is built while the VM boots
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    payload = pool.submit(kgc_tarball) if with_kgc else None
    pool.shutdown(wait=False)
    vm: NodeVM | None = None
    for _attempt in (1, 2, 3):
        port = free_port()
        vm = NodeVM(name, img, Hardware(memory_mib=NODE_MEMORY_MIB, vcpus=NODE_VCPUS),
                    boot_timeout_s=min(600.0, timeout_s), restrict=True,
                    ssh_probe_timeout_s=90.0, probe_after_console_report=True, forwards=(
                        f"hostfwd=tcp:127.0.0.1:{port}-:{port}",
                        f"guestfwd=tcp:{API_GUEST_ADDR}:{API_GUEST_PORT}-cmd:{relay_cmd}"))
        entry: dict[str, Any] = {"name": node, "vm": name, "kubelet_port": port,
                                 "variant": img.disk.parent.name}
        state.setdefault("nodes", []).append(entry)
        state.setdefault("ports", {})[f"kubelet-{node}"] = port
        save()
        try:
            t1 = time.monotonic()
            say(f"booting node {node} (VM {name}, image {img.disk.parent.name})")
            timings["boot_to_ssh_s"] = round(vm.start(), 2)
            break
        except LabError as exc:
            _forget_vm(vm, state, entry, save)
            if "could not bind a loopback port" in str(exc) or "hostfwd" in str(exc):
                continue
            raise
    else:
        raise LabError(f"QEMU could not bind loopback ports for node {node}")
    assert vm is not None
    qemu = vm.pid()
    entry.update(ssh_port=vm.port, ssh_config=str(vm.ssh_config), spec=vm.spec,
                 vm_dir=str(vm.dir), qemu_pid=qemu)
    state["ports"][f"ssh-{node}"] = vm.port
    if qemu is not None:
        state.setdefault("processes", []).append({
            "name": f"node-vm {node}", "pid": qemu, "start": procs.proc_start(qemu),
            "exe": "qemu-system-x86_64", "log": str(vm.console_log), "group": True})
        if record is not None:
            record.add_process(f"node-vm {node}", qemu, exe="qemu-system-x86_64",
                               group=True, log=str(vm.console_log))
            record.add_owned(vm.dir, ["qemu-system-x86_64"])
            record.add_ssh_port(vm.port)
            record.add_path(vm.dir)
    save()
    say(f"node {node} answers SSH after {timings['boot_to_ssh_s']} s")
    if payload is not None:
        timings["install_kgc_s"] = round(install_kgc(vm, payload.result(timeout=600), say), 2)
    t2 = time.monotonic()
    res = subprocess.run(
        [*vm.ssh_base(), "tar -x -C / --no-same-owner && hostname -F /etc/hostname && "
         "systemctl start kubelet"],
        input=_tar(node_files(pki, creds, node, port)), capture_output=True, timeout=300,
        check=False)
    if res.returncode != 0:
        raise LabError(f"starting the kubelet on {node} failed: "
                       f"{res.stderr.decode(errors='replace')[-2000:]}")
    api = kube.connect(state["kubeconfig"])
    try:
        kube.wait_for(f"node {node} to register (its kubelet, through the guest forward)",
                      lambda: _node_registered(api, node), max(60.0, timeout_s / 2), 1.0)
        timings["kubelet_start_to_registered_s"] = round(time.monotonic() - t2, 2)
        initialize_node(api, node)
        kube.wait_for(f"node {node} Ready", lambda: _node_ready(api, node),
                      max(60.0, timeout_s / 2), 1.0)
        timings["kubelet_start_to_ready_s"] = round(time.monotonic() - t2, 2)
        # DRA: the DeviceClass, the node's kubelet plugin and its ResourceSlice
        t3 = time.monotonic()
        realnode_dra.start(api, vm.ssh_base(), node)
        timings["dra_plugin_to_slice_s"] = round(time.monotonic() - t3, 2)
        say(f"DRA plugin {realnode_dra.DRIVER} published {node}'s ResourceSlice "
            f"({timings['dra_plugin_to_slice_s']} s)")
    except kube.WaitTimeout as exc:
        raise LabError(f"{exc}\nkubelet journal:\n{kubelet_journal(vm)}") from None
    finally:
        api.close()
    timings["boot_to_ready_s"] = round(time.monotonic() - t1, 2)
    timings["join_s"] = round(time.monotonic() - t0, 2)
    entry["timings"] = timings
    save()
    say(f"node {node} Ready ({json.dumps(timings)})")
    return entry


def kubelet_journal(vm: Any, lines: int = 40) -> str:
    try:
        res = vm.ssh(f"journalctl -u kubelet -u containerd --no-pager -n {lines} -o cat",
                     timeout=60, check=False)
    except (subprocess.TimeoutExpired, LabError) as exc:
        return f"(journal unreadable: {exc})"
    return str(res.stdout)[-6000:]


def _forget_vm(vm: Any, state: dict[str, Any], entry: dict[str, Any],
               save: Callable[[], None]) -> None:
    vm.stop()
    if not vm.alive():
        shutil.rmtree(vm.dir, ignore_errors=True)
    if entry in state.get("nodes", []):
        state["nodes"].remove(entry)
    save()


def leave(entry: Mapping[str, Any]) -> bool:
    """Power the node's VM off (QEMU monitor ``quit``, then SIGTERM) and remove its run
    directory (its disk overlay is never booted again). True when it is gone."""
    from kgc_lab.node.lab import NodeVM

    name = entry.get("vm")
    if not isinstance(name, str):
        return True
    try:
        vm = NodeVM.load(name)
    except LabError:
        return True
    vm.stop()
    if vm.alive():
        return False
    shutil.rmtree(vm.dir, ignore_errors=True)
    return True


def stop_relays(state: Mapping[str, Any], grace_s: float = 3.0) -> list[int]:
    """Stop what is left of the lab's relay processes (they end on their own once QEMU and
    the API server are gone); returns the pids that survived."""
    d = state.get("relay_dir")
    if not isinstance(d, str):
        return []
    left = []
    for pid in procs.referencing(d, RELAY_EXES):
        if not procs.stop(pid, procs.proc_start(pid), grace_s=grace_s):
            left.append(pid)
    return left


def guest_ssh(entry: Mapping[str, Any]) -> list[str]:
    """An ssh command line (without the remote command) for the node of ``entry``."""
    return ["ssh", "-F", str(entry["ssh_config"]), "-o", "ControlPath=none",
            f"kgc-{entry['vm']}"]


__all__ = ["DEFAULT_NODE", "REAL_NODE_LABEL", "REAL_NODE_TAINT", "guest_ssh", "initialize_node",
           "install_kgc", "issue_credentials", "join", "kgc_payload", "kgc_tarball",
           "kubelet_config", "kubelet_kubeconfig", "leave", "node_files", "placement",
           "stop_relays", "vm_name"]
