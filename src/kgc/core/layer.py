"""A layer is data: its scope, its checks, how it gets evidence, and how that evidence is
recorded into a bundle and replayed from one.

Two kinds of evidence:

- *snapshot* layers (iommu, vfio, persistence, runtime) are judged from the node's ONE
  batched host snapshot: they declare a ``query`` (joined into one collector script per
  node) and a pure ``parse(snapshot, profile)``. A bundle records the snapshot once; replay
  parses it again with the same function.
- *probe* layers (nri, reboot, and the cluster layers gpu, sizing, keda) do I/O of their
  own in ``gather(ctx)`` and own their recording: ``record(evidence) -> dict`` and
  ``replay(dict) -> evidence`` (which raises :class:`~kgc.core.model.EvidenceError` on a
  malformed record).

Every layer declares the numbered layer of the product's card it belongs to (``number``,
``card``): six card layers, several packages may share one (2 = vfio, persistence, reboot).
The registry orders by it, and the README, the suites, the console and the report all show
:attr:`Layer.label` ("2. VFIO binding and persistence") — nowhere else numbers a layer.

A layer that acts on the node or cluster beyond reading (a reboot, a probe plugin, pods)
names the explicit option that allows it (a :class:`Gate`); without it every check of the
layer is a ``skip`` that names the flag.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kgc.core.hostfs import HostQuery, HostSnapshot
from kgc.core.model import Registry
from kgc.core.profile import Profile

if TYPE_CHECKING:  # pragma: no cover
    from kgc.core.engine import Context


class Scope(enum.StrEnum):
    """Judged once per node (from the node) or once per cluster (through its API)."""

    NODE = "node"
    CLUSTER = "cluster"


@dataclass(frozen=True)
class Gate:
    """An explicit option a layer needs before it may act: ``option`` is the key in the run
    options, ``flag`` what the user types, ``why`` what the layer would do."""

    option: str
    flag: str
    why: str


@dataclass(frozen=True)
class Layer:
    name: str
    scope: Scope
    title: str
    checks: Registry
    # the product card's layer this package belongs to: its number (1..6) and its title
    number: int = 0
    card: str = ""
    # pytest markers besides the layer's own name (e.g. "host" for every node layer)
    markers: tuple[str, ...] = ()
    # snapshot layers: what they read from the node (fixed, or derived from the profile)
    query: HostQuery | Callable[[Profile], HostQuery] | None = None
    parse: Callable[[HostSnapshot, Profile], Any] | None = None
    # probe layers: their own I/O and their own record/replay
    gather: Callable[[Context], Any] | None = None
    record: Callable[[Any], Mapping[str, Any]] | None = None
    replay: Callable[[Mapping[str, Any]], Any] | None = None
    gate: Gate | None = None
    # scrubs secrets out of the node snapshot before anything else sees it (e.g. registry
    # credentials in containerd's config): applied once per node, bundles included
    redact: Callable[[HostSnapshot, Profile], HostSnapshot] | None = None
    # facts for the report's environment panel (versions: containerd, GPU driver, Kubernetes)
    describe: Callable[[Any], Mapping[str, str]] | None = None

    def __post_init__(self) -> None:
        for c in self.checks:
            if c.layer != self.name:
                raise ValueError(f"check {c.id} registered under layer {self.name}")
        snapshot = self.parse is not None
        probe = self.gather is not None
        if snapshot == probe:
            raise ValueError(f"layer {self.name}: give either query+parse or gather")
        if snapshot and (self.query is None or self.scope is not Scope.NODE):
            raise ValueError(f"layer {self.name}: a snapshot layer is node-scoped with a query")
        if probe and (self.record is None or self.replay is None):
            raise ValueError(f"layer {self.name}: a probe layer records and replays its evidence")

    @property
    def label(self) -> str:
        """The card layer as every output shows it: "N. title"."""
        return f"{self.number}. {self.card}"

    @property
    def all_markers(self) -> tuple[str, ...]:
        return (self.name, *self.markers)

    def query_for(self, profile: Profile) -> HostQuery | None:
        if self.query is None:
            return None
        return self.query(profile) if callable(self.query) else self.query


def snapshot_layer(
    name: str,
    title: str,
    checks: Registry,
    query: HostQuery | Callable[[Profile], HostQuery],
    parse: Callable[[HostSnapshot, Profile], Any],
    *,
    number: int,
    card: str,
) -> Layer:
    """A node layer judged from the node's one batched snapshot (marker ``host``)."""
    return Layer(name=name, scope=Scope.NODE, title=title, checks=checks, number=number,
                 card=card, markers=("host",), query=query, parse=parse)
