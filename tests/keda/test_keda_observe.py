"""Readers of watched API objects: a pod's milestones through its lifecycle, first-observed
receipt times kept, config from a ScaledObject; total on any input."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgc.layers.keda.evidence import Stamp
from kgc.layers.keda.observe import (
    controller_manager_sync_period,
    deployment_replicas,
    go_duration,
    hpa_desired,
    merge_observation,
    parse_time,
    pod_observation,
    scaled_object_active,
    scaling_config,
)

T0 = "2026-05-28T20:43:21Z"


def _pod(*, node: str | None = None, conds: dict[str, str] | None = None,
         running: bool = False, waiting: str | None = None) -> dict[str, Any]:
    conditions = [{"type": t, "status": s, "lastTransitionTime": f"2026-05-28T20:43:2{i}Z",
                   **({"reason": "Unschedulable", "message": "0/3 nodes are available"}
                      if (t, s) == ("PodScheduled", "False") else {})}
                  for i, (t, s) in enumerate((conds or {}).items(), start=2)]
    state: dict[str, Any] = {}
    if running:
        state = {"running": {"startedAt": "2026-05-28T20:43:27Z"}}
    elif waiting:
        state = {"waiting": {"reason": waiting, "message": "back-off pulling"}}
    return {
        "metadata": {"name": "kgc-kata-7f9c-x2k4q", "uid": "u-1", "creationTimestamp": T0},
        "spec": {"containers": [{"name": "app"}], **({"nodeName": node} if node else {})},
        "status": {"phase": "Running" if running else "Pending", "conditions": conditions,
                   "containerStatuses": [{"name": "app", "state": state}] if state else []},
    }


def test_a_pod_walks_through_every_milestone():
    seq = [
        (_pod(), {"created"}),
        (_pod(conds={"PodScheduled": "True"}, node="n1"), {"created", "scheduled"}),
        (_pod(conds={"PodScheduled": "True", "PodReadyToStartContainers": "True"}, node="n1"),
         {"created", "scheduled", "sandbox_ready"}),
        (_pod(conds={"PodScheduled": "True", "PodReadyToStartContainers": "True",
                     "Ready": "False"}, node="n1", running=True),
         {"created", "scheduled", "sandbox_ready", "started"}),
        (_pod(conds={"PodScheduled": "True", "PodReadyToStartContainers": "True",
                     "Ready": "True"}, node="n1", running=True),
         {"created", "scheduled", "sandbox_ready", "started", "ready"}),
    ]
    rec = None
    for i, (obj, want) in enumerate(seq):
        obs = pod_observation(obj)
        assert obs.reached == want, i
        rec = merge_observation(rec, obs, Stamp(10.0 + i, 1000.0 + i))
    assert rec is not None
    assert {m: s.mono for m, s in rec.observed.items()} == {
        "created": 10.0, "scheduled": 11.0, "sandbox_ready": 12.0, "started": 13.0,
        "ready": 14.0}
    assert rec.api["created"] == parse_time(T0)
    assert rec.api["started"] == parse_time("2026-05-28T20:43:27Z")
    assert rec.node == "n1" and rec.uid == "u-1" and rec.detail == ""


def test_first_observation_is_kept_when_a_condition_flips_back():
    ready = _pod(conds={"Ready": "True"}, node="n1", running=True)
    rec = merge_observation(None, pod_observation(ready), Stamp(1.0, 1.0))
    later = merge_observation(rec, pod_observation(_pod(node="n1")), Stamp(9.0, 9.0))
    assert later.observed["ready"].mono == 1.0


def test_a_pending_pod_says_why():
    obs = pod_observation(_pod(conds={"PodScheduled": "False"}))
    assert obs.reached == {"created"}
    assert obs.detail == "Pending; PodScheduled=False Unschedulable: 0/3 nodes are available"
    obs = pod_observation(_pod(node="n1", waiting="ImagePullBackOff"))
    assert "container app waiting: ImagePullBackOff (back-off pulling)" in obs.detail


def test_started_needs_every_container_running():
    two = _pod(node="n1", running=True)
    two["spec"]["containers"].append({"name": "side"})
    assert "started" not in pod_observation(two).reached


@pytest.mark.parametrize("v,want", [
    ("2026-05-28T20:43:21Z", 1780001001.0),
    ("2026-05-28T20:43:21.250000Z", 1780001001.25),
    ("2026-05-28T20:43:21+00:00", 1780001001.0),
    ("2026-05-28T22:43:21+02:00", 1780001001.0),
    ("yesterday", None), ("", None), (None, None), (17, None),
])
def test_parse_time(v, want):
    assert parse_time(v) == want


@pytest.mark.parametrize("v,want", [
    # Go time.ParseDuration forms (go/src/time/format.go documents "300ms", "1.5h", "2h45m")
    ("15s", 15.0), ("300ms", 0.3), ("1.5h", 5400.0), ("2h45m", 9900.0), ("1m30s", 90.0),
    ("0", 0.0), ("", None), ("15", None), ("-5s", None), ("5 s", None), ("1d", None),
    (None, None),
])
def test_go_duration(v, want):
    got = go_duration(v)
    assert got == (pytest.approx(want) if want is not None else None)


def test_controller_manager_flag_both_forms():
    assert controller_manager_sync_period(
        ["kube-controller-manager", "--horizontal-pod-autoscaler-sync-period=5s"]) == 5.0
    assert controller_manager_sync_period(
        ["kcm", "--horizontal-pod-autoscaler-sync-period", "1m"]) == 60.0
    assert controller_manager_sync_period(["kcm", "--v=2"]) is None
    assert controller_manager_sync_period("not a list") is None


def test_scaled_object_and_friends():
    so = {"spec": {"pollingInterval": 5, "cooldownPeriod": 30, "minReplicaCount": 0,
                   "maxReplicaCount": 3, "triggers": [{"type": "metrics-api"}],
                   "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                       "scaleUp": {"stabilizationWindowSeconds": 0}}}}},
          "status": {"conditions": [{"type": "Ready", "status": "True"},
                                    {"type": "Active", "status": "True"}]}}
    cfg = scaling_config(so, hpa_sync_period_s=5.0, hpa_sync_source="lab")
    assert (cfg.polling_interval_s, cfg.cooldown_period_s, cfg.min_replica_count,
            cfg.max_replica_count, cfg.trigger_kind) == (5.0, 30.0, 0, 3, "metrics-api")
    assert cfg.hpa_behavior == {"scaleUp": {"stabilizationWindowSeconds": 0}}
    hpa = {"spec": {"behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 4}]}}},
           "status": {"desiredReplicas": 3}}
    assert scaling_config(so, hpa).hpa_behavior == {"scaleUp": {"policies": [
        {"type": "Pods", "value": 4}]}}
    assert scaling_config({}).polling_interval_s is None  # KEDA's default applies
    assert scaled_object_active(so) is True
    assert scaled_object_active({"status": {"conditions": [{"type": "Active",
                                                            "status": "False"}]}}) is False
    assert scaled_object_active({}) is None
    assert hpa_desired(hpa) == 3 and hpa_desired({"status": {"desiredReplicas": "3"}}) is None
    assert deployment_replicas({"spec": {"replicas": 2}}) == 2
    assert deployment_replicas({"spec": {"replicas": True}}) is None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda c: st.lists(c, max_size=4) | st.dictionaries(
        st.sampled_from(["metadata", "spec", "status", "conditions", "type", "status",
                         "containerStatuses", "state", "running", "nodeName", "name",
                         "containers", "lastTransitionTime", "startedAt", "replicas",
                         "desiredReplicas", "pollingInterval", "behavior", "x"]), c,
        max_size=5),
    max_leaves=30,
)


@settings(max_examples=400)
@given(json_values)
def test_readers_are_total(value):
    obs = pod_observation(value)
    merge_observation(None, obs, Stamp(0.0, 0.0))
    deployment_replicas(value)
    hpa_desired(value)
    scaled_object_active(value)
    cfg = scaling_config(value, value)
    from kgc.layers.keda.evidence import ScalingConfig

    assert ScalingConfig.from_dict(cfg.to_dict()) == cfg  # what it records replays
    controller_manager_sync_period(value)
    go_duration(value)
    parse_time(value)


@given(st.text(max_size=30))
def test_duration_and_time_parsers_are_total_on_text(s):
    go_duration(s)
    parse_time(s)
