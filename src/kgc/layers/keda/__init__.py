"""Layer ``keda``: KEDA scale-up latency per phase, Kata vs the baseline runtime.

The live driver is :mod:`kgc.layers.keda.collect` (it creates two scale-to-zero workloads
in a labelled run namespace and drives them 0 -> K -> 0); the checks are pure
(:mod:`kgc.layers.keda.checks`); the record replays offline to identical verdicts
(:class:`KedaEvidence`). The layer also exposes ``artefacts(evidence, profile)``: the CSVs,
the timeline picture and the console's per-phase table (:mod:`kgc.layers.keda.timeline`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kgc.core.layer import Layer, Scope
from kgc.layers.keda.checks import CHECKS, analyse, keda_profile
from kgc.layers.keda.collect import gather
from kgc.layers.keda.evidence import KedaEvidence
from kgc.layers.keda.profile import KedaProfile
from kgc.layers.keda.timeline import artefacts


def _record(ev: KedaEvidence) -> Mapping[str, Any]:
    return ev.to_dict()


def _describe(ev: KedaEvidence) -> dict[str, str]:
    """Environment facts: KEDA's version and the settings that bound the latency."""
    if not isinstance(ev, KedaEvidence):
        return {}
    out = {"keda": ev.preflight.keda_version or ""}
    c = ev.kata.config if ev.kata is not None else None
    if c is not None:
        for key, val in (("keda.pollingInterval_s", c.polling_interval_s),
                         ("keda.cooldownPeriod_s", c.cooldown_period_s),
                         ("keda.hpa_sync_period_s", c.hpa_sync_period_s)):
            out[key] = "" if val is None else f"{val:g}"
    return out


@dataclass(frozen=True)
class ArtefactLayer(Layer):
    """A layer with report files: ``artefacts(evidence, profile) -> [(filename, mime,
    bytes)]``, attached to each of its Allure results and written next to verdict.json by
    the plugin. (Proposed for ``kgc.core.layer.Layer`` itself.)"""

    artefacts: Callable[[Any, Any], list[tuple[str, str, bytes]]] | None = None


LAYER = ArtefactLayer(
    name="keda",
    scope=Scope.CLUSTER,
    title="KEDA scale-up latency per phase, Kata vs the baseline runtime, within budgets",
    number=6,
    card="KEDA scale-up latency",
    checks=CHECKS,
    markers=("cluster",),
    gather=gather,
    record=_record,
    replay=KedaEvidence.from_dict,
    describe=_describe,
    artefacts=artefacts,
)

__all__ = ["CHECKS", "LAYER", "KedaEvidence", "KedaProfile", "analyse", "artefacts",
           "keda_profile"]
