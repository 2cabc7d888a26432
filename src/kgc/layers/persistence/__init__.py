"""Layer 3 — persistence: a static proof that each target is bound to vfio-pci again at the
next boot (modprobe.d, kernel command line from the boot loader config, initramfs contents,
driverctl, udev), without rebooting."""

from kgc.core.hostfs import HostSnapshot
from kgc.core.layer import Layer, Scope
from kgc.core.profile import Profile
from kgc.layers.persistence.checks import CHECKS
from kgc.layers.persistence.collect import QUERY, PersistenceEvidence, parse


def _parse(snap: HostSnapshot, profile: Profile) -> PersistenceEvidence:
    return parse(snap)


LAYER = Layer(
    name="persistence",
    scope=Scope.NODE,
    title="the vfio-pci binding is configured to survive a reboot (static proof)",
    checks=CHECKS,
    markers=("host",),
    query=QUERY,
    parse=_parse,
)

__all__ = ["LAYER", "QUERY", "PersistenceEvidence", "parse"]
