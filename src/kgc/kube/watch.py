"""Watchers that timestamp what the API server tells us, on receipt.

``PodWatcher`` follows the pods of a namespace from a resourceVersion taken *before* the
trigger (``start()`` lists first), and records per pod the client-side receipt time of the
first observation of each phase, next to the API's own timestamp for it (1 s resolution):

===================  ============================================  =========================
phase key            first observed when                           API timestamp
===================  ============================================  =========================
created              the pod is seen at all                        metadata.creationTimestamp
scheduled            spec.nodeName is set                          PodScheduled transition
sandbox_ready        PodReadyToStartContainers=True                its transition
initialized          Initialized=True                              its transition
running:<container>  the container's state.running is set          state.running.startedAt
containers_ready     ContainersReady=True                          its transition
ready                Ready=True                                    its transition
deleted              the DELETED event                             metadata.deletionTimestamp
===================  ============================================  =========================

Receipt times are ``time.monotonic()`` (for durations) and ``time.time()`` (to line them up
with the API's wall-clock stamps), taken as soon as the event's JSON line is parsed (objects
stay plain dicts: no model validation delays an event or drops one it does not like). After a
``410 Gone`` the watcher lists again and counts it in ``relists``: observations made by that
list may be late, and a reader can tell.

``EventWatcher`` records every Event of a namespace from both APIs (``core/v1`` and
``events.k8s.io/v1``, which serve the same events in two shapes) with its receipt time.

They observe; they never judge.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from kubernetes import watch
from kubernetes.client.rest import ApiException

from kgc.kube.client import Kube
from kgc.kube.wait import NotYet, WaitTimeout, wait_for

CREATED = "created"
SCHEDULED = "scheduled"
SANDBOX_READY = "sandbox_ready"
INITIALIZED = "initialized"
CONTAINERS_READY = "containers_ready"
READY = "ready"
DELETED = "deleted"
RUNNING_PREFIX = "running:"

_CONDITION_PHASES = {
    "PodScheduled": SCHEDULED,
    "PodReadyToStartContainers": SANDBOX_READY,
    "Initialized": INITIALIZED,
    "ContainersReady": CONTAINERS_READY,
    "Ready": READY,
}


@dataclass(frozen=True)
class Stamp:
    """When the client received something: monotonic (durations) and wall clock."""

    mono: float
    wall: float

    @classmethod
    def now(cls) -> Stamp:
        return cls(time.monotonic(), time.time())

    def to_dict(self) -> dict[str, float]:
        return {"mono": self.mono, "wall": self.wall}


def epoch(ts: Any) -> float | None:
    """An API timestamp (datetime or RFC 3339 text) as epoch seconds; None if absent."""
    if ts is None:
        return None
    if isinstance(ts, dt.datetime):
        return (ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC)).timestamp()
    if isinstance(ts, str):
        try:
            return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


@dataclass
class PodTimeline:
    """What one pod went through, as this client saw it and as the API stamped it."""

    name: str
    namespace: str
    uid: str = ""
    runtime_class: str | None = None
    node: str | None = None
    seen: dict[str, Stamp] = field(default_factory=dict)
    api: dict[str, float] = field(default_factory=dict)

    def at(self, phase: str) -> float | None:
        """Monotonic receipt time of ``phase`` (None: not observed)."""
        s = self.seen.get(phase)
        return s.mono if s else None

    # the phases a latency layer reads most, as monotonic receipt times
    @property
    def created(self) -> float | None:
        return self.at(CREATED)

    @property
    def scheduled(self) -> float | None:
        return self.at(SCHEDULED)

    @property
    def sandbox_ready(self) -> float | None:
        return self.at(SANDBOX_READY)

    @property
    def ready(self) -> float | None:
        return self.at(READY)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "runtime_class": self.runtime_class,
            "node": self.node,
            "seen": {k: v.to_dict() for k, v in self.seen.items()},
            "api": dict(self.api),
        }


class Follower:
    """One thread following one watch (list first, then watch from that resourceVersion;
    list again on 410 Gone) and handing each object to ``handle`` with its receipt time."""

    def __init__(
        self,
        name: str,
        list_fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        handle: Callable[[str, Any, Stamp], None],
        on_change: Callable[[], None],
    ) -> None:
        self.name = name
        self._list_fn = list_fn
        self._args = args
        self._kwargs = dict(kwargs)
        self._handle = handle
        self._on_change = on_change
        self._stop = threading.Event()
        self._watch: watch.Watch | None = None
        self._thread: threading.Thread | None = None
        self.resource_version = ""
        self.relists = 0
        self.error: BaseException | None = None
        self.started = threading.Event()

    def list_now(self) -> None:
        """List (and hand over) what exists now; the watch continues from here."""
        resp = self._list_fn(*self._args, _preload_content=False, **self._kwargs)
        now = Stamp.now()
        listed = json.loads(resp.data)
        for item in listed.get("items") or []:
            self._handle("LISTED", item, now)
        self.resource_version = str((listed.get("metadata") or {}).get("resourceVersion", ""))
        self._on_change()

    def start(self) -> None:
        if not self.resource_version:
            self.list_now()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self.started.wait(5)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                # objects as plain dicts: no model validation can make the watcher drop
                # an event (kwok's core Events have no eventTime, which the typed
                # events.k8s.io model refuses), and receipt is stamped before any decoding
                self._watch = watch.Watch(return_type="object")
                self.started.set()
                try:
                    for ev in self._watch.stream(
                        self._list_fn, *self._args, resource_version=self.resource_version,
                        allow_watch_bookmarks=True, timeout_seconds=60, **self._kwargs,
                    ):
                        stamp = Stamp.now()
                        kind = ev["type"]
                        if kind == "BOOKMARK":
                            md = ev["raw_object"].get("metadata") or {}
                            self.resource_version = md.get("resourceVersion",
                                                           self.resource_version)
                            continue
                        obj = ev["object"]
                        self.resource_version = str(
                            (obj.get("metadata") or {}).get("resourceVersion",
                                                            self.resource_version))
                        self._handle(kind, obj, stamp)
                        self._on_change()
                        if self._stop.is_set():
                            break
                except ApiException as exc:
                    if exc.status != 410 or self._stop.is_set():
                        raise
                    self.relists += 1
                    self.list_now()
        except BaseException as exc:  # noqa: BLE001 - handed to the reader via .error
            if not self._stop.is_set():
                self.error = exc
                self._on_change()
        finally:
            self.started.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is None:
            return

        def stopped() -> bool:
            # Watch.stop() shuts the socket down so the blocked read returns; a stop that
            # comes right after start() may find no socket yet (the request is still being
            # made): repeat it until the thread has left the stream
            if self._watch is not None:
                self._watch.stop()
            thread.join(0.05)
            return not thread.is_alive()

        try:
            wait_for(f"watch {self.name} to stop", stopped, timeout_s, interval_s=0.05)
        except WaitTimeout:
            pass  # a daemon thread: it ends with its stream's server-side timeout


class Watcher:
    """Shared machinery of every watcher (kgc's own and the layers'): followers, a lock, and
    a condition waiters sleep on. A subclass adds its watches with :meth:`follow`, guards
    its state with ``lock`` in its handlers and waits with :meth:`wait_until`."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self._followers: list[Follower] = []

    def follow(self, name: str, list_fn: Callable[..., Any], args: tuple[Any, ...],
               kwargs: Mapping[str, Any], handle: Callable[[str, Any, Stamp], None],
               resource_version: str = "") -> Follower:
        """Follow one more watch (``list_fn(*args, **kwargs)``) from ``start()`` on, each
        object handed to ``handle``; ``resource_version``: watch from there instead of
        listing first."""
        f = Follower(name, list_fn, args, kwargs, handle, self.changed)
        f.resource_version = resource_version
        self._followers.append(f)
        return f

    def changed(self) -> None:
        """Wake the waiters (a follower calls it after each object it handed over)."""
        with self.lock:
            self.lock.notify_all()

    @property
    def error(self) -> BaseException | None:
        return next((f.error for f in self._followers if f.error is not None), None)

    @property
    def relists(self) -> int:
        return sum(f.relists for f in self._followers)

    def start(self) -> Any:
        for f in self._followers:
            f.start()
        return self

    def stop(self) -> None:
        for f in self._followers:
            f.stop()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def wait_until(self, what: str, snapshot: Callable[[], Any], predicate: Callable[[Any], Any],
              timeout_s: float) -> Any:
        deadline = time.monotonic() + timeout_s
        last: Any = None
        with self.lock:
            while True:
                if self.error is not None:
                    raise self.error
                result = predicate(snapshot())
                if result:
                    return result
                last = result.observed if isinstance(result, NotYet) else last
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise WaitTimeout(what, timeout_s, last)
                self.lock.wait(remaining)


class PodWatcher(Watcher):
    """Follows the pods of ``namespace`` (optionally ``label_selector``) and keeps a
    ``PodTimeline`` per pod. Start it before the trigger: ``start()`` lists first, so the
    watch begins at a resourceVersion older than anything the trigger creates."""

    def __init__(self, kube: Kube, namespace: str, label_selector: str | None = None,
                 resource_version: str | None = None) -> None:
        """``resource_version``: watch from there (a list the caller made before its
        trigger) instead of listing at ``start()``."""
        super().__init__()
        self.namespace = namespace
        self._timelines: dict[str, PodTimeline] = {}
        kw: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
        self.follow(f"kgc-pod-watch-{namespace}", kube.core.list_namespaced_pod,
                    (namespace,), kw, self._observe, resource_version or "")

    def start(self) -> PodWatcher:
        super().start()
        return self

    def __enter__(self) -> PodWatcher:
        return self.start()

    @property
    def timelines(self) -> dict[str, PodTimeline]:
        """A copy of the timelines so far, by pod name."""
        with self.lock:
            return {k: _copy(v) for k, v in self._timelines.items()}

    def wait(self, what: str, predicate: Callable[[dict[str, PodTimeline]], Any],
             timeout_s: float) -> Any:
        """Sleep until ``predicate(timelines)`` is truthy (woken by each event; no polling)
        and return its value; ``WaitTimeout`` naming ``what`` otherwise."""
        return self.wait_until(what, lambda: self._timelines, predicate, timeout_s)

    def _observe(self, kind: str, pod: dict[str, Any], stamp: Stamp) -> None:
        md, spec, st = _d(pod.get("metadata")), _d(pod.get("spec")), _d(pod.get("status"))
        name = str(md.get("name", ""))
        with self.lock:
            tl = self._timelines.get(name)
            if tl is None or (md.get("uid") and tl.uid and tl.uid != md.get("uid")):
                tl = self._timelines[name] = PodTimeline(name, str(md.get("namespace") or ""))
            tl.uid = str(md.get("uid") or tl.uid)
            tl.runtime_class = spec.get("runtimeClassName", tl.runtime_class)
            _first(tl, CREATED, stamp, epoch(md.get("creationTimestamp")))
            conds = {c.get("type"): c for c in _l(st.get("conditions")) if isinstance(c, dict)}
            if spec.get("nodeName"):
                tl.node = str(spec["nodeName"])
                sched = _d(conds.get("PodScheduled"))
                _first(tl, SCHEDULED, stamp, epoch(sched.get("lastTransitionTime")))
            for ctype, c in conds.items():
                phase = _CONDITION_PHASES.get(str(ctype))
                if phase and phase != SCHEDULED and c.get("status") == "True":
                    _first(tl, phase, stamp, epoch(c.get("lastTransitionTime")))
            for cs in _l(st.get("containerStatuses")):
                running = _d(_d(cs).get("state")).get("running")
                if isinstance(running, dict):
                    _first(tl, RUNNING_PREFIX + str(_d(cs).get("name")), stamp,
                           epoch(running.get("startedAt")))
            started = epoch(st.get("startTime"))
            if started is not None:
                tl.api.setdefault("start_time", started)
            if kind == "DELETED":
                _first(tl, DELETED, stamp, epoch(md.get("deletionTimestamp")))


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _l(x: Any) -> list[Any]:
    return x if isinstance(x, list) else []


def _first(tl: PodTimeline, phase: str, stamp: Stamp, api: float | None) -> None:
    if phase not in tl.seen:
        tl.seen[phase] = stamp
        if api is not None:
            tl.api[phase] = api


def _copy(tl: PodTimeline) -> PodTimeline:
    return PodTimeline(tl.name, tl.namespace, tl.uid, tl.runtime_class, tl.node,
                       dict(tl.seen), dict(tl.api))


@dataclass(frozen=True)
class ObservedEvent:
    """One Event as received (``source``: the API that delivered it)."""

    source: str  # "core/v1" or "events.k8s.io/v1"
    uid: str
    type: str
    reason: str
    message: str
    kind: str  # of the object it is about (involvedObject / regarding)
    name: str
    namespace: str
    reporter: str
    api_time: float | None  # eventTime, else lastTimestamp/firstTimestamp (epoch s)
    count: int
    received: Stamp

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["received"] = self.received.to_dict()
        return d


class EventWatcher(Watcher):
    """Records the Events of ``namespace`` from core/v1 and events.k8s.io/v1."""

    SOURCES = ("core/v1", "events.k8s.io/v1")

    def __init__(self, kube: Kube, namespace: str,
                 sources: tuple[str, ...] = SOURCES) -> None:
        super().__init__()
        self.namespace = namespace
        self._events: list[ObservedEvent] = []
        self._seen: set[tuple[str, str, str]] = set()
        fns = {"core/v1": kube.core.list_namespaced_event,
               "events.k8s.io/v1": kube.events.list_namespaced_event}
        for src in sources:
            self.follow(f"kgc-event-watch-{src}-{namespace}", fns[src], (namespace,), {},
                        self._handler(src))

    def _handler(self, source: str) -> Callable[[str, Any, Stamp], None]:
        def handle(kind: str, ev: Any, stamp: Stamp) -> None:
            self._observe(source, kind, ev, stamp)

        return handle

    def start(self) -> EventWatcher:
        super().start()
        return self

    def __enter__(self) -> EventWatcher:
        return self.start()

    @property
    def events(self) -> list[ObservedEvent]:
        with self.lock:
            return list(self._events)

    def wait(self, what: str, predicate: Callable[[list[ObservedEvent]], Any],
             timeout_s: float) -> Any:
        return self.wait_until(what, lambda: list(self._events), predicate, timeout_s)

    def _observe(self, source: str, kind: str, ev: dict[str, Any], stamp: Stamp) -> None:
        if kind == "DELETED":
            return
        md = _d(ev.get("metadata"))
        key = (source, str(md.get("uid") or ""), str(md.get("resourceVersion") or ""))
        with self.lock:
            if key in self._seen:
                return
            self._seen.add(key)
            if source == "core/v1":
                obj = _d(ev.get("involvedObject"))
                reporter = ev.get("reportingComponent") or _d(ev.get("source")).get("component")
                api_time = epoch(ev.get("eventTime")) or epoch(ev.get("lastTimestamp")) \
                    or epoch(ev.get("firstTimestamp"))
                note, count = ev.get("message"), ev.get("count")
            else:
                obj = _d(ev.get("regarding"))
                reporter = ev.get("reportingController")
                api_time = epoch(ev.get("eventTime")) or epoch(
                    ev.get("deprecatedLastTimestamp")) or epoch(ev.get("deprecatedFirstTimestamp"))
                note = ev.get("note")
                count = _d(ev.get("series")).get("count") or ev.get("deprecatedCount")
            self._events.append(ObservedEvent(
                source=source, uid=key[1], type=str(ev.get("type") or ""),
                reason=str(ev.get("reason") or ""), message=str(note or ""),
                kind=str(obj.get("kind") or ""), name=str(obj.get("name") or ""),
                namespace=str(obj.get("namespace") or ""), reporter=str(reporter or ""),
                api_time=api_time, count=count if isinstance(count, int) else 1,
                received=stamp,
            ))
