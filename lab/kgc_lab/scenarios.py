"""Named lab scenarios, from every lab, behind one registry (``kgc lab run --scenario``).

A scenario brings a lab into a documented state, judges it with the real layers and writes
the same ``verdict.json`` (schema kgc-verdict/1) a conformance run writes, with the
documented expectation and any mismatch in its ``run`` section::

    "run": {"kind": "lab-scenario", "lab": "containerd", "scenario": "nri-on",
            "description": "...", "expected": {"nri.events": "pass", ...},
            "matches_documented": true, "mismatches": {}, ...lab specifics}

Labs add theirs with ``register_scenarios(LabScenario(...), ...)`` when their module is
imported. The built-in providers are listed in ``PROVIDERS``; another package (a GPU,
sizing or KEDA lab) adds its own through the entry-point group ``kgc.lab_scenarios``
(the entry point names a module that registers on import, or a callable returning
``LabScenario`` objects).
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from kgc.core import report

PROVIDERS = ("kgc_lab.node.scenarios", "kgc_lab.containerd", "kgc_lab.cluster.scenarios_gpu",
             "kgc_lab.cluster.scenarios_sizing", "kgc_lab.cluster.scenarios_keda")
ENTRY_POINT_GROUP = "kgc.lab_scenarios"


@dataclass(frozen=True)
class ScenarioOutcome:
    scenario: str
    lab: str
    verdict_json: Path
    mismatches: Mapping[str, str] = field(default_factory=dict)

    @property
    def matches(self) -> bool:
        return not self.mismatches


# run(report_dir, keep) -> outcome; writes report_dir/verdict.json
ScenarioRun = Callable[[Path, bool], ScenarioOutcome]


@dataclass(frozen=True)
class LabScenario:
    name: str
    lab: str
    description: str
    run: ScenarioRun


_REGISTRY: dict[str, LabScenario] = {}
_loaded = False


def register_scenarios(*scenarios: LabScenario) -> None:
    """Add scenarios to the registry. A name is global: the same name from another lab is
    refused (``kgc lab run --scenario NAME`` must mean one thing)."""
    for sc in scenarios:
        have = _REGISTRY.get(sc.name)
        if have is not None and have.lab != sc.lab:
            raise ValueError(f"lab scenario {sc.name!r} of lab {sc.lab!r} clashes with the "
                             f"one of lab {have.lab!r}")
        _REGISTRY[sc.name] = sc


def _load() -> None:
    global _loaded
    if _loaded:
        return
    for mod in PROVIDERS:
        importlib.import_module(mod)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        obj = ep.load()
        if callable(obj):
            register_scenarios(*obj())
    _loaded = True


def scenarios() -> dict[str, LabScenario]:
    """Every registered scenario by name (built-in providers and entry points loaded)."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def write_scenario_verdict(
    path: Path,
    lab: str,
    scenario: str,
    description: str,
    results: Iterable[Mapping[str, Any]],
    expected: Mapping[str, str],
    mismatches: Mapping[str, str],
    layers: Sequence[str] = (),
    **extra: Any,
) -> Path:
    """``verdict.json`` of one scenario, in the conformance run's schema; ``layers``: the
    layers the scenario judged (default: those its results name), said in ``run.layers``
    as a conformance run says them."""
    rows = [dict(r) for r in results]
    selected = list(layers) or list(dict.fromkeys(str(r.get("layer")) for r in rows))
    judged = [n for n in selected if any(r.get("layer") == n and r.get("status") != "skip"
                                         for r in rows)]
    try:
        from kgc.core.registry import load_layers

        every = list(load_layers())
    except ImportError:  # pragma: no cover - an older core without the registry
        every = selected
    run = {
        "kind": "lab-scenario",
        "lab": lab,
        "scenario": scenario,
        "description": description,
        "layers": selected,
        "layers_judged": judged,
        "scope": report.scope_note(selected, judged, every),
        "expected": dict(expected),
        "matches_documented": not mismatches,
        "mismatches": dict(mismatches),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **extra,
    }
    return report.write_verdict_json(Path(path), rows, run)
