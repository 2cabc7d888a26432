"""The one list of layers. The CLI, the pytest plugin, the labs and the README catalogue
all read it from here; nowhere else names the layers."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Mapping

from kgc.core.layer import Layer, Scope
from kgc.core.model import Registry

# Every layer package. Report order is the card number each declares (Layer.number), then
# this order among the packages of one card layer.
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

# Markers every layer may carry besides its own name.
MARKERS = {
    "host": "node layers, judged on each node (iommu, vfio, persistence, reboot, runtime, nri)",
    "cluster": "cluster layers, judged once per cluster through its API (gpu, sizing, keda)",
    "destructive": "changes the node (reboot); runs only with its explicit flag",
    "probe": "acts on the node or cluster beyond reading (probe plugin, pods); needs its flag",
}


@functools.cache
def _load_all() -> tuple[Layer, ...]:
    out = []
    for mod in LAYER_MODULES:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name == mod:  # a layer not built yet is simply absent
                continue
            raise
        out.append(m.LAYER)
    return tuple(sorted(_numbered(out), key=lambda lay: lay.number))


def _numbered(layers: list[Layer]) -> list[Layer]:
    """Every layer names its card layer, and the packages of one card layer agree on its
    title: a wrong declaration fails at load, not as a mislabelled report."""
    cards: dict[int, str] = {}
    for lay in layers:
        if lay.number < 1 or not lay.card:
            raise ValueError(f"layer {lay.name}: declares no card layer (number, card)")
        if cards.setdefault(lay.number, lay.card) != lay.card:
            raise ValueError(f"layer {lay.name}: card layer {lay.number} is "
                             f"{cards[lay.number]!r}, not {lay.card!r}")
    return layers


def load_layers(names: Iterable[str] | None = None) -> dict[str, Layer]:
    """Layers by name, in report order. ``names``: layer names or module names."""
    all_layers = _load_all()
    if names is None:
        return {lay.name: lay for lay in all_layers}
    wanted = {n.rsplit(".", 1)[-1] for n in names}
    return {lay.name: lay for lay in all_layers if lay.name in wanted}


def layers_of(scope: Scope, layers: Mapping[str, Layer] | None = None) -> dict[str, Layer]:
    layers = load_layers() if layers is None else layers
    return {n: lay for n, lay in layers.items() if lay.scope is scope}


def catalogue(layers: Mapping[str, Layer] | None = None) -> Registry:
    layers = load_layers() if layers is None else layers
    return Registry().merge(*(lay.checks for lay in layers.values()))


def cards(layers: Mapping[str, Layer] | None = None) -> dict[int, tuple[str, list[str]]]:
    """The product card's layers in report order: number -> (label "N. title", packages)."""
    layers = load_layers() if layers is None else layers
    out: dict[int, tuple[str, list[str]]] = {}
    for lay in layers.values():
        out.setdefault(lay.number, (lay.label, []))[1].append(lay.name)
    return out


def label_of(layer: str, layers: Mapping[str, Layer] | None = None) -> str:
    """The "N. title" a report shows for a layer package (its own name when it is not one
    of this build's layers, e.g. a result read from another build's verdict)."""
    layers = load_layers() if layers is None else layers
    return layers[layer].label if layer in layers else layer


def markers(layers: Mapping[str, Layer] | None = None) -> dict[str, str]:
    """Every pytest marker the suites use, with its description."""
    layers = load_layers() if layers is None else layers
    out = dict(MARKERS)
    for lay in layers.values():
        out[lay.name] = f"layer {lay.label} — {lay.name} ({lay.scope}): {lay.title}"
    return out
