"""Layer 1 — host IOMMU: platform support, kernel enablement, mode, interrupt remapping,
and the IOMMU group of every passthrough target."""

from kgc.core.engine import Context, Layer
from kgc.layers.iommu.checks import CHECKS
from kgc.layers.iommu.collect import QUERY, IommuEvidence, parse


def gather(ctx: Context) -> IommuEvidence:
    return parse(ctx.host())


LAYER = Layer(name="iommu", checks=CHECKS, gather=gather, query=QUERY)

__all__ = ["LAYER", "QUERY", "IommuEvidence", "parse"]
