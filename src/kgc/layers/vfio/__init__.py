"""Layer 2 — VFIO binding: every target on vfio-pci, its device node present, its whole
IOMMU group viable, no host driver able to claim it first, host-kept devices left alone."""

from kgc.core.layer import snapshot_layer
from kgc.layers.vfio.checks import CHECKS
from kgc.layers.vfio.collect import QUERY, VfioEvidence, parse

LAYER = snapshot_layer(
    "vfio",
    "every GPU target is bound to vfio-pci and its whole IOMMU group is viable",
    CHECKS,
    QUERY,
    parse,
    number=2,
    card="VFIO binding and persistence",
)

__all__ = ["LAYER", "QUERY", "VfioEvidence", "parse"]
