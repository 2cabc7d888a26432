"""Run a batch of pods to their end and collect what each one left: its last state, its
events and (when it finished) one container's log.

    outcomes = run_pods(run, manifests, container="collector",
                        schedule_timeout_s=300, finish_timeout_s=1500, max_parallel=4,
                        settled=lambda pod, events: None)

For each manifest, in order, at most ``max_parallel`` at a time:

1. the pod is created through ``run.create`` (labelled with the run; a refusal by the API —
   admission, quota, RBAC — is recorded as ``create_error``, not raised);
2. it is followed through one watch on the run's pods and one on the namespace's events
   (both listed first, so nothing that happens after the create is missed; no polling);
3. waiting stops, per pod, at the first of: the pod finished (phase ``Succeeded`` or
   ``Failed``); ``settled(pod, events)`` returns a reason (the caller knows the pod's fate
   already, e.g. an image that cannot be pulled); the pod is not scheduled within
   ``schedule_timeout_s``; it has not finished within ``finish_timeout_s`` (both counted
   from its creation);
4. its events are listed once more (the event stream may lag the pod stream), and the
   named container's log is read once the pod finished or that container terminated;
   a pod that stopped being waited for without finishing is deleted (unless the run keeps
   its objects), so that it frees what it holds (a GPU) for the pods after it.

It observes and collects; it never judges. Pods and events are kept as the plain dicts the
API served (``sanitize_for_serialization`` shape), for the layers' own readers.
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kgc.kube.client import KubeError, api_error
from kgc.kube.run import Run
from kgc.kube.watch import Stamp, Watcher
from kgc.progress import note

MAX_LOG_BYTES = 4 * 1024 * 1024
MAX_EVENTS_PER_POD = 200

# settled(pod, events) -> why waiting may stop now, or None to keep waiting
Settled = Callable[[Mapping[str, Any], Sequence[Mapping[str, Any]]], str | None]


@dataclass
class PodOutcome:
    """What one pod of the batch left behind."""

    name: str
    pod: dict[str, Any] | None = None  # the last state the API served (None: never seen)
    events: list[dict[str, Any]] = field(default_factory=list)  # about this pod, oldest first
    log: str | None = None  # the container's log, when it finished and could be read
    log_error: str | None = None  # why the log could not be read
    create_error: str | None = None  # the API refused the pod: its message
    waited_s: float = 0.0  # from the create to the end of waiting
    timed_out: bool = False  # waiting ended by a budget, not by the pod
    settled: str | None = None  # why waiting stopped ("the pod succeeded", ...)

    @property
    def finished(self) -> bool:
        return _phase(self.pod) in ("Succeeded", "Failed")


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _phase(pod: Mapping[str, Any] | None) -> str | None:
    p = _d(_d(pod).get("status")).get("phase")
    return p if isinstance(p, str) else None


def _terminated(pod: Mapping[str, Any] | None, container: str) -> bool:
    for cs in _d(_d(pod).get("status")).get("containerStatuses") or []:
        cs = _d(cs)
        if cs.get("name") == container and isinstance(_d(cs.get("state")).get("terminated"),
                                                      dict):
            return True
    return False


def _scheduled(pod: Mapping[str, Any] | None) -> bool:
    return bool(_d(_d(pod).get("spec")).get("nodeName"))


def _message(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        try:
            body = json.loads(exc.body or "")
        except (TypeError, ValueError):
            body = None
        msg = body.get("message") if isinstance(body, dict) else None
        return f"{exc.status} {exc.reason}: {msg or exc.body or ''}".strip()
    return str(exc)


class _BatchWatch(Watcher):
    """The run's pods (by the run's label) and the namespace's core/v1 Events, as raw dicts."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        k = run.kube
        self.pods: dict[str, dict[str, Any]] = {}
        self.deleted: set[str] = set()
        self._events: dict[str, dict[str, Any]] = {}
        self._order: list[str] = []
        self.follow(f"kgc-pods-{run.namespace}", k.core.list_namespaced_pod, (run.namespace,),
                    {"label_selector": run.selector}, self._pod)
        self.follow(f"kgc-events-{run.namespace}", k.core.list_namespaced_event,
                    (run.namespace,), {}, self._event)

    def _pod(self, kind: str, obj: Any, stamp: Stamp) -> None:
        name = str(_d(_d(obj).get("metadata")).get("name") or "")
        with self.lock:
            self.pods[name] = _d(obj)
            if kind == "DELETED":
                self.deleted.add(name)

    def _event(self, kind: str, obj: Any, stamp: Stamp) -> None:
        if kind == "DELETED":
            return
        md = _d(_d(obj).get("metadata"))
        uid = str(md.get("uid") or md.get("name") or len(self._order))
        with self.lock:
            if uid not in self._events:
                self._order.append(uid)
            self._events[uid] = _d(obj)  # an event's count grows in place: keep the latest

    def events_of(self, name: str, uid: str | None) -> list[dict[str, Any]]:
        out = []
        for key in self._order:
            ev = self._events[key]
            obj = _d(ev.get("involvedObject"))
            if obj.get("kind") == "Pod" and obj.get("name") == name and (
                    not uid or not obj.get("uid") or obj.get("uid") == uid):
                out.append(ev)
        return out[-MAX_EVENTS_PER_POD:]

    def wait_change(self, timeout_s: float) -> None:
        """Sleep until a watch delivers something (or ``timeout_s``); the caller holds the
        lock. Raises what a watch died of."""
        if self.error is not None:
            raise self.error
        if timeout_s > 0:
            self.lock.wait(timeout_s)
        if self.error is not None:
            raise self.error


@dataclass
class _InFlight:
    manifest: Mapping[str, Any]
    started: float
    outcome: PodOutcome
    said: str = "created"  # the last state the progress lines reported


def _state(pod: Mapping[str, Any] | None) -> str:
    """The pod's state as the progress lines tell it: created, scheduled, running."""
    if _phase(pod) == "Running":
        return "running"
    return "scheduled" if _scheduled(pod) else "created"


def _report(f: _InFlight, pod: Mapping[str, Any] | None, now: float,
            schedule_timeout_s: float, finish_timeout_s: float) -> None:
    """A progress line when the pod moved on (scheduled, running), with its budget left."""
    state = _state(pod)
    if state == f.said:
        return
    f.said = state
    node = _d(_d(pod).get("spec")).get("nodeName")
    left = max(0.0, finish_timeout_s - (now - f.started))
    note("pod %s %s%s after %.0f s (%.0f s of its %g s budget left)", f.outcome.name, state,
         f" on {node}" if node else "", now - f.started, left, finish_timeout_s)


def _read_log(run: Run, name: str, container: str) -> tuple[str | None, str | None]:
    try:
        resp: Any = run.kube.call("get", "pods/log", run.kube.core.read_namespaced_pod_log, name,
                             run.namespace, container=container, limit_bytes=MAX_LOG_BYTES,
                             _preload_content=False, _request_timeout=60)
    except (ApiException, KubeError) as exc:
        return None, f"reading the log of {run.namespace}/{name} ({container}): {_message(exc)}"
    data = resp.data if isinstance(resp.data, bytes) else bytes(resp.data or b"")
    return data.decode("utf-8", errors="replace"), None


def _when(ev: Mapping[str, Any]) -> tuple[str, int]:
    md = _d(ev.get("metadata"))
    ts = (ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
          or md.get("creationTimestamp") or "")
    rv = str(md.get("resourceVersion") or "")
    return (ts if isinstance(ts, str) else "", int(rv) if rv.isdigit() else 0)


def _final_events(run: Run, name: str, uid: str | None,
                  watched: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod's events as the API has them now (one consistent list, oldest first): the
    event stream and the pod stream are separate watches, so the last event may still be
    on its way when the pod's state settles. Falls back to what was watched."""
    try:
        resp: Any = run.kube.call("list", "events", run.kube.core.list_namespaced_event,
                             run.namespace, _preload_content=False, _request_timeout=30,
                             field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}")
        items = json.loads(resp.data).get("items") or []
    except (ApiException, KubeError, ValueError, AttributeError):
        return watched
    mine = [_d(e) for e in items if not uid or not _d(_d(e).get("involvedObject")).get("uid")
            or _d(_d(e).get("involvedObject")).get("uid") == uid]
    return sorted(mine, key=_when)[-MAX_EVENTS_PER_POD:]


def _delete(run: Run, name: str) -> None:
    """Best effort: a pod that is no longer waited for gives back what it holds."""
    try:
        run.kube.call("delete", "pods", run.kube.core.delete_namespaced_pod, name,
                      run.namespace, body=client.V1DeleteOptions(grace_period_seconds=0),
                      _preload_content=False)
    except (ApiException, KubeError):
        pass  # teardown deletes the namespace anyway


def run_pods(
    run: Run,
    manifests: Sequence[Mapping[str, Any]],
    *,
    container: str,
    schedule_timeout_s: float,
    finish_timeout_s: float,
    max_parallel: int = 4,
    settled: Settled | None = None,
) -> list[PodOutcome]:
    """Create ``manifests`` as pods of ``run`` (at most ``max_parallel`` at once), follow
    each to its end within the budgets, and return one :class:`PodOutcome` per manifest,
    in the manifests' order. Raises ``KubeError`` only when the run's pods or events cannot
    be watched at all."""
    if max_parallel < 1:
        raise ValueError("max_parallel must be >= 1")
    if finish_timeout_s < schedule_timeout_s:
        raise ValueError("finish_timeout_s must be >= schedule_timeout_s")
    names = [str(_d(m.get("metadata")).get("name") or "") for m in manifests]
    if not all(names) or len(set(names)) != len(names):
        raise ValueError("every manifest needs a distinct metadata.name")
    outcomes = {n: PodOutcome(n) for n in names}
    pending = collections.deque(zip(names, manifests, strict=True))
    inflight: dict[str, _InFlight] = {}
    done = 0
    note("%d pod(s) to run in %s, at most %d at once (scheduled within %g s, finished "
         "within %g s each)", len(names), run.namespace, max_parallel, schedule_timeout_s,
         finish_timeout_s)
    w = _BatchWatch(run)
    try:
        _refused_as_kube_error(w.start, run)
        while pending or inflight:
            while pending and len(inflight) < max_parallel:
                name, manifest = pending.popleft()
                t0 = time.monotonic()
                try:
                    run.create(manifest)
                except (ApiException, KubeError) as exc:
                    oc = outcomes[name]
                    oc.create_error, oc.settled = _message(exc), "the API refused the pod"
                    done += 1
                    note("pod %s refused by the API (%d of %d done): %s", name, done,
                         len(names), oc.create_error[:200])
                    continue
                inflight[name] = _InFlight(manifest, t0, outcomes[name])
                note("pod %s created", name)
            ended: list[_InFlight] = []
            with w.lock:
                now = time.monotonic()
                nearest = None
                for name, f in inflight.items():
                    why, timed_out = _verdict(w, name, f, now, container, schedule_timeout_s,
                                              finish_timeout_s, settled)
                    if why is not None:
                        oc = f.outcome
                        oc.pod = w.pods.get(name)
                        oc.events = w.events_of(name, _uid(oc.pod))
                        oc.settled, oc.timed_out = why, timed_out
                        oc.waited_s = round(now - f.started, 3)
                        ended.append(f)
                        continue
                    _report(f, w.pods.get(name), now, schedule_timeout_s, finish_timeout_s)
                    limit = f.started + (finish_timeout_s if _scheduled(w.pods.get(name))
                                         else schedule_timeout_s)
                    nearest = limit if nearest is None else min(nearest, limit)
                if not ended and inflight:
                    pause = max(0.0, (nearest or now) - now) + 0.01
                    _refused_as_kube_error(partial(w.wait_change, pause), run)
            for f in ended:
                oc = f.outcome
                del inflight[oc.name]
                done += 1
                note("pod %s: %s after %.0f s (%d of %d done)", oc.name, oc.settled,
                     oc.waited_s, done, len(names))
                oc.events = _final_events(run, oc.name, _uid(oc.pod), oc.events)
                if oc.finished or _terminated(oc.pod, container):
                    oc.log, oc.log_error = _read_log(run, oc.name, container)
                if not oc.finished and not run.keep:
                    _delete(run, oc.name)
    finally:
        w.stop()
    return [outcomes[n] for n in names]


def _refused_as_kube_error(fn: Callable[[], Any], run: Run) -> Any:
    """The watches list and watch without ``Kube.call``: a refusal (401/403) becomes the
    same ``KubeError`` every other call raises."""
    try:
        return fn()
    except ApiException as exc:
        if exc.status in (401, 403):
            raise api_error(exc, "watch", f"pods and events in {run.namespace}",
                            run.kube) from None
        raise


def _uid(pod: Mapping[str, Any] | None) -> str | None:
    uid = _d(_d(pod).get("metadata")).get("uid")
    return uid if isinstance(uid, str) else None


def _verdict(w: _BatchWatch, name: str, f: _InFlight, now: float, container: str,
             schedule_timeout_s: float, finish_timeout_s: float,
             settled: Settled | None) -> tuple[str | None, bool]:
    """(why waiting for this pod stops now, whether a budget stopped it); (None, False) to
    keep waiting. The caller holds the watch's lock."""
    pod = w.pods.get(name)
    phase = _phase(pod)
    if phase in ("Succeeded", "Failed"):
        return f"the pod {phase.lower()}", False
    if name in w.deleted:
        return "the pod was deleted by someone else", False
    if pod is not None and settled is not None:
        why = settled(pod, w.events_of(name, _uid(pod)))
        if why:
            return why, False
    waited = now - f.started
    if not _scheduled(pod) and waited >= schedule_timeout_s:
        return f"not scheduled within {schedule_timeout_s:g} s", True
    if waited >= finish_timeout_s:
        return f"not finished within {finish_timeout_s:g} s", True
    return None, False
