"""Layer ``sizing`` (``sizing.*``): pod limits -> the Kata microVM's vCPUs and memory.

Cluster scope. ``gather`` (:mod:`.collect`) reads the cluster's Pods, Nodes and
RuntimeClasses, runs one pod per shape of the profile's matrix (``cluster.sizing.shapes``)
with kgc's in-guest collector, measures the default VM with a limit-less probe pod where the
profile does not describe a Kata RuntimeClass, and records :class:`SizingEvidence`
(``record``/``replay``: ``kgc snapshot --kubeconfig`` + ``kgc evaluate`` judge it offline to
identical verdicts). The checks (:mod:`.checks`) are pure; the model (:mod:`.model`) is
Kata's sizing rules as a function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgc.core.layer import Layer, Scope
from kgc.layers.sizing.checks import CHECKS, judge_guest, judge_shape
from kgc.layers.sizing.collect import gather
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


def _record(ev: SizingEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


LAYER = Layer(
    name="sizing",
    scope=Scope.CLUSTER,
    title="Kata VM sizing: pod limits -> vCPUs and memory, starved pods, node over-commit",
    number=5,
    card="Resource limits -> VM sizing",
    checks=CHECKS,
    markers=("cluster",),
    gather=gather,
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
    "gather",
    "judge_guest",
    "judge_shape",
    "kata_config_from_runtime",
    "resolve_config",
    "shape_manifest",
]
