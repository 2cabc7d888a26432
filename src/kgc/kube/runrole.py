"""A run's in-namespace rights: a RoleBinding of the ClusterRole ``kgc-certify-run`` to the
run's own identity, in the run's namespace only.

Why: a run works in a namespace it creates (``kgc-<run id>``), so no cluster admin can bind
its rights there ahead of time, and a ClusterRoleBinding would grant them in *every*
namespace (pod logs, Deployment reads, ``services/proxy`` to any Service of the cluster).
The certification role (``deploy/rbac/kgc-certify.yaml``) therefore grants only ``create``
on RoleBindings plus ``bind`` on this one ClusterRole, and its ValidatingAdmissionPolicy
lets that account create a RoleBinding only in a run namespace, to this role, for itself.
The run binds it right after creating its namespace and waits until the authorizer honours
it.

Credentials that already hold the run's rights there (an admin's) get no binding; those that
may not create it (another role may grant the rights otherwise) go on without it: every
later call names its own refusal.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kgc.kube.client import Kube, KubeError
from kgc.kube.wait import WaitTimeout, wait_for

RUN_ROLE = "kgc-certify-run"
BINDING = "kgc-certify-run"
SA_PREFIX = "system:serviceaccount:"
# what a run does in its namespace (a sample of RUN_ROLE's rules): credentials that hold all
# of it already (an admin's) get no binding
RUN_RIGHTS = (("watch", "serviceaccounts"), ("create", "pods"), ("get", "pods/log"),
              ("create", "services/proxy"), ("create", "deployments.apps"))


def subject_of(username: str) -> dict[str, str]:
    """The RBAC subject of an authenticated user name (ServiceAccounts by their object)."""
    if username.startswith(SA_PREFIX):
        ns, _, name = username[len(SA_PREFIX):].partition(":")
        return {"kind": "ServiceAccount", "name": name, "namespace": ns}
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": username}


def binding_manifest(namespace: str, username: str, role: str = RUN_ROLE) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": BINDING, "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role},
        "subjects": [subject_of(username)],
    }


def whoami(kube: Kube) -> str | None:
    """The caller's user name (SelfSubjectReview, allowed to every authenticated user);
    None when the server does not answer it."""
    try:
        review: Any = kube.call("create", "selfsubjectreviews",
                                client.AuthenticationV1Api(kube.api).create_self_subject_review,
                                {"apiVersion": "authentication.k8s.io/v1",
                                 "kind": "SelfSubjectReview"}, _request_timeout=15)
    except (KubeError, ApiException):
        return None
    info = getattr(getattr(review, "status", None), "user_info", None)
    name = getattr(info, "username", None)
    return str(name) if name else None


def allowed(kube: Kube, namespace: str, verb: str, resource: str) -> bool:
    """Whether the caller may ``verb`` ``resource`` in ``namespace`` (SelfSubjectAccessReview)."""
    res, _, group = resource.partition(".")  # "deployments.apps", "services/proxy"
    res, _, sub = res.partition("/")
    attrs = {"namespace": namespace, "verb": verb, "resource": res, "group": group}
    if sub:
        attrs["subresource"] = sub
    try:
        r: Any = kube.call("create", "selfsubjectaccessreviews",
                           client.AuthorizationV1Api(kube.api)
                           .create_self_subject_access_review,
                           {"apiVersion": "authorization.k8s.io/v1",
                            "kind": "SelfSubjectAccessReview",
                            "spec": {"resourceAttributes": attrs}}, _request_timeout=15)
    except (KubeError, ApiException):
        return False
    return bool(getattr(getattr(r, "status", None), "allowed", False))


def bind_run_role(run: Any, timeout_s: float = 20.0) -> str:
    """Bind ``RUN_ROLE`` to the caller in ``run.namespace`` (through ``run.create``: labelled,
    recorded, gone with the namespace) and wait until the authorizer honours it (the next
    thing a run does is watch the namespace's ServiceAccounts). Returns what happened, for
    notes: ``"bound"``, or why not."""
    if all(allowed(run.kube, run.namespace, verb, res) for verb, res in RUN_RIGHTS):
        return "not needed (the credentials hold the run's rights here)"
    user = whoami(run.kube)
    if user is None:
        return "not bound: the API server did not say who the credentials are"
    try:
        run.create(binding_manifest(run.namespace, user))
    except KubeError as exc:  # 401/403: these credentials bring their own rights
        return f"not bound: {exc}"
    except ApiException as exc:
        if exc.status != 409:
            raise
    try:
        wait_for("the run role's binding to be honoured",
                 lambda: allowed(run.kube, run.namespace, "watch", "serviceaccounts"),
                 timeout_s, interval_s=0.1)
    except WaitTimeout:
        return f"bound, but not yet honoured after {timeout_s:.0f} s"
    return "bound"
