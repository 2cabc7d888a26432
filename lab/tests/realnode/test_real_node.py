"""The real node of the cluster lab ("kind-plus-VM"): a kubelet built from the lab's own
Kubernetes module, in the QEMU node image, joined to the lab's real control plane beside
the kwok nodes. Each test proves one thing that is real now, against the running lab."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException
from kubernetes.stream import stream

from kgc import kube
from kgc.core.engine import Context
from kgc.core.layer import Layer, Scope
from kgc.core.model import Registry, passed
from kgc.core.profile import load_profile, profiles_dir
from kgc.kube.origin import NodeOrigin, stand_ins
from kgc_lab.cluster import incluster, realnode
from kgc_lab.cluster.manifests import KWOK_ANNOTATION
from kgc_lab.node.kube_image import BUSYBOX_IMAGE, REPORT_MOUNT
from realnode.conftest import RealLab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

POD_TIMEOUT_S = 420  # pod create -> Running on a TCG node, on a loaded 2-core host


def _raw(lab: RealLab, obj: Any) -> dict[str, Any]:
    return dict(lab.kube.api.sanitize_for_serialization(obj))


def _busybox_pod(name: str, script: str, labels: dict[str, str]) -> dict[str, Any]:
    return kube.builders.pod(
        name, [kube.builders.container("bb", BUSYBOX_IMAGE, command=["/bin/sh", "-c", script],
                                       image_pull_policy="IfNotPresent")],
        labels=labels, runtime_class="runc", termination_grace_period_s=1,
        **realnode.placement())


# --------------------------------------------------------------------------- the node


def test_the_node_registered_itself_with_a_real_kubelet_and_kwok_leaves_it_alone(
        real_lab: RealLab) -> None:
    k = real_lab.kube
    node = _raw(real_lab, k.core.read_node(real_lab.node_name))
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == k.server_version()  # same Kubernetes module
    assert info["containerRuntimeVersion"].startswith("containerd://2.")
    assert info["osImage"] == "Debian GNU/Linux 12 (bookworm)"
    assert KWOK_ANNOTATION not in (node["metadata"].get("annotations") or {})
    assert {"type": "InternalIP", "address": "127.0.0.1"} in node["status"]["addresses"]
    port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
    assert port == real_lab.node["kubelet_port"]
    assert node["metadata"]["labels"][realnode.REAL_NODE_LABEL] == "true"
    assert node["spec"]["taints"] == [realnode.REAL_NODE_TAINT]
    # kwok keeps simulating the GPU nodes beside it
    kwok = [n for n in _raw(real_lab, k.core.list_node())["items"]
            if KWOK_ANNOTATION in (n["metadata"].get("annotations") or {})]
    assert len(kwok) == real_lab.cluster.lab.gpu_nodes + real_lab.cluster.lab.cpu_nodes
    assert all(n["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok") for n in kwok)
    # the engine's notion of a stand-in, on the live Node objects
    assert not NodeOrigin.of(real_lab.node_name, node).stand_in
    assert all(NodeOrigin.of(n["metadata"]["name"], n).stand_in for n in kwok)
    # cgroup v2, no swap, the kubelet really is the one running in the guest
    out = real_lab.ssh("stat -fc %T /sys/fs/cgroup; cat /proc/swaps | wc -l; "
                       "systemctl is-active kubelet containerd; "
                       "/usr/local/bin/kubelet --version")
    assert out.split() == ["cgroup2fs", "1", "active", "active", "Kubernetes",
                           info["kubeletVersion"]], out


def test_the_node_can_only_touch_its_own_node_object(real_lab: RealLab,
                                                     tmp_path: Path) -> None:
    """Node authorization: the kubelet's credentials (system:node:<name> in system:nodes)."""
    creds = real_lab.run_dir / "pki" / f"node-{real_lab.node_name}"
    ca = (real_lab.run_dir / "pki" / "ca.crt").read_bytes()

    def b64(p: Path | bytes) -> str:
        return base64.b64encode(p if isinstance(p, bytes) else p.read_bytes()).decode()

    cfg = tmp_path / "node.kubeconfig"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "node",
        "clusters": [{"name": "lab", "cluster": {"server": real_lab.state["server"],
                                                 "certificate-authority-data": b64(ca)}}],
        "users": [{"name": "node", "user": {
            "client-certificate-data": b64(creds / "kubelet-client.crt"),
            "client-key-data": b64(creds / "kubelet-client.key")}}],
        "contexts": [{"name": "node", "context": {"cluster": "lab", "user": "node"}}]}))
    as_node = kube.connect(cfg)
    try:
        own = as_node.core.read_node(real_lab.node_name)
        assert own.metadata.name == real_lab.node_name
        as_node.core.patch_node(real_lab.node_name,
                                {"metadata": {"annotations": {"kgc.io/selftest": "1"}}})
        for forbidden in (
            lambda: as_node.core.patch_node(
                "kgc-gpu-0", {"metadata": {"annotations": {"kgc.io/selftest": "1"}}}),
            lambda: as_node.core.list_namespaced_secret("kube-system"),
            lambda: as_node.core.delete_node("kgc-gpu-0"),
        ):
            with pytest.raises(ApiException) as exc:
                forbidden()
            assert exc.value.status == 403, exc.value
    finally:
        as_node.close()


# --------------------------------------------------------------------------- a real pod


@dataclass
class WatchedPod:
    run: kube.Run
    pod: Any
    probe: Any  # kgc.nri.probe.NriProbe, connected before the pod was created
    create_to_running_s: float


@pytest.fixture(scope="module")
def watched_pod(real_lab: RealLab, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[WatchedPod]:
    """One runc busybox pod on the real node, created through the API while kgc's NRI
    probe is registered with the node's containerd (its NRI socket forwarded to this host
    over SSH). One pod start serves the pod test and the NRI test: each costs minutes
    under TCG."""
    from kgc.nri.probe import NriProbe

    sock = tmp_path_factory.mktemp("nri") / "nri.sock"
    ssh = realnode.guest_ssh(real_lab.node)
    fwd = subprocess.Popen([*ssh[:-1], "-N", "-o", "ExitOnForwardFailure=yes",
                            "-L", f"{sock}:/var/run/nri/nri.sock", ssh[-1]])
    k = real_lab.kube
    try:
        kube.wait_for("the NRI socket forward", sock.exists, 60, 0.2)
        with NriProbe(str(sock), name=f"kgc-selftest-{uuid.uuid4().hex[:6]}") as probe, \
                kube.Run.for_profile(k, real_lab.cluster) as run:
            probe.connect(timeout_s=60)
            # the nonce exists only inside the container: logs and exec must both carry it
            run.create(_busybox_pod(
                "busybox", "cat /proc/sys/kernel/random/uuid > /tmp/nonce; "
                "echo nonce=$(cat /tmp/nonce); exec sleep 3600", run.labels))
            t0 = time.monotonic()
            pod = kube.wait_for_pod(k, run.namespace, "busybox", kube.pod_ready(),
                                    POD_TIMEOUT_S)
            took = time.monotonic() - t0
            print(f"pod create -> Running on the TCG node: {took:.1f} s")
            yield WatchedPod(run, pod, probe, took)
    finally:
        fwd.terminate()
        fwd.wait(10)


def test_a_runc_pod_runs_busybox_and_its_logs_and_exec_come_from_the_container(
        real_lab: RealLab, watched_pod: WatchedPod) -> None:
    k, pod, ns = real_lab.kube, watched_pod.pod, watched_pod.run.namespace
    assert pod.spec.node_name == real_lab.node_name
    assert pod.spec.runtime_class_name == "runc"
    cid = pod.status.container_statuses[0].container_id
    assert cid.startswith("containerd://"), cid
    logs = k.core.read_namespaced_pod_log("busybox", ns, container="bb")
    assert logs.startswith("nonce=") and len(logs.strip()) == len("nonce=") + 36, logs
    nonce = logs.strip().split("=", 1)[1]
    got = stream(k.core.connect_get_namespaced_pod_exec, "busybox", ns, container="bb",
                 command=["cat", "/tmp/nonce"], stderr=True, stdin=False, stdout=True,
                 tty=False, _request_timeout=120)
    assert got.strip() == nonce
    # the container is the node's: its containerd knows it
    ids = real_lab.ssh("ctr -n k8s.io containers ls -q")
    assert cid.removeprefix("containerd://") in ids.split()


def test_the_nri_probe_observes_a_pod_the_kubelet_created(real_lab: RealLab,
                                                           watched_pod: WatchedPod) -> None:
    """kgc's NRI probe, registered with the node's containerd, sees the sandbox and
    container the kubelet created for an API pod — identified by the pod UID the kubelet
    put on the sandbox — and their end when the pod is deleted."""
    probe, pod, ns = watched_pod.probe, watched_pod.pod, watched_pod.run.namespace
    assert probe.handshake.synchronized and probe.handshake.runtime_name == "containerd"
    uid = pod.metadata.uid

    def seen(kinds: set[str]) -> Any:
        got = {e.event for e in probe.events
               if e.pod_labels.get("io.kubernetes.pod.uid") == uid}
        return got >= kinds or kube.NotYet(sorted(got))

    kube.wait_for("NRI events of the kubelet's pod", lambda: seen(
        {"RUN_POD_SANDBOX", "CREATE_CONTAINER", "START_CONTAINER"}), 120, 0.5)
    real_lab.kube.core.delete_namespaced_pod("busybox", ns, grace_period_seconds=0)
    kube.wait_for("NRI stop events of the kubelet's pod", lambda: seen(
        {"STOP_CONTAINER", "STOP_POD_SANDBOX"}), POD_TIMEOUT_S, 1)
    mine = [e for e in probe.events if e.pod_labels.get("io.kubernetes.pod.uid") == uid]
    assert {(e.pod_name, e.pod_namespace) for e in mine} == {("busybox", ns)}
    assert {e.container_name for e in mine if e.container_name} == {"bb"}
    assert not any(e.adjusted for e in probe.events)  # read-only: no token was given


# --------------------------------------------------------------------------- node layers


def _ssh_host_run(real_lab: RealLab, out: Path) -> dict[str, Any]:
    node = real_lab.node
    ssh_config = out / "ssh_config"
    ssh_config.write_text(Path(node["ssh_config"]).read_text().replace(
        "ControlPath /tmp/kgc-ssh-%C", "ControlPath none"))
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "host", "-p", "no:cacheprovider", "-q",
         "--profile", str(profiles_dir() / "lab.yaml"), "--hosts",
         f"ssh://root@kgc-{node['vm']}", "--ssh-config", str(ssh_config),
         "--report-dir", str(out / "reports")],
        cwd=out, capture_output=True, text=True, timeout=900, check=False)
    path = out / "reports" / "verdict.json"
    assert path.exists(), res.stdout[-3000:] + res.stderr[-3000:]
    return dict(json.loads(path.read_text()))


def test_the_node_layers_run_in_cluster_and_agree_with_the_ssh_run(
        real_lab: RealLab, tmp_path: Path) -> None:
    """A DaemonSet runs ``pytest -m host`` in a pod on the real node (the node's root
    mounted read-only, recursively; kgc mounted read-only from the node's /opt/kgc); its
    verdicts equal those of the same suite run over SSH against the same VM."""
    k = real_lab.kube
    # the pod mounts the node's root (hostPath): Pod Security baseline, every run
    # namespace's default, refuses it; the lab's admin asks for privileged here
    with kube.Run.for_profile(k, real_lab.cluster, pod_security={
            "pod-security.kubernetes.io/enforce": "privileged"}) as run:
        ds = incluster.host_run_daemonset(
            "kgc-host", pytest_args=("--profile", "lab", "-q"),
            labels=run.labels, **realnode.placement())
        run.create(ds)
        via_ssh = _ssh_host_run(real_lab, tmp_path)  # meanwhile: the node runs the pod

        def finished() -> Any:
            pods = k.core.list_namespaced_pod(
                run.namespace, label_selector=f"{incluster.APP_LABEL}=kgc-host").items
            if not pods or not pods[0].status.container_statuses or \
                    not pods[0].status.container_statuses[0].state.running:
                return kube.NotYet(f"pod not running: {[p.status.phase for p in pods]}")
            log = k.core.read_namespaced_pod_log(pods[0].metadata.name, run.namespace)
            parsed = incluster.parse_host_run(log)
            return (pods[0], parsed) if parsed.done else kube.NotYet(log[-300:])

        pod, in_cluster = kube.wait_for("the in-cluster host run to print its verdicts",
                                        finished, 900, 5)
    assert pod.spec.node_name == real_lab.node_name
    assert in_cluster.verdict is not None, in_cluster.verdict_error
    # read-only, but for the pod's own report/scratch emptyDir mounted over the node's path
    assert in_cluster.mounts and in_cluster.writable_host_mounts(
        "/host", (f"/host{REPORT_MOUNT}",)) == [], in_cluster.mounts
    assert {"/host", "/host/proc", "/host/sys", "/host/run"} <= set(in_cluster.mounts)
    ssh_name = f"kgc-{real_lab.node['vm']}"
    pod_v = incluster.verdict_map(in_cluster.verdict)
    ssh_v = {c: (s, r.replace(ssh_name, real_lab.node_name))
             for c, (s, r) in incluster.verdict_map(via_ssh).items()}
    assert pod_v and pod_v == ssh_v, {c: (pod_v.get(c), ssh_v.get(c))
                                      for c in set(pod_v) | set(ssh_v)
                                      if pod_v.get(c) != ssh_v.get(c)}
    assert {r["target"] for r in in_cluster.verdict["results"]} == {real_lab.node_name}
    assert in_cluster.exit_code == (0 if in_cluster.verdict["overall"] == "pass" else 1)
    assert pod_v["iommu.enabled"][0] == "pass"  # the node's own kernel, read in the pod


# --------------------------------------------------------------------------- GPU layer


def _real_node_gpu_profile(path: Path) -> Path:
    """The lab profile, with the gpu layer aimed at the real node: runc (the node has no
    Kata), the lab's busybox image (no registry), the stand-in GPU the test advertises."""
    doc = yaml.safe_load((profiles_dir() / "lab.yaml").read_text())
    doc["name"] = "lab-real-node-gpu"
    doc["platform"] = {**doc["platform"], "kata": {"runtime_class": "runc"},
                       "gpu": {"resources": ["nvidia.com/gpu"]}}  # no device plugin judged
    # (keda, not run here, would compare its runc baseline against runc: nothing to compare)
    doc["cluster"]["keda"]["baseline_runtime_class"] = None
    doc["cluster"]["gpu"].update({
        "require_overhead": False, "image": BUSYBOX_IMAGE,
        "count": 1, "pods_per_node": 1, "max_nodes": 1,
        "cpu": "100m", "memory": "64Mi", "node_selector": {realnode.REAL_NODE_LABEL: "true"},
        "schedule_timeout_s": 300, "start_timeout_s": POD_TIMEOUT_S,
        "collector_timeout_s": 120})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_gpu_layer_on_a_runc_pod_of_the_real_node_fails_isolation_truly(
        real_lab: RealLab, tmp_path: Path) -> None:
    """Real negative evidence: the gpu layer's pod runs under runc on the real node, its
    collector reads the node's own kernel — ``gpu.in-vm`` fails for the true reason, and
    the verdict is not marked simulated (its pod ran on a real kubelet)."""
    k, node = real_lab.kube, real_lab.node_name
    kernel = k.core.read_node(node).status.node_info.kernel_version
    # one stand-in GPU to schedule against (accounting only: the node has no GPU), and the
    # real-node taint lifted while the layer runs (its pods tolerate the GPU taints only)
    k.core.patch_node_status(node, {"status": {"capacity": {"nvidia.com/gpu": "1"}}})
    k.core.patch_node(node, {"spec": {"taints": None}})
    try:
        kube.wait_for("the stand-in GPU to be allocatable", lambda: (
            k.core.read_node(node).status.allocatable or {}).get("nvidia.com/gpu") == "1",
            120, 1)
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "gpu",
             "--kubeconfig", str(real_lab.kubeconfig), "--profile",
             str(_real_node_gpu_profile(tmp_path / "profile.yaml"))],
            cwd=tmp_path, capture_output=True, text=True, timeout=1500, check=False)
    finally:
        k.core.patch_node(node, {"spec": {"taints": [realnode.REAL_NODE_TAINT]}})
        realnode.drop_stand_in_gpu(k, node)
    doc = json.loads((tmp_path / "reports" / "verdict.json").read_text())
    by = {r["check"]: r for r in doc["results"]}
    assert "gpu.in-vm" in by, res.stdout[-3000:]
    v = by["gpu.in-vm"]
    assert v["status"] == "fail", v
    assert f"the pod's kernel {kernel} is the node's own kernel" in v["reason"], v["reason"]
    assert v["simulated"] is False, v  # every pod it rests on ran on the real kubelet
    assert by["gpu.pod-runs"]["status"] == "pass" and not by["gpu.pod-runs"]["simulated"]
    assert res.returncode == 1  # not certified: a GPU pod outside a VM


# --------------------------------------------------------------------------- simulated marks


def test_verdicts_from_the_real_node_are_not_marked_simulated_kwok_ones_are(
        real_lab: RealLab) -> None:
    """The engine's per-node rule on live Node objects: evidence resting on the real node
    is real; evidence resting on a kwok node stays marked."""
    k = real_lab.kube
    nodes = {n["metadata"]["name"]: n for n in _raw(real_lab, k.core.list_node())["items"]}

    class Ev:
        def __init__(self, pod_nodes: dict[str, str]) -> None:
            self.origins = {p: NodeOrigin.of(n, nodes.get(n)) for p, n in pod_nodes.items()}

        def stand_ins(self) -> list[str] | None:
            return stand_ins(self.origins.items())

    reg = Registry()
    reg.check("demo.pods", title="demo", remediation="-")(lambda ev, prof: passed("ran"))

    def judge(ev: Ev) -> Any:
        lay = Layer("demo", Scope.CLUSTER, "demo", reg, gather=lambda ctx: ev,
                    record=lambda e: {}, replay=lambda d: ev)

        class T:
            name, scope, origin = "lab", Scope.CLUSTER, "live"

        return Context(T(), load_profile("lab"), {"demo": lay}).judge("demo.pods")  # type: ignore[arg-type]

    real = judge(Ev({"p0": real_lab.node_name}))
    mixed = judge(Ev({"p0": real_lab.node_name, "p1": "kgc-gpu-0"}))
    assert not real.simulated, real
    assert mixed.simulated and "pod p1 on kgc-gpu-0: kwok node" in mixed.simulated_why
