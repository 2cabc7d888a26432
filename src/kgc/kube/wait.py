"""Bounded waits on described conditions. They wait and return what they saw; they never
judge (no asserts, no verdicts).

* ``wait_for(what, probe, timeout_s)`` — polls ``probe`` with tenacity. For things no watch
  can follow (an HTTP endpoint, a file, a computed value).
* ``watch_until(what, list_fn, predicate, timeout_s)`` — list, then follow a watch from
  that resourceVersion and re-evaluate ``predicate`` on every change. No polling.
* ``wait_for_pod`` / ``wait_for_pods`` — ``watch_until`` on pods with a ``Condition``
  (a predicate plus the words that describe it).

A timeout raises ``WaitTimeout``: it says what was awaited, for how long, and the last
thing observed, e.g. ``timed out after 60 s waiting for pod kgc-x/gpu Ready (last observed:
phase=Pending, PodScheduled=False Unschedulable: 0/3 nodes are available...)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kubernetes import watch
from kubernetes.client.rest import ApiException
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from kgc.kube.client import Kube
from kgc.progress import Waiting

T = TypeVar("T")
O = TypeVar("O")  # noqa: E741 - an API object


class WaitTimeout(Exception):
    """A bounded wait ran out. ``what``: the described condition; ``last_observed``: the
    last state seen (text or an object's summary)."""

    def __init__(self, what: str, timeout_s: float, last_observed: Any = None) -> None:
        self.what = what
        self.timeout_s = timeout_s
        self.last_observed = last_observed
        seen = "nothing" if last_observed is None else _one_line(last_observed)
        super().__init__(f"timed out after {timeout_s:g} s waiting for {what} "
                         f"(last observed: {seen})")


@dataclass(frozen=True)
class NotYet:
    """What a probe returns when the condition does not hold yet, with what it saw."""

    observed: Any = None

    def __bool__(self) -> bool:
        return False


def _one_line(x: Any, limit: int = 400) -> str:
    text = " ".join(str(x).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Pending(Exception):
    def __init__(self, observed: Any) -> None:
        super().__init__(str(observed))
        self.observed = observed


def wait_for(
    what: str,
    probe: Callable[[], T],
    timeout_s: float,
    interval_s: float = 0.25,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``probe`` every ``interval_s`` until it returns something truthy; return it.

    A falsy result (``None``, ``False``, ``NotYet(observed)``...) means "not yet"; so does
    an exception of a ``retry_on`` type. Any other exception propagates at once (that is
    how a caller aborts the wait: e.g. the process it waits on has died)."""

    waiting = Waiting(what, timeout_s)

    def attempt() -> T:
        try:
            value = probe()
        except retry_on as exc:
            waiting.update(f"{type(exc).__name__}: {exc}")
            raise _Pending(f"{type(exc).__name__}: {exc}") from exc
        if not value:
            waiting.update(value.observed if isinstance(value, NotYet) else None)
            raise _Pending(value.observed if isinstance(value, NotYet) else value)
        return value

    try:
        for att in Retrying(
            stop=stop_after_delay(timeout_s),
            wait=wait_fixed(interval_s),
            retry=retry_if_exception_type(_Pending),
        ):
            with att:
                return attempt()
    except RetryError as exc:
        last = exc.last_attempt.exception()
        raise WaitTimeout(what, timeout_s,
                          last.observed if isinstance(last, _Pending) else last) from None
    raise WaitTimeout(what, timeout_s)  # pragma: no cover - Retrying always attempts once


def _key(obj: Any) -> str:
    md = obj.metadata if not isinstance(obj, dict) else None
    if md is not None:
        return f"{md.namespace or ''}/{md.name}"
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name')}"


def _rv(obj: Any) -> str | None:
    if isinstance(obj, dict):
        return (obj.get("metadata") or {}).get("resourceVersion")
    return obj.metadata.resource_version if obj.metadata else None


def watch_until(
    what: str,
    list_fn: Callable[..., Any],
    predicate: Callable[[dict[str, Any]], T],
    timeout_s: float,
    *args: Any,
    describe: Callable[[dict[str, Any]], str] | None = None,
    **list_kwargs: Any,
) -> T:
    """List the objects ``list_fn(*args, **list_kwargs)`` returns, then watch them from
    that resourceVersion, keeping ``{"namespace/name": object}`` current, until
    ``predicate(objects)`` is truthy; return its value. On ``410 Gone`` it lists again.

    ``predicate`` may return ``NotYet(observed)`` to say what it saw; otherwise the last
    observation is ``describe(objects)`` (default: the object names)."""
    deadline = time.monotonic() + timeout_s
    objects: dict[str, Any] = {}
    last: Any = None
    waiting = Waiting(what, timeout_s)  # a line when it takes time and what it sees changes

    def check() -> T | None:
        nonlocal last
        result = predicate(objects)
        if result:
            return result
        if isinstance(result, NotYet):
            last = result.observed
        elif describe is not None:
            last = describe(objects)
        else:
            last = f"{len(objects)} object(s): {', '.join(sorted(objects)) or '-'}"
        waiting.update(last)
        return None

    def relist() -> str:
        listed = list_fn(*args, **list_kwargs)
        objects.clear()
        if isinstance(listed, dict):  # custom objects come as plain dicts
            items, rv = listed.get("items") or [], (listed.get("metadata") or {}).get(
                "resourceVersion", "")
        else:
            items, rv = listed.items or [], listed.metadata.resource_version
        for item in items:
            objects[_key(item)] = item
        return str(rv)

    rv = relist()
    done = check()
    if done:
        return done
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise WaitTimeout(what, timeout_s, last)
        w = watch.Watch()
        try:
            for ev in w.stream(
                list_fn, *args, resource_version=rv, allow_watch_bookmarks=True,
                timeout_seconds=max(1, math.ceil(remaining)),
                _request_timeout=remaining + 10, **list_kwargs,
            ):
                kind, obj = ev["type"], ev["object"]
                if kind == "BOOKMARK":
                    rv = (ev["raw_object"].get("metadata") or {}).get("resourceVersion", rv)
                    continue
                rv = _rv(obj) or rv
                if kind == "DELETED":
                    objects.pop(_key(obj), None)
                else:
                    objects[_key(obj)] = obj
                done = check()
                if done:
                    w.stop()
                    return done
                if time.monotonic() >= deadline:
                    w.stop()
                    break
        except ApiException as exc:
            if exc.status != 410:
                raise
            rv = relist()  # our resourceVersion is too old: start over from the present
            done = check()
            if done:
                return done


# --------------------------------------------------------------------------- conditions


@dataclass(frozen=True)
class Condition(Generic[O]):
    """A predicate on one object and the words for it ("Ready", "scheduled")."""

    what: str
    test: Callable[[O], bool]

    def __call__(self, obj: O) -> bool:
        return bool(self.test(obj))


def _conditions(pod: Any) -> dict[str, Any]:
    return {c.type: c for c in (pod.status.conditions or [])} if pod.status else {}


def pod_condition(type_: str, status: str = "True") -> Condition[Any]:
    """The pod has condition ``type_`` with ``status`` (e.g. PodReadyToStartContainers)."""
    return Condition(f"{type_}={status}",
                     lambda p: getattr(_conditions(p).get(type_), "status", None) == status)


def pod_ready() -> Condition[Any]:
    return Condition("Ready", pod_condition("Ready").test)


def pod_scheduled() -> Condition[Any]:
    return Condition("scheduled", lambda p: bool(p.spec and p.spec.node_name))


def pod_phase(*phases: str) -> Condition[Any]:
    return Condition("phase " + "|".join(phases),
                     lambda p: bool(p.status and p.status.phase in phases))


def pod_unschedulable() -> Condition[Any]:
    """The scheduler said it cannot place the pod (PodScheduled=False, Unschedulable)."""

    def test(p: Any) -> bool:
        c = _conditions(p).get("PodScheduled")
        return bool(c and c.status == "False" and c.reason == "Unschedulable")

    return Condition("Unschedulable", test)


def describe_pod(pod: Any) -> str:
    """One line: phase, node and every condition (with reason/message when not True)."""
    if pod is None:
        return "no such pod"
    st = pod.status
    parts = [f"phase={getattr(st, 'phase', None)}", f"node={pod.spec.node_name or '-'}"]
    for c in (st.conditions or []) if st else []:
        item = f"{c.type}={c.status}"
        if c.status != "True" and (c.reason or c.message):
            item += f" {c.reason or ''}: {c.message or ''}".rstrip(": ")
        parts.append(item)
    for cs in (st.container_statuses or []) if st else []:
        state = cs.state
        if state and state.waiting:
            parts.append(f"{cs.name} waiting {state.waiting.reason or ''}".rstrip())
        elif state and state.terminated:
            parts.append(f"{cs.name} terminated {state.terminated.reason or ''} "
                         f"(exit {state.terminated.exit_code})")
    return ", ".join(parts)


def wait_for_pod(
    kube: Kube, namespace: str, name: str, condition: Condition[Any], timeout_s: float
) -> Any:
    """Watch pod ``namespace/name`` until ``condition`` holds; return the pod."""
    key = f"{namespace}/{name}"

    def pred(objs: Mapping[str, Any]) -> Any:
        pod = objs.get(key)
        if pod is not None and condition(pod):
            return pod
        return NotYet(describe_pod(pod))

    return watch_until(
        f"pod {key} {condition.what}", kube.core.list_namespaced_pod, pred, timeout_s,
        namespace, field_selector=f"metadata.name={name}",
    )


def wait_for_pods(
    kube: Kube,
    namespace: str,
    condition: Condition[Any],
    timeout_s: float,
    count: int = 1,
    label_selector: str | None = None,
) -> list[Any]:
    """Watch the pods of ``namespace`` (optionally by label) until at least ``count`` of
    them satisfy ``condition``; return those pods (sorted by name)."""
    sel = f" ({label_selector})" if label_selector else ""

    def pred(objs: Mapping[str, Any]) -> Any:
        good = sorted((p for p in objs.values() if condition(p)), key=lambda p: p.metadata.name)
        if len(good) >= count:
            return good
        return NotYet(f"{len(good)}/{count} {condition.what}; "
                      + "; ".join(f"{p.metadata.name}: {describe_pod(p)}"
                                  for p in sorted(objs.values(), key=lambda p: p.metadata.name)
                                  if not condition(p))[:600])

    kw: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
    return watch_until(
        f"{count} pod(s) in {namespace}{sel} {condition.what}",
        kube.core.list_namespaced_pod, pred, timeout_s, namespace, **kw,
    )


def wait_for_deleted(
    kube: Kube, kind: str, names: Iterable[str], timeout_s: float
) -> None:
    """Watch until every cluster-scoped object ``names`` of ``kind`` ("namespace") is gone."""
    wanted = set(names)
    lists: dict[str, Callable[..., Any]] = {
        "namespace": kube.core.list_namespace,
        "runtimeclass": kube.node.list_runtime_class,
        "clusterrole": kube.rbac.list_cluster_role,
        "clusterrolebinding": kube.rbac.list_cluster_role_binding,
        "priorityclass": kube.scheduling.list_priority_class,
    }
    if not wanted:
        return

    def pred(objs: Mapping[str, Any]) -> Any:
        left = sorted(n for n in wanted if f"/{n}" in objs)
        return True if not left else NotYet(f"still present: {', '.join(left)}")

    watch_until(f"{kind}(s) {', '.join(sorted(wanted))} deleted", lists[kind], pred, timeout_s)
