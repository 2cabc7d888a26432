"""What every lab shares: its one error type, its one cache location, its one way to pick
a free loopback port."""

from __future__ import annotations

import os
import socket
from pathlib import Path


class LabError(Exception):
    """A lab could not build, start, reach or stop something; ``str()`` is the message for
    the user and names the component (and its log when there is one)."""


class LabUnavailable(LabError):
    """The lab cannot run on this machine at all (a binary not built, not root...); the
    message says what is missing and how to get it."""


def cache_root() -> Path:
    """``${KGC_CACHE:-~/.cache/kgc}``: every lab's artefacts, run directories and records."""
    return Path(os.environ.get("KGC_CACHE") or Path.home() / ".cache" / "kgc")


def lab_cache(lab: str) -> Path:
    """One lab's part of the cache (``node``, ``containerd``, ``cluster``)."""
    return cache_root() / lab


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (a caller that loses the race retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
