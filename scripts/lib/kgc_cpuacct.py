"""CPU seconds per self-test, for `scripts/run-tests.sh` (loaded with ``-p kgc_cpuacct``).

``--durations`` shows wall seconds, which on a saturated 2-core machine say little about
where the cores went: a test that waits on a clock looks as slow as one that emulates a
guest. With ``KGC_TEST_CPU_CG`` set to a writable cgroup v1 cpuacct directory (the
session's, made by run-tests.sh), each pytest process (an xdist worker or a plain session)
moves itself into a group of its own below it — every process it starts afterwards (QEMU,
the cluster lab, kgc subprocesses, daemonized ones too) is counted there — and appends one
line per test to ``KGC_TEST_CPU_LOG``: the CPU seconds its group used from the test's setup
to its teardown, and the test id. A session fixture's cost lands on the first test that
uses it, as in ``--durations``; a lab left running between tests is charged to the tests
that run beside it on that worker. Off (nothing written, nothing moved) without the
variables or where the cgroup is not writable.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_group: Path | None = None
_log: Path | None = None


def _usage() -> float:
    assert _group is not None
    return int((_group / "cpuacct.usage").read_text()) / 1e9


def _set_or_drop(var: str, value: str) -> None:
    if value:
        os.environ[var] = value
    else:
        os.environ.pop(var, None)


def _forget_in_children() -> None:
    """The pytest processes a test starts (the README's commands in a wheel's venv, kgc's
    own) are not loaded with this plugin and not moved out of the test's group."""
    here = Path(__file__).resolve().parent
    paths = os.environ.get("PYTHONPATH", "").split(":")
    _set_or_drop("PYTHONPATH", ":".join(p for p in paths if p and Path(p).resolve() != here))
    _set_or_drop("PYTEST_ADDOPTS",
                 os.environ.get("PYTEST_ADDOPTS", "").replace("-p kgc_cpuacct", "").strip())
    for var in ("KGC_TEST_CPU_CG", "KGC_TEST_CPU_LOG"):
        os.environ.pop(var, None)


def pytest_configure(config: pytest.Config) -> None:
    global _group, _log
    cg, log = os.environ.get("KGC_TEST_CPU_CG"), os.environ.get("KGC_TEST_CPU_LOG")
    if not cg or not log:
        return
    # an xdist controller runs no test: its workers (started after this, from its
    # environment) need the variables; a worker or a plain session drops them for children
    controller = bool(getattr(config.option, "numprocesses", None)) and \
        "PYTEST_XDIST_WORKER" not in os.environ
    if controller:
        return
    _forget_in_children()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    g = Path(cg) / worker
    try:
        g.mkdir(exist_ok=True)
        (g / "tasks").write_text(str(os.getpid()))
    except OSError:
        return
    _group, _log = g, Path(log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if _group is None or _log is None:
        yield
        return
    before = _usage()
    yield
    spent = _usage() - before
    with _log.open("a") as f:
        f.write(f"{spent:.1f}\t{item.nodeid}\n")
