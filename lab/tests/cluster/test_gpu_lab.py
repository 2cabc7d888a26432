"""The gpu layer on the cluster lab, as a user runs it: as the least-privilege
ServiceAccount of deploy/rbac/kgc-certify.yaml (the lab's real RBAC authorizer and
admission enforce it), against a real control plane whose GPU pods are simulated by kwok
and answered with recorded real guest output.

- the ServiceAccount may do what a run needs and is refused what it does not need;
- every documented GPU scenario yields its documented verdicts (all marked simulated);
- `pytest -m gpu --kubeconfig` from a temp dir, then `kgc snapshot` + `kgc evaluate` of the
  same cluster, agree; `pytest --snapshot` of the bundle gives exactly `kgc evaluate`'s
  verdicts; no secret of the lab (token, keys, kubeconfig content) is in any output;
- a run SIGKILLed mid-way leaves only labelled objects, and `kgc cleanup` removes them all.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes.client.rest import ApiException

from cluster.kubehelp import LabInfo
from kgc import kube
from kgc.layers.gpu.dra import DRA_CHECKS
from kgc.layers.gpu.evidence import API_ONLY_CHECKS
from kgc_lab.cluster import rbac, scenarios_gpu
from kgc_lab.cluster.scenarios_gpu import SCENARIOS, LabHandle
from kgc_lab.scenarios import scenarios

pytestmark = [pytest.mark.lab, pytest.mark.cluster]

RUN_LABEL = "kgc.io/run"


@pytest.fixture(scope="module")
def gpu_lab(lab_cluster: LabInfo) -> LabHandle:
    return scenarios_gpu.handle(lab_cluster.kube, lab_cluster.run_dir, lab_cluster.server)


def sa_kube(lab: LabHandle) -> kube.Kube:
    return kube.connect(lab.sa_kubeconfig)


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.pop("KUBECONFIG", None)
    return e


def kgc(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kgc.cli", *args], cwd=cwd, env=env(),
                          capture_output=True, text=True, timeout=timeout, check=False)


def pytest_run(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           *args], cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=timeout, check=False)


# --------------------------------------------------------------------------- RBAC
def test_the_certify_serviceaccount_is_refused_what_a_run_does_not_need(
        gpu_lab: LabHandle) -> None:
    sa = sa_kube(gpu_lab)
    # RBAC: no secrets
    with pytest.raises(kube.KubeError, match=r"refused list secrets \(403 Forbidden\)"):
        sa.call("list", "secrets", sa.core.list_namespaced_secret, "kube-system")
    # the policy: no namespace outside the runs; RBAC (the run's writes are granted only
    # through the RoleBinding each run makes in its own namespace) or the policy: no pod,
    # Deployment or Service outside a run namespace (dry runs: nothing changes even if a
    # refusal were missing)
    for what, fn in (
        ("delete namespace keda", lambda: sa.core.delete_namespace("keda", dry_run="All")),
        ("create a pod in default", lambda: sa.core.create_namespaced_pod(
            "default", kube.builders.pod("x", [kube.builders.container("c", "i")]),
            dry_run="All")),
        ("create namespace not-a-run", lambda: sa.core.create_namespace(
            {"metadata": {"name": "not-a-run"}}, dry_run="All")),
        ("create a Deployment in default (keda's workload kind)",
         lambda: sa.apps.create_namespaced_deployment("default", {
             "metadata": {"name": "x"}, "spec": {
                 "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}}},
             dry_run="All")),
        ("create a Service in default", lambda: sa.core.create_namespaced_service(
            "default", {"metadata": {"name": "x"}, "spec": {"ports": [{"port": 80}]}},
            dry_run="All")),
    ):
        with pytest.raises(ApiException) as err:
            fn()
        assert err.value.status == 403 or (
            err.value.status == 422 and "kgc-certify-confine" in str(err.value.body)), what
    # and what a run needs is granted (the scenarios below exercise it all)
    assert sa.server_version().startswith("v1.")
    sa.call("list", "nodes", sa.core.list_node)


def test_the_rbac_manifest_grants_no_write_outside_the_run() -> None:
    roles = [d for d in rbac.manifest_docs() if d["kind"] == "ClusterRole"]
    writes = {res for role in roles for r in role["rules"] for res in r["resources"]
              if set(r["verbs"]) & {"create", "delete", "update", "patch"}}
    # keda's workloads, their ScaledObjects and its trigger endpoint (Service, reached through
    # the API server's service proxy) are the only writes beyond the gpu/sizing pods, their
    # DRA claims (the gpu layer's claim mode), and the RoleBinding that grants them inside
    # the run's namespace (kgc-certify-run)
    assert writes == {"namespaces", "pods", "configmaps", "deployments", "scaledobjects",
                      "services", "services/proxy", "rolebindings", "resourceclaims",
                      "resourceclaimtemplates"}, writes
    policy = next(d for d in rbac.manifest_docs() if d["kind"] == "ValidatingAdmissionPolicy")
    confined = {res for rule in policy["spec"]["matchConstraints"]["resourceRules"]
                for res in rule["resources"]}
    # every written kind but the proxy (a CONNECT, not an object) is confined to run namespaces
    assert writes - {"services/proxy"} <= confined, confined
    rules = [r for role in roles for r in role["rules"]]
    assert not any("*" in r["verbs"] or "*" in r["resources"] for r in rules)
    assert not any("secrets" in r["resources"] for r in rules)


# --------------------------------------------------------------------------- scenarios
def test_the_gpu_scenarios_are_registered_with_the_cluster_lab() -> None:
    known = scenarios()
    for sc in SCENARIOS:
        assert known[sc.name].lab == "cluster"
    assert {s.name for s in SCENARIOS} == {"cluster-good", "no-device-plugin",
                                           "runtimeclass-missing", "gpu-not-in-guest",
                                           "image-pull", "dra-good", "dra-no-slices",
                                           "dra-extended-by-name", "dra-kata-coldplug",
                                           "cc-good", "cc-off"}


@pytest.mark.parametrize("name", [s.name for s in SCENARIOS])
def test_gpu_scenario_yields_its_documented_verdicts(gpu_lab: LabHandle, name: str,
                                                     tmp_path: Path) -> None:
    sc = scenarios_gpu.BY_NAME[name]
    out = scenarios_gpu.run_on_lab(sc, gpu_lab, tmp_path)
    doc = json.loads(out.verdict_json.read_text())
    assert out.matches, json.dumps(out.mismatches, indent=1)
    assert doc["run"]["matches_documented"] and doc["run"]["identity"] == rbac.USER
    assert {r["check"] for r in doc["results"]} == set(sc.expected)
    for r in doc["results"]:
        # every pass resting on the lab's stand-ins is marked; the RuntimeClass checks read
        # API objects of the real control plane only
        if r["status"] == "pass" and r["check"] not in API_ONLY_CHECKS:
            assert r["simulated"] and "[simulated:" in r["reason"], r["check"]
        if r["status"] in ("fail", "error"):
            assert r["remediation"], r["check"]
    if name == "image-pull":  # classified within seconds, never a bare timeout
        assert doc["run"]["wall_s"] < 60
        pods = next(r for r in doc["results"] if r["check"] == "gpu.pod-runs")
        assert "could not pull" in pods["reason"] and "timed out" not in pods["reason"]
    if name == "cluster-good":
        # what the lab served and changed is in its own event, recorded with the pods
        # (the product judges from generic evidence and never reads the lab's events)
        text = (tmp_path / f"{name}.bundle.json").read_text()
        assert "GPU UUID varied by the lab" in text
        assert "fixtures/guest/h200-firecracker.raw.txt" in text
    # the scenario's own bundle replays to the same verdicts offline
    ev = kgc("evaluate", str(tmp_path / f"{name}.bundle.json"), "--profile",
             str(tmp_path / f"{name}.profile.yaml"), "--json", cwd=tmp_path)
    replayed = {r["check"]: r["status"] for r in json.loads(ev.stdout)["results"]
                if r["layer"] == "gpu"}
    assert replayed == {r["check"]: r["status"] for r in doc["results"]}


# --------------------------------------------------------------------------- as a user
def _norm(text: str) -> str:
    text = re.sub(r"kgc-[0-9a-f]{10}\b", "kgc-<run>", text)
    return re.sub(r"\b\d+(\.\d+)? s\b", "<n> s", text)


def secrets_of(lab: LabInfo, sa_kubeconfig: Path) -> dict[str, str]:
    """Every credential of the lab a leak would show: the ServiceAccount's token, the
    private keys of the lab's PKI (each PEM body line) and the kubeconfigs' key data."""
    out: dict[str, str] = {}
    token = yaml.safe_load(sa_kubeconfig.read_text())["users"][0]["user"]["token"]
    out["sa token"] = token
    out["sa token (base64)"] = base64.b64encode(token.encode()).decode()[:60]
    out["sa token signature"] = token.rsplit(".", 1)[-1]
    for key in sorted((lab.run_dir / "pki").glob("**/*.key")):
        body = [ln for ln in key.read_text().splitlines() if ln and not ln.startswith("-----")]
        for i, ln in enumerate(body[:3]):
            if len(ln) >= 40:
                out[f"{key.name} line {i}"] = ln
    for kc in (lab.kubeconfig, sa_kubeconfig):
        doc = yaml.safe_load(kc.read_text())
        for u in doc.get("users") or []:
            for k, v in (u.get("user") or {}).items():
                if k in ("client-key-data", "token", "client-certificate-data") and v:
                    out[f"{kc.name} {k}"] = str(v)[:60]
    return out


def assert_no_secret(where: Path, secrets: dict[str, str]) -> None:
    files = [where] if where.is_file() else [p for p in where.rglob("*") if p.is_file()]
    assert files
    for p in files:
        text = p.read_text(errors="replace")
        for name, value in secrets.items():
            assert value not in text, f"{name} leaked into {p}"
        assert "PRIVATE KEY" not in text, p


def test_pytest_as_the_serviceaccount_then_snapshot_and_evaluate_agree_with_no_secret(
        gpu_lab: LabHandle, lab_cluster: LabInfo, tmp_path: Path) -> None:
    sa = str(gpu_lab.sa_kubeconfig)
    live = pytest_run("-m", "gpu", "--kubeconfig", sa, "--profile", "lab", cwd=tmp_path)
    assert live.returncode == 0, live.stdout[-3000:] + live.stderr[-2000:]
    live_doc = json.loads((tmp_path / "reports" / "verdict.json").read_text())
    assert live_doc["overall"] == "pass"
    live_gpu = {r["check"]: r for r in live_doc["results"] if r["layer"] == "gpu"}
    assert len(live_gpu) == 27
    # the lab's profile requests GPUs by device plugin: the DRA preflight skips, naming it
    assert {live_gpu[c]["status"] for c in DRA_CHECKS} == {"skip"}
    # ... and the confidential-GPU checks skip: the lab's profile asks for no CC
    cc = {c for c in live_gpu if c.startswith("gpu.cc-")}
    assert len(cc) == 4 and {live_gpu[c]["status"] for c in cc} == {"skip"}
    dra_pod = {"gpu.dra-allocation", "gpu.dra-device-match"}  # skip: device-plugin requests
    assert {live_gpu[c]["status"] for c in dra_pod} == {"skip"}
    not_applicable = set(DRA_CHECKS) | cc | dra_pod
    assert {r["status"] for c, r in live_gpu.items() if c not in not_applicable} == {"pass"}
    assert all(r["simulated"] for c, r in live_gpu.items()
               if c not in API_ONLY_CHECKS and c not in not_applicable)
    assert all(r["target"] == live_gpu["gpu.runtimeclass"]["target"] for r in live_gpu.values())

    snap = kgc("snapshot", "--kubeconfig", sa, "--profile", "lab", "-o", "cluster.json",
               cwd=tmp_path)
    assert snap.returncode == 0, snap.stderr
    assert oct((tmp_path / "cluster.json").stat().st_mode & 0o777) == "0o600"
    # the snapshot recorded every cluster layer as the ServiceAccount (gpu, sizing, keda):
    # the role must be enough for each — no verdict rests on a refusal. (Whether keda's
    # latency run passes in this GPU-shaped lab is the keda tests' business, not this one's.)
    every = kgc("evaluate", "cluster.json", "--profile", "lab", "--json", cwd=tmp_path)
    results = json.loads(every.stdout)["results"]
    assert {r["layer"] for r in results} >= {"gpu", "sizing", "keda"}
    refused = [(r["check"], r["reason"]) for r in results
               if "403 Forbidden" in r["reason"] or " is forbidden" in r["reason"]]
    assert not refused, refused
    ev = kgc("evaluate", "cluster.json", "--layers", "gpu", "--profile", "lab", "--json",
             cwd=tmp_path)
    assert ev.returncode == 0, ev.stdout[-2000:] + ev.stderr
    offline = {r["check"]: r for r in json.loads(ev.stdout)["results"] if r["layer"] == "gpu"}
    # two live runs of one cluster: the same verdicts (run ids and timings aside)
    assert {c: (r["status"], _norm(r["reason"])) for c, r in offline.items()} == \
        {c: (r["status"], _norm(r["reason"])) for c, r in live_gpu.items()}
    assert {r["origin"] for r in offline.values()} == {"bundle"}

    # the bundle through pytest gives exactly kgc evaluate's verdicts
    again = tmp_path / "again"
    again.mkdir()
    rep = pytest_run("-m", "gpu", "--snapshot", str(tmp_path / "cluster.json"), "--profile",
                     "lab", cwd=again)
    assert rep.returncode == 0, rep.stdout[-2000:]
    replay = {r["check"]: r for r in json.loads((again / "reports" / "verdict.json")
                                                .read_text())["results"]}
    for c, r in offline.items():
        for k in ("status", "reason", "evidence", "remediation", "simulated", "origin"):
            assert replay[c][k] == r[k], (c, k)

    secrets = secrets_of(lab_cluster, gpu_lab.sa_kubeconfig)
    assert len(secrets) >= 5
    for d in (tmp_path / "reports", again / "reports"):
        assert (d / "junit.xml").exists() and list((d / "allure-results").glob("*.json"))
        assert_no_secret(d, secrets)
    assert_no_secret(tmp_path / "cluster.json", secrets)


# --------------------------------------------------------------------------- SIGKILL
def _cluster_scoped(k: kube.Kube) -> set[str]:
    out = set()
    for kind, fn in (("runtimeclass", k.node.list_runtime_class),
                     ("clusterrole", k.rbac.list_cluster_role),
                     ("clusterrolebinding", k.rbac.list_cluster_role_binding),
                     ("priorityclass", k.scheduling.list_priority_class)):
        out |= {f"{kind}/{o.metadata.name}" for o in fn().items}
    return out


def test_a_sigkilled_run_leaves_only_labelled_objects_and_kgc_cleanup_removes_them(
        gpu_lab: LabHandle, tmp_path: Path) -> None:
    admin = gpu_lab.admin
    ns_before = {n.metadata.name for n in admin.core.list_namespace().items}
    scoped_before = _cluster_scoped(admin)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "gpu",
         "--kubeconfig", str(gpu_lab.sa_kubeconfig), "--profile", "lab"],
        cwd=tmp_path, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        pods = kube.watch_until(
            "the run's first GPU pod", admin.core.list_pod_for_all_namespaces,
            lambda objs: [p for p in objs.values() if p.metadata.namespace not in ns_before]
            or kube.NotYet("no GPU pod of this run yet"), 180,
            label_selector="kgc.io/layer=gpu")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    run_ns = {p.metadata.namespace for p in pods}
    left = {n.metadata.name: n for n in admin.core.list_namespace().items}
    new_ns = set(left) - ns_before
    assert new_ns and run_ns <= new_ns
    for name in new_ns:  # every namespace it created is a labelled run namespace
        assert name.startswith("kgc-") and RUN_LABEL in (left[name].metadata.labels or {})
        run_id = left[name].metadata.labels[RUN_LABEL]
        for p in admin.core.list_namespaced_pod(name).items:
            assert (p.metadata.labels or {}).get(RUN_LABEL) == run_id, p.metadata.name
        for cm in admin.core.list_namespaced_config_map(name).items:
            if cm.metadata.name != "kube-root-ca.crt":  # the controller's, not the run's
                assert (cm.metadata.labels or {}).get(RUN_LABEL) == run_id, cm.metadata.name
    assert _cluster_scoped(admin) == scoped_before  # nothing cluster-scoped was created

    out = kgc("cleanup", "--kubeconfig", str(gpu_lab.sa_kubeconfig), "--all", "--wait", "120",
              cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    for name in new_ns:
        assert f"removed namespace/{name}" in out.stdout, out.stdout
    assert not admin.core.list_namespace(label_selector=RUN_LABEL).items
    assert not admin.core.list_pod_for_all_namespaces(label_selector=RUN_LABEL).items
    again = kgc("cleanup", "--kubeconfig", str(gpu_lab.sa_kubeconfig), "--all", cwd=tmp_path)
    assert again.returncode == 0 and "0 object(s)" in again.stdout
