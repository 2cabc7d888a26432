"""Layer 1 — host IOMMU: platform support, kernel enablement, mode, interrupt remapping,
and the IOMMU group of every passthrough target."""

from kgc.core.layer import snapshot_layer
from kgc.layers.iommu.checks import CHECKS
from kgc.layers.iommu.collect import QUERY, IommuEvidence, parse

LAYER = snapshot_layer(
    "iommu",
    "the platform has an IOMMU, the kernel enabled it, every GPU target is in a group",
    CHECKS,
    QUERY,
    parse,
    number=1,
    card="Host IOMMU",
)

__all__ = ["LAYER", "QUERY", "IommuEvidence", "parse"]
