"""The labs' record of what they started, so that ``kgc lab cleanup`` can stop it all —
also after the run that started it was SIGKILLed and never ran its teardown.

One JSON file per lab instance under ``${KGC_CACHE}/lab-runs/``, rewritten (atomically)
after every start, removed when the instance was torn down cleanly. It lists:

* ``processes``: name, pid, start time (``/proc/PID/stat`` field 22), executable; ``group``
  when the process leads its own process group (stopped with killpg);
* ``owns``: helpers the lab did not start itself but that are its own — a process whose
  executable is one of ``exes`` and whose command line names a path under ``prefix``
  (containerd shims name the lab's socket; a QEMU names its VM directory);
* ``ssh_ports``: loopback ports whose SSH clients (and ControlMasters) belong to the lab;
* ``mounts``: prefixes under which the lab's processes mount things;
* ``paths``: files and directories to remove (temp dirs, sockets, a VM's run dir);
* ``cri``: CRI sockets on which to sweep NRI probe pods before stopping the runtime.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgc_lab.common import cache_root
from kgc_lab.procs import proc_start

SCHEMA = "kgc-lab-run/1"


def records_dir() -> Path:
    return cache_root() / "lab-runs"


@dataclass
class LabRecord:
    path: Path
    data: dict[str, Any] = field(default_factory=dict)

    # ---- creation / loading
    @classmethod
    def create(cls, lab: str, name: str = "", **info: Any) -> LabRecord:
        d = records_dir()
        d.mkdir(parents=True, exist_ok=True)
        rid = f"{lab}-{name + '-' if name else ''}{uuid.uuid4().hex[:8]}"
        me = os.getpid()
        rec = cls(d / f"{rid}.json", {
            "schema": SCHEMA, "lab": lab, "id": rid, "name": name,
            "created": time.time(),
            "owner": {"pid": me, "start": proc_start(me)},
            "processes": [], "owns": [], "ssh_ports": [], "mounts": [], "paths": [],
            "cri": [], "info": dict(info),
        })
        rec.save()
        return rec

    @classmethod
    def load(cls, path: Path) -> LabRecord:
        data = json.loads(Path(path).read_text())
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"{path}: not a {SCHEMA} record")
        for key in ("processes", "owns", "ssh_ports", "mounts", "paths", "cri"):
            if not isinstance(data.get(key, []), list):
                raise ValueError(f"{path}: `{key}` is not a list")
        return cls(Path(path), data)

    @classmethod
    def open(cls, path: str | Path | None) -> LabRecord | None:
        """The record at ``path`` if it still exists (a lab's state file points at it)."""
        if not path:
            return None
        try:
            return cls.load(Path(path))
        except (OSError, ValueError):
            return None

    # ---- content
    @property
    def lab(self) -> str:
        return str(self.data.get("lab", "?"))

    @property
    def id(self) -> str:
        return str(self.data.get("id", self.path.stem))

    @property
    def processes(self) -> list[dict[str, Any]]:
        return [p for p in self.data.get("processes", []) if isinstance(p, dict)
                and isinstance(p.get("pid"), int)]

    def _list(self, key: str) -> list[str]:
        return [str(x) for x in self.data.get(key, []) if isinstance(x, str)]

    @property
    def mounts(self) -> list[str]:
        return self._list("mounts")

    @property
    def paths(self) -> list[str]:
        return self._list("paths")

    @property
    def cri(self) -> list[str]:
        return self._list("cri")

    @property
    def owns(self) -> list[tuple[str, list[str]]]:
        out = []
        for o in self.data.get("owns", []):
            if isinstance(o, dict) and isinstance(o.get("prefix"), str):
                out.append((o["prefix"], [str(e) for e in o.get("exes") or []]))
        return out

    @property
    def ssh_ports(self) -> list[int]:
        return [p for p in self.data.get("ssh_ports", []) if isinstance(p, int)]

    @property
    def owner_alive(self) -> bool:
        from kgc_lab.procs import is_same

        o = self.data.get("owner") or {}
        return isinstance(o.get("pid"), int) and is_same(o["pid"], o.get("start"))

    def add_process(self, name: str, pid: int, exe: str | None = None, group: bool = False,
                    log: str | None = None) -> None:
        entry: dict[str, Any] = {"name": name, "pid": pid, "start": proc_start(pid),
                                 "exe": exe, "group": group}
        if log:
            entry["log"] = log
        self.data.setdefault("processes", []).append(entry)
        self.save()

    def _add(self, key: str, value: str | Path) -> None:
        items = self.data.setdefault(key, [])
        if str(value) not in items:
            items.append(str(value))
            self.save()

    def add_owned(self, prefix: str | Path, exes: list[str]) -> None:
        """Processes running one of ``exes`` (basenames; ``*`` globs) whose command line
        names a path under ``prefix`` belong to this lab."""
        entry = {"prefix": str(prefix), "exes": list(exes)}
        items = self.data.setdefault("owns", [])
        if entry not in items:
            items.append(entry)
            self.save()

    def add_ssh_port(self, port: int) -> None:
        items = self.data.setdefault("ssh_ports", [])
        if port not in items:
            items.append(port)
            self.save()

    def add_mounts(self, prefix: str | Path) -> None:
        self._add("mounts", prefix)

    def add_path(self, path: str | Path) -> None:
        self._add("paths", path)

    def add_cri(self, socket_path: str | Path) -> None:
        self._add("cri", socket_path)

    def update(self, **info: Any) -> None:
        self.data.setdefault("info", {}).update(info)
        self.save()

    # ---- persistence
    def save(self) -> None:
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        tmp.replace(self.path)

    def close(self) -> None:
        """The instance was torn down cleanly: forget it."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def records(lab: str | None = None) -> tuple[list[LabRecord], list[str]]:
    """Every record (optionally of one lab), oldest first, and the unreadable files."""
    d = records_dir()
    out: list[LabRecord] = []
    bad: list[str] = []
    if not d.is_dir():
        return out, bad
    for f in sorted(d.glob("*.json")):
        try:
            rec = LabRecord.load(f)
        except (OSError, ValueError) as exc:
            bad.append(f"{f}: {exc}")
            continue
        if lab is None or rec.lab == lab:
            out.append(rec)
    out.sort(key=lambda r: float(r.data.get("created") or 0))
    return out, bad
