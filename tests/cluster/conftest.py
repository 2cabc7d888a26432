"""Fixtures for the cluster lab's smoke suite.

``lab_cluster`` brings the lab (``kgc_lab.cluster``) up once per session in a temporary
run directory and takes it down at the end, also when tests fail. Tests talk to it through
``kgc.kube`` (a run namespace per test, watch streams for timing, bounded waits).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client

from cluster.kubehelp import LabInfo
from kgc import kube
from kgc_lab import cluster as labc


@pytest.fixture(scope="session")
def lab_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    bins = labc.binaries()
    missing = bins.missing(keda=False)
    if missing:
        pytest.fail(
            "cluster lab binaries not built: " + ", ".join(map(str, missing))
            + " — run scripts/bootstrap.d/30-cluster.sh (builds them from lab/cluster/go/)"
        )
    keda_missing = [p for p in bins.missing(keda=True) if p not in missing]
    run_dir = tmp_path_factory.mktemp("cluster-lab")
    lab = labc.Lab(run_dir, keda=not keda_missing, die_with_parent=True)
    try:
        state = lab.up()
    except labc.LabError as exc:
        pytest.fail(f"kgc lab cluster up failed: {exc}", pytrace=False)
    try:
        k = kube.connect(state["kubeconfig"])
        yield LabInfo(
            run_dir=run_dir,
            kubeconfig=Path(state["kubeconfig"]),
            server=state["server"],
            metric_url=state["metric_url"],
            cluster=lab.cluster,
            state=state,
            kube=k,
            keda_missing=tuple(str(p) for p in keda_missing),
        )
    finally:
        report = labc.down(run_dir)
        assert not report["left"] and not report["listening"], report


@pytest.fixture
def core(lab_cluster: LabInfo) -> client.CoreV1Api:
    return lab_cluster.kube.core


@pytest.fixture
def run(lab_cluster: LabInfo) -> Iterator[kube.Run]:
    """A kgc.kube run: a fresh labelled namespace, torn down after the test."""
    with kube.Run.for_profile(lab_cluster.kube, lab_cluster.cluster) as r:
        yield r


@pytest.fixture
def namespace(run: kube.Run) -> str:
    return run.namespace


@pytest.fixture
def pod_watcher(lab_cluster: LabInfo) -> Iterator[Callable[[str], kube.PodWatcher]]:
    started: list[kube.PodWatcher] = []

    def make(ns: str) -> kube.PodWatcher:
        w = kube.PodWatcher(lab_cluster.kube, ns).start()  # lists first: before the trigger
        started.append(w)
        return w

    yield make
    for w in started:
        w.stop()
