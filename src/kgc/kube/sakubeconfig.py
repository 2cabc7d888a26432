"""A kubeconfig that authenticates as a ServiceAccount: what `kgc kubeconfig
--service-account NS/NAME -o FILE` writes for a certification run.

The user's own context (the one kubectl uses, or ``--context``) names the cluster; a bound
token comes from the TokenRequest API (``POST .../serviceaccounts/NAME/token``, what
`kubectl create token` does: it expires, it is never stored as a Secret); the file carries
that cluster entry — its CA embedded, so the file stands alone — and the token, and nothing
else of the user's kubeconfig (no other cluster, user or credential). It is written 0600.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Any

import yaml
from kubernetes.client.rest import ApiException

from kgc.kube.client import KubeError, connect
from kgc.kube.config import resolve

# the fields of a kubeconfig cluster entry that say how to reach and trust the server
_CLUSTER_FIELDS = ("server", "certificate-authority-data", "insecure-skip-tls-verify",
                   "tls-server-name", "proxy-url", "disable-compression")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def parse_account(spec: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` -> (namespace, name); ValueError (one line) otherwise."""
    ns, sep, name = spec.partition("/")
    if not sep or not _NAME.match(ns) or not _NAME.match(name):
        raise ValueError(f"--service-account {spec!r}: give NAMESPACE/NAME "
                         "(e.g. kgc-system/kgc-certify)")
    return ns, name


def _cluster_entry(kubeconfig: str | None, context: str | None) -> tuple[str, dict[str, Any]]:
    """The context's cluster entry (name, body) with its CA file read in."""
    r = resolve(kubeconfig, context)
    for node in r.config.value.get("clusters") or []:
        if str(node.value.get("name")) == r.cluster:
            body = node.value.get("cluster")
            body = body.value if hasattr(body, "value") else body
            break
    else:
        raise KubeError(f"kubeconfig {r.source}: context {r.context!r} names cluster "
                        f"{r.cluster!r}, which it does not define",
                        "fix the context's cluster entry in the kubeconfig")
    out = {k: body[k] for k in _CLUSTER_FIELDS if isinstance(body, dict) and k in body}
    ca = body.get("certificate-authority") if isinstance(body, dict) else None
    if ca and "certificate-authority-data" not in out:
        try:
            out["certificate-authority-data"] = base64.b64encode(Path(ca).read_bytes()).decode()
        except OSError as exc:
            raise KubeError(f"kubeconfig {r.source}: cluster {r.cluster!r}: CA file {ca}: "
                            f"{exc.strerror or exc}", "fix the certificate-authority path"
                            ) from None
    if not out.get("server"):
        raise KubeError(f"kubeconfig {r.source}: cluster {r.cluster!r} has no server",
                        "fix the cluster entry (server: https://...)")
    return r.cluster or r.context, out


def service_account_kubeconfig(account: str, *, kubeconfig: str | None = None,
                               context: str | None = None,
                               duration_s: int = 7200) -> dict[str, Any]:
    """The kubeconfig document (see the module docstring). Raises :class:`KubeError` when
    the kubeconfig or context is bad, the API server cannot be reached or refuses the
    TokenRequest (the account missing: apply the RBAC first)."""
    ns, name = parse_account(account)
    cluster, entry = _cluster_entry(kubeconfig, context)
    k = connect(kubeconfig, context)
    req = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
           "spec": {"expirationSeconds": int(duration_s)}}
    with k:
        try:
            resp: Any = k.call("create", f"serviceaccounts/{name}/token in {ns}",
                               k.core.create_namespaced_service_account_token, name, ns, req)
        except ApiException as exc:
            if exc.status == 404:
                raise KubeError(f"{k.name}: no ServiceAccount {ns}/{name}",
                                "apply the certification role first: "
                                "kgc rbac certify | kubectl apply -f -") from None
            raise KubeError(f"{k.name}: TokenRequest for {ns}/{name} failed ({exc.status} "
                            f"{exc.reason})", "check the account and your rights to "
                            "create serviceaccounts/token in its namespace") from None
    token = resp.status.token
    ctx = f"{name}@{cluster}"
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": ctx,
        "clusters": [{"name": cluster, "cluster": entry}],
        "users": [{"name": f"{ns}/{name}", "user": {"token": token}}],
        "contexts": [{"name": ctx, "context": {"cluster": cluster, "user": f"{ns}/{name}",
                                               "namespace": ns}}],
    }


def write_private(path: Path, doc: dict[str, Any]) -> Path:
    """Write ``doc`` as YAML, mode 0600 from the first byte (a token is a credential);
    an existing file is replaced and keeps no wider mode."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            yaml.safe_dump(doc, f, sort_keys=False)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
