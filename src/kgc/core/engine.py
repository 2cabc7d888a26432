"""The engine: layers, the per-target context, and judging checks.

A layer is data: its checks, the host query its collector needs (if any), and a ``gather``
function that does the layer's I/O and returns the evidence object its pure evaluators
judge. The context caches the one batched host snapshot and each layer's evidence, so a
whole host run costs one round trip per node however many checks and devices there are.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.core.hostfs import HostQuery, HostSnapshot
from kgc.core.model import Check, Outcome, Registry, Status, Verdict
from kgc.core.profile import Profile
from kgc.core.target import BundleTarget, Target, TargetError

# Every layer package the product knows, in report order. A package that is not present
# in this build is simply absent from the catalogue.
LAYER_MODULES = (
    "kgc.layers.iommu",
    "kgc.layers.vfio",
    "kgc.layers.persistence",
    "kgc.layers.reboot",
    "kgc.layers.runtime",
    "kgc.layers.nri",
    "kgc.layers.gpu",
    "kgc.layers.sizing",
    "kgc.layers.keda",
)


@dataclass(frozen=True)
class Layer:
    name: str
    checks: Registry
    gather: Callable[[Context], Any]
    # what the layer reads from a node: fixed, or derived from the profile (paths it moves)
    query: HostQuery | Callable[[Profile], HostQuery] | None = None
    host: bool = True  # part of `pytest -m host`

    def __post_init__(self) -> None:
        for c in self.checks:
            if c.layer != self.name:
                raise ValueError(f"check {c.id} registered under layer {self.name}")


def load_layers(modules: Iterable[str] = LAYER_MODULES) -> dict[str, Layer]:
    layers: dict[str, Layer] = {}
    for mod in modules:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name == mod:
                continue
            raise
        layer: Layer = m.LAYER
        layers[layer.name] = layer
    return layers


def catalogue(layers: Mapping[str, Layer] | None = None) -> Registry:
    layers = load_layers() if layers is None else layers
    reg = Registry()
    return reg.merge(*(lay.checks for lay in layers.values()))


def host_query(layers: Mapping[str, Layer], profile: Profile) -> HostQuery:
    """The union of every host layer's query for this profile: one script, one round trip."""
    q = HostQuery()
    for lay in layers.values():
        if lay.query is None:
            continue
        q = q | (lay.query(profile) if callable(lay.query) else lay.query)
    return q


@dataclass
class Context:
    """Everything one target's checks see. I/O happens only through ``gather``."""

    target: Target
    profile: Profile
    layers: Mapping[str, Layer]
    options: Mapping[str, Any] = field(default_factory=dict)
    _host: HostSnapshot | None = None
    _host_error: str | None = None
    _evidence: dict[str, Any] = field(default_factory=dict)
    _gather_errors: dict[str, str] = field(default_factory=dict)
    _checks: Registry | None = None

    @property
    def name(self) -> str:
        return self.target.name

    def host(self) -> HostSnapshot:
        """The node's one batched snapshot for all host layers (collected once)."""
        if self._host is None:
            if self._host_error is not None:
                raise TargetError(self._host_error)
            try:
                self._host = self.target.collect(host_query(self.layers, self.profile))
            except TargetError as exc:
                self._host_error = str(exc)
                raise
        return self._host

    def bundle_extra(self, key: str) -> Any:
        if isinstance(self.target, BundleTarget):
            return self.target.extra(key)
        return None

    @property
    def offline(self) -> bool:
        return isinstance(self.target, BundleTarget)

    def evidence(self, layer: str) -> Any:
        if layer in self._gather_errors:
            raise TargetError(self._gather_errors[layer])
        if layer not in self._evidence:
            try:
                self._evidence[layer] = self.layers[layer].gather(self)
            except TargetError as exc:
                self._gather_errors[layer] = str(exc)
                raise
        return self._evidence[layer]

    def check(self, check_id: str) -> Check:
        if self._checks is None:
            self._checks = catalogue(self.layers)
        return self._checks.get(check_id)

    def judge(self, check_id: str) -> Verdict:
        chk = self.check(check_id)
        try:
            ev = self.evidence(chk.layer)
        except TargetError as exc:
            return _error_verdict(chk, self.name, f"evidence could not be collected: {exc}")
        return chk.judge(ev, self.profile, self.name)

    def judge_all(self, layer_names: Iterable[str] | None = None) -> list[Verdict]:
        names = list(self.layers) if layer_names is None else list(layer_names)
        out = []
        for n in names:
            for chk in self.layers[n].checks:
                out.append(self.judge(chk.id))
        return out


def _error_verdict(chk: Check, target: str, reason: str) -> Verdict:
    out = Outcome(
        Status.ERROR,
        reason,
        {},
        "Make the node reachable and the collector runnable (see the reason), then rerun.",
    )
    return Check(
        chk.id, chk.layer, chk.title, chk.severity, chk.remediation, lambda _e, _p: out
    ).judge(None, None, target)
