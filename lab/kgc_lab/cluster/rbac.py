"""The certification role (``deploy/rbac/kgc-certify.yaml`` and its namespaced variant
``deploy/rbac/kgc-certify-namespaced.yaml``) — built here, written by
``python -m kgc_lab.cluster.rbac --write``; a self-test keeps the files equal to the build —
and the lab's use of it: run the suites as that least-privilege ServiceAccount, not as the
lab's admin, so that the lab's real authorizer (RBAC) and admission (the manifest's
ValidatingAdmissionPolicy) prove the role is enough for a certification run and that it
cannot take a node (``lab/tests/cluster/test_rbac_escalation.py``).

    apply_certify_rbac(admin_kube)                  # the manifest, as a user would apply it
    kubeconfig = certify_kubeconfig(admin_kube, lab_state, out_path)   # token of the SA

The design (docs/rbac.md says it for operators):

* ``kgc-certify`` (ClusterRoleBinding): only what a run needs *outside* its namespaces — the
  cluster-scoped reads, creating/deleting run namespaces, every pod's spec for the sizing
  layer (the cluster variant only), and ``create`` RoleBindings + ``bind`` on one role;
* ``kgc-certify-run`` (bound by the run itself, :mod:`kgc.kube.runrole`, inside the run
  namespace only): pods, their logs and events, ConfigMaps, Deployments, Services,
  ``services/proxy``, ScaledObjects, HPAs — so none of these reaches another namespace;
* the ValidatingAdmissionPolicy ``kgc-certify-confine`` (matched to this account only):
  namespaces only ``kgc-*`` labelled ``kgc.io/run`` with Pod Security ``baseline`` or
  ``restricted``; every namespaced write only in such a namespace; the RoleBinding only to
  ``kgc-certify-run`` for the account itself; no pod — nor any pod template of a workload
  kind another controller turns into pods — with host namespaces, privileges, hostPath or
  other host volumes, added capabilities, host ports, ``nodeName``, unconfined
  seccomp/AppArmor, SELinux options, sysctls, control-plane tolerations or system priority;
  Services only of type ClusterIP without external IPs.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.kube.run import DEFAULT_LABEL, DEFAULT_PREFIX
from kgc.kube.runrole import RUN_ROLE

# the product ships the generated files as package data (`kgc rbac certify` prints them);
# deploy/rbac/*.yaml are links to them
DEPLOY = Path(__file__).resolve().parents[3] / "src" / "kgc" / "data" / "rbac"
MANIFEST = DEPLOY / "kgc-certify.yaml"
NAMESPACED_MANIFEST = DEPLOY / "kgc-certify-namespaced.yaml"
RBAC_FILES = {"cluster": MANIFEST.name, "namespaced": NAMESPACED_MANIFEST.name}
NAMESPACE = "kgc-system"
SERVICE_ACCOUNT = "kgc-certify"
ROLE = "kgc-certify"
POD_READER = "kgc-certify-pod-reader"
POLICY = "kgc-certify-confine"
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
VARIANTS = ("cluster", "namespaced")
RBAC_GROUP = "rbac.authorization.k8s.io"
DRA_GROUP = "resource.k8s.io"
DRA_CLAIM_KINDS = ("resourceclaims", "resourceclaimtemplates")
# a namespace with this label lets its claims ask for adminAccess: devices in use by others
DRA_ADMIN_LABEL = "resource.kubernetes.io/admin-access"

# Every kind whose pods this account could have made, directly or by a controller. The
# account has RBAC verbs only on pods and Deployments; the policy still judges the others,
# so that a verb added later cannot open the ReplicaSet-controller path again.
POD_TEMPLATE_KINDS: dict[str, tuple[str, ...]] = {
    "": ("pods", "pods/ephemeralcontainers", "replicationcontrollers"),
    "apps": ("deployments", "replicasets", "statefulsets", "daemonsets"),
    "batch": ("jobs", "cronjobs"),
}
# volume kinds a run's pods may mount: the layers use configMap and emptyDir; projected is
# the ServiceAccount token the API server adds; downwardAPI exposes only the pod's own data
ALLOWED_VOLUMES = ("configMap", "emptyDir", "projected", "downwardAPI")
PSA = "pod-security.kubernetes.io/"
PSA_LEVELS = ("baseline", "restricted")
CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")


def _rule(group: str, resources: list[str], verbs: list[str],
          names: list[str] | None = None) -> dict[str, Any]:
    r: dict[str, Any] = {"apiGroups": [group], "resources": resources, "verbs": verbs}
    if names:
        r["resourceNames"] = names
    return r


def cluster_rules(variant: str = "cluster") -> list[dict[str, Any]]:
    """The ClusterRoleBinding's rules: nothing inside a namespace but (cluster variant) the
    list of every pod the sizing layer judges."""
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r}: one of {VARIANTS}")
    rules = [
        # preflight: what the cluster offers GPU pods
        _rule("node.k8s.io", ["runtimeclasses"], ["get", "list"]),
        _rule("", ["nodes"], ["list"]),
        # DRA preflight (gpu.dra-*): the DeviceClasses and the driver's ResourceSlices
        # (cluster-scoped objects; no write)
        _rule(DRA_GROUP, ["deviceclasses", "resourceslices"], ["get", "list", "watch"]),
        # the run's namespace: create, delete at the end; kgc cleanup lists labelled ones
        _rule("", ["namespaces"], ["create", "delete", "list", "watch"]),
        # the run binds kgc-certify-run to itself in its namespace (the policy: only there,
        # only that role, only for this account)
        _rule(RBAC_GROUP, ["rolebindings"], ["create"]),
        _rule(RBAC_GROUP, ["clusterroles"], ["bind"], [RUN_ROLE]),
        # keda: its metrics adapter's APIService, by name
        _rule("apiregistration.k8s.io", ["apiservices"], ["get"],
              ["v1beta1.external.metrics.k8s.io"]),
        # kgc cleanup / run teardown: labelled leftovers of the cluster-scoped kinds a run
        # may create (no layer creates any, so no delete is granted)
        _rule(RBAC_GROUP, ["clusterroles", "clusterrolebindings"], ["list"]),
        _rule("scheduling.k8s.io", ["priorityclasses"], ["list"]),
    ]
    if variant == "cluster":
        # sizing: every pod's resources, RuntimeClass and node (node over-commit, starved
        # pods); gpu: the device plugin's pods; keda: kube-controller-manager's static pod.
        # A list shows whole pod specs (env values too): the namespaced variant omits it.
        rules.insert(2, _rule("", ["pods"], ["list"]))
    return rules


def run_rules() -> list[dict[str, Any]]:
    """``kgc-certify-run``: what a run does inside its own namespace, bound there only."""
    return [
        _rule("", ["serviceaccounts"], ["list", "watch"]),  # wait for the default SA
        # the GPU / sizing / keda pods, their events and logs
        _rule("", ["pods"], ["create", "delete", "get", "list", "watch"]),
        _rule("", ["pods/log"], ["get"]),
        _rule("", ["events"], ["list", "watch"]),
        _rule("events.k8s.io", ["events"], ["list", "watch"]),
        # the in-guest collector script / the trigger endpoint's script
        _rule("", ["configmaps"], ["create"]),
        # the DRA GPU pod: its ResourceClaim(Template) (the policy refuses adminAccess)
        _rule(DRA_GROUP, list(DRA_CLAIM_KINDS), ["create", "delete", "get"]),
        # keda: the workloads under test, their ScaledObjects and HPAs, the trigger endpoint
        _rule("apps", ["deployments"], ["create", "delete", "get", "list", "watch"]),
        _rule("keda.sh", ["scaledobjects"], ["create", "delete", "get", "list", "watch"]),
        _rule("autoscaling", ["horizontalpodautoscalers"], ["get", "list", "watch"]),
        _rule("", ["services"], ["create", "delete"]),
        _rule("", ["services/proxy"], ["get", "create", "update"]),
    ]


# --------------------------------------------------------------------------- the policy
def _cel_list(items: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(f"'{i}'" for i in items) + "]"


def _kinds() -> list[str]:
    return sorted({r.partition("/")[0] for rs in POD_TEMPLATE_KINDS.values() for r in rs})


# (name, expression, message); every expression is true for what the account may do.
# `variables.podSpec` etc. are evaluated lazily, only where `variables.hasPod` holds.
VARIABLES: list[tuple[str, str]] = [
    ("ns", "request.operation == 'DELETE' ? oldObject : object"),
    ("nsLabels", "has(variables.ns.metadata.labels) ? variables.ns.metadata.labels : {}"),
    ("hasPod", "request.operation != 'DELETE' && request.resource.resource in "
               + _cel_list(_kinds())),
    ("template", "request.resource.resource == 'pods' ? object : "
                 "request.resource.resource == 'cronjobs' ? "
                 "object.spec.jobTemplate.spec.template : object.spec.template"),
    ("podSpec", "variables.template.spec"),
    ("claimSpec", "request.resource.resource == 'resourceclaims' ? object.spec : "
                  "object.spec.spec"),
    ("podMeta", "has(variables.template.metadata) ? variables.template.metadata : {}"),
    ("containers",
     "variables.podSpec.containers"
     " + (has(variables.podSpec.initContainers) ? variables.podSpec.initContainers : [])"
     " + (has(variables.podSpec.ephemeralContainers) ?"
     " variables.podSpec.ephemeralContainers : [])"),
]

_SC = "c.securityContext"


def _unset_or(path: str, ok: str) -> str:
    """``path`` absent, or ``ok`` holds for it (CEL has() needs a field selection)."""
    return f"(!has({path}) || {ok})"


VALIDATIONS: list[tuple[str, str]] = [
    # ---- where: run namespaces only
    ("request.resource.resource != 'namespaces' || "
     "(variables.ns.metadata.name.startsWith('" + DEFAULT_PREFIX + "') && "
     "'" + DEFAULT_LABEL + "' in variables.nsLabels)",
     "kgc-certify may create and delete only run namespaces "
     "(" + DEFAULT_PREFIX + "*, labelled " + DEFAULT_LABEL + ")"),
    ("request.resource.resource == 'namespaces' || "
     "(namespaceObject != null && has(namespaceObject.metadata.labels) && "
     "'" + DEFAULT_LABEL + "' in namespaceObject.metadata.labels)",
     "kgc-certify may write namespaced objects only in run namespaces (labelled "
     + DEFAULT_LABEL + ")"),
    # ---- a run namespace's Pod Security labels: enforce baseline or restricted, no looser
    ("request.resource.resource != 'namespaces' || request.operation == 'DELETE' || "
     "('" + PSA + "enforce' in variables.nsLabels && variables.nsLabels['" + PSA
     + "enforce'] in " + _cel_list(PSA_LEVELS)
     + " && variables.nsLabels.all(k, !k.startsWith('" + PSA + "') || "
     "(k in " + _cel_list([PSA + m for m in ("enforce", "warn", "audit")]) + " && "
     "variables.nsLabels[k] in " + _cel_list(PSA_LEVELS) + ") || "
     "(k in " + _cel_list([PSA + m + "-version" for m in ("enforce", "warn", "audit")])
     + " && (variables.nsLabels[k] == 'latest' || "
     "variables.nsLabels[k].matches('^v1\\\\.[0-9]+$')))))",
     "kgc-certify may create a namespace only with Pod Security enforce=baseline or "
     "restricted (warn/audit likewise, versions 'latest' or v1.N)"),
    # ---- DRA: no admin access (to devices allocated to others), not even by a label
    ("request.resource.resource != 'namespaces' || request.operation == 'DELETE' || "
     "!('" + DRA_ADMIN_LABEL + "' in variables.nsLabels)",
     "kgc-certify may not label a namespace " + DRA_ADMIN_LABEL),
    ("!(request.resource.resource in " + _cel_list(DRA_CLAIM_KINDS) + ") || "
     "request.operation == 'DELETE' || "
     "(request.resource.resource == 'resourceclaimtemplates' && !has(object.spec.spec)) || "
     "!has(variables.claimSpec.devices) || !has(variables.claimSpec.devices.requests) || "
     "variables.claimSpec.devices.requests.all(r, !has(r.exactly) || "
     "!has(r.exactly.adminAccess) || !r.exactly.adminAccess)",
     "kgc-certify may not create ResourceClaims or ResourceClaimTemplates with adminAccess"),
    # ---- RoleBindings: kgc-certify-run to this account, nothing else
    ("request.resource.resource != 'rolebindings' || request.operation == 'DELETE' || "
     "(object.roleRef.apiGroup == '" + RBAC_GROUP + "' && object.roleRef.kind == 'ClusterRole'"
     " && object.roleRef.name == '" + RUN_ROLE + "' && has(object.subjects) && "
     "object.subjects.size() == 1 && object.subjects[0].kind == 'ServiceAccount' && "
     "object.subjects[0].name == '" + SERVICE_ACCOUNT + "' && has(object.subjects[0].namespace)"
     " && object.subjects[0].namespace == '" + NAMESPACE + "')",
     "kgc-certify may bind only ClusterRole " + RUN_ROLE + ", to itself"),
    # ---- Services: reachable only inside the cluster, no external IPs
    ("request.resource.resource != 'services' || request.operation == 'DELETE' || "
     "((!has(object.spec.type) || object.spec.type == 'ClusterIP') && "
     "(!has(object.spec.externalIPs) || object.spec.externalIPs.size() == 0))",
     "kgc-certify may create only ClusterIP Services without externalIPs"),
    # ---- pods and every pod template
    ("!variables.hasPod || !("
     + " || ".join(f"(has(variables.podSpec.{f}) && variables.podSpec.{f})"
                   for f in ("hostNetwork", "hostPID", "hostIPC")) + ")",
     "kgc-certify may not create pods (or pod templates) that use the node's network, PID "
     "or IPC namespace"),
    ("!variables.hasPod || "
     + _unset_or("variables.podSpec.nodeName", "variables.podSpec.nodeName == ''"),
     "kgc-certify may not set nodeName (pods are placed by the scheduler, through "
     "nodeSelector/affinity, which honours taints)"),
    ("!variables.hasPod || " + _unset_or(
        "variables.podSpec.volumes",
        "variables.podSpec.volumes.all(v, v.all(k, k == 'name' || k in "
        + _cel_list(ALLOWED_VOLUMES) + "))"),
     "kgc-certify may mount only " + ", ".join(ALLOWED_VOLUMES)
     + " volumes (no hostPath, no other host or storage volume)"),
    ("!variables.hasPod || variables.containers.all(c, " + _unset_or(_SC, " && ".join([
        f"!(has({_SC}.privileged) && {_SC}.privileged)",
        f"!(has({_SC}.allowPrivilegeEscalation) && {_SC}.allowPrivilegeEscalation)",
        _unset_or(f"{_SC}.capabilities",
                  _unset_or(f"{_SC}.capabilities.add", f"{_SC}.capabilities.add.size() == 0")),
        _unset_or(f"{_SC}.procMount", f"{_SC}.procMount == 'Default'"),
        f"!has({_SC}.seLinuxOptions)",
        f"!has({_SC}.windowsOptions)",
        _unset_or(f"{_SC}.seccompProfile", f"{_SC}.seccompProfile.type != 'Unconfined'"),
        _unset_or(f"{_SC}.appArmorProfile", f"{_SC}.appArmorProfile.type != 'Unconfined'"),
    ])) + ")",
     "kgc-certify may not create privileged containers, allow privilege escalation, add "
     "capabilities, unmask /proc, set SELinux/Windows options or unconfine seccomp/AppArmor"),
    ("!variables.hasPod || variables.containers.all(c, " + _unset_or(
        "c.ports", "c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)") + ")",
     "kgc-certify may not use host ports"),
    ("!variables.hasPod || " + _unset_or("variables.podSpec.securityContext", " && ".join([
        "!has(variables.podSpec.securityContext.sysctls)",
        "!has(variables.podSpec.securityContext.seLinuxOptions)",
        "!has(variables.podSpec.securityContext.windowsOptions)",
        _unset_or("variables.podSpec.securityContext.seccompProfile",
                  "variables.podSpec.securityContext.seccompProfile.type != 'Unconfined'"),
        _unset_or("variables.podSpec.securityContext.appArmorProfile",
                  "variables.podSpec.securityContext.appArmorProfile.type != 'Unconfined'"),
    ])) + " && " + _unset_or(
        "variables.podMeta.annotations",
        "variables.podMeta.annotations.all(k, !(k.startsWith('container.apparmor.security."
        "beta.kubernetes.io/') || k.startsWith('seccomp.security.alpha.kubernetes.io/')) || "
        "variables.podMeta.annotations[k] != 'unconfined')"),
     "kgc-certify may not set sysctls, SELinux/Windows options or unconfined seccomp/AppArmor "
     "for a pod"),
    ("!variables.hasPod || " + _unset_or(
        "variables.podSpec.tolerations",
        "variables.podSpec.tolerations.all(t, has(t.key) && t.key != '' && !(t.key in "
        + _cel_list(CONTROL_PLANE_TAINTS) + "))"),
     "kgc-certify may not tolerate every taint or the control plane's"),
    ("!variables.hasPod || " + _unset_or(
        "variables.podSpec.priorityClassName",
        "!variables.podSpec.priorityClassName.startsWith('system-')"),
     "kgc-certify may not use the system priority classes"),
]


def policy() -> dict[str, Any]:
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"],
         "resources": ["namespaces", "configmaps", "services",
                       *POD_TEMPLATE_KINDS[""]]},
        *({"apiGroups": [g], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"],
           "resources": list(rs)} for g, rs in POD_TEMPLATE_KINDS.items() if g),
        {"apiGroups": [RBAC_GROUP], "apiVersions": ["v1"],
         "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["rolebindings"]},
        {"apiGroups": ["keda.sh"], "apiVersions": ["*"],
         "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["scaledobjects"]},
        {"apiGroups": [DRA_GROUP], "apiVersions": ["*"],
         "operations": ["CREATE", "UPDATE", "DELETE"], "resources": list(DRA_CLAIM_KINDS)},
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "matchConditions": [{"name": "only-the-kgc-certify-serviceaccount",
                                 "expression": f"request.userInfo.username == '{USER}'"}],
            "variables": [{"name": n, "expression": e} for n, e in VARIABLES],
            "validations": [{"expression": e, "message": m} for e, m in VALIDATIONS],
        },
    }


def manifest(variant: str = "cluster") -> list[dict[str, Any]]:
    """Every object of one variant, in apply order."""
    binding_subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                        "namespace": NAMESPACE}]
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SERVICE_ACCOUNT, "namespace": NAMESPACE},
         "automountServiceAccountToken": False},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": ROLE},
         "rules": cluster_rules(variant)},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": ROLE},
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": ROLE},
         "subjects": binding_subject},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
         "metadata": {"name": RUN_ROLE}, "rules": run_rules()},
    ]
    if variant == "namespaced":
        # bound by nobody here: `kubectl -n <ns> create rolebinding` it where the team
        # allows reading pods (the device plugin's namespace, say)
        docs.append({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
                     "metadata": {"name": POD_READER},
                     "rules": [_rule("", ["pods"], ["list"])]})
    docs += [policy(), {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": POLICY},
        "spec": {"policyName": POLICY, "validationActions": ["Deny"]}}]
    return docs


HEADER = {
    "cluster": """\
# Least-privilege access for a kgc certification run of the cluster layers (gpu, sizing, keda).
# Generated by the repository's RBAC builder (docs/rbac.md says how); a self-test keeps it
# equal. What each grant is for, and what it is not: docs/rbac.md.
#
#   kgc rbac certify | kubectl apply -f -        # this file, as the wheel ships it
#   kgc kubeconfig --service-account kgc-system/kgc-certify -o kgc-certify.kubeconfig
#
# kgc-certify (cluster-wide): RuntimeClasses, nodes, DRA DeviceClasses and ResourceSlices
# (reads), every pod's spec (sizing), run namespaces (kgc-*, labelled kgc.io/run), and the
# RoleBinding each run makes in its own namespace to kgc-certify-run: pods, their logs and
# events, ConfigMaps, ResourceClaims and ResourceClaimTemplates, Deployments, Services,
# services/proxy, ScaledObjects, HPAs -- in the run namespace only.
# The ValidatingAdmissionPolicy (Kubernetes >= 1.30) is part of the role: without it the
# account could bind kgc-certify-run anywhere and create privileged pods. It refuses, for
# this account, namespaces other than run namespaces with Pod Security baseline/restricted,
# writes outside them, any other RoleBinding, and pods or pod templates with host
# namespaces, privilege, hostPath or other host volumes, added capabilities, host ports,
# nodeName, unconfined seccomp/AppArmor, SELinux/Windows options, sysctls, control-plane
# tolerations or system priority classes; Services other than ClusterIP; DRA claims with
# adminAccess and the namespace label that allows it. If you change
# platform.namespace_prefix or platform.run_label in the profile, or bind this role to another
# subject, change the policy's expressions to match.
""",
    "namespaced": """\
# The certification role without reads of other namespaces: what kgc-certify.yaml grants,
# less the cluster-wide pod list (so: no pod, log, Deployment or Service of any namespace
# but the run's own is readable). Generated by the repository's RBAC builder (docs/rbac.md);
# docs/rbac.md lists what each layer then cannot judge (sizing's node over-commit and
# starved pods, the gpu device-plugin preflight: `error`/`skip` naming the refusal) and how
# to grant the device plugin's namespace alone:
#
#   kgc rbac certify-namespaced | kubectl apply -f -
#   kubectl -n <device plugin namespace> create rolebinding kgc-certify-pod-reader \\
#     --clusterrole kgc-certify-pod-reader --serviceaccount kgc-system:kgc-certify
#
# The ValidatingAdmissionPolicy is the same as kgc-certify.yaml's: apply one file, not both.
""",
}


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, s: str) -> yaml.ScalarNode:
    if len(s) > 80:  # CEL: folded, readable in review
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=">")
    return dumper.represent_scalar("tag:yaml.org,2002:str", s)


_Dumper.add_representer(str, _str)


def render(variant: str = "cluster") -> str:
    body = yaml.dump_all(manifest(variant), Dumper=_Dumper, sort_keys=False, width=96,
                         explicit_start=False)
    return HEADER[variant] + body.replace("\n...\n", "\n")


def manifest_docs(path: Path = MANIFEST) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def apply_certify_rbac(k: kube.Kube, path: Path = MANIFEST) -> list[str]:
    """Create every object of the manifest (those that exist already are left as they are);
    what was created, as ``kind/name``."""
    made = []
    for doc in manifest_docs(path):
        try:
            kube.create_object(k, doc)
        except ApiException as exc:
            if exc.status != 409:
                raise
            continue
        made.append(f"{doc['kind'].lower()}/{doc['metadata']['name']}")
    return made


def certify_kubeconfig(k: kube.Kube, server: str, ca_file: Path, out: Path,
                       expiration_s: int = 7200) -> Path:
    """A kubeconfig (mode 0600) that authenticates as the kgc-certify ServiceAccount with a
    bound token from the TokenRequest API — what `kubectl create token` does."""
    req: Any = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_s}}
    resp: Any = k.core.create_namespaced_service_account_token(SERVICE_ACCOUNT, NAMESPACE, req)
    token = resp.status.token
    doc = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kgc-certify",
        "clusters": [{"name": "kgc-lab", "cluster": {
            "server": server,
            "certificate-authority-data": base64.b64encode(ca_file.read_bytes()).decode()}}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
        "contexts": [{"name": "kgc-certify",
                      "context": {"cluster": "kgc-lab", "user": SERVICE_ACCOUNT}}],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return out


def wait_policy_enforced(sa: kube.Kube, timeout_s: float = 60.0) -> None:
    """Wait until the API server enforces the manifest's ValidatingAdmissionPolicy (policies
    take effect a moment after they are created): a dry-run delete of a namespace that is
    not a run's must be refused by it."""

    def refused() -> Any:
        try:
            sa.core.delete_namespace(NAMESPACE, dry_run="All", _preload_content=False)
        except ApiException as exc:
            if exc.status == 422 and POLICY in str(exc.body):
                return True
            raise
        return kube.NotYet("the dry-run delete of a non-run namespace was still allowed")

    kube.wait_for(f"ValidatingAdmissionPolicy {POLICY} enforced", refused, timeout_s, 0.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgc_lab.cluster.rbac",
                                 description="print or write the certification RBAC "
                                 "(src/kgc/data/rbac/*.yaml; deploy/rbac links to them)")
    ap.add_argument("--variant", choices=VARIANTS, default="cluster",
                    help="which manifest to print (default cluster)")
    ap.add_argument("--write", action="store_true",
                    help="write both files (the product's package data)")
    a = ap.parse_args(argv)
    if a.write:
        for variant, path in (("cluster", MANIFEST), ("namespaced", NAMESPACED_MANIFEST)):
            path.write_text(render(variant))
        return 0
    sys.stdout.write(render(a.variant))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
