"""Waits and watchers without a cluster: tenacity waits that describe what they waited for,
watch-based waits that follow events (and list again after 410 Gone), and the pod and
event watchers' phase bookkeeping."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client

from kgc import kube
from kgc.kube import NotYet, WaitTimeout, wait_for
from kgc.kube.watch import EventWatcher, PodWatcher, Stamp, epoch
from kube.fakeapi import Script, kubeconfig, pod, pod_list, serve

PODS = "/api/v1/namespaces/ns/pods"


def connect(tmp_path: Path, url: str) -> kube.Kube:
    (tmp_path / "kc").write_text(yaml.safe_dump(kubeconfig(url)))
    return kube.connect(tmp_path / "kc")


# --------------------------------------------------------------------------- wait_for


def test_wait_for_returns_the_first_truthy_value() -> None:
    seq = iter([None, NotYet("phase=Pending"), {"ok": 1}])
    assert wait_for("thing", lambda: next(seq), 5, interval_s=0.01) == {"ok": 1}


def test_wait_for_timeout_says_what_and_what_it_saw() -> None:
    t0 = time.monotonic()
    with pytest.raises(WaitTimeout) as err:
        wait_for("pod kgc-x/gpu Ready", lambda: NotYet("phase=Pending, node=-"), 0.3,
                 interval_s=0.05)
    assert time.monotonic() - t0 < 2
    msg = str(err.value)
    assert msg.startswith("timed out after 0.3 s waiting for pod kgc-x/gpu Ready")
    assert "last observed: phase=Pending, node=-" in msg
    assert err.value.what == "pod kgc-x/gpu Ready" and err.value.timeout_s == 0.3


def test_wait_for_retries_only_the_named_exceptions() -> None:
    calls = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionError("refused")
        return "up"

    assert wait_for("endpoint", flaky, 5, 0.01, retry_on=(ConnectionError,)) == "up"
    with pytest.raises(WaitTimeout, match=r"last observed: ConnectionError: refused"):
        wait_for("endpoint", lambda: (_ for _ in ()).throw(ConnectionError("refused")), 0.2,
                 0.05, retry_on=(ConnectionError,))

    def dead() -> None:
        raise RuntimeError("the component exited")

    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="exited"):
        wait_for("endpoint", dead, 30, 0.05, retry_on=(ConnectionError,))
    assert time.monotonic() - t0 < 1  # not retried: aborts at once


# --------------------------------------------------------------------------- watch_until


def test_wait_for_pod_follows_the_watch_to_ready(tmp_path: Path) -> None:
    script = Script(
        answers={PODS: [(200, pod_list("10", pod("gpu", "9")))]},
        watches={PODS: [[
            {"type": "MODIFIED", "object": pod("gpu", "11", node="n1")},
            {"type": "MODIFIED", "object": pod("gpu", "12", ready=True, node="n1")},
        ]]},
    )
    with serve(script) as url:
        k = connect(tmp_path, url)
        got = kube.wait_for_pod(k, "ns", "gpu", kube.pod_ready(), 10)
    assert got.metadata.resource_version == "12" and got.spec.node_name == "n1"
    watch_req = [r for r in script.requests if "watch=true" in r]
    assert watch_req and "resourceVersion=10" in watch_req[0]
    assert "fieldSelector=metadata.name%3Dgpu" in watch_req[0]


def test_watch_until_lists_again_after_410_gone(tmp_path: Path) -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "code": 410,
                                        "reason": "Expired", "message": "too old"}}
    script = Script(
        answers={PODS: [(200, pod_list("10", pod("gpu", "9"))),
                        (200, pod_list("50", pod("gpu", "49", ready=True)))]},
        watches={PODS: [[gone]]},
    )
    with serve(script) as url:
        k = connect(tmp_path, url)
        got = kube.wait_for_pod(k, "ns", "gpu", kube.pod_ready(), 10)
    assert got.metadata.resource_version == "49"
    assert sum(1 for r in script.requests if "watch=true" not in r) == 2


def test_watch_until_timeout_describes_the_pod(tmp_path: Path) -> None:
    script = Script(answers={PODS: [(200, pod_list("10", pod("gpu", "9")))]})
    with serve(script) as url:
        k = connect(tmp_path, url)
        with pytest.raises(WaitTimeout) as err:
            kube.wait_for_pod(k, "ns", "gpu", kube.pod_ready(), 1.5)
    assert "waiting for pod ns/gpu Ready" in str(err.value)
    assert "phase=Pending" in str(err.value) and "Ready=False" in str(err.value)


def test_wait_for_pods_counts(tmp_path: Path) -> None:
    script = Script(
        answers={PODS: [(200, pod_list("10", pod("a", "1", ready=True), pod("b", "2")))]},
        watches={PODS: [[{"type": "MODIFIED", "object": pod("b", "11", ready=True)}]]},
    )
    with serve(script) as url:
        got = kube.wait_for_pods(connect(tmp_path, url), "ns", kube.pod_ready(), 10, count=2)
    assert [p.metadata.name for p in got] == ["a", "b"]


# --------------------------------------------------------------------------- PodWatcher


def test_pod_watcher_records_each_phase_once_with_api_stamps(tmp_path: Path) -> None:
    sched = pod("gpu", "11", node="n1")
    sched["status"]["conditions"] += [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-01-01T00:00:01Z"},
        {"type": "PodReadyToStartContainers", "status": "True",
         "lastTransitionTime": "2025-01-01T00:00:03Z"},
    ]
    ready = pod("gpu", "12", ready=True, node="n1")
    ready["status"]["containerStatuses"] = [{
        "name": "c", "image": "i", "imageID": "", "ready": True, "restartCount": 0,
        "state": {"running": {"startedAt": "2025-01-01T00:00:04Z"}}}]
    script = Script(answers={PODS: [(200, pod_list("10"))]},
                    watches={PODS: [[{"type": "ADDED", "object": pod("gpu", "10")},
                                     {"type": "MODIFIED", "object": sched},
                                     {"type": "MODIFIED", "object": ready},
                                     {"type": "MODIFIED", "object": ready}]]})
    with serve(script) as url:
        w = PodWatcher(connect(tmp_path, url), "ns").start()
        try:
            w.wait("gpu Ready", lambda tls: "gpu" in tls and tls["gpu"].ready is not None, 10)
        finally:
            w.stop()
    tl = w.timelines["gpu"]
    assert w.error is None and tl.node == "n1"
    order = ["created", "scheduled", "sandbox_ready", "running:c", "ready"]
    assert all(p in tl.seen for p in order), tl.seen
    monos = [tl.seen[p].mono for p in order]
    assert monos == sorted(monos)
    base = dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp()
    assert tl.api == {"created": base, "scheduled": base + 1, "sandbox_ready": base + 3,
                      "running:c": base + 4, "ready": base + 5}
    d = tl.to_dict()
    assert d["seen"]["ready"]["wall"] > base and set(d) >= {"name", "uid", "seen", "api"}


def test_pod_watcher_wait_times_out_naming_what(tmp_path: Path) -> None:
    with serve(Script(answers={PODS: [(200, pod_list("10"))]})) as url:
        with PodWatcher(connect(tmp_path, url), "ns") as w:
            with pytest.raises(WaitTimeout, match="waiting for 4 pods Ready"):
                w.wait("4 pods Ready", lambda tls: NotYet(f"{len(tls)} pods"), 0.5)


def test_pod_watcher_counts_relists(tmp_path: Path) -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "code": 410,
                                        "reason": "Expired", "message": "too old"}}
    script = Script(answers={PODS: [(200, pod_list("10")),
                                    (200, pod_list("60", pod("late", "59", ready=True)))]},
                    watches={PODS: [[gone]]})
    with serve(script) as url:
        with PodWatcher(connect(tmp_path, url), "ns") as w:
            w.wait("late seen", lambda tls: "late" in tls, 10)
            assert w.relists == 1 and w.error is None


# --------------------------------------------------------------------------- EventWatcher


def test_event_watcher_reads_both_event_apis() -> None:
    w = EventWatcher(kube.Kube.from_api_client(client.ApiClient()), "ns")
    t = "2025-01-01T00:00:02.500000Z"
    core = {"metadata": {"uid": "e1", "resourceVersion": "5"},
            "involvedObject": {"kind": "Pod", "name": "gpu", "namespace": "ns"},
            "reason": "SandboxReady", "message": "sandbox ready", "type": "Normal", "count": 1,
            "lastTimestamp": "2025-01-01T00:00:02Z", "eventTime": None,
            "source": {"component": "kwok"}}
    new = {"metadata": {"uid": "e2", "resourceVersion": "6"},
           "regarding": {"kind": "ScaledObject", "name": "app", "namespace": "ns"},
           "reason": "KEDAScaleTargetActivated",
           "note": "Scaled apps/v1.Deployment ns/app from 0 to 4", "type": "Normal",
           "eventTime": t, "reportingController": "keda-operator"}
    odd = {"metadata": {"uid": "e3", "resourceVersion": "7"}, "count": "many",
           "involvedObject": None, "eventTime": 17}
    s = Stamp.now()
    w._observe("core/v1", "ADDED", core, s)
    w._observe("core/v1", "MODIFIED", core, s)  # same resourceVersion: recorded once
    w._observe("events.k8s.io/v1", "ADDED", new, s)
    w._observe("core/v1", "ADDED", odd, s)  # malformed fields never stop the watcher
    evs = w.events
    assert [(e.source, e.reason, e.kind, e.name, e.reporter) for e in evs] == [
        ("core/v1", "SandboxReady", "Pod", "gpu", "kwok"),
        ("events.k8s.io/v1", "KEDAScaleTargetActivated", "ScaledObject", "app",
         "keda-operator"),
        ("core/v1", "", "", "", "")]
    assert evs[0].api_time == dt.datetime(2025, 1, 1, 0, 0, 2, tzinfo=dt.UTC).timestamp()
    assert evs[1].api_time == dt.datetime(2025, 1, 1, 0, 0, 2, 500000,
                                          tzinfo=dt.UTC).timestamp()  # microseconds kept
    assert evs[1].to_dict()["received"]["mono"] == s.mono and evs[2].count == 1


@pytest.mark.parametrize(("ts", "want"), [
    (None, None), ("2025-01-01T00:00:00Z", dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp()),
    ("garbage", None), (12, None),
    (dt.datetime(2025, 1, 1), dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp()),
])
def test_epoch(ts: object, want: float | None) -> None:
    assert epoch(ts) == want


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["metadata", "spec", "status", "name", "uid", "nodeName",
                         "conditions", "type", "status", "lastTransitionTime",
                         "containerStatuses", "state", "running", "startedAt", "startTime",
                         "involvedObject", "regarding", "series", "count", "eventTime",
                         "creationTimestamp", "runtimeClassName", "resourceVersion"]),
        inner, max_size=5),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(obj=st.dictionaries(st.sampled_from(["metadata", "spec", "status", "involvedObject",
                                            "regarding", "series", "count", "eventTime"]),
                           JSON, max_size=5), kind=st.sampled_from(["ADDED", "DELETED",
                                                                     "LISTED"]))
def test_watchers_take_any_object_without_crashing(obj: dict, kind: str) -> None:
    k = kube.Kube.from_api_client(client.ApiClient())
    PodWatcher(k, "ns")._observe(kind, obj, Stamp.now())
    EventWatcher(k, "ns")._observe("core/v1", kind, obj, Stamp.now())
    EventWatcher(k, "ns")._observe("events.k8s.io/v1", kind, obj, Stamp.now())
