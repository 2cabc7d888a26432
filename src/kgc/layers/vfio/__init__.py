"""Layer 2 — VFIO binding: every target on vfio-pci, its device node present, its whole
IOMMU group viable, no host driver able to claim it first, host-kept devices left alone."""

from kgc.core.hostfs import HostSnapshot
from kgc.core.layer import Layer, Scope
from kgc.core.profile import Profile
from kgc.layers.vfio.checks import CHECKS
from kgc.layers.vfio.collect import QUERY, VfioEvidence, parse


def _parse(snap: HostSnapshot, profile: Profile) -> VfioEvidence:
    return parse(snap)


LAYER = Layer(
    name="vfio",
    scope=Scope.NODE,
    title="every GPU target is bound to vfio-pci and its whole IOMMU group is viable",
    checks=CHECKS,
    markers=("host",),
    query=QUERY,
    parse=_parse,
)

__all__ = ["LAYER", "QUERY", "VfioEvidence", "parse"]
