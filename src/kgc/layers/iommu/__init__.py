"""Layer 1 — host IOMMU: platform support, kernel enablement, mode, interrupt remapping,
and the IOMMU group of every passthrough target."""

from kgc.core.hostfs import HostSnapshot
from kgc.core.layer import Layer, Scope
from kgc.core.profile import Profile
from kgc.layers.iommu.checks import CHECKS
from kgc.layers.iommu.collect import QUERY, IommuEvidence, parse


def _parse(snap: HostSnapshot, profile: Profile) -> IommuEvidence:
    return parse(snap)


LAYER = Layer(
    name="iommu",
    scope=Scope.NODE,
    title="the platform has an IOMMU, the kernel enabled it, every GPU target is in a group",
    checks=CHECKS,
    markers=("host",),
    query=QUERY,
    parse=_parse,
)

__all__ = ["LAYER", "QUERY", "IommuEvidence", "parse"]
