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
``h200-cc-snp``              the H200 capture with the confidential-computing records of
                             ``fixtures/gpu/cc/cc-good.records.json`` added (SEV-SNP guest,
                             CC ON, ready, the CDH releases the resource): TRANSCRIBED from
                             Kata's tests and NVIDIA's docs, never captured on a CC GPU
``h200-cc-off``              the same with ``cc-off.records.json`` (CC OFF, not ready, the
                             CDH refuses), transcribed likewise
===========================  ========================================================

A pod whose GPU Dynamic Resource Allocation allocated (claims of
:mod:`kgc_lab.cluster.sim_dra`'s stand-in slices) gets the capture with its GPU UUID replaced
by the allocated device's ``uuid`` attribute — the guest shows the GPU it was given, as on a
real cluster where the driver read that UUID from the GPU.

Otherwise one physical GPU cannot be in two VMs: when a run places several GPU pods on one node, the
first of them by name keeps the recorded capture and each other one gets a copy whose GPU
UUID is derived from the recorded one (the only change, said in the pod's
``SimulatedOutput`` event); the file itself is never changed. Ranking by name (not by
arrival) gives the same pods the same UUIDs in every run of the same plan.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from pathlib import Path
from typing import Any

from kgc_lab.cluster.simulate import (
    SimOutput,
    fixtures_dir,
    lab_client,
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
# name -> (the records of fixtures/gpu/cc/ added to the H200 capture, what)
CC_CAPTURES = {
    "h200-cc-snp": ("cc-good", "the H200 capture with TRANSCRIBED confidential-computing "
                               "records (SEV-SNP, CC ON, ready; fixtures/gpu/cc/cc-good)"),
    "h200-cc-off": ("cc-off", "the H200 capture with TRANSCRIBED confidential-computing "
                              "records (CC OFF, not ready; fixtures/gpu/cc/cc-off)"),
}
DRA_GROUP, DRA_VERSION = "resource.k8s.io", "v1"
_MARK = re.compile(r"^(@@KGC-[0-9a-f]+@@) V ", re.M)
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


def with_cc_records(text: str, records: dict[str, Any]) -> str:
    """A collector output with the CC records of a ``kgc-cc-records/1`` document (and the
    collector's ``kgc-guest/4`` line, which records them) inserted before its END record, in
    the collector's own record format (``C name``, output, ``R rc``)."""
    m = _MARK.search(text)
    end = text.rfind("\n", 0, text.rfind("@@ END")) + 1 if "@@ END" in text else len(text)
    if m is None:
        raise ValueError("the capture has no collector V record")
    mark = m.group(1)
    cmds = {"collector": {"rc": 0, "output": "kgc-guest/4\n"}, **records["commands"]}
    add = "".join(f"{mark} C {name}\n{c['output']}\n{mark} R {int(c['rc'])}\n"
                  for name, c in cmds.items())
    return text[:end] + add + text[end:]


def capture_text(name: str, fixtures: Path | None = None) -> tuple[str, str, str]:
    """(the collector output, where it comes from, what it is) of capture ``name``."""
    base = fixtures or fixtures_dir()
    if name in CC_CAPTURES:
        rec, what = CC_CAPTURES[name]
        fname, _ = CAPTURES[DEFAULT_CAPTURE]
        records = json.loads((base / "gpu" / "cc" / f"{rec}.records.json").read_text())
        text = (base / "guest" / fname).read_text(errors="replace")
        return (with_cc_records(text, records),
                f"fixtures/guest/{fname} with the transcribed (not captured) records of "
                f"fixtures/gpu/cc/{rec}.records.json added", what)
    if name not in CAPTURES:
        raise ValueError(f"{SIM_GUEST}={name!r} names no recorded capture "
                         f"(known: {', '.join([*CAPTURES, *CC_CAPTURES])})")
    fname, what = CAPTURES[name]
    return ((base / "guest" / fname).read_text(errors="replace"), f"fixtures/guest/{fname}",
            what)


def allocated_uuids(pod: dict[str, Any]) -> list[str]:
    """The ``uuid`` attributes of the devices DRA allocated to ``pod`` (its claims from
    templates, ``status.resourceClaimStatuses``, and the claim the scheduler made for an
    extended-resource request, ``status.extendedResourceClaimStatus``), in allocation
    order; [] when the pod has no DRA claim (or no responder runs)."""
    admin = lab_client()
    md, st = _d(pod.get("metadata")), _d(pod.get("status"))
    found: list[Any] = [_d(c).get("resourceClaimName")
                        for c in st.get("resourceClaimStatuses") or []]
    found.append(_d(st.get("extendedResourceClaimStatus")).get("resourceClaimName"))
    names: list[str] = [n for n in found if isinstance(n, str) and n]
    if admin is None or not names:
        return []
    out: list[str] = []
    listed: Any = admin.custom.list_cluster_custom_object(DRA_GROUP, DRA_VERSION,
                                                          "resourceslices")
    slices = listed.get("items") or []
    for name in names:
        claim: Any = admin.custom.get_namespaced_custom_object(
            DRA_GROUP, DRA_VERSION, str(md.get("namespace")), "resourceclaims", name)
        for r in _d(_d(_d(claim.get("status")).get("allocation")).get("devices")).get(
                "results") or []:
            uuid = _slice_uuid(slices, _d(r))
            if uuid:
                out.append(uuid)
    return out


def _slice_uuid(slices: list[Any], result: dict[str, Any]) -> str | None:
    for s in slices:
        spec = _d(_d(s).get("spec"))
        if spec.get("driver") != result.get("driver") or _d(spec.get("pool")).get(
                "name") != result.get("pool"):
            continue
        for dev in spec.get("devices") or []:
            if _d(dev).get("name") == result.get("device"):
                v = _d(_d(_d(dev).get("attributes")).get("uuid")).get("string")
                return v if isinstance(v, str) else None
    return None


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
        try:
            text, source, what = capture_text(name, self.fixtures and self.fixtures.parent)
        except ValueError as exc:
            raise ValueError(f"node {node_name}: {exc}") from None
        note = (f"simulated by the kgc cluster lab: this pod never ran; its log is the "
                f"recorded real guest output {source} ({what})")
        m = _UUID.search(text)
        allocated = allocated_uuids(pod)
        if allocated and m is not None:
            old, new = m.group(0), allocated[0]
            text = text.replace(old, new)
            note += (f"; GPU UUID set by the lab to the DRA-allocated device's uuid attribute: "
                     f"{old} -> {new}")
            return SimOutput(text, 0, note)
        index = self.rank(pod, node_name)
        text, was, now = vary_uuid(text, index)
        if was and now:
            note += (f"; GPU UUID varied by the lab for GPU pod #{index + 1} on {node_name} "
                     f"(one GPU cannot be in two VMs): {was} -> {now}")
        return SimOutput(text, 0, note)


register_chooser(KIND, GpuChooser())
