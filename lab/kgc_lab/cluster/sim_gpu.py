"""The cluster lab's answer for simulated GPU pods (``kgc.io/collector=gpu``): the recorded
real guest output of ``fixtures/guest/``.

Which capture a pod gets is a property of the node it landed on (as it would be on a real
cluster: the node's Kata/VFIO setup decides what the guest sees): the node annotation
``kgc.io/sim-guest`` names it, default ``h200-firecracker``:

===========================  ========================================================
``h200-firecracker``         ``h200-firecracker.raw.txt``: a Firecracker microVM with one
                             NVIDIA H200 passed through (nvidia-smi, BARs, torch matmul)
``cpu-only-firecracker``     ``cpu-only-firecracker.raw.txt``: a microVM with no GPU
                             (``nvidia-smi: not found``) — the ``gpu-not-in-guest`` case
===========================  ========================================================

One physical GPU cannot be in two VMs: when a run places several GPU pods on one node, the
first of them by name keeps the recorded capture and each other one gets a copy whose GPU
UUID is derived from the recorded one (the only change, said in the pod's
``SimulatedOutput`` event); the file itself is never changed. Ranking by name (not by
arrival) gives the same pods the same UUIDs in every run of the same plan.
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path
from typing import Any

from kgc_lab.cluster.simulate import (
    SimOutput,
    fixtures_dir,
    lab_node,
    lab_pods,
    register_chooser,
)

KIND = "gpu"
SIM_GUEST = "kgc.io/sim-guest"
DEFAULT_CAPTURE = "h200-firecracker"
CAPTURES = {
    "h200-firecracker": ("h200-firecracker.raw.txt",
                         "a Firecracker microVM with one NVIDIA H200 passed through"),
    "cpu-only-firecracker": ("cpu-only-firecracker.raw.txt",
                             "a Firecracker microVM with no GPU"),
}
_UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def derived_uuid(uuid: str, index: int) -> str:
    """A stable, distinct GPU UUID for the ``index``-th pod (index >= 1) on a node: the
    recorded one with its last group replaced by a hash of (uuid, index)."""
    tail = hashlib.sha256(f"{uuid}/{index}".encode()).hexdigest()[:12]
    return uuid[: -12] + tail


def vary_uuid(text: str, index: int) -> tuple[str, str | None, str | None]:
    """(text with every occurrence of its first GPU UUID replaced, old, new); unchanged
    when ``index`` is 0 or the text names no GPU UUID."""
    m = _UUID.search(text)
    if index == 0 or m is None:
        return text, None, None
    old = m.group(0)
    new = derived_uuid(old, index)
    return text.replace(old, new), old, new


class GpuChooser:
    """Serves the capture the pod's node names; counts GPU pods per (namespace, node)."""

    def __init__(self, fixtures: Path | None = None) -> None:
        self.fixtures = fixtures
        self._seen: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.Lock()

    def rank(self, pod: dict[str, Any], node: str) -> int:
        """This pod's place by name among the GPU pods of its namespace on its node (the
        pods it has answered before count too, should the API no longer list them)."""
        md = _d(pod.get("metadata"))
        ns, name = str(md.get("namespace")), str(md.get("name"))
        listed = {str(_d(p.get("metadata")).get("name")) for p in lab_pods(ns, KIND, node)}
        with self._lock:
            seen = self._seen.setdefault((ns, node), [])
            if name not in seen:
                seen.append(name)
            return sorted(listed | set(seen)).index(name)

    def capture(self, node: dict[str, Any] | None) -> str:
        return str(_d(_d(_d(node).get("metadata")).get("annotations")).get(SIM_GUEST)
                   or DEFAULT_CAPTURE)

    def __call__(self, pod: dict[str, Any]) -> SimOutput | None:
        node_name = _d(pod.get("spec")).get("nodeName")
        if not isinstance(node_name, str) or not node_name:
            return None
        name = self.capture(lab_node(node_name))
        if name not in CAPTURES:
            raise ValueError(f"node {node_name}: {SIM_GUEST}={name!r} names no recorded capture "
                             f"(known: {', '.join(CAPTURES)})")
        fname, what = CAPTURES[name]
        path = (self.fixtures or fixtures_dir() / "guest") / fname
        text = path.read_text(errors="replace")
        index = self.rank(pod, node_name)
        text, old, new = vary_uuid(text, index)
        note = (f"simulated by the kgc cluster lab: this pod never ran; its log is the recorded "
                f"real guest output fixtures/guest/{fname} ({what})")
        if old and new:
            note += (f"; GPU UUID varied by the lab for GPU pod #{index + 1} on {node_name} "
                     f"(one GPU cannot be in two VMs): {old} -> {new}")
        return SimOutput(text, 0, note)


register_chooser(KIND, GpuChooser())
