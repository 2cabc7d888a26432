"""Layer ``sizing`` (``sizing.*``): pod limits -> the Kata microVM's vCPUs and memory.

PROVISIONAL ``__init__`` (the lead writes the real one): it exports the pure model
(:mod:`.model`), the evidence and its parsers (:mod:`.evidence`), the checks (:mod:`.checks`)
and the profile section (:mod:`.profile`). The registry imports every layer package and
needs a ``LAYER``; this one (shaped like the keda layer's provisional one) carries an EMPTY
registry, so the catalogue, the README and the suites are unchanged until the lead wires
``CHECKS`` with a ``gather`` that collects :class:`SizingEvidence` and a conformance suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgc.core.layer import Layer, Scope
from kgc.core.model import Registry
from kgc.layers.sizing.checks import CHECKS, judge_guest, judge_shape
from kgc.layers.sizing.evidence import (
    SIZING_GUEST_QUERY,
    ClusterObjects,
    GuestSize,
    KataConfigSource,
    ShapeObservation,
    SizingEvidence,
    kata_config_from_runtime,
    resolve_config,
)
from kgc.layers.sizing.model import KataSizing, PodShape, SizingInputError, VmSize, expected_vm
from kgc.layers.sizing.profile import SizingProfile, shape_manifest


def _not_wired(ctx: Any) -> SizingEvidence:  # provisional: nothing is collected yet
    return SizingEvidence(notes=("the sizing driver is not wired into this build yet",))


def _record(ev: SizingEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


LAYER = Layer(
    name="sizing",
    scope=Scope.CLUSTER,
    title="Kata VM sizing: pod limits -> vCPUs and memory, starved pods, node over-commit",
    checks=Registry(),  # provisional: CHECKS is wired by the lead with the live driver
    markers=("cluster",),
    gather=_not_wired,
    record=_record,
    replay=SizingEvidence.from_dict,
)

__all__ = [
    "CHECKS",
    "LAYER",
    "SIZING_GUEST_QUERY",
    "ClusterObjects",
    "GuestSize",
    "KataConfigSource",
    "KataSizing",
    "PodShape",
    "ShapeObservation",
    "SizingEvidence",
    "SizingInputError",
    "SizingProfile",
    "VmSize",
    "expected_vm",
    "judge_guest",
    "judge_shape",
    "kata_config_from_runtime",
    "resolve_config",
    "shape_manifest",
]
