"""The certification role's manifests, offline: the files are the builder's output, and
their structure keeps the escalation paths of issue 21 closed — what RBAC grants where,
and that the admission policy judges every kind a pod can come from. (The policy's CEL is
judged by the real API server in ``test_rbac_escalation.py``.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgc.kube import run as krun
from kgc.kube import runrole
from kgc_lab.cluster import rbac

REPO = Path(__file__).resolve().parents[3]


def docs(variant: str) -> list[dict[str, Any]]:
    return rbac.manifest(variant)


def one(variant: str, kind: str, name: str) -> dict[str, Any]:
    return next(d for d in docs(variant) if d["kind"] == kind and d["metadata"]["name"] == name)


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every rule (resourceNames appended to the resource)."""
    out = set()
    for r in role["rules"]:
        names = ",".join(r.get("resourceNames", []))
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    out.add((g, res + (f"[{names}]" if names else ""), v))
    return out


@pytest.mark.parametrize("variant,path", [("cluster", rbac.MANIFEST),
                                          ("namespaced", rbac.NAMESPACED_MANIFEST)])
def test_the_deploy_files_are_the_builders_output(variant: str, path: Any) -> None:
    assert path.read_text() == rbac.render(variant), (
        f"{path} is stale: python -m kgc_lab.cluster.rbac --write")
    assert rbac.manifest_docs(path) == docs(variant)


@pytest.mark.parametrize("variant,role", [("cluster", "certify"),
                                          ("namespaced", "certify-namespaced")])
def test_kgc_rbac_prints_the_builders_output(variant: str, role: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """What the wheel ships and `kgc rbac ROLE` prints (package data, the product never
    imports this generator) is the generator's output; deploy/rbac/ holds links to it."""
    from kgc import cli

    assert cli.rbac_text(role) == rbac.render(variant)
    assert cli.main(["rbac", role]) == 0
    assert capsys.readouterr().out == rbac.render(variant)
    link = REPO / "deploy" / "rbac" / rbac.RBAC_FILES[variant]
    assert link.is_symlink() and link.resolve() == (rbac.DEPLOY / link.name).resolve()


@pytest.mark.parametrize("variant", rbac.VARIANTS)
def test_the_cluster_wide_role_grants_nothing_inside_a_namespace_but_the_pod_list(
        variant: str) -> None:
    """Pod logs, pod get/watch, Deployments, Services, services/proxy, events: only through
    the run's own RoleBinding (issue 21: all were granted in every namespace)."""
    g = grants(one(variant, "ClusterRole", rbac.ROLE))
    namespaced = {(grp, res, v) for grp, res, v in g
                  if res.split("[")[0] not in ("runtimeclasses", "nodes", "namespaces",
                                               "clusterroles", "clusterrolebindings",
                                               "priorityclasses", "apiservices",
                                               "deviceclasses", "resourceslices")}
    expect = {("rbac.authorization.k8s.io", "rolebindings", "create")}
    if variant == "cluster":
        expect.add(("", "pods", "list"))  # sizing: every pod's resources (documented)
    assert namespaced == expect, namespaced
    # bind: only the run role, by name; no escalate, no impersonate, no wildcard
    assert ("rbac.authorization.k8s.io", f"clusterroles[{runrole.RUN_ROLE}]", "bind") in g
    assert not {v for _, _, v in g} & {"escalate", "impersonate", "*", "bind"} - {"bind"}
    assert all("resourceNames" in r for r in one(variant, "ClusterRole", rbac.ROLE)["rules"]
               if "bind" in r["verbs"])


def test_the_namespaced_variant_is_the_cluster_role_less_the_pod_list() -> None:
    full = grants(one("cluster", "ClusterRole", rbac.ROLE))
    ns = grants(one("namespaced", "ClusterRole", rbac.ROLE))
    assert full - ns == {("", "pods", "list")} and ns <= full
    assert grants(one("namespaced", "ClusterRole", rbac.POD_READER)) == {("", "pods", "list")}
    # nothing binds the pod reader in the file: a team binds it per namespace
    assert not any(d["kind"].endswith("Binding") and d.get("roleRef", {}).get("name")
                   == rbac.POD_READER for d in docs("namespaced"))
    same = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    assert [d for d in docs("cluster") if d["kind"] in same] == \
        [d for d in docs("namespaced") if d["kind"] in same]


@pytest.mark.parametrize("variant", rbac.VARIANTS)
def test_no_role_of_the_manifest_grants_secrets_wildcards_or_workload_kinds(
        variant: str) -> None:
    roles = [d for d in docs(variant) if d["kind"] == "ClusterRole"]
    everything = set().union(*(grants(r) for r in roles))
    assert not any("*" in (g, res, v) for g, res, v in everything)
    resources = {res.split("[")[0] for _, res, _ in everything}
    assert "secrets" not in resources
    # no layer creates these: no verb at all (the policy judges them anyway)
    assert not resources & {"replicasets", "statefulsets", "daemonsets", "jobs", "cronjobs",
                            "replicationcontrollers", "pods/exec", "pods/attach",
                            "pods/portforward", "pods/ephemeralcontainers", "nodes/proxy",
                            "endpoints", "endpointslices"}
    writes = {(g, res) for g, res, v in everything if v in ("create", "update", "patch",
                                                            "delete")}
    assert ("", "nodes") not in writes and ("", "namespaces/finalize") not in writes


def test_only_the_run_role_is_bound_by_the_runs_and_it_holds_every_in_namespace_grant() -> None:
    run_role = one("cluster", "ClusterRole", runrole.RUN_ROLE)
    g = grants(run_role)
    for need in [("", "services/proxy", "create"), ("", "services/proxy", "update"),
                 ("", "pods/log", "get"), ("", "pods", "watch"), ("apps", "deployments", "create"),
                 ("", "serviceaccounts", "watch"), ("keda.sh", "scaledobjects", "create"),
                 ("resource.k8s.io", "resourceclaims", "create"),
                 ("resource.k8s.io", "resourceclaimtemplates", "delete")]:
        assert need in g, need
    crbs = [d for d in docs("cluster") if d["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in crbs] == [rbac.ROLE]  # the run role: never cluster-wide


def _policy(variant: str = "cluster") -> dict[str, Any]:
    return one(variant, "ValidatingAdmissionPolicy", rbac.POLICY)


def test_the_policy_judges_every_kind_a_pod_can_come_from_and_every_write() -> None:
    spec = _policy()["spec"]
    matched = {(g, res) for rule in spec["matchConstraints"]["resourceRules"]
               for g in rule["apiGroups"] for res in rule["resources"]
               if {"CREATE", "UPDATE"} <= set(rule["operations"])}
    for g, kinds in rbac.POD_TEMPLATE_KINDS.items():
        for k in kinds:
            assert (g, k) in matched, (g, k)
    for want in [("", "pods"), ("apps", "deployments"), ("batch", "cronjobs"),
                 ("", "replicationcontrollers"), ("apps", "daemonsets"), ("batch", "jobs"),
                 ("apps", "statefulsets"), ("apps", "replicasets"), ("", "namespaces"),
                 ("rbac.authorization.k8s.io", "rolebindings"), ("", "services")]:
        assert want in matched, want
    # every object either role may write is judged by the policy (the proxy is a CONNECT-like
    # call on the run's own Service, scoped by the RoleBinding)
    writes = {(g, res) for d in docs("cluster") if d["kind"] == "ClusterRole"
              for g, res, v in grants(d) if v in ("create", "update", "delete")}
    assert writes - {("", "services/proxy")} <= matched, writes - matched
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConditions"] == [{"name": "only-the-kgc-certify-serviceaccount",
                                        "expression": f"request.userInfo.username == "
                                                      f"'{rbac.USER}'"}]
    binding = one("cluster", "ValidatingAdmissionPolicyBinding", rbac.POLICY)
    assert binding["spec"] == {"policyName": rbac.POLICY, "validationActions": ["Deny"]}


@pytest.mark.parametrize("field", [
    "hostNetwork", "hostPID", "hostIPC", "nodeName", "privileged", "allowPrivilegeEscalation",
    "capabilities.add", "hostPort", "procMount", "seLinuxOptions", "windowsOptions",
    "sysctls", "Unconfined", "tolerations", "priorityClassName", "'emptyDir'",
    "pod-security.kubernetes.io/enforce", "roleRef.name", "externalIPs",
    "jobTemplate.spec.template", "ephemeralContainers", "initContainers",
    "adminAccess", "resource.kubernetes.io/admin-access", "resourceclaimtemplates",
])
def test_the_policy_names_each_escalation_field(field: str) -> None:
    """A guard against a rule silently dropped from the builder (the lab test proves each
    rule refuses)."""
    assert field in str(_policy()["spec"]), field


def test_a_runs_namespace_and_binding_are_what_the_policy_allows() -> None:
    """Run.setup's namespace labels and runrole's binding, judged by the rules the policy
    writes down (roleRef, subject, Pod Security level) — no drift between the two."""
    assert krun.POD_SECURITY[rbac.PSA + "enforce"] in rbac.PSA_LEVELS
    assert krun.POD_SECURITY[rbac.PSA + "enforce-version"] == "latest"
    b = runrole.binding_manifest("kgc-abc", rbac.USER)
    assert b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": runrole.RUN_ROLE}
    assert b["subjects"] == [{"kind": "ServiceAccount", "name": rbac.SERVICE_ACCOUNT,
                              "namespace": rbac.NAMESPACE}]
    text = str(_policy()["spec"])
    assert f"object.roleRef.name == '{runrole.RUN_ROLE}'" in text
    assert f"object.subjects[0].name == '{rbac.SERVICE_ACCOUNT}'" in text
    assert runrole.subject_of("alice") == {"kind": "User", "name": "alice",
                                           "apiGroup": "rbac.authorization.k8s.io"}


def test_the_layers_pods_use_only_what_the_policy_allows() -> None:
    """The gpu, sizing and keda pods (their own builders): no securityContext, nodeName,
    host namespace, host port or volume kind outside the policy's list — a layer that
    starts needing one fails here before the lab refuses it."""
    from kgc.core.profile import ClusterProfile
    from kgc.layers.gpu.plan import PodPlan, gpu_pod_manifest
    from kgc.layers.gpu.profile import GpuProfile
    from kgc.layers.keda.profile import KedaProfile
    from kgc.layers.keda.trigger import endpoint_manifests, marker_manifest
    from kgc.layers.keda.workloads import workload_manifest
    from kgc.layers.sizing import collect as sizing

    gp, kp = GpuProfile(), KedaProfile()
    specs = [gpu_pod_manifest(PodPlan("p", "n", gp.resources[0], 1), gp, namespace="ns",
                              configmap="cm", labels={})["spec"],
             marker_manifest(0, kp)["spec"]]
    specs += [m["spec"]["template"]["spec"] for m in
              (*endpoint_manifests(kp), workload_manifest("kata", kp))
              if m["kind"] == "Deployment"]
    sp = ClusterProfile().sizing
    plans, _ = sizing.plan(None, sp, ClusterProfile(), namespace="ns", labels={},
                           probe_classes=[])
    specs += [p.manifest["spec"] for p in plans if not p.not_applicable]
    assert len(specs) >= 5
    for spec in specs:
        for f in ("nodeName", "hostNetwork", "hostPID", "hostIPC", "securityContext",
                  "priorityClassName"):
            assert f not in spec, f
        for v in spec.get("volumes", []):
            assert set(v) - {"name"} <= set(rbac.ALLOWED_VOLUMES), v
        for c in spec["containers"] + spec.get("initContainers", []):
            assert "securityContext" not in c
            assert all(not p.get("hostPort") for p in c.get("ports", []))
        for t in spec.get("tolerations", []):
            assert t.get("key") and t["key"] not in rbac.CONTROL_PLANE_TAINTS


class _FakeRun:
    def __init__(self, fail: Exception | None = None) -> None:
        self.kube = object()
        self.namespace = "kgc-abc"
        self.fail = fail
        self.made: list[dict[str, Any]] = []

    def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        if self.fail is not None:
            raise self.fail
        self.made.append(manifest)
        return manifest


def test_a_run_binds_its_role_and_waits_until_the_authorizer_honours_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    answers = iter([True, False,  # the credentials lack one of the run's rights
                    False, False, True])  # then: not yet honoured, twice
    monkeypatch.setattr(runrole, "whoami", lambda k: rbac.USER)
    monkeypatch.setattr(runrole, "allowed", lambda k, ns, verb, res: next(answers))
    run = _FakeRun()
    assert runrole.bind_run_role(run) == "bound"
    assert run.made == [runrole.binding_manifest("kgc-abc", rbac.USER)]
    assert next(answers, None) is None  # it asked until allowed


def test_credentials_that_may_not_bind_go_on_without_the_binding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An admin's or another role's credentials: the run goes on; every later call names its
    own refusal (never a silent pass: the binding grants rights, it judges nothing)."""
    from kgc.kube import KubeError

    monkeypatch.setattr(runrole, "allowed", lambda k, ns, verb, res: False)
    monkeypatch.setattr(runrole, "whoami", lambda k: "alice")
    note = runrole.bind_run_role(_FakeRun(KubeError("refused create rolebindings (403)")))
    assert note.startswith("not bound: refused create rolebindings")
    monkeypatch.setattr(runrole, "whoami", lambda k: None)
    assert runrole.bind_run_role(_FakeRun()).startswith("not bound: the API server did not")


def test_credentials_that_hold_the_runs_rights_get_no_binding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runrole, "allowed", lambda k, ns, verb, res: True)
    run = _FakeRun()
    assert runrole.bind_run_role(run).startswith("not needed")
    assert run.made == []


def test_the_run_rights_sample_is_granted_by_the_run_role() -> None:
    g = grants(one("cluster", "ClusterRole", runrole.RUN_ROLE))
    for verb, res in runrole.RUN_RIGHTS:
        name, _, group = res.partition(".")
        assert (group, name, verb) in g, (verb, res)
