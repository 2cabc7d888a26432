"""Layer — the live reboot test (markers ``reboot`` and ``destructive``).

Only with the explicit flag ``--allow-reboot``. Never reboots the machine that runs kgc,
a loopback address, a container or pod, or an offline tree (the target decides, see
:meth:`kgc.core.target.NodeTarget.reboot_refusal`).

It records every PCI device's binding and ``/proc/sys/kernel/random/boot_id`` (from the
node's one batched host snapshot, so the host layers judge the state *before* the reboot),
reboots the node through the target's own transport with the reboot detached from the
session, waits -- bounded, with tenacity -- until the node answers with a new boot_id,
collects the binding again and compares device by device. A node that does not come back
yields ``error`` with the timeout and, when the lab knows it, the console log.

Under ``platform.gpu.binding: dra`` it proves the opposite of "bound again"
(``reboot.rebindable``): once the node answers it waits (bounded) for the boot to finish,
then records the bindings and the holder scan of the GPU device nodes, and the boot-time
vfio-pci bindings the node had configured before the reboot.
"""

from collections.abc import Mapping
from typing import Any

from kgc.core.layer import Gate, Layer, Scope
from kgc.layers.reboot.checks import CHECKS
from kgc.layers.reboot.collect import QUERY, RebootEvidence, bindings, gather


def _record(ev: RebootEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


LAYER = Layer(
    name="reboot",
    scope=Scope.NODE,
    title="after a real reboot every GPU target is bound to vfio-pci again",
    number=2,
    card="VFIO binding and persistence",
    checks=CHECKS,
    markers=("host", "destructive"),
    query=QUERY,
    gather=gather,
    record=_record,
    replay=RebootEvidence.from_dict,
    gate=Gate("allow_reboot", "--allow-reboot", "it reboots the node"),
)

__all__ = ["LAYER", "QUERY", "RebootEvidence", "bindings", "gather"]
