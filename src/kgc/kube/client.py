"""The cluster connection: one ``Kube`` per kubeconfig context.

``connect()`` reads the kubeconfig kubectl would (``--kubeconfig``, else ``$KUBECONFIG``
merged, else ``~/.kube/config``: :mod:`kgc.kube.config`) and returns a
``Kube`` that owns the ``ApiClient`` and the typed APIs the cluster layers use. It never
contacts the cluster; ``server_version()`` does. Every failure a user can act on becomes a
``KubeError`` whose message is one line and whose ``remediation`` says what to do. The
names it exposes (``context``, ``cluster_name``, ``server``) are safe to print and record:
no credentials, no kubeconfig content, no userinfo in the URL.
"""

from __future__ import annotations

import json
import os
import re
import ssl
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.config.config_exception import ConfigException
from kubernetes.config.kube_config import KubeConfigLoader

from kgc.kube.config import KubeError, KubeRefused, KubeUnreachable, resolve

T = TypeVar("T")


def redact_url(url: str) -> str:
    """``url`` without userinfo (``https://user:pw@host`` -> ``https://host``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(unparsable server URL)"
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class Kube:
    """A connection to one cluster (one kubeconfig context) and its typed APIs."""

    def __init__(
        self,
        api: client.ApiClient,
        context: str = "",
        cluster_name: str = "",
        source: str = "",
    ) -> None:
        self.api = api
        self.context = context
        self.cluster_name = cluster_name or context
        self.source = source  # the kubeconfig path(s), for messages
        self.server = redact_url(str(api.configuration.host or ""))
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.node = client.NodeV1Api(api)
        self.rbac = client.RbacAuthorizationV1Api(api)
        self.scheduling = client.SchedulingV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.events = client.EventsV1Api(api)
        self.autoscaling = client.AutoscalingV2Api(api)
        self.extensions = client.ApiextensionsV1Api(api)
        self.registration = client.ApiregistrationV1Api(api)
        self.version = client.VersionApi(api)

    @property
    def name(self) -> str:
        """How a verdict names this cluster: the context (falls back to the server)."""
        return self.context or self.cluster_name or self.server

    def __repr__(self) -> str:
        return f"Kube(context={self.context!r}, server={self.server!r})"

    def __enter__(self) -> Kube:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.api.close()

    def call(self, verb: str, resource: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """Run one API call; refusals (401/403) and an unreachable server become
        ``KubeError`` naming ``verb`` and ``resource``. Other API errors (404, 409, 422...)
        propagate as ``ApiException``: they are answers, not connection problems."""
        try:
            return fn(*args, **kw)
        except ApiException as exc:
            if exc.status in (401, 403):
                raise api_error(exc, verb, resource, self) from None
            raise
        except (urllib3.exceptions.HTTPError, OSError, ssl.SSLError) as exc:
            raise unreachable(exc, self) from None

    def server_version(self) -> str:
        """The API server's ``gitVersion`` (e.g. ``v1.37.2``); contacts the server."""
        info = self.call("get", "/version", self.version.get_code, _request_timeout=15)
        return str(info.git_version)

    @classmethod
    def from_api_client(cls, api: client.ApiClient, context: str = "") -> Kube:
        """Wrap an ``ApiClient`` built elsewhere (e.g. with a ServiceAccount token)."""
        return cls(api, context=context, cluster_name=context)


def connect(
    kubeconfig: str | os.PathLike[str] | None = None,
    context: str | None = None,
    retries: int = 2,
) -> Kube:
    """A ``Kube`` for ``context`` (default: the kubeconfig's current-context), the files
    resolved and merged as kubectl does (:func:`kgc.kube.config.resolve`).

    Raises ``KubeError`` for a missing or malformed kubeconfig and an unknown context. Does
    not contact the cluster (call ``server_version()`` to prove it answers)."""
    r = resolve(kubeconfig, context)
    cfg = client.Configuration()
    try:
        loader = KubeConfigLoader(config_dict=r.config, active_context=r.context,
                                  config_base_path=None)
        loader.load_and_set(cfg)
    except ConfigException as exc:
        raise KubeError(
            f"kubeconfig {r.source}, context {r.context!r}: {exc}",
            "fix that context's cluster and user entries in the kubeconfig",
        ) from None
    except (OSError, ValueError, TypeError) as exc:
        # e.g. a certificate file the kubeconfig names does not exist
        raise KubeError(
            f"kubeconfig {r.source}, context {r.context!r}: {type(exc).__name__}: {exc}",
            "fix the paths/data of that context's certificates and keys",
        ) from None
    cfg.retries = retries
    return Kube(client.ApiClient(configuration=cfg), context=r.context,
                cluster_name=r.cluster or r.context, source=r.source)


def _status_message(exc: ApiException) -> str:
    try:
        body = json.loads(exc.body or "")
    except (TypeError, ValueError):
        return str(exc.reason or "")
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return str(exc.reason or "")


def api_error(exc: ApiException, verb: str, resource: str, kube: Kube | None = None) -> KubeError:
    """A ``KubeError`` for an API refusal, naming the verb and resource refused."""
    where = f"{kube.name} ({kube.server})" if kube else "the API server"
    ctx = f"context {kube.context!r}" if kube and kube.context else "these credentials"
    if exc.status == 401:
        return KubeRefused(
            f"{where} rejected the credentials of {ctx} (401 Unauthorized) on {verb} {resource}",
            f"refresh the credentials of {ctx} (expired token or client certificate?)", 401,
        )
    if exc.status == 403:
        return KubeRefused(
            f"{where} refused {verb} {resource} (403 Forbidden): {_status_message(exc)}",
            f"grant the user of {ctx} '{verb}' on '{resource}' (a Role or ClusterRole and its "
            "binding), or use a context whose user may", 403,
        )
    return KubeError(f"{where}: {verb} {resource} failed ({exc.status} {exc.reason}): "
                     f"{_status_message(exc)}", "")


def _without_ids(text: str) -> str:
    """urllib3's text names its objects by address (``<...HTTPSConnection object at
    0x7f…>``): dropped, so the same failure reads the same in every check and every run."""
    return re.sub(r"<([\w.]+) object at 0x[0-9a-f]+>", r"\1", text)


def unreachable(exc: BaseException, kube: Kube) -> KubeError:
    """A ``KubeError`` for a server that does not answer (refused, DNS, TLS, timeout)."""
    reason = exc
    inner = getattr(exc, "reason", None)
    if isinstance(inner, BaseException):
        reason = inner
    text = str(reason)
    if isinstance(reason, ssl.SSLError) or "SSL" in type(reason).__name__ or "CERTIFICATE" in text:
        return KubeUnreachable(
            f"TLS with the API server {kube.server} failed ({type(reason).__name__}: {text})",
            f"check the certificate-authority of context {kube.context!r}'s cluster "
            f"({kube.cluster_name}) against the server's certificate",
        )
    return KubeUnreachable(
        f"cannot reach the API server {kube.server} of context {kube.context!r} "
        f"({type(reason).__name__}: {_without_ids(text)})",
        "check that the cluster is up and that this machine can reach "
        f"{kube.server} (VPN, firewall, proxy)",
    )
