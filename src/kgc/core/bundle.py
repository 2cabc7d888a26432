"""Evidence bundles: what a node or cluster showed, recorded as one JSON file that replays
offline to the same verdicts.

``kgc-bundle/2``::

    {
      "format": "kgc-bundle/2",
      "scope": "node" | "cluster",
      "target": "gpu-a",                 # the target's name (never credentials)
      "collected_at": "...Z", "kgc_version": "...",
      "complete": true,
      "host": {...},                     # node scope: the one batched host snapshot
      "layers": {"nri": {...}, ...},     # each probe layer's own record
      "unavailable": {"gpu": {"status": "error", "reason": "...", "remediation": "...",
                              "category": "..."}},
                                         # layers whose evidence errored while recording
                                         # (every layer's outcome, when the target failed)
      "failure": {"reason": "...", "remediation": "..."}
                                         # the target did not answer (then complete: false,
                                         # no host, no layers)
    }

A failure is recorded, not dropped: offline judging gives the same ``error`` (the same
reason and remediation) as the live run that met it, never a skip for missing evidence.

``kgc-bundle/1`` (earlier node bundles: ``host`` plus probe records at the top level) is
read as well. Bundles are written with mode 0600: they describe a node in detail.

A bundle is validated completely when it is opened — its snapshot and every layer record
it holds — so a corrupt file is one clear error before anything is judged.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgc import __version__
from kgc.core.hostfs import HostSnapshot
from kgc.core.layer import Layer, Scope
from kgc.core.model import EvidenceError, Status
from kgc.core.target import Address, TargetError, redact_url

FORMAT = "kgc-bundle/2"
FORMATS = ("kgc-bundle/1", FORMAT)
_V1_META = {"format", "kgc_version", "target", "collected_at", "host", "label",
            "collector_rc", "collector_wall_s", "complete", "scope"}


class BundleError(Exception):
    """A bundle that cannot be judged. ``str()`` is one line naming the file and the fault."""


@dataclass(frozen=True)
class Bundle:
    path: Path
    scope: Scope
    name: str
    collected_at: str
    host: HostSnapshot | None
    parts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # (reason, remediation) of a target that did not answer, and per layer (status,
    # reason, remediation, category) of what recording it met: replayed as those outcomes
    failure: tuple[str, str] | None = None
    unavailable: Mapping[str, tuple[Status, str, str, str]] = field(default_factory=dict)

    origin = "bundle"
    round_trips = 0

    @property
    def redacted(self) -> str:
        return f"bundle {self.path.name}"

    def part(self, layer: str) -> Mapping[str, Any] | None:
        return self.parts.get(layer)


def _fail(path: Path, what: str) -> BundleError:
    return BundleError(f"{path}: {what}")


def load_bundle(path: str | Path, layers: Mapping[str, Layer]) -> Bundle:
    """Open and fully validate a bundle against the layers that will judge it."""
    p = Path(path)
    try:
        raw_text = p.read_bytes()
    except FileNotFoundError:
        raise _fail(p, "no such file") from None
    except OSError as exc:
        raise _fail(p, f"cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(raw_text)
    except (ValueError, RecursionError) as exc:
        raise _fail(p, f"not JSON ({type(exc).__name__}: {str(exc)[:120]})") from None
    if not isinstance(doc, dict):
        raise _fail(p, f"not a kgc evidence bundle (top level is {type(doc).__name__})")
    fmt = doc.get("format")
    if fmt not in FORMATS:
        raise _fail(p, f"not a kgc evidence bundle (format {str(fmt)[:40]!r}; "
                       f"expected one of {', '.join(FORMATS)})")
    failure = _failure(p, doc.get("failure"))
    if doc.get("complete") is False and failure is None:
        raise _fail(p, "marked incomplete (the collector did not finish); record it again")
    scope_raw = doc.get("scope", "node")
    try:
        scope = Scope(scope_raw)
    except ValueError:
        raise _fail(p, f"unknown scope {str(scope_raw)[:40]!r} (node or cluster)") from None
    target = doc.get("target")
    if not isinstance(target, str) or not target.strip():
        raise _fail(p, "`target` must be a non-empty string")
    collected = doc.get("collected_at", "")
    if not isinstance(collected, str):
        raise _fail(p, "`collected_at` must be a string")

    unavailable = _unavailable(p, doc.get("unavailable"))
    if failure is not None:
        return Bundle(p, scope, _node_name(target), collected, None, failure=failure,
                      unavailable=unavailable)
    host: HostSnapshot | None = None
    if scope is Scope.NODE:
        h = doc.get("host")
        if not isinstance(h, dict):
            raise _fail(p, "`host` (the node snapshot) must be an object")
        try:
            host = HostSnapshot.from_dict(h)
        except EvidenceError as exc:
            raise _fail(p, f"host snapshot: {exc}") from None
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise _fail(p, f"host snapshot malformed ({type(exc).__name__}: "
                           f"{str(exc)[:120]})") from None
        if not host.complete:
            raise _fail(p, "its host snapshot is marked incomplete (the collector did not "
                           "finish); record it again")

    if fmt == "kgc-bundle/1":
        parts_raw = {k: v for k, v in doc.items() if k not in _V1_META}
    else:
        parts_raw = doc.get("layers", {})
        if not isinstance(parts_raw, dict):
            raise _fail(p, "`layers` must be an object")
    parts: dict[str, Mapping[str, Any]] = {}
    for name, part in parts_raw.items():
        lay = layers.get(name)
        if lay is None:
            continue  # a layer this build does not judge
        if lay.scope is not scope:
            raise _fail(p, f"layer {name} is {lay.scope}-scoped but the bundle is {scope}")
        if not isinstance(part, dict):
            raise _fail(p, f"layer {name}: record must be an object, not {type(part).__name__}")
        if lay.replay is None:
            continue
        try:
            lay.replay(part)
        except EvidenceError as exc:
            raise _fail(p, f"layer {name}: {exc}") from None
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise _fail(p, f"layer {name}: malformed record ({type(exc).__name__}: "
                           f"{str(exc)[:120]})") from None
        parts[name] = part
    return Bundle(p, scope, _node_name(target), collected, host, parts,
                  unavailable=unavailable)


def _failure(p: Path, raw: Any) -> tuple[str, str] | None:
    if raw is None:
        return None
    if not (isinstance(raw, dict) and isinstance(raw.get("reason"), str)
            and isinstance(raw.get("remediation", ""), str)):
        raise _fail(p, "`failure` must be an object with a string `reason`")
    return raw["reason"], raw.get("remediation", "")


def _unavailable(p: Path, raw: Any) -> dict[str, tuple[Status, str, str, str]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _fail(p, "`unavailable` must be an object (layer -> outcome)")
    out = {}
    for name, v in raw.items():
        if not (isinstance(v, dict) and v.get("status") in ("error", "skip")
                and all(isinstance(v.get(k, ""), str) for k in ("reason", "remediation",
                                                                 "category"))
                and isinstance(v.get("reason"), str)):
            raise _fail(p, f"`unavailable` {str(name)[:40]!r}: expected status error|skip "
                           "and a string reason")
        out[str(name)] = (Status(v["status"]), v["reason"], v.get("remediation", ""),
                          v.get("category", "environment"))
    return out


def _node_name(recorded: str) -> str:
    """Earlier bundles recorded the target spec (``ssh://root@gpu-a``): name it the way every
    other output does (``gpu-a``), never with credentials."""
    if "://" not in recorded:
        return redact_url(recorded)
    try:
        addr = Address.parse(recorded)
    except TargetError:
        return redact_url(recorded)
    return redact_url(recorded) if addr.kind == "local" else addr.name


def write_bundle(
    path: str | Path,
    *,
    scope: Scope,
    target: str,
    host: HostSnapshot | None = None,
    parts: Mapping[str, Mapping[str, Any]] | None = None,
    meta: Mapping[str, Any] | None = None,
    unavailable: Mapping[str, Mapping[str, str]] | None = None,
    failure: Mapping[str, str] | None = None,
) -> Path:
    """Write atomically with mode 0600 (a bundle describes a node in detail). A ``failure``
    (the target did not answer) makes the bundle incomplete: it holds that failure only."""
    doc: dict[str, Any] = {
        "format": FORMAT,
        "scope": str(scope),
        "target": redact_url(target),
        "kgc_version": __version__,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": (host.complete if host is not None else True) and failure is None,
    }
    if failure is not None:
        doc["failure"] = dict(failure)
        host, parts = None, {}
    if host is not None:
        doc["host"] = host.to_dict()
    doc["layers"] = {k: dict(v) for k, v in (parts or {}).items()}
    if unavailable:
        doc["unavailable"] = {k: dict(v) for k, v in unavailable.items()}
    if meta:
        doc["meta"] = dict(meta)  # free-form notes (a lab scenario's name...); never judged
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True, default=str)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out
