"""run_pods against a live in-memory API (tests/kube/liveapi.py): pods are created, watched
(no polling) and collected with their events and logs; waiting stops per pod for the right
reason; at most ``max_parallel`` pods are in flight; API refusals are recorded, not raised."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kgc import kube
from kgc.kube import KubeError, PodOutcome, run_pods
from kube.fakeapi import kubeconfig
from kube.liveapi import LiveApi, serve

NS = "kgc-t1"


def make_run(tmp_path: Path, url: str) -> kube.Run:
    (tmp_path / "kc").write_text(yaml.safe_dump(kubeconfig(url)))
    return kube.Run(kube.connect(tmp_path / "kc"), run_id="t1")  # not entered: no namespace


def manifest(name: str, image: str = "img") -> dict[str, Any]:
    return kube.builders.pod(name, [kube.builders.container("collector", image)])


def kubelet(api: LiveApi, *, delay: float = 0.05, log: str = "out\n", exit_code: int = 0,
            skip: tuple[str, ...] = ()) -> None:
    """A stand-in scheduler + kubelet: schedule each new pod, finish it with ``log``."""

    def run(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        if name in skip:
            return
        time.sleep(delay)
        api.schedule(NS, name, "node-a")
        time.sleep(delay)
        api.finish(NS, name, f"{name}: {log}", exit_code)

    api.after_create = run


def test_every_pod_runs_to_its_end_with_its_log_in_manifest_order(tmp_path: Path) -> None:
    api = LiveApi()
    kubelet(api)
    with serve(api) as url:
        run = make_run(tmp_path, url)
        out = run_pods(run, [manifest(f"p{i}") for i in range(5)], container="collector",
                       schedule_timeout_s=10, finish_timeout_s=20, max_parallel=5)
    assert [o.name for o in out] == [f"p{i}" for i in range(5)]
    for o in out:
        assert o.settled == "the pod succeeded" and not o.timed_out, o
        assert o.log == f"{o.name}: out\n" and o.log_error is None
        assert o.pod is not None and o.pod["metadata"]["labels"] == {"kgc.io/run": "t1"}
        assert 0 < o.waited_s < 10
    # per pod: one create, one list of its events, one log read; the rest is one list +
    # watch per stream for the whole batch
    posts = [r for r in api.requests if r[0] == "POST"]
    logs = [r for r in api.requests if r[1].endswith("/log")]
    events = [r for r in api.requests if r == ("GET", f"/api/v1/namespaces/{NS}/events")]
    assert len(posts) == 5 and len(logs) == 5 and len(events) == 5 + 1
    assert not [r for r in api.requests if r[0] == "DELETE"]  # finished pods are left


def test_at_most_max_parallel_pods_are_in_flight(tmp_path: Path) -> None:
    api = LiveApi()
    alive: list[int] = []
    lock = threading.Lock()
    inner = {"n": 0}

    def run(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        with lock:
            inner["n"] += 1
            alive.append(inner["n"])
        time.sleep(0.15)
        api.schedule(NS, name, "node-a")
        with lock:
            inner["n"] -= 1
        api.finish(NS, name, "x")

    api.after_create = run
    with serve(api) as url:
        out = run_pods(make_run(tmp_path, url), [manifest(f"p{i}") for i in range(6)],
                       container="collector", schedule_timeout_s=10, finish_timeout_s=10,
                       max_parallel=2)
    assert all(o.settled == "the pod succeeded" for o in out)
    assert max(alive) == 2, alive


def test_a_refused_pod_is_recorded_and_the_others_still_run(tmp_path: Path) -> None:
    api = LiveApi()
    kubelet(api)
    api.on_create = lambda p: ((403, 'pods "p1" is forbidden: pod rejected: RuntimeClass '
                                '"kata-qemu-nvidia-gpu" not found')
                               if p["metadata"]["name"] == "p1" else None)
    with serve(api) as url:
        out = run_pods(make_run(tmp_path, url), [manifest("p0"), manifest("p1")],
                       container="collector", schedule_timeout_s=5, finish_timeout_s=5)
    assert out[0].settled == "the pod succeeded"
    assert out[1].pod is None and out[1].log is None
    assert out[1].settled == "the API refused the pod"
    assert 'RuntimeClass "kata-qemu-nvidia-gpu" not found' in (out[1].create_error or "")


def test_settled_stops_waiting_early_and_frees_the_pod(tmp_path: Path) -> None:
    api = LiveApi()

    def run(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        api.schedule(NS, name, "node-a")
        api.event(NS, name, "Warning", "Failed", 'Failed to pull image "x": not found')
        api.wait_container(NS, name, "ImagePullBackOff", 'Back-off pulling image "x"')

    api.after_create = run
    seen: list[int] = []

    def settled(pod: Any, events: Any) -> str | None:
        seen.append(len(events))
        for cs in pod.get("status", {}).get("containerStatuses") or []:
            if cs["state"].get("waiting", {}).get("reason") == "ImagePullBackOff":
                return "image pull: ImagePullBackOff"
        return None

    t0 = time.monotonic()
    with serve(api) as url:
        out = run_pods(make_run(tmp_path, url), [manifest("p0")], container="collector",
                       schedule_timeout_s=30, finish_timeout_s=60, settled=settled)
    assert time.monotonic() - t0 < 10  # not the 60 s budget
    o = out[0]
    assert o.settled == "image pull: ImagePullBackOff" and not o.timed_out
    assert o.log is None and o.log_error is None  # it never ran: no log to read
    assert [e["reason"] for e in o.events] == ["Failed"]
    assert ("DELETE", f"/api/v1/namespaces/{NS}/pods/p0") in api.requests
    assert seen  # consulted on each change (the event may arrive after the pod's state)


def test_a_pod_never_scheduled_stops_at_the_schedule_budget_with_its_events(
        tmp_path: Path) -> None:
    api = LiveApi()

    def run(pod: dict[str, Any]) -> None:
        uid = api.event(NS, pod["metadata"]["name"], "Warning", "FailedScheduling",
                        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
        api.event(NS, pod["metadata"]["name"], "Warning", "FailedScheduling",
                  "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", count=2, uid=uid)

    api.after_create = run
    with serve(api) as url:
        t0 = time.monotonic()
        out = run_pods(make_run(tmp_path, url), [manifest("p0")], container="collector",
                       schedule_timeout_s=0.6, finish_timeout_s=30)
        took = time.monotonic() - t0
    o = out[0]
    assert 0.6 <= took < 5
    assert o.timed_out and o.settled == "not scheduled within 0.6 s"
    assert [(e["reason"], e["count"]) for e in o.events] == [("FailedScheduling", 2)]
    assert o.pod is not None and not o.pod["spec"].get("nodeName")


def test_a_pod_that_never_finishes_stops_at_the_finish_budget(tmp_path: Path) -> None:
    api = LiveApi()
    api.after_create = lambda p: api.schedule(NS, p["metadata"]["name"], "node-a")
    with serve(api) as url:
        out = run_pods(make_run(tmp_path, url), [manifest("p0")], container="collector",
                       schedule_timeout_s=0.5, finish_timeout_s=0.8)
    o = out[0]
    assert o.timed_out and o.settled == "not finished within 0.8 s"
    assert o.pod is not None and o.pod["spec"]["nodeName"] == "node-a"
    assert api.pods_alive(NS) == []  # deleted: it would hold its GPU otherwise


def test_a_failed_pod_still_yields_its_log(tmp_path: Path) -> None:
    api = LiveApi()
    kubelet(api, log="boom\n", exit_code=3)
    with serve(api) as url:
        out = run_pods(make_run(tmp_path, url), [manifest("p0")], container="collector",
                       schedule_timeout_s=5, finish_timeout_s=5)
    o = out[0]
    assert o.settled == "the pod failed" and o.finished
    assert o.log == "p0: boom\n"


def test_a_log_that_cannot_be_read_says_why(tmp_path: Path) -> None:
    api = LiveApi()

    def run(pod: dict[str, Any]) -> None:
        name = pod["metadata"]["name"]
        api.schedule(NS, name, "node-a")
        api.finish(NS, name, "x")
        api.logs.pop((NS, name))

    api.after_create = run
    with serve(api) as url:
        out = run_pods(make_run(tmp_path, url), [manifest("p0")], container="collector",
                       schedule_timeout_s=5, finish_timeout_s=5)
    assert out[0].log is None
    assert "container is waiting to start" in (out[0].log_error or "")
    assert f"{NS}/p0" in (out[0].log_error or "")


def test_watch_refused_is_a_kube_error_naming_it(tmp_path: Path) -> None:
    api = LiveApi()
    with serve(api) as url:
        run = make_run(tmp_path, url)

        def refuse(*a: Any, **kw: Any) -> Any:
            from kubernetes.client.rest import ApiException
            raise ApiException(status=403, reason="Forbidden")

        run.kube.core.list_namespaced_event = refuse  # type: ignore[method-assign]
        with pytest.raises(KubeError, match=r"refused watch pods and events in kgc-t1"):
            run_pods(run, [manifest("p0")], container="collector", schedule_timeout_s=1,
                     finish_timeout_s=1)
    assert not [r for r in api.requests if r[0] == "POST"]  # nothing created


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    run = kube.Run(kube.Kube.from_api_client(kube.connect.__globals__["client"].ApiClient()),
                   run_id="t1")
    for kw, msg in (({"max_parallel": 0}, "max_parallel"),
                    ({"finish_timeout_s": 0.1}, "finish_timeout_s")):
        args: dict[str, Any] = {"container": "c", "schedule_timeout_s": 1,
                                "finish_timeout_s": 1, **kw}
        with pytest.raises(ValueError, match=msg):
            run_pods(run, [manifest("a")], **args)
    with pytest.raises(ValueError, match="distinct"):
        run_pods(run, [manifest("a"), manifest("a")], container="c", schedule_timeout_s=1,
                 finish_timeout_s=1)


def test_outcome_defaults() -> None:
    o = PodOutcome("x")
    assert not o.finished and o.events == [] and o.settled is None
