"""Layer 2 — persistence: a static proof that each target is bound to vfio-pci again at the
next boot (modprobe.d, kernel command line from the boot loader config, initramfs contents,
driverctl, udev), without rebooting."""

from kgc.core.layer import snapshot_layer
from kgc.layers.persistence.checks import CHECKS
from kgc.layers.persistence.collect import QUERY, PersistenceEvidence, parse

LAYER = snapshot_layer(
    "persistence",
    "the vfio-pci binding is configured to survive a reboot (static proof)",
    CHECKS,
    QUERY,
    parse,
    number=2,
    card="VFIO binding and persistence",
)

__all__ = ["LAYER", "QUERY", "PersistenceEvidence", "parse"]
