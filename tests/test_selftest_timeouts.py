"""Every self-test has a time bound (tests/conftest.py, pytest-timeout): a hung test fails
and its fixtures still tear down; conformance runs get no bound from the self-tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import DEFAULT_TIMEOUT_S, REPO, TIMEOUT_S, self_test_timeout

PROBE = "KGC_TIMEOUT_PROBE"
# a -p plugin that prints every collected item's timeout marker after conftest's hook
SHOW = '''
import pytest

@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    for i in items:
        m = i.get_closest_marker("timeout")
        print("BOUND", i.nodeid, m.args[0] if m else None)
'''


def _bounds(args: list[str], cwd: Path, tmp: Path) -> dict[str, object]:
    (tmp / "kgc_show_bounds.py").write_text(SHOW)
    env = {**os.environ, "PYTHONPATH": str(tmp)}
    env.pop("PYTEST_TIMEOUT", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                        "kgc_show_bounds", "--co", "-q", *args], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = {}
    for line in r.stdout.splitlines():
        if line.startswith("BOUND "):
            nodeid, bound = line[len("BOUND "):].rsplit(" ", 1)
            out[nodeid] = None if bound == "None" else float(bound)
    assert out, r.stdout[-2000:]
    return out


def test_self_tests_are_bounded_by_their_slowest_marker(tmp_path: Path) -> None:
    # test_partial_root: slow, one of its tests lab too (root); test_wheel: lab (the network)
    got = _bounds(["tests/test_targets.py", "tests/fleet/test_partial_root.py",
                   "tests/test_wheel.py", "lab/tests/keda/test_keda_live.py"], REPO, tmp_path)
    for nodeid, bound in got.items():
        lab = ("keda_live" in nodeid or "test_wheel" in nodeid
               or "judges_the_partial_tree_like_the_whole_root" in nodeid)
        want = (TIMEOUT_S["lab"] if lab else
                TIMEOUT_S["slow"] if "test_partial_root" in nodeid else DEFAULT_TIMEOUT_S)
        assert bound == want, (nodeid, bound)
    # the caller's --timeout wins (0: no bound at all)
    assert set(_bounds(["tests/test_targets.py", "--timeout", "0"], REPO, tmp_path).values()
               ) == {None}


def test_a_conformance_run_gets_no_bound_from_the_self_tests(tmp_path: Path) -> None:
    assert set(_bounds(["-m", "iommu"], tmp_path, tmp_path).values()) == {None}


def test_the_bound_of_an_item(request: pytest.FixtureRequest) -> None:
    assert self_test_timeout(request.node) == DEFAULT_TIMEOUT_S
    request.node.add_marker(pytest.mark.slow)
    assert self_test_timeout(request.node) == TIMEOUT_S["slow"]
    request.node.add_marker(pytest.mark.lab)
    assert self_test_timeout(request.node) == TIMEOUT_S["lab"]


@pytest.fixture
def _teardown_marker() -> Iterator[None]:
    yield
    Path(os.environ[PROBE]).write_text("torn down")


@pytest.mark.skipif(not os.environ.get(PROBE), reason="run by the test below")
def test_probe_hangs(_teardown_marker: None) -> None:
    time.sleep(120)


def test_a_hung_test_fails_and_its_fixtures_tear_down(tmp_path: Path) -> None:
    mark = tmp_path / "teardown"
    env = {**os.environ, PROBE: str(mark), "PYTEST_TIMEOUT": "2"}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        f"{Path(__file__).relative_to(REPO)}::test_probe_hangs"], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=110, check=False)
    assert r.returncode == 1 and "Timeout" in r.stdout, r.stdout[-2000:]
    assert time.monotonic() - t0 < 100
    assert mark.read_text() == "torn down"  # a lab fixture would have cleaned up
