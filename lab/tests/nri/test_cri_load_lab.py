"""Issue 18.1 live: configs that break containerd's CRI plugin in different ways, and
configs that break nothing, on the REAL containerd 1.7.24 and 2.1.9 (the lab cache).

The truth is the binary's own plugin list (``ctr plugins ls -d``); kgc, collecting from the
same running containerd through its real collector, must agree: runtime.config and
runtime.kata-handler never PASS when the CRI plugin failed, and the missing NRI socket is
blamed on that failure. The same cases, captured, are fixtures/containerd (fast tests:
tests/nri/test_cri_load.py). Needs root and the containerd lab cache."""

from __future__ import annotations

import shutil

import pytest

from kgc.core.model import Status
from kgc.evidence.containerd_load import CRI_PLUGINS_2, parse_plugins
from kgc_lab.containerd_instance import LabUnavailable, require_lab
from kgc_lab.cri_load import CASES, CriCase, run_case

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.mark.parametrize("case", CASES, ids=[f"ctd{c.flavour}-{c.name}" for c in CASES])
def test_kgc_agrees_with_what_containerd_started(case: CriCase) -> None:
    try:
        require_lab()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc}")
    c = run_case(case, judge=True)
    try:
        plugins = parse_plugins(c.plugins)
        assert plugins is not None, c.plugins[:500]
        bad = [p for p in plugins if p.name in CRI_PLUGINS_2 and p.status != "ok"]
        # the binary did what the case documents
        assert (not bad) is case.loads, [f"{p.name}: {p.error}" for p in bad]
        assert c.nri_socket is case.loads  # containerd opens the NRI socket only with CRI
        v = c.verdicts
        if case.loads:
            assert v["runtime.config"].status is Status.PASS, v["runtime.config"].reason
            return
        root = next(p for p in bad if p.name == case.failed_plugin)
        assert case.error_has in root.error
        for cid in ("runtime.config", "runtime.kata-handler", "runtime.nri-socket"):
            assert v[cid].status is Status.FAIL, (cid, v[cid].reason)
            assert root.error in v[cid].reason, (cid, v[cid].reason)
        assert "not restarted" not in v["runtime.nri-socket"].reason
    finally:
        shutil.rmtree(c.tmp, ignore_errors=True)
