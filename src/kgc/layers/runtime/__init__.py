"""Layer — containerd runtime: containerd's real NRI state, the Kata handler and Kata's
VFIO config.

The layer's query is derived from the profile (:func:`query_for`: config file, socket,
Kata config, binary paths) and joins the node's one batched collection, so a profile that
moves paths costs no extra round trip, and a bundle records exactly what was judged.
"""

from dataclasses import replace

from kgc.core.hostfs import HostQuery, HostSnapshot
from kgc.core.layer import snapshot_layer
from kgc.core.profile import Profile
from kgc.layers.runtime.checks import CHECKS
from kgc.layers.runtime.collect import (
    QUERY,
    RuntimeEvidence,
    parse,
    query_for,
    redact_snapshot,
)


def _query(profile: Profile) -> HostQuery:
    return query_for(profile.runtime)


def _describe(ev: RuntimeEvidence) -> dict[str, str]:
    return {"containerd": str(ev.version) if ev.version.known else ""}


def _redact(snap: HostSnapshot, profile: Profile) -> HostSnapshot:
    """Registry credentials in containerd's config never reach evidence, reports or bundles."""
    return redact_snapshot(snap, profile.runtime)


LAYER = replace(snapshot_layer(
    "runtime",
    "containerd really enables NRI, the Kata handler is wired, Kata plugs VFIO right",
    CHECKS,
    _query,
    parse,
    number=3,
    card="containerd + NRI",
), describe=_describe, redact=_redact)

__all__ = ["LAYER", "QUERY", "RuntimeEvidence", "parse", "query_for"]
