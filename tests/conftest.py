"""Self-test fixtures. Trees shaped like a node's /sys and /proc are read through the real
collector (same script, same testinfra local transport, same parser)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# The self-tests run on 2 shared cores next to QEMU guests and control planes: a property
# test is judged by what it finds, never by the wall time one example happened to take.
settings.register_profile("kgc", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kgc")

sys.path.insert(0, str(Path(__file__).parent))

from kgc.core.engine import Context  # noqa: E402
from kgc.core.profile import load_profile  # noqa: E402
from kgc.core.registry import load_layers  # noqa: E402
from kgc.core.target import NodeTarget  # noqa: E402
from systree import SysTree, intel_good  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


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
