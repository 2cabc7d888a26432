"""Helpers for the cluster lab's smoke suite: bounded waits (tenacity) and a pod watcher
that records client-side timestamps of watch events."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client, watch
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from kgc.core.profile import ClusterProfile
from kgc.lab import cluster as labc


@dataclass
class LabInfo:
    run_dir: Path
    kubeconfig: Path
    server: str
    metric_url: str
    cluster: ClusterProfile
    state: dict[str, Any]
    api: Any
    keda_missing: tuple[str, ...] = ()

    def set_metric(self, value: float) -> None:
        labc.set_metric(value, self.run_dir)


class _NotYet(Exception):
    pass


def wait_until(
    pred: Callable[[], Any],
    timeout: float,
    what: str,
    every: float = 0.25,
    retry_on: tuple[type[BaseException], ...] = (),
) -> Any:
    """Bounded wait (tenacity) until ``pred()`` returns something truthy; returns it.
    Exceptions of the ``retry_on`` types count as "not yet" (the last one is reported)."""

    def attempt() -> Any:
        try:
            value = pred()
        except retry_on as exc:
            raise _NotYet(f"{what}: {type(exc).__name__}: {exc}") from exc
        if not value:
            raise _NotYet(what)
        return value

    try:
        for att in Retrying(
            stop=stop_after_delay(timeout),
            wait=wait_fixed(every),
            retry=retry_if_exception_type(_NotYet),
        ):
            with att:
                return attempt()
    except RetryError as exc:
        last = exc.last_attempt.exception()
        raise AssertionError(f"timed out after {timeout} s waiting for {what} ({last})") from None
    raise AssertionError(f"no attempt made waiting for {what}")


@dataclass
class PodTimeline:
    """Client-side monotonic timestamps of watch events for one pod."""

    name: str
    runtime_class: str | None = None
    created: float | None = None
    scheduled: float | None = None
    sandbox_ready: float | None = None
    ready: float | None = None
    node: str | None = None


@dataclass
class PodWatcher:
    """Watches pods of a namespace from a resourceVersion taken before the trigger and
    records, per pod, when each phase was first observed (client clock)."""

    core: client.CoreV1Api
    namespace: str
    resource_version: str
    timelines: dict[str, PodTimeline] = field(default_factory=dict)
    error: BaseException | None = None
    _w: watch.Watch = field(default_factory=watch.Watch)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> PodWatcher:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        rv = self.resource_version
        try:
            while not self._stop.is_set():
                for ev in self._w.stream(
                    self.core.list_namespaced_pod, self.namespace,
                    resource_version=rv, timeout_seconds=30, allow_watch_bookmarks=False,
                ):
                    now = time.monotonic()
                    pod = ev["object"]
                    rv = pod.metadata.resource_version
                    self._observe(pod, now)
                    if self._stop.is_set():
                        break
        except BaseException as exc:  # noqa: BLE001 - surfaced to the test via .error
            if not self._stop.is_set():
                self.error = exc

    def _observe(self, pod: Any, now: float) -> None:
        tl = self.timelines.setdefault(pod.metadata.name, PodTimeline(pod.metadata.name))
        tl.runtime_class = pod.spec.runtime_class_name
        if tl.created is None:
            tl.created = now
        conds = {c.type: c.status for c in (pod.status.conditions or [])}
        if tl.scheduled is None and pod.spec.node_name:
            tl.scheduled = now
            tl.node = pod.spec.node_name
        if tl.sandbox_ready is None and conds.get("PodReadyToStartContainers") == "True":
            tl.sandbox_ready = now
        if tl.ready is None and conds.get("Ready") == "True":
            tl.ready = now

    def stop(self) -> None:
        self._stop.set()
        self._w.stop()
        if self._thread:
            self._thread.join(timeout=35)


