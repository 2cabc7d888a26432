"""Which keda verdicts rest on stand-ins: the evidence records the origin of every node a
measured pod ran on (a real kubelet, or a kwok node), and answers the engine per check
(``stand_ins_for``). Granularity: a verdict is one mark, so a check is unmarked only when
every pod its evaluator reads ran on a real node -- on the lab with a real node that is
``keda.baseline-budgets`` (the baseline class alone, placed on the real node); every other
check reads the Kata class, whose pods are kwok's, and stays marked, naming those pods."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kedasynth import synth, uniform

from kgc.core.engine import Context
from kgc.core.layer import Scope
from kgc.core.model import EvidenceError, Status
from kgc.core.profile import load_profile, profiles_dir
from kgc.kube.origin import NodeOrigin
from kgc.layers.keda import LAYER
from kgc.layers.keda.checks import CHECKS
from kgc.layers.keda.evidence import CHECK_ROLES, KedaEvidence

KWOK = NodeOrigin("kgc-gpu-0", True, "kwok node (kwok.x-k8s.io/node=fake)", "kwok-v0.8.0")
REAL = NodeOrigin("kgc-node-0", False, "", "v1.33.1")


def _on(ev: KedaEvidence, role: str, node: str | None) -> KedaEvidence:
    run = getattr(ev, role)
    reps = tuple(dataclasses.replace(r, pods=tuple(dataclasses.replace(p, node=node)
                                                   for p in r.pods)) for r in run.repetitions)
    return dataclasses.replace(ev, **{role: dataclasses.replace(run, repetitions=reps)})


def lab_like(nodes: tuple[NodeOrigin, ...] | None = (KWOK, REAL)) -> KedaEvidence:
    """Kata pods on a kwok node, the baseline's on the real node (2 repetitions x 3)."""
    ev = synth({"kata": uniform(2, 3, sandbox=3.0), "baseline": uniform(2, 3, sandbox=1.5)})
    ev = _on(_on(ev, "kata", KWOK.node), "baseline", REAL.node)
    return dataclasses.replace(ev, nodes=nodes)


def test_node_origins_round_trip_and_older_records_stay_byte_identical():
    ev = lab_like()
    d = json.loads(json.dumps(ev.to_dict()))
    assert d["nodes"] == [KWOK.to_dict(), REAL.to_dict()]
    assert KedaEvidence.from_dict(d) == ev
    old = dataclasses.replace(ev, nodes=None)
    assert "nodes" not in old.to_dict()  # a record without origins is what it was
    assert KedaEvidence.from_dict(old.to_dict()).nodes is None


@pytest.mark.parametrize("nodes,message", [
    ("kgc-node-0", "nodes: expected a list"),
    ([{"node": "a", "stand_in": "no"}], "nodes[0]: node origin: `stand_in` must be true"),
    ([None], "nodes[0]: node origin: expected an object"),
    ([REAL.to_dict(), REAL.to_dict()], "a node is recorded twice"),
])
def test_malformed_node_origins_are_an_evidence_error_naming_the_field(nodes: Any,
                                                                        message: str):
    d = lab_like().to_dict() | {"nodes": nodes}
    with pytest.raises(EvidenceError) as exc:
        KedaEvidence.from_dict(d)
    assert message in str(exc.value)


def test_each_check_names_the_stand_ins_of_the_pods_it_reads():
    ev = lab_like()
    assert set(CHECK_ROLES) <= {c.id for c in CHECKS}
    kata = ["6 kata pods on kgc-gpu-0: kwok node (kwok.x-k8s.io/node=fake)"]
    for c in CHECKS:
        want = [] if c.id == "keda.baseline-budgets" else kata
        assert ev.stand_ins_for(c.id) == want, c.id
    assert ev.stand_ins() == kata
    # everything real: nothing named; everything kwok: the baseline's pods named too
    real = _on(lab_like(), "kata", REAL.node)
    assert all(real.stand_ins_for(c.id) == [] for c in CHECKS)
    kwok = _on(lab_like(), "baseline", KWOK.node)
    assert kwok.stand_ins_for("keda.baseline-budgets") == [
        "6 runc pods on kgc-gpu-0: kwok node (kwok.x-k8s.io/node=fake)"]


def test_what_cannot_be_told_is_never_called_real():
    # origins not recorded (an older bundle, or nodes not readable): cannot tell
    assert lab_like(nodes=None).stand_ins_for("keda.baseline-budgets") is None
    # a node missing from the record, a pod that never got a node: stand-ins
    ev = lab_like(nodes=(KWOK,))
    assert ev.stand_ins_for("keda.baseline-budgets") == [
        "6 runc pods on kgc-node-0: node origin not recorded"]
    ev = _on(lab_like(), "baseline", None)
    assert ev.stand_ins_for("keda.baseline-budgets") == ["6 runc pods never ran on a node"]
    # no pod measured (a preflight failure): nothing to tell by
    assert KedaEvidence("preflight-failed", nodes=()).stand_ins_for("keda.preflight") is None


def _profile(tmp_path: Path, simulated: bool = True) -> Any:
    doc = yaml.safe_load((profiles_dir() / "lab.yaml").read_text())
    doc["cluster"]["simulated"] = simulated
    doc["cluster"]["keda"]["budgets"]["baseline_p95_s"] = {"startup": 1.0}
    path = tmp_path / "lab-real-baseline.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_profile(path)


class _Cluster:
    name, scope, origin = "lab", Scope.CLUSTER, "live"


def _judge(ev: KedaEvidence, profile: Any) -> dict[str, Any]:
    lay = dataclasses.replace(LAYER, gather=lambda ctx: ev)
    ctx = Context(_Cluster(), profile, {"keda": lay})  # type: ignore[arg-type]
    return {c.id: ctx.judge(c.id) for c in CHECKS}


def test_the_engine_marks_per_check(tmp_path: Path):
    by = _judge(lab_like(), _profile(tmp_path))
    base = by.pop("keda.baseline-budgets")
    # runc startup p50/p95 = 0.02 + 1.5 + 0.2 + 0.1 = 1.82 s > 1 s: judged, real
    assert base.status is Status.FAIL and not base.simulated, base
    assert "runc on kgc-node-0: pod startup p95 1.82 s > 1 s budget" in base.reason
    for cid, v in by.items():
        assert v.simulated, cid
        assert v.simulated_why == ("evidence from stand-ins: 6 kata pods on kgc-gpu-0: kwok "
                                   "node (kwok.x-k8s.io/node=fake)"), cid
    # without origins every verdict keeps the layer-wide mark
    for cid, v in _judge(lab_like(nodes=None), _profile(tmp_path)).items():
        assert v.simulated and "simulated (kwok)" in v.simulated_why, cid
    # whoever runs it (a profile that does not declare the cluster simulated) the evidence
    # marks the same verdicts: the stand-ins are in the record, not in the profile
    plain = _judge(lab_like(), _profile(tmp_path, simulated=False))
    assert not plain.pop("keda.baseline-budgets").simulated
    for cid, v in plain.items():
        assert v.simulated and v.simulated_why == by[cid].simulated_why, cid
    # only what the record cannot tell is left to the profile: unmarked on a real cluster's
    for cid, v in _judge(lab_like(nodes=None), _profile(tmp_path, simulated=False)).items():
        assert not v.simulated, cid
