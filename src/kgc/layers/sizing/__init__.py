"""Layer 6 — VM sizing (``sizing.*``): pod limits -> the Kata microVM's vCPUs and memory.

PROVISIONAL ``__init__`` (the lead writes the real one): it exports the pure model
(:mod:`.model`), the evidence and its parsers (:mod:`.evidence`), the checks (:mod:`.checks`)
and the profile section (:mod:`.profile`). ``kgc.core.engine.load_layers`` imports every
layer package and needs a ``LAYER``; this one carries an EMPTY registry so the catalogue,
the README and the conformance suites are unchanged until the lead wires ``CHECKS`` with a
``gather`` that collects :class:`SizingEvidence` and a conformance suite.
"""

from kgc.core.engine import Context, Layer
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


def _gather(ctx: Context) -> SizingEvidence:  # provisional: nothing is collected yet
    return SizingEvidence()


LAYER = Layer(name="sizing", checks=Registry(), gather=_gather, query=None, host=False)

__all__ = [
    "LAYER",
    "CHECKS",
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
