"""Layer 4 — the live reboot test (markers ``reboot`` and ``destructive``).

Only with the explicit option ``allow_reboot`` (``--allow-reboot``). Never reboots the
machine that runs kgc (``local://``) nor a directory tree (``chroot://``, ``KGC_ROOT``).

It records every PCI device's binding and ``/proc/sys/kernel/random/boot_id`` (from the
node's one batched host snapshot, so the host layers judge the state *before* the reboot),
reboots the node through the target's own transport with the reboot detached from the
session, waits -- bounded, with tenacity -- until the node answers with a new boot_id,
collects the binding again and compares device by device. A node that does not come back
yields ``error`` with the timeout and, when the lab knows it, the console log.
"""

from kgc.core.engine import Layer
from kgc.layers.reboot.checks import CHECKS
from kgc.layers.reboot.collect import QUERY, RebootEvidence, bindings, gather

LAYER = Layer(name="reboot", checks=CHECKS, gather=gather, query=QUERY, host=False)

__all__ = ["LAYER", "QUERY", "RebootEvidence", "bindings", "gather"]
