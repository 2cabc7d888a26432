"""Run the suites against the lab as the least-privilege ServiceAccount of
``deploy/rbac/kgc-certify.yaml``, not as the lab's admin: the lab's real authorizer (RBAC)
and admission (the manifest's ValidatingAdmissionPolicy) then prove the manifest is enough
for a certification run — and that it does not grant more.

    apply_certify_rbac(admin_kube)                  # the manifest, as a user would apply it
    kubeconfig = certify_kubeconfig(admin_kube, lab_state, out_path)   # token of the SA
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.rest import ApiException

from kgc import kube

MANIFEST = Path(__file__).resolve().parents[4] / "deploy" / "rbac" / "kgc-certify.yaml"
NAMESPACE = "kgc-system"
SERVICE_ACCOUNT = "kgc-certify"
USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


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
            if exc.status == 422 and "kgc-certify-confine" in str(exc.body):
                return True
            raise
        return kube.NotYet("the dry-run delete of a non-run namespace was still allowed")

    kube.wait_for("ValidatingAdmissionPolicy kgc-certify-confine enforced", refused,
                  timeout_s, 0.5)
