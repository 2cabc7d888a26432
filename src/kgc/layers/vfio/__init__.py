"""Layer 2 — VFIO binding: every target on vfio-pci, its device node present, its whole
IOMMU group viable, no host driver able to claim it first, host-kept devices left alone."""

from kgc.core.engine import Context, Layer
from kgc.layers.vfio.checks import CHECKS
from kgc.layers.vfio.collect import QUERY, VfioEvidence, parse


def gather(ctx: Context) -> VfioEvidence:
    return parse(ctx.host())


LAYER = Layer(name="vfio", checks=CHECKS, gather=gather, query=QUERY)

__all__ = ["LAYER", "QUERY", "VfioEvidence", "parse"]
