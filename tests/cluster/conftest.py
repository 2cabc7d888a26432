"""Fixtures for the cluster lab's smoke suite.

``lab_cluster`` brings the lab (``kgc.lab.cluster``) up once per session in a temporary
run directory and takes it down at the end, also when tests fail. Tests talk to it through
the ``kubernetes`` client (watch streams for timing) and tenacity for bounded waits.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from cluster.kubehelp import LabInfo, PodWatcher, wait_until
from kgc.lab import cluster as labc


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
        api = config.new_client_from_config(config_file=state["kubeconfig"])
        yield LabInfo(
            run_dir=run_dir,
            kubeconfig=Path(state["kubeconfig"]),
            server=state["server"],
            metric_url=state["metric_url"],
            cluster=lab.cluster,
            state=state,
            api=api,
            keda_missing=tuple(str(p) for p in keda_missing),
        )
    finally:
        report = labc.down(run_dir)
        assert not report["left"] and not report["listening"], report


@pytest.fixture
def core(lab_cluster: LabInfo) -> client.CoreV1Api:
    return client.CoreV1Api(lab_cluster.api)


@pytest.fixture
def namespace(lab_cluster: LabInfo) -> Iterator[str]:
    core = client.CoreV1Api(lab_cluster.api)
    name = f"kgc-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name, "labels": {"kgc.io/run": "selftest"}}})
    wait_until(lambda: _has_default_sa(core, name), 60, f"default ServiceAccount in {name}")
    yield name
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def _has_default_sa(core: client.CoreV1Api, ns: str) -> bool:
    return any(
        sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items
    )


@pytest.fixture
def pod_watcher(core: client.CoreV1Api) -> Iterator[Callable[[str], PodWatcher]]:
    started: list[PodWatcher] = []

    def make(ns: str) -> PodWatcher:
        rv = core.list_namespaced_pod(ns).metadata.resource_version
        w = PodWatcher(core, ns, rv).start()
        started.append(w)
        return w

    yield make
    for w in started:
        w.stop()
