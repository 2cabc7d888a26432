"""The watch of one repetition: from one list taken before the trigger, the run namespace's
measured pods, Deployments, HPAs and ScaledObjects, kept as a :class:`RoleState` per class
(receipt stamps taken by :mod:`kgc.kube.watch` as each event is decoded), and the
repetition's record assembled from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgc import kube
from kgc.kube.watch import Stamp as KubeStamp
from kgc.kube.watch import Watcher
from kgc.layers.keda.evidence import PodRecord, Repetition, ScaleMark, Stall, Stamp
from kgc.layers.keda.observe import (
    deployment_replicas,
    hpa_desired,
    merge_observation,
    pod_observation,
    scaled_object_active,
)
from kgc.layers.keda.workloads import KEDA_GROUP, KEDA_VERSION, ROLE_LABEL, SO_PLURAL, workload_name


def _stamp(s: KubeStamp) -> Stamp:
    return Stamp(s.mono, s.wall)


@dataclass
class RoleState:
    """What the watches showed for one role during one repetition."""

    role: str
    deployment: str
    pods: dict[str, PodRecord] = field(default_factory=dict)  # uid -> record
    listed: set[str] = field(default_factory=set)  # uids present before the trigger
    live: set[str] = field(default_factory=set)  # uids not yet DELETED
    marks: list[ScaleMark] = field(default_factory=list)
    replicas: int | None = None
    desired: int | None = None
    active: Stamp | None = None
    active_now: bool | None = None
    scaled_down: Stamp | None = None
    so: dict[str, Any] | None = None
    hpa: dict[str, Any] | None = None
    dep: dict[str, Any] | None = None

    def new_pods(self) -> list[PodRecord]:
        return [r for uid, r in self.pods.items() if uid not in self.listed]

    def ready_count(self) -> int:
        return sum(1 for r in self.new_pods() if "ready" in r.observed)

    def activated(self) -> bool:
        return (self.active is not None or any(m.replicas >= 1 for m in self.marks)
                or bool(self.new_pods()))


class ScaleWatcher(Watcher):
    """Follows, from one list taken before the trigger, the run namespace's measured pods
    (by role label), Deployments, HPAs and ScaledObjects, and keeps a ``RoleState`` per
    role (receipt stamps taken by ``kgc.kube.watch`` as each event is decoded)."""

    def __init__(self, k: kube.Kube, namespace: str, roles: Sequence[str]) -> None:
        super().__init__()
        self.namespace = namespace
        self.states = {r: RoleState(r, workload_name(r)) for r in roles}
        self._by_name = {workload_name(r): r for r in roles}
        self.lowered: Stamp | None = None
        sel = {"label_selector": ROLE_LABEL}
        for name, fn, args, kw, handle in (
            ("pods", k.core.list_namespaced_pod, (namespace,), sel, self._pod),
            ("deployments", k.apps.list_namespaced_deployment, (namespace,), sel, self._dep),
            ("hpas", k.autoscaling.list_namespaced_horizontal_pod_autoscaler, (namespace,), {},
             self._hpa),
            ("scaledobjects", k.custom.list_namespaced_custom_object,
             (KEDA_GROUP, KEDA_VERSION, namespace, SO_PLURAL), {}, self._so),
        ):
            self.follow(f"kgc-keda-{name}-{namespace}", fn, args, kw, handle)

    def start(self) -> ScaleWatcher:
        super().start()
        return self

    def __enter__(self) -> ScaleWatcher:
        return self.start()

    def snapshot(self) -> dict[str, RoleState]:
        return self.states

    def wait(self, what: str, predicate: Callable[[dict[str, RoleState]], Any],
             timeout_s: float) -> Any:
        """Sleep until ``predicate(states)`` holds (woken by each event); ``WaitTimeout``."""
        return self.wait_until(what, self.snapshot, predicate, max(timeout_s, 0.0))

    def lower(self, at: Stamp) -> None:
        with self.lock:
            self.lowered = at
            for st in self.states.values():
                self._settle(st, at)

    # -- handlers (under no lock: take it)
    def _pod(self, kind: str, pod: dict[str, Any], s: KubeStamp) -> None:
        role = ((pod.get("metadata") or {}).get("labels") or {}).get(ROLE_LABEL)
        st = self.states.get(role) if isinstance(role, str) else None
        if st is None:
            return
        at = _stamp(s)
        obs = pod_observation(pod)
        uid = obs.uid or obs.name or "?"
        with self.lock:
            if kind == "LISTED":
                st.listed.add(uid)
            st.pods[uid] = merge_observation(st.pods.get(uid), obs, at)
            if kind == "DELETED":
                st.live.discard(uid)
            else:
                st.live.add(uid)
            self._settle(st, at)

    def _dep(self, kind: str, dep: dict[str, Any], s: KubeStamp) -> None:
        st = self._role_of((dep.get("metadata") or {}).get("name"))
        if st is None or kind == "DELETED":
            return
        at = _stamp(s)
        n = deployment_replicas(dep)
        with self.lock:
            st.dep = dep
            if n is not None and n != st.replicas:
                if kind != "LISTED":
                    st.marks.append(ScaleMark("deployment", n, at))
                st.replicas = n
            self._settle(st, at)

    def _hpa(self, kind: str, hpa: dict[str, Any], s: KubeStamp) -> None:
        ref = ((hpa.get("spec") or {}).get("scaleTargetRef") or {}).get("name")
        st = self._role_of(ref)
        if st is None or kind == "DELETED":
            return
        at = _stamp(s)
        n = hpa_desired(hpa)
        with self.lock:
            st.hpa = hpa
            if n is not None and n != st.desired:
                if kind != "LISTED":
                    st.marks.append(ScaleMark("hpa", n, at))
                st.desired = n

    def _so(self, kind: str, so: dict[str, Any], s: KubeStamp) -> None:
        st = self._role_of((so.get("metadata") or {}).get("name"))
        if st is None or kind == "DELETED":
            return
        at = _stamp(s)
        active = scaled_object_active(so)
        with self.lock:
            st.so = so
            if active and not st.active_now and kind != "LISTED" and st.active is None:
                st.active = at
            st.active_now = active

    def _role_of(self, name: Any) -> RoleState | None:
        role = self._by_name.get(name) if isinstance(name, str) else None
        return self.states.get(role) if role else None

    def _settle(self, st: RoleState, at: Stamp) -> None:
        """Scale-down is complete at the first event after the trigger was lowered that
        leaves no pod of the role and the Deployment at 0 replicas."""
        if self.lowered is None or st.scaled_down is not None:
            return
        if not st.live and st.replicas == 0:
            st.scaled_down = at if at.mono >= self.lowered.mono else self.lowered


def assemble(w: ScaleWatcher, index: int, k: int, trig: Stamp | None, lowered: Stamp | None,
              stalls: Mapping[str, list[Stall]]) -> dict[str, Repetition]:
    if w.error is not None:
        raise w.error
    out = {}
    with w.lock:
        for role, st in w.states.items():
            out[role] = Repetition(
                index=index, target_replicas=k, trigger=trig, active=st.active,
                scale=tuple(sorted(st.marks, key=lambda m: m.at.mono)),
                pods=tuple(st.new_pods()), lowered=lowered, scaled_down=st.scaled_down,
                stalls=tuple(stalls.get(role, ())))
    return out
