"""Layer ``keda``: KEDA scale-up latency per phase, Kata vs the baseline runtime.

PROVISIONAL (the lead owns this file). The registry imports every package named in
``LAYER_MODULES`` and reads its ``LAYER``, so this package must define one as soon as it
exists. Until the live driver is wired, ``LAYER`` carries an EMPTY registry (nothing in the
catalogue, the README table or the suites changes) and a ``gather`` that records
``not-run``. The real catalogue is :data:`kgc.layers.keda.checks.CHECKS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgc.core.layer import Layer, Scope
from kgc.core.model import Registry
from kgc.layers.keda.checks import CHECKS, analyse, keda_profile
from kgc.layers.keda.evidence import KedaEvidence
from kgc.layers.keda.profile import KedaProfile


def _not_wired(ctx: Any) -> KedaEvidence:
    return KedaEvidence("not-run", "the KEDA latency driver is not wired into this build yet")


def _record(ev: KedaEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


LAYER = Layer(
    name="keda",
    scope=Scope.CLUSTER,
    title="KEDA scale-up latency per phase, Kata vs the baseline runtime, within budgets",
    checks=Registry(),  # provisional: CHECKS is wired by the lead with the live driver
    markers=("cluster",),
    gather=_not_wired,
    record=_record,
    replay=KedaEvidence.from_dict,
)

__all__ = ["CHECKS", "LAYER", "KedaEvidence", "KedaProfile", "analyse", "keda_profile"]
