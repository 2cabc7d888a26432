"""Who holds a GPU's device nodes open, and what the DRA driver needs to rebind it (pure).

Under ``platform.gpu.binding: dra`` NVIDIA's DRA driver (kubernetes-sigs/dra-driver-nvidia-gpu,
feature gate ``PassthroughSupport``) moves a GPU from ``nvidia`` to ``vfio-pci`` when a claim
is prepared and back when it is unprepared. Facts this module rests on, read in that
repository at 95932046 (2026-08-07), ``cmd/gpu-kubelet-plugin/vfio-device.go``:

* ``Configure`` waits (``WaitForGPUFree``, 60 s, ``fuser`` every second) until no process has
  ``/dev/nvidia<minor>`` of that GPU open, then fails "timed out waiting for gpu to be free";
  the minor is the GPU's NVML minor number (``/proc/driver/nvidia/gpus/<bdf>/information``,
  "Device Minor"). Only that node is checked, not ``/dev/nvidiactl`` or ``/dev/nvidia-uvm``.
  nvidia-persistenced holding the node is kubernetes-sigs/dra-driver-nvidia-gpu#1037 (open);
  any other holder, #1076 (open).
* Device links: go-nvlib ``pkg/nvpassthrough`` (v0.12.0, vendored there) ``Unbind`` also
  unbinds the GPU's graphics auxiliary function -- the ``consumer:pci:<bdf>`` device link of
  a VGA-class (0300) GPU, its HDMI audio function -- and ``BindToDriver`` binds the GPU alone:
  the audio function is left without a driver, which keeps the IOMMU group viable.

The collector (one command in the node's batched script) walks ``/proc/<pid>/fd`` with ONE
``ls -lq`` and ONE ``awk``: for every fd whose link names ``…/dev/nvidia*`` or ``…/dev/vfio/…``
it prints pid, fd and the path, and once per such pid its ``comm``. It reads links only,
opens nothing but ``comm``, writes nothing, and is bounded: at most :data:`MAX_HOLDERS` holder
records and :data:`MAX_UNREADABLE` unreadable pids are printed (the rest are counted). A
``/proc/<pid>/fd`` it may not read (not root) is listed as such: that process "could not be
checked", never "holds nothing". A link shows the path in the holder's own mount namespace
(a container's ``/dev/nvidia0``, a driver container's ``/run/nvidia/driver/dev/nvidia0``):
nodes are matched by their last component.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.core.hostfs import (
    HostQuery,
    HostSnapshot,
    want_int,
    want_list,
    want_mapping,
    want_str,
)
from kgc.core.model import EvidenceError
from kgc.evidence.pci import PCI

COMMAND = "dev_holders"
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"
MAX_HOLDERS = 256
MAX_UNREADABLE = 64

HOLDERS_CMD = (
    "u=$(id -u 2>/dev/null) || u='?'; printf 'I %s\\n' \"$u\"; "
    # every process's fd directory (self and thread-self included: awk drops what is not a
    # pid); a tree without one is "no process table", never "nothing holds it"
    'set -- "$R"/proc/*/fd; '
    '[ -d "$1" ] || { echo "KGC-NO-PROC no process table to read"; exit 3; }; '
    # with one directory ls prints no "dir:" header: name it twice (awk drops the repeat)
    '[ $# -gt 1 ] || set -- "$1" "$1"; '
    'ls -lq -- "$@" 2>&1 | awk '
    f"-v M={MAX_HOLDERS} -v U={MAX_UNREADABLE} '"
    "function pid(s,  p) { p = \"\"; while (match(s, /\\/proc\\/[0-9]+\\/fd/)) { "
    "p = substr(s, RSTART + 6, RLENGTH - 9); s = substr(s, RSTART + RLENGTH) } return p } "
    "/^ls: / { q = pid($0); if ($0 ~ /No such file/) { gone++; next } "
    "if (q == \"\" && $0 !~ /Permission denied/) next; "
    "if (!(q in bad)) { bad[q] = 1; nb++; if (nb <= U) print \"U \" (q == \"\" ? \"?\" : q) } "
    "next } "
    # a directory's header: its pid, and its comm beside it (.../<pid>/fd -> .../<pid>/comm)
    "/:$/ && !/ -> / { cur = pid($0); if (cur == \"\") next; "
    "dir = substr($0, 1, length($0) - 3); if (!(cur in seen)) { seen[cur] = 1; ns++ } next } "
    "/ -> / { if (cur == \"\") next; i = index($0, \" -> \"); t = substr($0, i + 4); "
    "n = split(substr($0, 1, i - 1), w, \" \"); fd = w[n]; "
    "if (t !~ /(^|\\/)dev\\/nvidia[^\\/]*$/ && t !~ /(^|\\/)dev\\/nvidia-caps\\// && "
    "t !~ /(^|\\/)dev\\/vfio\\//) next; "
    "k = cur \" \" fd; if (k in done) next; done[k] = 1; nh++; if (nh > M) next; "
    "print \"H \" cur \" \" fd \" \" t; "
    "if (!(cur in cm)) { c = \"\"; f = dir \"comm\"; "
    "if ((getline c < f) <= 0 || c == \"\") c = \"?\"; close(f); cm[cur] = c; "
    "print \"C \" cur \" \" c } } "
    "END { printf \"N %d %d %d %d\\n\", ns, nh, nb, gone }'"
)

QUERY = HostQuery(
    files=(f"{NVIDIA_GPUS}/*/information",),
    links=(f"{PCI}/*/consumer:*",),
    commands=((COMMAND, HOLDERS_CMD),),
)

_NODE = re.compile(r"nvidia(\d+)")
_LINE = re.compile(r"^(?:I (\S+)|U (\d+|\?)|H (\d+) (\d+) (/\S.*)|C (\d+) (.*)|"
                   r"N (\d+) (\d+) (\d+) (\d+))$")


@dataclass(frozen=True)
class Holder:
    """One open fd on a device node: the process and the path its fd link names."""

    pid: int
    comm: str
    path: str
    fd: int = -1

    @property
    def node(self) -> str:
        """The node's last component: ``nvidia0``, ``nvidiactl``, ``vfio`` or a group."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def describe(self) -> str:
        return f"pid {self.pid} ({self.comm}) holds {self.path}"


@dataclass(frozen=True)
class DeviceUse:
    """Who holds the GPU device nodes, and the facts to tell which GPU a node is.

    ``error``: why nothing about holders can be said (not collected by this snapshot -- an
    older kgc --, no process table, a malformed record); ``unreadable``/``unreadable_count``:
    processes whose fds could not be read; ``truncated``: holder records the collector
    counted but did not print. ``minors``: bdf -> nvidia minor; ``aux``: a GPU's
    ``consumer:pci:<bdf>`` device links (its graphics auxiliary functions)."""

    holders: tuple[Holder, ...] = ()
    error: str | None = None
    unreadable: tuple[int, ...] = ()
    unreadable_count: int = 0
    truncated: int = 0
    scanned: int = 0
    uid: str | None = None
    minors: Mapping[str, int] = field(default_factory=dict)
    aux: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every process was read and every holder is listed."""
        return self.error is None and not self.unreadable_count and not self.truncated

    def gap(self) -> str:
        """Why "nobody holds it" cannot be said (empty when it can)."""
        if self.error is not None:
            return self.error
        parts = []
        if self.unreadable_count:
            who = ", ".join(str(p) for p in self.unreadable[:8])
            more = "" if self.unreadable_count <= 8 else f" and {self.unreadable_count - 8} more"
            parts.append(f"the open files of {self.unreadable_count} process(es) could not be "
                         f"read (pid {who}{more}"
                         + (f"; the collector ran as uid {self.uid}" if self.uid not in (None, "0")
                            else "") + "): they could not be checked")
        if self.truncated:
            parts.append(f"{self.truncated} holder record(s) beyond the collector's bound "
                         f"({MAX_HOLDERS}) were counted but not listed")
        return "; ".join(parts)

    def node_holders(self, name: str) -> list[Holder]:
        return [h for h in self.holders if h.node == name]

    def gpu_node_holders(self) -> list[Holder]:
        """Holders of any per-GPU node ``/dev/nvidia<N>``."""
        return [h for h in self.holders if _NODE.fullmatch(h.node)
                and "/dev/nvidia" in "/" + h.path.lstrip("/")]

    def to_dict(self) -> dict[str, Any]:
        return {
            "holders": [{"pid": h.pid, "comm": h.comm, "path": h.path, "fd": h.fd}
                        for h in self.holders],
            "error": self.error, "unreadable": list(self.unreadable),
            "unreadable_count": self.unreadable_count, "truncated": self.truncated,
            "scanned": self.scanned, "uid": self.uid, "minors": dict(self.minors),
            "aux": {k: list(v) for k, v in self.aux.items()},
        }

    @classmethod
    def from_dict(cls, d: Any, where: str) -> DeviceUse:
        """A recorded value; a wrong shape or a list beyond the collector's bounds raises one
        :class:`EvidenceError` line naming the field."""
        d = want_mapping(d, where)
        unknown = sorted(set(d) - {"holders", "error", "unreadable", "unreadable_count",
                                   "truncated", "scanned", "uid", "minors", "aux"})
        if unknown:
            raise EvidenceError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
        rows = want_list(d.get("holders", []), f"{where}.holders")
        if len(rows) > MAX_HOLDERS:
            raise EvidenceError(f"{where}.holders: {len(rows)} records, over the collector's "
                                f"bound of {MAX_HOLDERS}")
        holders = []
        for i, r in enumerate(rows):
            w = f"{where}.holders[{i}]"
            r = want_mapping(r, w)
            holders.append(Holder(want_int(r.get("pid"), f"{w}.pid"),
                                  want_str(r.get("comm"), f"{w}.comm"),
                                  want_str(r.get("path"), f"{w}.path"),
                                  want_int(r.get("fd", -1), f"{w}.fd")))
        unread = want_list(d.get("unreadable", []), f"{where}.unreadable")
        if len(unread) > MAX_UNREADABLE:
            raise EvidenceError(f"{where}.unreadable: {len(unread)} pids, over the collector's "
                                f"bound of {MAX_UNREADABLE}")
        minors = {k: want_int(v, f"{where}.minors[{k!r}]")
                  for k, v in want_mapping(d.get("minors", {}), f"{where}.minors").items()}
        aux = {k: tuple(want_str(x, f"{where}.aux[{k!r}]")
                        for x in want_list(v, f"{where}.aux[{k!r}]"))
               for k, v in want_mapping(d.get("aux", {}), f"{where}.aux").items()}
        return cls(
            holders=tuple(holders),
            error=want_str(d.get("error"), f"{where}.error", optional=True),
            unreadable=tuple(want_int(p, f"{where}.unreadable[{i}]")
                             for i, p in enumerate(unread)),
            unreadable_count=want_int(d.get("unreadable_count", 0), f"{where}.unreadable_count"),
            truncated=want_int(d.get("truncated", 0), f"{where}.truncated"),
            scanned=want_int(d.get("scanned", 0), f"{where}.scanned"),
            uid=want_str(d.get("uid"), f"{where}.uid", optional=True),
            minors=minors, aux=aux)


def _minors(snap: HostSnapshot) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in snap.glob(f"{NVIDIA_GPUS}/*/information"):
        text = snap.read(p) or ""
        m = re.search(r"^Device Minor:\s*(\d+)\s*$", text, re.M)
        if m:
            out[p.split("/")[-2].lower()] = int(m.group(1))
    return out


def _aux(snap: HostSnapshot) -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for p in snap.glob(f"{PCI}/*/consumer:*"):
        bdf, name = p.split("/")[-2:]
        _, _, peer = name.partition("consumer:pci:")
        if peer:
            out.setdefault(bdf, []).append(peer)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def parse_output(output: str) -> DeviceUse:
    """The holder scan's output (see :data:`HOLDERS_CMD`). Never raises: an unknown line, a
    missing summary or lists beyond the bounds give a ``DeviceUse`` whose ``error`` names it."""
    lines = [ln for ln in output.split("\n") if ln != ""]
    if any(ln.startswith("KGC-NO-PROC") for ln in lines):
        why = next(ln for ln in lines if ln.startswith("KGC-NO-PROC"))[len("KGC-NO-PROC "):]
        return DeviceUse(error=f"no process table to scan ({why}): an offline tree or image "
                         "has no running processes, so who holds the GPU nodes is unknown")
    if len(lines) > MAX_HOLDERS * 2 + MAX_UNREADABLE + 4:
        return DeviceUse(error=f"the {COMMAND} record has {len(lines)} lines, more than the "
                         f"collector prints ({MAX_HOLDERS} holders, {MAX_UNREADABLE} "
                         "unreadable pids): not a record of this collector")
    uid: str | None = None
    unread: list[int] = []
    held: list[tuple[int, int, str]] = []
    comms: dict[int, str] = {}
    summary: tuple[int, int, int, int] | None = None
    for n, ln in enumerate(lines, 1):
        m = _LINE.match(ln)
        if m is None or summary is not None:
            return DeviceUse(error=f"the {COMMAND} record is malformed at line {n}: "
                             f"{ln[:80]!r}" + (" (after the summary line)" if m else ""))
        if m.group(1) is not None:
            uid = m.group(1)
        elif m.group(2) is not None:
            if m.group(2) != "?":
                unread.append(int(m.group(2)))
        elif m.group(3) is not None:
            held.append((int(m.group(3)), int(m.group(4)), m.group(5)))
        elif m.group(6) is not None:
            comms[int(m.group(6))] = m.group(7)
        else:
            summary = (int(m.group(8)), int(m.group(9)), int(m.group(10)), int(m.group(11)))
    if summary is None:
        return DeviceUse(uid=uid, error=f"the {COMMAND} record has no summary line: the scan "
                         "did not finish, so who holds the GPU nodes is unknown")
    scanned, total, bad, _gone = summary
    if len(held) > min(total, MAX_HOLDERS) or len(unread) > min(bad, MAX_UNREADABLE):
        return DeviceUse(uid=uid, error=f"the {COMMAND} record lists more holders or "
                         "unreadable processes than its summary counts: not a record of this "
                         "collector")
    holders = tuple(Holder(p, comms.get(p, "?"), path, fd) for p, fd, path in held)
    return DeviceUse(holders=holders, unreadable=tuple(unread), unreadable_count=bad,
                     truncated=total - len(held), scanned=scanned, uid=uid)


def parse_device_use(snap: HostSnapshot) -> DeviceUse:
    """The node's :class:`DeviceUse` from its batched snapshot. A snapshot recorded before
    this evidence existed (no ``dev_holders`` command) says so in ``error``."""
    minors, aux = _minors(snap), _aux(snap)
    res = snap.command(COMMAND)
    if res is None:
        use = DeviceUse(error=f"the snapshot holds no {COMMAND} record (recorded by a kgc "
                        "before the holder scan, or the command was not run): who holds the "
                        "GPU device nodes is unknown")
    else:
        use = parse_output(res.output)
        if use.error is None and res.rc != 0:
            use = DeviceUse(uid=use.uid, error=f"the holder scan exited {res.rc}: "
                            f"{res.output.strip()[:200]!r}")
    return DeviceUse(use.holders, use.error, use.unreadable, use.unreadable_count,
                     use.truncated, use.scanned, use.uid, minors, aux)
