"""The node lab's shared session fixture: scenarios run once per session, on demand.

``node_lab.get(names)`` runs the scenarios of ``names`` not run yet (``run_scenarios``:
cached image variants, scenarios sharing a VM on one boot) and returns their results, so
test files that each need some scenarios (test_node_lab.py: all; test_node_dra.py: the
binding: dra ones) boot each VM once between them in one session."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest

from kgc_lab.node.runner import AfterGroup, ScenarioResult, run_scenarios

MISSING = [t for t in ("qemu-system-x86_64", "qemu-img", "debootstrap", "mkfs.ext4", "ssh")
           if shutil.which(t) is None]


class NodeLabRuns:
    def __init__(self, out: Path) -> None:
        self.out = out
        keep = os.environ.get("KGC_LAB_BUNDLE_DIR")  # set to fixtures/bundles to refresh them
        self.bundle_dir = Path(keep) if keep else out / "bundles"
        self.parallel = int(os.environ.get("KGC_LAB_PARALLEL", "2"))
        self.results: dict[str, ScenarioResult] = {}

    def get(self, names: Iterable[str], after: AfterGroup | None = None
            ) -> dict[str, ScenarioResult]:
        names = list(names)
        todo = [n for n in names if n not in self.results]
        if todo:
            self.results.update(run_scenarios(todo, out_dir=self.out, bundle_dir=self.bundle_dir,
                                              parallel=self.parallel, after=after))
        return {n: self.results[n] for n in names}


@pytest.fixture(scope="session")
def node_lab(tmp_path_factory: pytest.TempPathFactory) -> NodeLabRuns:
    if MISSING or os.geteuid() != 0:
        pytest.fail(f"the node lab needs root and {', '.join(MISSING) or 'its tools'}: run "
                    "scripts/bootstrap.d/10-node-lab.sh as root")
    return NodeLabRuns(tmp_path_factory.mktemp("node-lab"))
