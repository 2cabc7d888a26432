"""Which kubeconfig and context a run talks to: kubectl's loading rules, decided once.

Every entry point (pytest's cluster target, ``kgc snapshot``, ``kgc cleanup``, ``kgc fleet
collect``) resolves the cluster here, so ``KUBECONFIG=a:b`` means the same cluster in each
of them and the same one ``kubectl`` reaches:

- ``--kubeconfig FILE``: only that file (it must exist), no merging;
- else ``$KUBECONFIG`` (set and non-empty): its colon-separated list, empty entries and
  files that do not exist skipped, the rest merged: for ``clusters``, ``users`` and
  ``contexts`` the first file to define a name wins (the whole entry: later files' fields
  for that name are dropped), ``current-context`` comes from the first file that sets a
  non-empty one;
- else ``~/.kube/config``.

The entry-level merge is the ``kubernetes`` client's ``KubeConfigMerger``; two of its
differences from kubectl are corrected here: it takes ``current-context`` from the *last*
file that sets it, and it reads a user's relative certificate paths against the directory
of the file that defined the *cluster*. kubectl (client-go ``ResolveLocalPaths``) resolves
each entry's relative paths against the file that defined that entry; so does this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes.config.kube_config import ENV_KUBECONFIG_PATH_SEPARATOR, KubeConfigMerger

DEFAULT_KUBECONFIG = "~/.kube/config"

# the path fields client-go resolves against the file that defined the entry
_PATH_FIELDS = {"clusters": ("certificate-authority",),
                "users": ("client-certificate", "client-key", "tokenFile")}


class KubeError(Exception):
    """A cluster could not be used: one-line message naming the thing, plus ``remediation``
    (defined here, below the client, so the kubeconfig's own errors are ``KubeError`` too)."""

    def __init__(self, message: str, remediation: str = "") -> None:
        super().__init__(" ".join(message.split()))
        self.remediation = remediation


class NoKubeconfig(KubeError):
    """No file to read: an explicit ``--kubeconfig`` that does not exist, or none of the
    candidates (``$KUBECONFIG``'s entries, ``~/.kube/config``) does."""


class UnknownContext(KubeError):
    """``--context NAME`` (or the current-context) names no context of the merged files."""


class KubeRefused(KubeError):
    """The API server answered 401 or 403: these credentials, not the cluster, are the
    problem (``status`` holds the code)."""

    def __init__(self, message: str, remediation: str = "", status: int = 0) -> None:
        super().__init__(message, remediation)
        self.status = status


class KubeUnreachable(KubeError):
    """The API server did not answer: connection refused, DNS, timeout, TLS."""


def explicit(kubeconfig: str | os.PathLike[str] | None) -> bool:
    """``--kubeconfig`` was given (an empty string counts as not given, as in kubectl)."""
    return kubeconfig is not None and str(kubeconfig) != ""


def kubeconfig_paths(kubeconfig: str | os.PathLike[str] | None = None) -> list[Path]:
    """The candidate files in precedence order: the argument, else every non-empty entry of
    ``$KUBECONFIG`` (duplicates once), else ``~/.kube/config``. A ``$KUBECONFIG`` of only
    separators names no file at all (kubectl then reads nothing, not ``~/.kube/config``)."""
    if explicit(kubeconfig):
        return [Path(os.path.expanduser(str(kubeconfig)))]
    env = os.environ.get("KUBECONFIG", "")
    if env:
        out: list[Path] = []
        for p in env.split(ENV_KUBECONFIG_PATH_SEPARATOR):
            path = Path(os.path.expanduser(p)) if p else None
            if path is not None and path not in out:
                out.append(path)
        return out
    return [Path(os.path.expanduser(DEFAULT_KUBECONFIG))]


def kubeconfig_files(kubeconfig: str | os.PathLike[str] | None = None) -> list[Path]:
    """The files that are read: the candidates that exist (kubectl ignores the others)."""
    return [p for p in kubeconfig_paths(kubeconfig) if p.is_file()]


def configured(kubeconfig: str | os.PathLike[str] | None = None) -> bool:
    """A cluster is asked for: ``--kubeconfig`` given, ``$KUBECONFIG`` set, or
    ``~/.kube/config`` present. (A ``$KUBECONFIG`` naming only missing files still asks:
    the run reports that, rather than skipping the cluster as if none was meant.)"""
    return explicit(kubeconfig) or bool(os.environ.get("KUBECONFIG")) or bool(
        kubeconfig_files(None))


@dataclass
class Resolved:
    """The merged kubeconfig and the context in use. ``config`` holds credentials: it is
    for ``KubeConfigLoader`` only, never printed (not in ``repr``)."""

    source: str  # the candidate path(s), as messages name them
    files: list[Path]  # the files read, in precedence order
    context: str
    cluster: str  # the context's cluster entry's name
    user: str
    contexts: list[str]
    config: Any = field(repr=False, default=None)  # the merger's ConfigNode


def resolve(kubeconfig: str | os.PathLike[str] | None = None,
            context: str | None = None) -> Resolved:
    """Merge the files as kubectl does and pick ``context`` (default: the merged
    current-context). Raises ``NoKubeconfig``, ``UnknownContext`` or ``KubeError``
    (a file that is not a kubeconfig); never contacts the cluster."""
    paths = kubeconfig_paths(kubeconfig)
    source = os.pathsep.join(str(p) for p in paths) or os.environ.get("KUBECONFIG", "")
    files = [p for p in paths if p.is_file()]
    if not files:
        raise NoKubeconfig(
            f"no kubeconfig at {source or '(empty $KUBECONFIG)'}",
            "pass --kubeconfig PATH, set KUBECONFIG, or create ~/.kube/config "
            "(e.g. `kubectl config view --raw > ~/.kube/config` on a machine that has one)",
        )
    read = [(p, read_kubeconfig(p)) for p in files]
    docs = [(p, d) for p, d in read if d is not None]  # an empty file adds nothing
    if not docs:
        raise NoKubeconfig(f"kubeconfig {source} is empty",
                           "point --kubeconfig at a kubeconfig with a context")
    merger = KubeConfigMerger(ENV_KUBECONFIG_PATH_SEPARATOR.join(str(p) for p, _ in docs))
    merged = merger.config
    current = next((str(d["current-context"]) for _, d in docs
                    if d.get("current-context")), "")
    merged.value["current-context"] = current  # the first file that sets it, not the last
    for key, fields in _PATH_FIELDS.items():
        for node in merged.value.get(key) or []:
            _absolute(node.value.get(key[:-1]), node.path, fields, exec_=key == "users")
    names = [str(c.value["name"]) for c in merged.value.get("contexts") or []]
    wanted = context or current
    known = ", ".join(names) or "none"
    if not wanted:
        raise UnknownContext(f"kubeconfig {source} has no current-context and none was given",
                             f"pass --context NAME (known: {known})")
    if wanted not in names:
        raise UnknownContext(f"context {wanted!r} not found in kubeconfig {source}",
                             f"pass one of the kubeconfig's contexts: {known}")
    body = next(c.value for c in merged.value["contexts"] if c.value["name"] == wanted)
    ctx = body.get("context") if isinstance(body.get("context"), dict) else {}
    return Resolved(source=source, files=[p for p, _ in docs], context=str(wanted),
                    cluster=str(ctx.get("cluster") or ""), user=str(ctx.get("user") or ""),
                    contexts=names, config=merged)


def _absolute(body: Any, origin: str | None, fields: tuple[str, ...], exec_: bool) -> None:
    """Relative paths of one entry made absolute against its own file's directory."""
    if not isinstance(body, dict) or not origin:
        return
    base = os.path.dirname(os.path.abspath(origin))
    for f in fields:
        v = body.get(f)
        if isinstance(v, str) and v and not os.path.isabs(v):
            body[f] = os.path.join(base, v)
    cmd = body.get("exec", {}).get("command") if exec_ and isinstance(body.get("exec"),
                                                                      dict) else None
    if isinstance(cmd, str) and os.sep in cmd and not os.path.isabs(cmd):
        body["exec"]["command"] = os.path.join(base, cmd)


def read_kubeconfig(path: Path) -> dict[str, Any] | None:
    """One kubeconfig file, checked for the shape the loader relies on (``None``: empty)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise KubeError(f"kubeconfig {path} is not valid YAML ({type(exc).__name__})",
                              "fix the file, or point --kubeconfig at a valid one") from None
    except OSError as exc:
        raise KubeError(f"kubeconfig {path} cannot be read ({exc.strerror or exc})",
                              "check the file's permissions (the kubeconfig must be readable)"
                              ) from None
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise KubeError(
            f"kubeconfig {path} is not a kubeconfig (no mapping at the top level)",
            "point --kubeconfig at a kubeconfig file")
    for key in ("clusters", "contexts", "users"):
        items = doc.get(key)
        if items is None:
            continue
        if not isinstance(items, list) or not all(
            isinstance(i, dict) and isinstance(i.get("name"), str) for i in items
        ):
            raise KubeError(f"kubeconfig {path}: `{key}` must be a list of named entries",
                                  f"fix the `{key}` section of the kubeconfig")
        for i in items:
            body = i.get(key[:-1])
            if body is not None and not isinstance(body, dict):
                raise KubeError(
                    f"kubeconfig {path}: {key[:-1]} {i['name']!r} is not a mapping",
                    f"fix the `{key}` section of the kubeconfig")
    return doc
