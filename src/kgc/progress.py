"""Progress of long work: one line per phase and per state change that matters (pods
created / scheduled / running / done, KEDA repetitions done of N, a bounded wait that takes
time, with its budget left, a node rebooting) — so that minutes of cluster work are not a
silent screen between pytest's dots.

Collectors call :func:`note` (and :class:`Waiting` for a bounded wait); they never print.
The lines are records of the ``kgc.progress`` logger, at INFO: whoever runs the collectors
decides where they go (:func:`install`). The pytest plugin writes them on stderr
(``kgc: ...``), except under ``-q``; so does ``kgc image check --boot``. With no sink
installed (a library caller) they go nowhere — logging's last resort shows WARNING and above
only — and pytest's log capture keeps them with the test either way.

It sits at the bottom of the package, beside ``kgc.errors``: ``kgc.kube`` (below core)
reports its pods and waits through it too.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

LOGGER = "kgc.progress"
log = logging.getLogger(LOGGER)


def note(msg: str, *args: Any) -> None:
    """One progress line (``msg % args``, as logging formats it)."""
    log.info(msg, *args)


def _short(x: Any, limit: int = 160) -> str:
    text = " ".join(str(x).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Waiting:
    """The progress of one bounded wait: quiet while it is quick (``quiet_s``), then a line
    when what it observes changes — at most one every ``every_s``, and the same observation
    again after ``3 * every_s`` — saying what it waits for, what it sees and how much of its
    budget is left. The waiter calls :meth:`update` with each observation that did not end
    the wait."""

    def __init__(self, what: str, timeout_s: float, *, quiet_s: float = 2.0,
                 every_s: float = 10.0, clock: Any = time.monotonic) -> None:
        self.what = what
        self.timeout_s = timeout_s
        self.quiet_s = quiet_s
        self.every_s = every_s
        self.clock = clock
        self.start = clock()
        self.said_at: float | None = None
        self.said: str | None = None

    def update(self, observed: Any) -> None:
        now = self.clock()
        if now - self.start < self.quiet_s:
            return
        seen = _short(observed) if observed is not None else ""
        if self.said_at is not None:
            since = now - self.said_at
            # a new observation at most every every_s; the same one again after 3 x every_s
            if since < self.every_s or (seen == self.said and since < 3 * self.every_s):
                return
        self.said_at, self.said = now, seen
        left = max(0.0, self.timeout_s - (now - self.start))
        note("waiting for %s (%.0f s of %.0f s left)%s", self.what, left, self.timeout_s,
             f": {seen}" if seen else "")


class StderrHandler(logging.Handler):
    """Writes each progress line as ``kgc: MESSAGE`` on stderr (at the time of the write:
    whatever ``sys.stderr`` is then)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.write(f"kgc: {record.getMessage()}\n")
        except Exception:  # noqa: BLE001 - logging's contract: a sink never raises
            self.handleError(record)

    def write(self, line: str) -> None:
        sys.stderr.write(line)
        sys.stderr.flush()


def install(handler: logging.Handler | None = None) -> logging.Handler:
    """Send the progress lines to ``handler`` (default: a :class:`StderrHandler`); the
    lines of one process go to one sink (installing again replaces it). Returns it, for
    :func:`uninstall`."""
    for h in list(log.handlers):
        log.removeHandler(h)
    h = handler if handler is not None else StderrHandler()
    log.addHandler(h)
    log.setLevel(logging.INFO)
    return h


def uninstall(handler: logging.Handler) -> None:
    log.removeHandler(handler)
