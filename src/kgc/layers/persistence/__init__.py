"""Layer 3 — persistence: a static proof that each target is bound to vfio-pci again at the
next boot (modprobe.d, kernel command line from the boot loader config, initramfs contents,
driverctl, udev), without rebooting."""

from kgc.core.engine import Context, Layer
from kgc.layers.persistence.checks import CHECKS
from kgc.layers.persistence.collect import QUERY, PersistenceEvidence, parse


def gather(ctx: Context) -> PersistenceEvidence:
    return parse(ctx.host())


LAYER = Layer(name="persistence", checks=CHECKS, gather=gather, query=QUERY)

__all__ = ["LAYER", "QUERY", "PersistenceEvidence", "parse"]
