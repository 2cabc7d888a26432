"""What a node-run pod prints, and the total parser that reads it back from the pod's log.

A node-run pod prints, in this order (other lines — pytest's console — are ignored)::

    KGC-NODE <node name>            # the Kubernetes node name (downward API spec.nodeName)
    KGC-HOST boot_id=<id> machine_id=<id> hostname=<name>   # what the host root itself says
    KGC-MODE live|offline           # live: the host root has a running kernel's /proc
    KGC-MOUNT <mount point> <options>   # every mount under the host root, one per line
    KGC-ERROR <one line>            # only when the run could not start (bad profile, ...)
    KGC-EXIT <pytest's exit status>
    KGC-VERDICT-BEGIN
    <verdict.json, a kgc-verdict/1 document>
    KGC-VERDICT-END

and then idles (a DaemonSet's pods must not exit). :func:`parse_node_log` accepts any text
and never raises: what it could not find stays empty, and the collector turns that into the
node's ``error`` with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BEGIN = "KGC-VERDICT-BEGIN"
END = "KGC-VERDICT-END"
MOUNT = "KGC-MOUNT"
EXIT = "KGC-EXIT"
NODE = "KGC-NODE"
MODE = "KGC-MODE"
HOST = "KGC-HOST"
# what KGC-HOST may say about the host (each key=value, values without blanks)
HOST_KEYS = ("boot_id", "machine_id", "hostname")
ERROR = "KGC-ERROR"


@dataclass
class HostRun:
    """What one node-run pod printed."""

    done: bool = False  # a complete BEGIN..END block was seen
    exit_code: int | None = None  # pytest's exit status
    verdict: dict[str, Any] | None = None
    verdict_text: str = ""  # the last complete block, as printed
    verdict_error: str = ""
    node: str = ""
    host: dict[str, str] = field(default_factory=dict)  # KGC-HOST: boot_id, machine_id ...
    mode: str = ""
    errors: list[str] = field(default_factory=list)
    mounts: dict[str, str] = field(default_factory=dict)  # mount point -> options

    def writable_host_mounts(self, host_root: str = "/host",
                             writable_ok: tuple[str, ...] = ()) -> list[str]:
        """Mounts under the host root that are not read-only (``writable_ok`` excepted)."""
        return sorted(m for m, opts in self.mounts.items()
                      if (m == host_root or m.startswith(host_root.rstrip("/") + "/"))
                      and m not in writable_ok and "ro" not in opts.split(","))


def parse_node_log(log: str) -> HostRun:
    """Parse a node-run pod's log. Total: any text gives a HostRun. When the log holds more
    than one verdict block (the container restarted), the last complete one counts."""
    out = HostRun()
    body: list[str] | None = None
    for line in str(log).splitlines():
        word = line.strip()
        if body is not None:
            if word == END:
                out.done = True
                out.verdict_text = "\n".join(body).strip()
                out.verdict, out.verdict_error = None, ""
                try:
                    doc = json.loads(out.verdict_text)
                except (ValueError, RecursionError) as exc:
                    first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                    out.verdict_error = f"verdict.json unreadable: {first}"
                else:
                    if isinstance(doc, dict):
                        out.verdict = doc
                    else:
                        out.verdict_error = "verdict.json is not an object"
                body = None
            elif word == BEGIN:  # a block cut off by a restart: start again
                body = []
            else:
                body.append(line)
            continue
        parts = line.split(maxsplit=1)
        head = parts[0] if parts else ""
        rest = parts[1].strip() if len(parts) > 1 else ""
        if word == BEGIN:
            body = []
        elif head == MOUNT:
            mp = rest.rsplit(maxsplit=1)
            if len(mp) == 2:
                out.mounts[mp[0]] = mp[1]
        elif head == EXIT and rest.isascii() and rest.isdigit() and len(rest) < 10:
            out.exit_code = int(rest)
        elif head == NODE and rest:
            out.node = rest[:253]
        elif head == HOST:
            out.host = {k: v[:253] for k, _, v in (w.partition("=") for w in rest.split())
                        if k in HOST_KEYS and v}
        elif head == MODE and rest:
            out.mode = rest[:20]
        elif head == ERROR and rest:
            out.errors.append(rest[:500])
    if body is not None and not out.done:
        out.verdict_error = "the log ends inside the verdict (the pod was cut off)"
    return out


def verdict_map(doc: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """check id -> (status, reason) of a kgc-verdict/1 document (malformed rows skipped)."""
    out: dict[str, tuple[str, str]] = {}
    rows = doc.get("results") if isinstance(doc, Mapping) else None
    for r in rows if isinstance(rows, list) else []:
        if isinstance(r, Mapping) and isinstance(r.get("check"), str):
            out[r["check"]] = (str(r.get("status")), str(r.get("reason")))
    return out
