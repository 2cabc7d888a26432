"""nri.* evaluators on recorded evidence, bundle replay and remote targets (no containerd)."""

from __future__ import annotations

import json
from pathlib import Path

from kgc.core.bundle import load_bundle, write_bundle
from kgc.core.engine import Context
from kgc.core.hostfs import HostSnapshot
from kgc.core.layer import Scope
from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc.layers.nri.checks import CHECKS
from kgc.layers.nri.collect import NriEvidence

PROFILE = load_profile()
TOKEN = "abc123"


def _ev(**kw):  # type: ignore[no-untyped-def]
    base = dict(
        socket_path="/var/run/nri/nri.sock",
        socket_exists=True,
        handshake={
            "plugin": "99-kgc-probe",
            "synchronized": True,
            "handshake_ms": 2.0,
            "runtime_name": "containerd",
            "runtime_version": "1.7.24",
        },
        pod={"name": "kgc-nri-probe-x", "token": TOKEN, "image": "kgc.local/nri-probe:1"},
        adjustment={"requested": True, "env": "KGC_NRI_PROBE", "expected": TOKEN, "seen": TOKEN},
        events=[
            {
                "event": "RUN_POD_SANDBOX",
                "via": "StateChange",
                "pod_labels": {"kgc.io/nri-probe": TOKEN},
                "pod_name": "kgc-nri-probe-x",
                "pod_namespace": "kgc-nri",
                "adjusted": False,
                "t_ms": 5,
            },
            {
                "event": "CREATE_CONTAINER",
                "via": "CreateContainer",
                "pod_labels": {"kgc.io/nri-probe": TOKEN},
                "pod_name": "kgc-nri-probe-x",
                "pod_namespace": "kgc-nri",
                "adjusted": True,
                "t_ms": 9,
            },
        ],
    )
    base.update(kw)
    return NriEvidence(**base)


def judge(ev: NriEvidence) -> dict:
    return {c.id: c.judge(ev, PROFILE, "t") for c in CHECKS}


def test_all_pass_on_observed_events_and_applied_adjustment():
    v = judge(_ev())
    assert {k: x.status for k, x in v.items()} == {
        "nri.events": Status.PASS,
        "nri.adjustment": Status.PASS,
        "nri.handshake": Status.PASS,
        "nri.own-pods-only": Status.PASS,
    }


def test_handshake_without_events_fails_everything():
    v = judge(_ev(events=[]))
    assert v["nri.events"].status is Status.FAIL
    assert v["nri.handshake"].status is Status.FAIL
    assert "handshake alone proves nothing" in v["nri.handshake"].reason


def test_other_pods_events_do_not_count_for_the_probe_pod():
    foreign = [
        {
            "event": "RUN_POD_SANDBOX",
            "via": "StateChange",
            "pod_labels": {},
            "pod_name": "web",
            "pod_namespace": "default",
            "adjusted": False,
        }
    ]
    v = judge(_ev(events=foreign))
    assert v["nri.events"].status is Status.FAIL


def test_adjustment_not_visible_fails():
    v = judge(
        _ev(adjustment={"requested": True, "env": "KGC_NRI_PROBE", "expected": TOKEN, "seen": ""})
    )
    assert v["nri.adjustment"].status is Status.FAIL
    assert "did not apply" in v["nri.adjustment"].reason


def test_adjusting_a_foreign_pod_is_flagged():
    bad = {
        "event": "CREATE_CONTAINER",
        "via": "CreateContainer",
        "pod_labels": {},
        "pod_name": "web",
        "pod_namespace": "default",
        "adjusted": True,
    }
    ev = _ev()
    ev.events.append(bad)
    assert judge(ev)["nri.own-pods-only"].status is Status.FAIL


def test_slow_handshake_warns():
    ev = _ev()
    ev.handshake["handshake_ms"] = 1500.0
    assert judge(ev)["nri.handshake"].status is Status.WARN


def test_connections_disabled_reason_comes_from_the_runtime_context():
    ev = _ev(
        events=[],
        socket_exists=False,
        connect_error="cannot connect to NRI socket x: [Errno 2]",
        runtime_context={"enabled": True, "disable_connections": True},
    )
    r = judge(ev)["nri.events"]
    assert r.status is Status.FAIL and "disable_connections = true" in r.reason


def test_remote_target_says_what_is_needed():
    layers = load_layers(("kgc.layers.nri",))
    ctx = Context(target=NodeTarget("ssh://root@node:22"), profile=PROFILE, layers=layers,
                  options={"nri_probe": True})
    v = ctx.judge("nri.events")
    assert v.status is Status.SKIP
    assert "ssh -N -L" in v.reason and "--nri-socket" in v.reason


def test_bundle_replays_recorded_probe_evidence(tmp_path: Path):
    p = write_bundle(tmp_path / "b.json", scope=Scope.NODE, target="node1",
                     host=HostSnapshot(), parts={"nri": _ev().to_dict()})
    json.loads(p.read_text())
    layers = load_layers(("kgc.layers.nri",))
    ctx = Context(target=load_bundle(p, layers), profile=PROFILE, layers=layers)
    assert ctx.judge("nri.events").status is Status.PASS
    empty = write_bundle(tmp_path / "c.json", scope=Scope.NODE, target="n", host=HostSnapshot())
    ctx2 = Context(target=load_bundle(empty, layers), profile=PROFILE, layers=layers)
    v = ctx2.judge("nri.events")
    assert v.status is Status.SKIP and "holds no nri evidence" in v.reason
