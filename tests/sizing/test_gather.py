"""The live gather end to end against an in-process stand-in for the API (the lab's tests run
it against the real control plane): every way a part can fail becomes evidence with its
reason, and every verdict follows from it — never a crash.

The stand-in answers ``list`` calls from kwok-shaped objects and runs each pod the way the
cluster lab does (:func:`kgc_lab.cluster.sim_sizing.decide`: the recorded capture of the
predicted VM, or a failed pod saying there is none)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import pytest

from kgc import kube as kkube
from kgc.core.engine import Context
from kgc.core.layer import Scope
from kgc.core.profile import Profile, load_profile, profiles_dir
from kgc.core.registry import load_layers
from kgc.core.target import TargetError
from kgc.kube import KubeError
from kgc.kube.pods import PodOutcome
from kgc.layers.sizing.collect import collector_container, gather
from kgc.layers.sizing.evidence import SizingEvidence
from kgc_lab.cluster import sim_sizing
from kgc_lab.cluster.manifests import node_manifests, runtime_class_manifests

LAB = load_profile(profiles_dir() / "lab.yaml")


class Resp:
    def __init__(self, doc: Any) -> None:
        self.data = json.dumps(doc).encode()


class FakeKube:
    """``Kube.call`` and the three list calls the gather makes."""

    def __init__(self, pods: list[dict[str, Any]], *, forbid: str = "",
                 down: bool = False) -> None:
        self.pods, self.forbid, self.down = pods, forbid, down
        cp = LAB.cluster
        self.core = SimpleNamespace(list_pod_for_all_namespaces=self._lister(pods),
                                    list_node=self._lister(node_manifests(cp)))
        self.node = SimpleNamespace(list_runtime_class=self._lister(
            runtime_class_manifests(cp)))

    @staticmethod
    def _lister(items: list[dict[str, Any]]):  # type: ignore[no-untyped-def]
        def fn(**kw: Any) -> Resp:
            assert kw["limit"] == 500 and kw["_preload_content"] is False
            return Resp({"items": items, "metadata": {}})
        return fn

    def server_version(self) -> str:
        if self.down:
            raise KubeError("cannot reach the API server https://127.0.0.1:1 (refused)",
                            "check that the cluster is up")
        return "v1.35.0"

    def call(self, verb: str, resource: str, fn: Any, **kw: Any) -> Any:
        if resource == self.forbid:
            raise KubeError(f"refused {verb} {resource} (403 Forbidden)", "grant it")
        return fn(**kw)


class FakeRun:
    namespace = "kgc-test"
    labels = {"kgc.io/run": "test"}

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    def create(self, m: Mapping[str, Any]) -> dict[str, Any]:
        self.created.append(dict(m))
        return dict(m)


def lab_run_pods(run: Any, manifests: Sequence[Mapping[str, Any]], *, container: str,
                 **kw: Any) -> list[PodOutcome]:
    """Each pod as the cluster lab runs it: kwok node, recorded guest or a failure."""
    out = []
    for m in manifests:
        assert collector_container(m) == container
        c = sim_sizing.decide(m)  # the lab's Kata RuntimeClasses (profiles/lab.yaml)
        pod = json.loads(json.dumps(m))
        pod["spec"]["nodeName"] = "kgc-gpu-0"
        phase = "Succeeded" if c.exit_code == 0 else "Failed"
        pod["status"] = {"phase": phase, "containerStatuses": [
            {"name": container, "state": {"terminated": {"exitCode": c.exit_code}}}]}
        out.append(PodOutcome(m["metadata"]["name"], pod, log=c.text, waited_s=3.4,
                              settled=f"the pod {phase.lower()}"))
    return out


@contextmanager
def fake_cluster(monkeypatch: pytest.MonkeyPatch, fk: FakeKube,
                 run_pods: Any = lab_run_pods) -> Iterator[list[FakeRun]]:
    runs: list[FakeRun] = []

    @contextmanager
    def for_profile(k: Any, cluster: Any) -> Iterator[FakeRun]:
        r = FakeRun()
        runs.append(r)
        yield r

    monkeypatch.setattr(kkube.Run, "for_profile", staticmethod(for_profile))
    # sizing.collect imports run_pods at the top (no function-level import): patch its name
    monkeypatch.setattr("kgc.layers.sizing.collect.run_pods", run_pods)
    yield runs


def ctx_for(fk: FakeKube, profile: Profile = LAB) -> Context:
    target = SimpleNamespace(connect=lambda: fk, name="lab", scope=Scope.CLUSTER,
                             origin="live")
    return Context(target=target, profile=profile, layers=load_layers(["sizing"]))  # type: ignore[arg-type]


def verdicts(ctx: Context) -> dict[str, Any]:
    return {v.check: v for v in ctx.judge_all(["sizing"])}


def kata_pod(name: str, **res: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "apps"},
            "spec": {"runtimeClassName": "kata", "nodeName": "kgc-gpu-1",
                     "containers": [{"name": "c", "resources": res}]},
            "status": {"phase": "Running"}}


def test_the_lab_profile_passes_and_the_replayed_record_judges_the_same(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fk = FakeKube([kata_pod("web", limits={"cpu": "1", "memory": "2Gi"})])
    with fake_cluster(monkeypatch, fk) as runs:
        ctx = ctx_for(fk)
        got = verdicts(ctx)
    assert {k: str(v.status) for k, v in got.items()} == {
        "sizing.kata-config": "pass", "sizing.vm-matches-limits": "pass",
        "sizing.starved-pods": "pass", "sizing.node-overcommit": "pass"}
    # marked where the verdict rests on a stand-in (the shape pods and the Kata pod's node
    # are kwok's); the profile's Kata entry and the pods' specs are no stand-in's
    assert {k: v.simulated for k, v in got.items()} == {
        "sizing.kata-config": False, "sizing.vm-matches-limits": True,
        "sizing.starved-pods": False, "sizing.node-overcommit": True}
    assert "node kgc-gpu-1: kwok node" in got["sizing.node-overcommit"].simulated_why
    assert "[before it: node: not read (a cluster run cannot read the nodes' Kata files" \
        in got["sizing.kata-config"].reason
    created = runs[0].created
    assert created[0]["kind"] == "ConfigMap" and len(created) == 1  # pods: via run_pods
    ev = ctx.evidence("sizing")
    rec = json.loads(json.dumps(ctx.record(["sizing"])["sizing"]))
    replayed = SizingEvidence.from_dict(rec)
    assert replayed == ev
    from kgc.layers.sizing.checks import CHECKS

    for c in CHECKS:
        v = c.judge(replayed, LAB, "lab").with_origin("bundle", "x")
        assert (v.status, v.reason.split(" [simulated")[0]) == (
            got[c.id].status, got[c.id].reason.split(" [simulated")[0])


def test_without_a_profile_entry_the_default_vm_is_measured_by_a_probe_pod(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = LAB.model_dump()
    data["cluster"]["sizing"]["kata"] = {}
    prof = Profile.model_validate(data)
    fk = FakeKube([])
    with fake_cluster(monkeypatch, fk):
        ctx = ctx_for(fk, prof)
        got = verdicts(ctx)
    src = ctx.evidence("sizing").configs["kata"]
    assert src.kind == "measured"
    assert src.tried[0].startswith("node: not read") and "profile: no cluster.sizing.kata.kata" \
        in src.tried[1]
    assert "kgc-probe-kata on kgc-gpu-0: default VM 1 vCPU / 8192 MiB" in src.detail
    assert got["sizing.vm-matches-limits"].status == "pass", got["sizing.vm-matches-limits"]
    assert "from measured:" in got["sizing.kata-config"].reason


def test_an_unreachable_cluster_is_a_target_error(monkeypatch: pytest.MonkeyPatch) -> None:
    fk = FakeKube([], down=True)
    with fake_cluster(monkeypatch, fk), pytest.raises(TargetError, match="cannot reach"):
        gather(ctx_for(fk))
    with fake_cluster(monkeypatch, fk):
        got = verdicts(ctx_for(fk))
    assert {str(v.status) for v in got.values()} == {"error"}
    assert all("cannot reach the API server" in v.reason for v in got.values())


def test_pods_that_cannot_be_listed_make_the_static_checks_errors(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fk = FakeKube([], forbid="pods")
    with fake_cluster(monkeypatch, fk):
        got = verdicts(ctx_for(fk))
    for cid in ("sizing.starved-pods", "sizing.node-overcommit"):
        assert got[cid].status == "error"
        assert "could not be read: refused list pods (403 Forbidden)" in got[cid].reason
    assert got["sizing.vm-matches-limits"].status == "pass"  # the live shapes still ran


def test_pods_the_api_refuses_are_errors_naming_them(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(run: Any, manifests: Sequence[Mapping[str, Any]], **kw: Any) -> list[PodOutcome]:
        return [PodOutcome(m["metadata"]["name"], create_error='403 Forbidden: exceeded quota',
                           settled="the API refused the pod") for m in manifests]

    fk = FakeKube([])
    with fake_cluster(monkeypatch, fk, refused):
        got = verdicts(ctx_for(fk))
    v = got["sizing.vm-matches-limits"]
    assert v.status == "error"
    assert "pod kgc-sizing-one-container: the API refused it: 403 Forbidden" in v.reason


def test_a_pod_whose_size_has_no_recording_is_a_clear_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = LAB.model_dump()
    data["cluster"]["sizing"]["shapes"] = [
        {"name": "odd", "containers": [{"cpu": "2", "memory": "5Gi"}]}]
    fk = FakeKube([])
    with fake_cluster(monkeypatch, fk):
        got = verdicts(ctx_for(fk, Profile.model_validate(data)))
    v = got["sizing.vm-matches-limits"]
    assert v.status == "error"
    # the lab sizes its pods from a hand-worked table, not kgc's model: it does not know these
    assert "pod kgc-sizing-odd (Failed, exit 1) on kgc-gpu-0: its log holds no kgc collector " \
           "output: \"kgc lab: no hand-worked VM size for a pod with limits " \
           "[('app', '2', '5Gi')]" in v.reason


def test_the_run_namespace_failing_keeps_the_static_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fk = FakeKube([kata_pod("web", requests={"cpu": "2"})])

    @contextmanager
    def broken(k: Any, cluster: Any) -> Iterator[FakeRun]:
        raise KubeError("refused create namespaces (403 Forbidden)", "grant create")
        yield FakeRun()  # pragma: no cover

    monkeypatch.setattr(kkube.Run, "for_profile", staticmethod(broken))
    got = verdicts(ctx_for(fk))
    assert got["sizing.vm-matches-limits"].status == "error"
    assert "the pods could not be run: refused create namespaces" in \
        got["sizing.vm-matches-limits"].reason
    assert got["sizing.starved-pods"].status == "warn"
    assert "apps/web" in got["sizing.starved-pods"].reason
    assert got["sizing.kata-config"].status == "pass"  # from the profile
