"""The certification account cannot take a node — proved on the cluster lab's real API
server (its RBAC authorizer, its ValidatingAdmissionPolicy and Pod Security admission), as
the ``kgc-certify`` ServiceAccount of ``deploy/rbac/kgc-certify.yaml``.

Issue 21's reproduction first: a namespace ``kgc-x`` labelled ``kgc.io/run`` and Pod
Security ``enforce=privileged``, and there a pod with ``privileged``, ``hostPID``,
``hostNetwork`` and ``hostPath: /`` — both were accepted. Then every other way to the
node's root the issue lists: each host-access field alone, added capabilities, ``nodeName``,
every workload kind whose pods a controller creates (the ReplicaSet controller is not the
account, so only the template can be judged), ``services/proxy``, pod logs, pod and
Deployment reads and secrets outside the run's namespace, and a RoleBinding to anything but
the run role. Writes are dry runs (``dryRun=All``: admission runs, nothing is stored — a
missing refusal changes nothing). What a run does stays allowed (the run's namespace,
binding, pods and Deployments here; the three cluster layers as this account in
``test_gpu_lab.py``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from cluster.kubehelp import LabInfo
from kgc import kube
from kgc.kube import runrole
from kgc_lab.cluster import rbac

pytestmark = [pytest.mark.lab, pytest.mark.cluster]

PSA = "pod-security.kubernetes.io/"


@dataclass
class Certify:
    admin: kube.Kube
    sa: kube.Kube
    kubeconfig: Path
    namespace: str  # a run namespace the account made (and bound its run role in)
    node: str  # a node of the lab
    # a namespace labelled as a run's by an admin, without Pod Security labels (the lab's
    # default level, privileged, applies): there the policy alone stands between the
    # account and the node. The account may bind its run role there (it is a run's).
    unguarded: str = ""


@pytest.fixture(scope="module")
def certify(lab_cluster: LabInfo) -> Iterator[Certify]:
    admin = lab_cluster.kube
    rbac.apply_certify_rbac(admin)
    kc = rbac.certify_kubeconfig(admin, lab_cluster.server, lab_cluster.run_dir / "pki" / "ca.crt",
                                 lab_cluster.run_dir / "kubeconfig-rbac-escalation")
    sa = kube.connect(kc)
    rbac.wait_policy_enforced(sa)
    node = admin.core.list_node().items[0].metadata.name
    with kube.Run.for_profile(sa, lab_cluster.cluster) as run, \
            kube.Run.for_profile(admin, lab_cluster.cluster, bind_role=False) as bare:
        assert run.notes == [f"run role {runrole.RUN_ROLE}: bound"], run.notes
        ns = admin.core.read_namespace(run.namespace).metadata.labels
        assert ns[PSA + "enforce"] == "baseline", ns
        admin.core.patch_namespace(bare.namespace, {"metadata": {"labels": {
            PSA + "enforce": None, PSA + "enforce-version": None}}})
        create(sa, runrole.binding_manifest(bare.namespace, rbac.USER), bare.namespace,
               dry_run=False)
        kube.wait_for(f"{runrole.RUN_ROLE} honoured in {bare.namespace}",
                      lambda: runrole.allowed(sa, bare.namespace, "create", "pods")
                      or kube.NotYet("not yet"), 20, 0.1)
        yield Certify(admin, sa, kc, run.namespace, node, bare.namespace)


# --------------------------------------------------------------------------- objects
def pod(**spec: Any) -> dict[str, Any]:
    """A pod a run could make (the builders' shape), with ``spec`` merged in."""
    body = kube.builders.pod("x", [kube.builders.container("c", "registry.k8s.io/pause:3.10")])
    body["spec"].update(spec)
    return body


def with_container(**sc: Any) -> dict[str, Any]:
    body = pod()
    body["spec"]["containers"][0].update(sc)
    return body


ROOT_POD = pod(hostPID=True, hostNetwork=True,
               volumes=[{"name": "root", "hostPath": {"path": "/"}}])
ROOT_POD["spec"]["containers"][0].update(
    securityContext={"privileged": True},
    volumeMounts=[{"name": "root", "mountPath": "/host"}])

BAD_PODS: dict[str, tuple[dict[str, Any], str]] = {
    "privileged": (with_container(securityContext={"privileged": True}), "privileged"),
    "allowPrivilegeEscalation": (with_container(
        securityContext={"allowPrivilegeEscalation": True}), "privilege escalation"),
    "hostPath /": (pod(volumes=[{"name": "r", "hostPath": {"path": "/"}}]), "hostPath"),
    "hostNetwork": (pod(hostNetwork=True), "network, PID or IPC"),
    "hostPID": (pod(hostPID=True), "network, PID or IPC"),
    "hostIPC": (pod(hostIPC=True), "network, PID or IPC"),
    "capabilities.add SYS_ADMIN": (with_container(
        securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}), "add capabilities"),
    "hostPort": (with_container(ports=[{"containerPort": 80, "hostPort": 80}]), "host ports"),
    "nodeName": (pod(nodeName="<node>"), "nodeName"),
    "privileged init container": (pod(initContainers=[{
        "name": "i", "image": "registry.k8s.io/pause:3.10",
        "securityContext": {"privileged": True}}]), "privileged"),
    "an unconfined seccomp profile": (pod(securityContext={
        "seccompProfile": {"type": "Unconfined"}}), "seccomp"),
    "a toleration of every taint": (pod(tolerations=[{"operator": "Exists"}]),
                                    "tolerate every taint"),
    "a PVC volume": (pod(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]),
                     "hostPath"),
}


def workload(kind: str, template: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """(resource, body) of a ``kind`` whose pods a controller creates from ``template``."""
    tmpl = {"metadata": {"labels": {"app": "x"}}, "spec": copy.deepcopy(template["spec"])}
    if kind in ("Job", "CronJob"):
        tmpl["spec"]["restartPolicy"] = "Never"
    else:
        tmpl["spec"]["restartPolicy"] = "Always"
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "x"}}, "template": tmpl}
    group = {"Deployment": "apps", "ReplicaSet": "apps", "StatefulSet": "apps",
             "DaemonSet": "apps", "Job": "batch", "CronJob": "batch",
             "ReplicationController": ""}[kind]
    if kind == "ReplicationController":
        spec["selector"] = {"app": "x"}
    if kind == "Job":
        spec = {"template": tmpl}
    if kind == "CronJob":
        spec = {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": tmpl}}}
    body = {"apiVersion": f"{group}/v1" if group else "v1", "kind": kind,
            "metadata": {"name": "x"}, "spec": spec}
    return kind.lower() + "s", body


WORKLOAD_KINDS = ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob",
                  "ReplicationController")


def create(k: kube.Kube, body: dict[str, Any], namespace: str | None,
           dry_run: bool = True) -> Any:
    """Create ``body`` as ``k`` through the dynamic path every kind shares."""
    body = copy.deepcopy(body)
    if namespace:
        body["metadata"]["namespace"] = namespace
    api_version, kind = body["apiVersion"], body["kind"]
    plural = kind.lower() + "s"
    group, _, version = api_version.rpartition("/")
    path = (f"/api/{version}" if not group else f"/apis/{group}/{version}") + \
        (f"/namespaces/{namespace}" if namespace else "") + f"/{plural}"
    return _raw(k, "POST", path, body, query=[("dryRun", "All")] if dry_run else [])


def _raw(k: kube.Kube, method: str, path: str, body: Any = None,
         query: list[tuple[str, str]] | None = None) -> Any:
    api = k.api
    m, url, headers, b, post = api.param_serialize(
        method=method, resource_path=path, query_params=query or [],
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body, auth_settings=["BearerToken"])
    resp = api.call_api(m, url, header_params=headers, body=b, post_params=post,
                        _request_timeout=30)
    resp.read()
    if not 200 <= resp.status < 300:
        raise ApiException(http_resp=resp)
    return resp


def refused(fn: Callable[[], Any]) -> ApiException:
    """The API's refusal of ``fn`` (a failure when it was accepted)."""
    try:
        fn()
    except ApiException as exc:
        return exc
    pytest.fail("accepted", pytrace=False)


def by_policy(exc: ApiException, message: str) -> None:
    body = str(exc.body)
    assert exc.status == 422 and rbac.POLICY in body, (exc.status, body[:600])
    assert message in body, body[:600]


def by_pod_security_or_policy(exc: ApiException, message: str) -> None:
    """In the run's own namespace Pod Security ``baseline`` (admission before the policy)
    refuses most host access first; either refusal holds."""
    if exc.status == 403 and "violates PodSecurity" in str(exc.body):
        return
    by_policy(exc, message)


def by_rbac(exc: ApiException) -> None:
    assert exc.status == 403, (exc.status, str(exc.body)[:600])


# --------------------------------------------------------------------------- the issue's repro
def test_issue_21_reproduction_privileged_namespace_and_root_pod_are_refused(
        certify: Certify) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "kgc-x", "labels": {"kgc.io/run": "x", PSA + "enforce": "privileged"}}}
    by_policy(refused(lambda: create(certify.sa, ns, None)), "Pod Security")
    # the root pod in the account's own run namespace (where the namespace rules hold)
    root = copy.deepcopy(ROOT_POD)
    root["spec"]["nodeName"] = certify.node
    exc = refused(lambda: create(certify.sa, root, certify.namespace))
    by_pod_security_or_policy(exc, "network, PID or IPC")
    by_policy(refused(lambda: create(certify.sa, root, certify.unguarded)),
              "network, PID or IPC")
    for where in (certify.namespace, certify.unguarded):
        assert not certify.admin.core.list_namespaced_pod(where).items


@pytest.mark.parametrize("labels", [
    {PSA + "enforce": "privileged"},
    {},  # no enforce label: the cluster's default level (often privileged) would apply
    {PSA + "enforce": "baseline", PSA + "warn": "privileged"},
    {PSA + "enforce": "baseline", PSA + "audit": "privileged"},
    {PSA + "enforce": "baseline", PSA + "exempt": "true"},
], ids=["enforce=privileged", "no-enforce", "warn=privileged", "audit=privileged",
        "unknown-psa-label"])
def test_a_namespace_with_looser_pod_security_is_refused(certify: Certify,
                                                         labels: dict[str, str]) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace",
          "metadata": {"name": "kgc-x", "labels": {"kgc.io/run": "x", **labels}}}
    by_policy(refused(lambda: create(certify.sa, ns, None)), "Pod Security")


@pytest.mark.parametrize("labels", [
    {PSA + "enforce": "baseline", PSA + "enforce-version": "latest"},
    {PSA + "enforce": "restricted", PSA + "enforce-version": "v1.30",
     PSA + "warn": "restricted", PSA + "audit": "baseline"},
], ids=["baseline", "restricted"])
def test_a_run_namespace_with_baseline_or_restricted_pod_security_is_allowed(
        certify: Certify, labels: dict[str, str]) -> None:
    create(certify.sa, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "kgc-x", "labels": {"kgc.io/run": "x", **labels}}}, None)


def _bad(certify: Certify, name: str) -> tuple[dict[str, Any], str]:
    body, message = copy.deepcopy(BAD_PODS[name])
    if body["spec"].get("nodeName") == "<node>":
        body["spec"]["nodeName"] = certify.node
    return body, message


@pytest.mark.parametrize("name", list(BAD_PODS))
def test_a_pod_with_host_access_is_refused(certify: Certify, name: str) -> None:
    body, message = _bad(certify, name)
    by_pod_security_or_policy(refused(lambda: create(certify.sa, body, certify.namespace)),
                              message)
    # and by the policy alone where no Pod Security level guards the namespace
    by_policy(refused(lambda: create(certify.sa, body, certify.unguarded)), message)


@pytest.mark.parametrize("kind", WORKLOAD_KINDS)
def test_a_workload_with_a_root_pod_template_is_refused(certify: Certify, kind: str) -> None:
    _, body = workload(kind, ROOT_POD)
    exc = refused(lambda: create(certify.sa, body, certify.namespace))
    if kind == "Deployment":  # keda's kind: granted by RBAC, so the policy judges it
        by_policy(exc, "network, PID or IPC")
    else:  # no layer creates these: no RBAC verb at all
        by_rbac(exc)


@pytest.mark.parametrize("name", ["privileged", "hostPath /", "capabilities.add SYS_ADMIN",
                                  "nodeName"])
def test_a_deployment_whose_template_has_host_access_is_refused(certify: Certify,
                                                                name: str) -> None:
    tmpl, message = _bad(certify, name)
    _, body = workload("Deployment", tmpl)
    by_policy(refused(lambda: create(certify.sa, body, certify.namespace)), message)


def test_services_other_than_cluster_ip_are_refused(certify: Certify) -> None:
    svc = kube.builders.service("x", {"app": "x"}, [80], type_="NodePort")
    by_policy(refused(lambda: create(certify.sa, svc, certify.namespace)), "ClusterIP")
    svc = kube.builders.service("x", {"app": "x"}, [80])
    svc["spec"]["externalIPs"] = ["10.0.0.1"]
    by_policy(refused(lambda: create(certify.sa, svc, certify.namespace)), "externalIPs")


# --------------------------------------------------------------------------- bindings
def _binding(role: str, subject: dict[str, str], kind: str = "ClusterRole") -> dict[str, Any]:
    b = runrole.binding_manifest("ignored", rbac.USER, role)
    b["roleRef"]["kind"] = kind
    b["subjects"] = [subject]
    del b["metadata"]["namespace"]
    return b


SELF = runrole.subject_of(rbac.USER)


def test_the_run_role_binds_only_in_a_run_namespace_and_only_to_itself(
        certify: Certify) -> None:
    # the run role anywhere else: the policy (RBAC would allow create + bind)
    by_policy(refused(lambda: create(certify.sa, _binding(runrole.RUN_ROLE, SELF),
                                     "kube-system")), "only in run namespaces")
    # to another subject (a pod's ServiceAccount, say), in its own run namespace
    other = {"kind": "ServiceAccount", "name": "default", "namespace": certify.namespace}
    by_policy(refused(lambda: create(certify.sa, _binding(runrole.RUN_ROLE, other),
                                     certify.namespace)), "to itself")
    # any other role: RBAC's escalation check refuses a role with rights the account
    # lacks (no bind on it), the policy one whose rights it holds (its own ClusterRole)
    for role in ("cluster-admin", "admin", "edit", rbac.ROLE):
        exc = refused(lambda role=role: create(certify.sa, _binding(role, SELF),
                                               certify.namespace))
        if exc.status == 403:
            assert "attempting to grant RBAC permissions not currently held" in str(exc.body)
        else:
            by_policy(exc, "to itself")
    # and no ClusterRoleBinding at all
    crb = _binding(runrole.RUN_ROLE, SELF)
    crb["kind"] = "ClusterRoleBinding"
    by_rbac(refused(lambda: create(certify.sa, crb, None)))


# --------------------------------------------------------------------------- reads, proxy
def _foreign_pod(c: Certify) -> tuple[str, str]:
    for p in c.admin.core.list_pod_for_all_namespaces().items:
        if not p.metadata.namespace.startswith("kgc-"):
            return p.metadata.namespace, p.metadata.name
    pytest.fail("the lab has no pod outside the run namespaces")


def test_pod_logs_reads_secrets_and_proxy_outside_the_run_namespace_are_refused(
        certify: Certify) -> None:
    sa = certify.sa
    ns, name = _foreign_pod(certify)
    for path in (
        f"/api/v1/namespaces/{ns}/pods/{name}/log",
        f"/api/v1/namespaces/{ns}/pods/{name}",
        "/apis/apps/v1/deployments",
        f"/apis/apps/v1/namespaces/{ns}/deployments",
        "/api/v1/secrets",
        "/api/v1/namespaces/kube-system/secrets",
        "/api/v1/configmaps",
        "/api/v1/namespaces/default/services/https:kubernetes:443/proxy/version",
        "/api/v1/namespaces/default/services/kubernetes/proxy/",
        "/api/v1/namespaces/default/events",
    ):
        by_rbac(refused(lambda path=path: _raw(sa, "GET", path)))
    by_rbac(refused(lambda: _raw(sa, "PUT", "/api/v1/namespaces/default/services/"
                                 "kubernetes/proxy/metric", {"value": 1})))
    # the service proxy in its own run namespace passes the authorizer (404/503: no such
    # Service, no endpoints; kwok pods serve nothing, so keda's proxied endpoint is proven
    # by authority here)
    exc = refused(lambda: _raw(sa, "GET", f"/api/v1/namespaces/{certify.namespace}/services/"
                                          "kgc-none/proxy/"))
    assert exc.status in (404, 503), (exc.status, str(exc.body)[:300])
    # the same in the account's run namespace: granted (through its RoleBinding only)
    for verb, res in (("get", "services/proxy"), ("create", "services/proxy"),
                      ("get", "pods/log"), ("watch", "pods"), ("list", "deployments.apps")):
        assert runrole.allowed(sa, certify.namespace, verb, res), (verb, res)
        assert not runrole.allowed(sa, "default", verb, res), (verb, res)


# --------------------------------------------------------------------------- still allowed
def test_what_a_run_does_stays_allowed(certify: Certify) -> None:
    """The layers' own objects, built by their own builders, pass — and a Deployment's pods
    (made by the ReplicaSet controller under baseline Pod Security) are created."""
    from kgc.layers.gpu.plan import PodPlan, gpu_pod_manifest
    from kgc.layers.gpu.profile import GpuProfile
    from kgc.layers.keda.profile import KedaProfile
    from kgc.layers.keda.trigger import endpoint_manifests
    from kgc.layers.keda.workloads import workload_manifest

    sa, ns = certify.sa, certify.namespace
    gp = GpuProfile()
    gpu = gpu_pod_manifest(PodPlan("kgc-gpu-0", certify.node, gp.resources[0], 1), gp,
                           namespace=ns,
                           configmap="kgc-gpu-collector", labels={"kgc.io/run": "t"})
    create(sa, gpu, ns)
    kp = KedaProfile()
    for m in (*endpoint_manifests(kp), workload_manifest("kata", kp)):
        create(sa, m, ns)
    dep = kube.builders.deployment("kgc-rbac-ok", [kube.builders.container(
        "c", "registry.k8s.io/pause:3.10")], replicas=1, labels={"kgc.io/run": "t"})
    create(sa, dep, ns, dry_run=False)
    # the ReplicaSet controller (not the account) makes its pod: baseline admits it
    kube.wait_for_pods(certify.admin, ns, kube.pod_scheduled(), 60, 1,
                       label_selector="app=kgc-rbac-ok")


def test_the_keda_layer_passes_as_the_serviceaccount(lab_cluster: LabInfo,
                                                      certify: Certify) -> None:
    """The keda layer's whole run (namespace, binding, Deployments, ScaledObjects, watches,
    HPAs) as this account under the lab profile: what the keda lab tests get as admin.
    (gpu: test_gpu_lab.py, sizing: lab/tests/sizing/test_lab_sizing.py, both as this account.)"""
    from kgc.core.engine import Context
    from kgc.core.profile import load_profile
    from kgc.core.target import ClusterTarget

    if lab_cluster.keda_missing:
        pytest.fail("KEDA not built: " + ", ".join(lab_cluster.keda_missing)
                    + " — run scripts/bootstrap.d/30-cluster.sh")
    # the profile the lab wrote (profiles/lab.yaml plus its trigger endpoint and HPA sync
    # period: the keda layer reads no lab state)
    ctx = Context(ClusterTarget(str(certify.kubeconfig)),
                  load_profile(lab_cluster.state["profile"]))
    got = {v.check: v for v in ctx.judge_all(["keda"])}
    assert len(got) == 9, sorted(got)
    bad = {c: (str(v.status), v.reason) for c, v in got.items()
           if str(v.status) not in ("pass", "warn")}
    if bad:
        # the whole reasons (an assert's repr cuts them) and what kwok did meanwhile: a pod
        # that never became Ready on a kwok node is kwok's story, not the account's
        kwok_log = lab_cluster.run_dir / "logs" / "kwok.log"
        tail = kwok_log.read_text(errors="replace").splitlines()[-60:] \
            if kwok_log.is_file() else [f"(no {kwok_log})"]
        pytest.fail("\n".join([*(f"{c}: {s}: {r}" for c, (s, r) in sorted(bad.items())),
                               "--- kwok.log (last 60 lines) ---", *tail]))
    assert not [c for c, v in got.items() if "403" in v.reason or "forbidden" in v.reason]
