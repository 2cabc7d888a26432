"""Self-test fixtures. Trees shaped like a node's /sys and /proc are read through the real
collector (same script, same testinfra local transport, same parser)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The self-tests run on 2 shared cores next to QEMU guests and control planes: a property
# test is judged by what it finds, never by the wall time one example happened to take.
settings.register_profile("kgc", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kgc")

sys.path.insert(0, str(Path(__file__).parent))

# pytest's own fixture for running pytest in this process (`pytester.runpytest_inprocess`):
# a test about what the plugin does runs the suites here instead of paying a Python +
# pytest + Kubernetes-client start-up per run (`make check`'s 5-minute bound).
pytest_plugins = ["pytester"]

# The containerd lab's instances live in /tmp/kgc-*; the profiles it recorded beside its
# bundles (fixtures/nri) name files there. The product names no lab path: the operator
# accepts them ($KGC_PATH_ROOTS, kgc.core.profile), here the self-tests (and the kgc
# processes they start) do.
os.environ.setdefault("KGC_PATH_ROOTS", "/tmp/kgc-")

import kgc.cli  # noqa: E402,F401
from kgc.core.engine import Context  # noqa: E402
from kgc.core.profile import load_profile  # noqa: E402
from kgc.core.registry import load_layers  # noqa: E402
from kgc.core.target import NodeTarget  # noqa: E402
from systree import SysTree, intel_good  # noqa: E402

# pytester restores sys.modules after each in-process run (and at its teardown): a module
# first imported there would be dropped while the layer registry's cache (and whatever
# else keeps objects) still holds its classes, and a later import would make new ones.
# Everything the in-process runs use (kgc.cli, kgc_main's) is imported here, before any
# snapshot is taken.
load_layers()

REPO = Path(__file__).resolve().parents[1]

# Per-test time bounds for the self-tests (pytest-timeout; the test extra). A hung test —
# a mutant that loops, a lab that never answers — fails after its bound instead of stalling
# the session (one hung it 900 s). Set here, not in pyproject's [tool.pytest.ini_options]:
# that is the conformance runs' configuration, and a check such as the reboot wait may
# legitimately take longer. The bound covers setup + call + teardown, so a lab test's bound
# includes the session fixture that boots its lab: the node lab's setup took 920 s, 1628 s
# under contention, a real-node module 12.6 min (benchmarks/README.md). Plain tests spawn
# pytest/kgc/chromium subprocesses: the slowest measured 155 s (test_report_html's history
# trend) and 131 s (test_plugin's xdist fleet) at load ≈ 15 on the 2-core machine. The
# method is pytest-timeout's default on Linux (SIGALRM): the test fails and its fixtures
# still tear down (a lab cleans up). `--timeout N`, PYTEST_TIMEOUT, a `timeout` ini setting
# or a test's own @pytest.mark.timeout win over these defaults (`--timeout 0`: none).
TIMEOUT_S = {"lab": 3600, "slow": 900}
DEFAULT_TIMEOUT_S = 300
# the self-tests' two tiers: the product's (here) and the lab's, whose conftest loads this one
SELF_TESTS = {Path(__file__).resolve().parent, REPO / "lab" / "tests"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("timeout"):
        return
    if (config.getoption("timeout", None) is not None or os.environ.get("PYTEST_TIMEOUT")
            or config.getini("timeout")):
        return  # the caller chose
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        if not SELF_TESTS.intersection(Path(item.path).resolve().parents):
            continue
        item.add_marker(pytest.mark.timeout(self_test_timeout(item)))


def self_test_timeout(item: pytest.Item) -> int:
    """The bound of a self-test: its slowest marker's, else the default."""
    return max((s for m, s in TIMEOUT_S.items() if item.get_closest_marker(m) is not None),
               default=DEFAULT_TIMEOUT_S)


@pytest.fixture
def tree(tmp_path: Path) -> SysTree:
    return SysTree(tmp_path / "node")


@pytest.fixture
def good_tree(tmp_path: Path) -> SysTree:
    return intel_good(tmp_path / "node")


@pytest.fixture(scope="session")
def generic_profile():
    return load_profile("generic-nvidia-passthrough")


def judge_tree(root: Path, profile, layers=("iommu",)) -> dict:
    """Collect a tree through the real local collector and judge the given layers."""
    all_layers = load_layers()
    ctx = Context(NodeTarget("local://", root=str(root)), profile, all_layers)
    return {v.check: v for v in ctx.judge_all(layers)}


KgcMain = Callable[..., "subprocess.CompletedProcess[str]"]


@pytest.fixture
def kgc_main(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> KgcMain:
    """`kgc ARGS` in this process: ``kgc.cli.main(argv)`` with its exit code and what it
    wrote to file descriptors 1 and 2 (capfd: also what a child or C code writes there),
    shaped as the ``subprocess.run`` result the CLI tests read. For
    a test about a command's behaviour; a test about the real process boundary (the entry
    point's exit status, what reaches the terminal) spawns ``python -m kgc.cli`` itself."""
    from kgc import cli

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        capfd.readouterr()
        try:
            rc = cli.main(list(args))
        except SystemExit as exc:  # argparse's usage errors and --help/--version
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        out = capfd.readouterr()
        return subprocess.CompletedProcess(list(args), rc, out.out, out.err)

    return run


@pytest.fixture
def certify_here(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """`kgc certify` in this process spawns no pytest: the command line it would spawn
    (``python -m pytest`` over the installed suites, checked) runs here through pytester.
    The list collects those command lines."""
    spawned: list[list[str]] = []

    def call(argv: list[str]) -> int:
        spawned.append(argv)
        assert argv[:3] == [sys.executable, "-m", "pytest"], argv
        return int(pytester.runpytest_inprocess(*argv[3:]).ret)

    monkeypatch.setattr("kgc.cli.subprocess.call", call)
    return spawned
