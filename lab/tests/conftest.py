"""The lab tier's configuration (`make test` runs this directory; `make check` never does).

Everything here needs a lab — QEMU guests, containerd, the cluster lab, root — or tests the
lab itself, so every test collected here is marked ``lab``. The product tier's conftest
(tests/conftest.py) is loaded as a module: its hooks (the per-test time bounds), hypothesis
profile, fixtures and helpers (``REPO``, the sys trees) are the lab tier's too, and
``tests/`` is on the import path for the shared helpers (systree, kube.fakeapi, ...)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

_spec = importlib.util.spec_from_file_location("kgc_selftests_conftest",
                                               REPO / "tests" / "conftest.py")
assert _spec is not None and _spec.loader is not None
product = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = product
_spec.loader.exec_module(product)
sys.path.insert(0, str(HERE))  # lab/tests' own packages (lab, cluster, realnode) first

tree = product.tree
good_tree = product.good_tree
generic_profile = product.generic_profile
judge_tree = product.judge_tree


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents and item.get_closest_marker("lab") is None:
            item.add_marker(pytest.mark.lab)
    product.pytest_collection_modifyitems(config, items)
