"""Which node a pod really ran on: a real kubelet, or a stand-in (a kwok-managed node).

A cluster layer records, for every pod its evidence rests on, the origin of the pod's node
(:class:`NodeOrigin`, part of the recorded evidence, so a replay says the same) and answers
the engine's ``stand_ins()`` question with :func:`stand_ins` (see
``kgc.core.engine.Context.simulated``): results from the lab's real node are then not marked
simulated, results from its kwok nodes stay marked. Pure functions over raw Node dicts (what
``kgc.kube`` watchers keep); no I/O.

A node is a stand-in when kwok manages it (the ``kwok.x-k8s.io/node`` annotation kwok
selects nodes by) or when its status says its kubelet is kwok's (``kubeletVersion``
``kwok-*``/``fake``).

A pod is a stand-in too when its own events show that its containers' lifecycle was played,
not run: a container event only the kubelet reports (``Pulling``/``Pulled``/``Created``/
``Started``/``Killing``, kubernetes ``pkg/kubelet/events/event.go``) that names another
reporter (kwok's stages report them as ``kwok_controller``, kwok
``pkg/kwok/controllers/controller.go``) — whatever that pod printed was served by it, no
container produced it (:func:`played_by`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kgc.errors import EvidenceError

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KUBELET = "kubelet"  # the kubelet's event source (cmd/kubelet: EventSource{Component: "kubelet"})
# container events only the kubelet reports on a pod (kubernetes pkg/kubelet/events/event.go);
# "Failed"/"BackOff" are left out: other controllers use those words too
KUBELET_REASONS = frozenset({"Pulling", "Pulled", "Created", "Started", "Killing"})


def _sub(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, Mapping) else {}


def stand_in_reason(node: Mapping[str, Any] | None) -> str | None:
    """Why ``node`` (a raw Node dict) is a stand-in, or None when a real kubelet runs it.
    A missing node (never seen) is a stand-in too: nothing shows a kubelet ran the pod."""
    if not isinstance(node, Mapping):
        return "node not seen"
    ann = _sub(_sub(node, "metadata"), "annotations")
    if KWOK_ANNOTATION in ann:
        return f"kwok node ({KWOK_ANNOTATION}={ann.get(KWOK_ANNOTATION)})"
    version = _sub(_sub(node, "status"), "nodeInfo").get("kubeletVersion")
    if not isinstance(version, str) or not version:
        return "no kubelet version reported"
    if version.startswith("kwok") or version == "fake":
        return f"kwok kubelet ({version})"
    return None


def played_by(events: Iterable[tuple[str | None, str | None]]) -> str | None:
    """Why a pod's events show its containers were played by a stand-in, or None.

    ``events`` are the pod's (reason, reporting component) pairs. A kubelet-only container
    event reported by another component (kwok's ``kwok_controller``) says no kubelet ran
    the container: the pod's output, if any, was served. An event without a reporter says
    nothing either way."""
    for reason, source in events:
        if reason in KUBELET_REASONS and source and source != KUBELET:
            return f"its {reason!r} event was reported by {source}, not by a kubelet"
    return None


def reporter(event: Mapping[str, Any]) -> str | None:
    """Who reported a raw Event (``core/v1`` ``source.component``, ``events.k8s.io/v1``
    ``reportingController``, or ``reportingComponent``)."""
    for v in (_sub(event, "source").get("component"), event.get("reportingController"),
              event.get("reportingComponent")):
        if isinstance(v, str) and v:
            return v
    return None


def pod_stand_in(node_name: str | None, node: Mapping[str, Any] | None,
                 events: Iterable[tuple[str | None, str | None]]) -> str | None:
    """Why one pod's result rests on a stand-in (its node, else its events), or None.
    A pod that never got a node rests on the API and the scheduler only: not a stand-in by
    its node (its events may still say so)."""
    if node_name:
        why = stand_in_reason(node)
        if why is not None:
            return f"node {node_name}: {why}"
    return played_by(events)


@dataclass(frozen=True)
class NodeOrigin:
    """Recorded with a layer's evidence: the node a pod ran on and whether it is real."""

    node: str
    stand_in: bool
    why: str = ""  # why it is a stand-in; "" for a real node
    kubelet: str = ""  # the node's kubeletVersion, when known

    @classmethod
    def of(cls, name: str, node: Mapping[str, Any] | None) -> NodeOrigin:
        why = stand_in_reason(node)
        version = _sub(_sub(node, "status"), "nodeInfo").get("kubeletVersion") \
            if isinstance(node, Mapping) else None
        return cls(name, why is not None, why or "",
                   version if isinstance(version, str) else "")

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "stand_in": self.stand_in, "why": self.why,
                "kubelet": self.kubelet}

    @classmethod
    def from_dict(cls, d: Any) -> NodeOrigin:
        if not isinstance(d, Mapping):
            raise EvidenceError(f"node origin: expected an object, got {type(d).__name__}")
        node, stand, why, kubelet = (d.get("node"), d.get("stand_in"), d.get("why", ""),
                                     d.get("kubelet", ""))
        if not isinstance(node, str):
            raise EvidenceError("node origin: `node` must be a string")
        if not isinstance(stand, bool):
            raise EvidenceError("node origin: `stand_in` must be true or false")
        if not isinstance(why, str) or not isinstance(kubelet, str):
            raise EvidenceError("node origin: `why` and `kubelet` must be strings")
        return cls(node, stand, why, kubelet)


def stand_ins(subjects: Iterable[tuple[str, NodeOrigin | None]]) -> list[str] | None:
    """The engine's answer for a layer's evidence: ``subjects`` are (pod, origin of its
    node; None when the pod never got a node). Returns the stand-ins by name, ``[]`` when
    every pod ran on a real node, None when there is no pod to tell by."""
    out: list[str] = []
    seen = False
    for pod, origin in subjects:
        seen = True
        if origin is None:
            out.append(f"pod {pod} (never ran on a node)")
        elif origin.stand_in:
            out.append(f"pod {pod} on {origin.node}: {origin.why}")
    return out if seen else None
