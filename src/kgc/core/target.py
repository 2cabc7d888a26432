"""Where evidence comes from: a live node (through a testinfra backend) or a bundle file.

A live target runs the batched collection script once per :meth:`collect` call. The
number of round trips is counted so benchmarks and tests can hold it to its budget.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from kgc import __version__
from kgc.core.hostfs import (
    HostQuery,
    HostSnapshot,
    build_script,
    new_boundary,
    parse_output,
)

BUNDLE_FORMAT = "kgc-bundle/1"


class TargetError(Exception):
    """The target could not be reached or answered nothing usable."""


class Target(Protocol):
    @property
    def name(self) -> str: ...

    def collect(self, query: HostQuery) -> HostSnapshot: ...


@dataclass
class LiveTarget:
    """A node reached through testinfra: ``local://``, ``ssh://user@host:port``,
    ``chroot:///path``, ``kubectl://pod``... ``root`` prefixes every path read (used by
    self-tests on a directory tree shaped like /sys and /proc)."""

    spec: str = "local://"
    root: str = ""
    sudo: bool = False
    ssh_config: str | None = None
    ssh_identity_file: str | None = None
    timeout_s: int = 120
    round_trips: int = 0
    _host: Any = field(default=None, repr=False)

    @property
    def name(self) -> str:
        if self.spec in ("local://", "local", ""):
            return platform.node() or "localhost"
        return self.spec

    @property
    def host(self) -> Any:
        if self._host is None:
            import testinfra

            kw: dict[str, Any] = {"sudo": self.sudo}
            if self.ssh_config:
                kw["ssh_config"] = self.ssh_config
            if self.ssh_identity_file:
                kw["ssh_identity_file"] = self.ssh_identity_file
            if self.spec.startswith(("ssh://", "paramiko://")):
                kw["timeout"] = self.timeout_s
            self._host = testinfra.get_host(self.spec, **kw)
        return self._host

    def run(self, script: str) -> tuple[int, str, str]:
        """One round trip: run a shell script on the node."""
        self.round_trips += 1
        env_prefix = f"KGC_ROOT={_q(self.root)} " if self.root else ""
        cmd = f"{env_prefix}sh -c {_q(script)}"
        try:
            res = self.host.run(cmd)
        except Exception as exc:  # noqa: BLE001 - transport failures become TargetError
            raise TargetError(f"{self.name}: could not run the collector: {_brief(exc)}") from exc
        return res.rc, res.stdout, res.stderr

    def collect(self, query: HostQuery) -> HostSnapshot:
        boundary = new_boundary()
        rc, out, err = self.run(build_script(query, boundary))
        snap = parse_output(out, boundary)
        if not snap.complete:
            raise TargetError(
                f"{self.name}: the collector did not finish (exit {rc}); "
                f"stderr: {err.strip()[:500]}"
            )
        return snap


def _brief(exc: Exception) -> str:
    """A transport error without the (long) collector script in it."""
    arg = exc.args[0] if exc.args else None
    rc = getattr(arg, "exit_status", None) if arg is not None else None
    if rc is not None:
        err = getattr(arg, "stderr", "") or ""
        if isinstance(err, bytes):
            err = err.decode(errors="replace")
        return f"exit {rc}: {err.strip()[-500:] or '(no stderr)'}"
    text = str(exc)
    return text if len(text) <= 600 else text[:300] + " … " + text[-300:]


def _q(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


@dataclass
class BundleTarget:
    """Evidence recorded earlier by ``kgc snapshot``; evaluated offline, no I/O to a node."""

    path: Path
    data: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            raw = json.loads(Path(self.path).read_text())
        except (OSError, ValueError) as exc:
            raise TargetError(f"cannot read evidence bundle {self.path}: {exc}") from exc
        if not isinstance(raw, dict) or raw.get("format") != BUNDLE_FORMAT:
            raise TargetError(f"{self.path}: not a {BUNDLE_FORMAT} evidence bundle")
        self.data = raw

    @property
    def name(self) -> str:
        return str(self.data.get("target", Path(self.path).stem))

    round_trips: int = 0

    def collect(self, query: HostQuery) -> HostSnapshot:
        return HostSnapshot.from_dict(self.data.get("host", {}))

    def extra(self, key: str) -> Any:
        """Non-host evidence recorded in the bundle (e.g. ``nri``, ``reboot``)."""
        return self.data.get(key)


def write_bundle(
    path: Path, target: str, snapshot: HostSnapshot, extra: Mapping[str, Any] | None = None
) -> Path:
    doc: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "kgc_version": __version__,
        "target": target,
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": snapshot.to_dict(),
    }
    if extra:
        doc.update(extra)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    os.replace(tmp, path)
    return path


def make_target(spec: str, **kw: Any) -> LiveTarget | BundleTarget:
    if spec.startswith("bundle://"):
        return BundleTarget(Path(spec[len("bundle://") :]))
    return LiveTarget(spec, **kw)
