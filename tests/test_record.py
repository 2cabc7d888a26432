"""kgc.evidence.record: the one record/replay of the cluster layers' evidence.

* Bundles written before it still load and dump back to the same JSON: the records the
  hand-written converters wrote during the layer tests (tests/data/records_before_generic.json)
  and the fixture bundles.
* Every record class round-trips (hypothesis, instances built from the same type hints and
  key declarations the loader reads): dump -> JSON -> load gives an equal record.
* The keys a record may leave out are the ones the old converters allowed, class by class
  (a truncated record is refused, never completed from defaults), and a refusal is one line
  naming the field path.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.model import EvidenceError
from kgc.evidence.guest import GuestEvidence
from kgc.evidence.record import OPTIONAL, Key, Record, Rules, dump, key, load
from kgc.kube.origin import NodeOrigin
from kgc.layers.gpu import evidence as gpu
from kgc.layers.keda import evidence as keda
from kgc.layers.sizing import evidence as sizing
from kgc.layers.sizing.model import KataSizing

REPO = Path(__file__).resolve().parents[1]
BEFORE = json.loads((REPO / "tests" / "data" / "records_before_generic.json").read_text())
TOP = {"gpu": gpu.GpuRunEvidence, "sizing": sizing.SizingEvidence, "keda": keda.KedaEvidence}


def _recorded() -> list[tuple[str, str, Any]]:
    out = [(layer, f"before[{i}]", d) for layer in TOP for i, d in enumerate(BEFORE[layer])]
    for p in sorted(glob.glob(str(REPO / "fixtures" / "gpu" / "*.run.json"))):
        out.append(("gpu", Path(p).name, json.loads(Path(p).read_text())))
    for p in sorted(glob.glob(str(REPO / "fixtures" / "**" / "*.json"), recursive=True)):
        doc = json.loads(Path(p).read_text())
        for layer, part in (doc.get("layers") or {}).items() if isinstance(doc, dict) else ():
            if layer in TOP:
                out.append((layer, f"{Path(p).name}:{layer}", part))
    return out


RECORDED = _recorded()


def test_the_corpus_covers_every_layer() -> None:
    layers = [layer for layer, _, _ in RECORDED]
    assert {layer: layers.count(layer) >= 3 for layer in TOP} == dict.fromkeys(TOP, True)


@pytest.mark.parametrize(("layer", "name", "doc"), RECORDED, ids=[n for _, n, _ in RECORDED])
def test_a_recorded_section_loads_and_dumps_back_to_the_same_json(layer: str, name: str,
                                                                  doc: Any) -> None:
    ev = TOP[layer].from_dict(doc)
    again = json.loads(json.dumps(ev.to_dict()))
    assert again == doc  # dict equality: key order aside, the same JSON
    assert TOP[layer].from_dict(again) == ev


# -- round trip of every record class -------------------------------------------------------
GPU = (gpu.RuntimeClassInfo, gpu.NodeInfo, gpu.PluginPod, gpu.ClusterGpuEvidence,
       gpu.PodCondition, gpu.ContainerState, gpu.PodEvent, gpu.GpuPodEvidence, gpu.GpuRunEvidence,
       gpu.ClaimResult, gpu.ClaimEvidence)
SIZING = (sizing.GuestSize, KataSizing, sizing.KataConfigSource, sizing.ShapeObservation,
          sizing.ClusterObjects, sizing.SizingEvidence)
KEDA = (keda.Stamp, keda.ClockOffset, keda.PodRecord, keda.ScaleMark, keda.Stall,
        keda.Repetition, keda.ScalingConfig, keda.ClassRun, keda.Preflight, keda.KedaEvidence)
RECORDS = GPU + SIZING + KEDA

GUESTS = [GuestEvidence.from_dict(p["guest"], "guest")
          for d in BEFORE["gpu"] for p in d["pods"] if p["guest"] is not None][:3]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    max_leaves=6,
)


def _role(role: str) -> st.SearchStrategy[Any]:
    return st.none() | _record(keda.ClassRun).map(lambda r: dataclasses.replace(r, role=role))


# the fields a type hint cannot describe: another module's records, cross-field rules
OVERRIDES: dict[tuple[type, str], st.SearchStrategy[Any]] = {
    (gpu.GpuPodEvidence, "guest"): st.none() | st.sampled_from(GUESTS),
    (keda.KedaEvidence, "kata"): st.deferred(lambda: _role("kata")),
    (keda.KedaEvidence, "baseline"): st.deferred(lambda: _role("baseline")),
    (keda.KedaEvidence, "nodes"): st.none() | st.lists(
        st.builds(NodeOrigin, st.text(max_size=5), st.booleans(), st.text(max_size=5),
                  st.text(max_size=5)), max_size=3, unique_by=lambda n: n.node).map(tuple),
}


# invariants of a record the builders keep: a node whose origin is not recorded has no reason
# for it either (the dump leaves both out, as the converters before did)
INVARIANTS: dict[type, Any] = {
    gpu.NodeInfo: lambda n: dataclasses.replace(n, stand_in_why="") if n.stand_in is None else n,
}


def _value(tp: Any, k: Key) -> st.SearchStrategy[Any]:  # noqa: PLR0911
    origin, args = get_origin(tp), get_args(tp)
    if k.one_of:
        return st.sampled_from(k.one_of)
    if tp is Any:
        return JSON
    if origin in (Union, types.UnionType):
        inner = next(a for a in args if a is not type(None))
        return st.none() | _value(inner, k)
    if origin is Literal:
        return st.sampled_from(args)
    if tp is str:
        return st.text(max_size=6)
    if tp is bool:
        return st.booleans()
    if tp is int:
        return st.integers(int(k.minimum) if k.minimum is not None else -10**9, 10**9)
    if tp is float:
        return st.floats(min_value=k.minimum, allow_nan=False, allow_infinity=False)
    if origin is tuple:
        return st.lists(_value(args[0], Key()), max_size=2).map(tuple)
    if origin in (Mapping, dict):
        keys = st.sampled_from(k.keys_one_of) if k.keys_one_of else st.text(max_size=5)
        return st.dictionaries(keys, _value(args[1], Key()), max_size=2)
    if dataclasses.is_dataclass(tp):
        return _record(tp)
    raise AssertionError(f"no strategy for {tp!r}")


def _record(cls: type) -> st.SearchStrategy[Any]:
    hints = get_type_hints(cls)
    parts = {f.name: OVERRIDES[cls, f.name] if (cls, f.name) in OVERRIDES
             else _value(hints[f.name], f.metadata.get("record", Key()))
             for f in dataclasses.fields(cls)}
    return st.fixed_dictionaries(parts).map(lambda kw: cls(**kw)).map(
        INVARIANTS.get(cls, lambda x: x))


FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                       HealthCheck.data_too_large])


@pytest.mark.parametrize("cls", RECORDS, ids=[c.__name__ for c in RECORDS])
@FUZZ
@given(data=st.data())
def test_every_record_class_round_trips_through_json(cls: type, data: st.DataObject) -> None:
    obj = data.draw(_record(cls))
    doc = json.loads(json.dumps(dump(obj), allow_nan=False))
    back = load(cls, doc, "x")
    assert back == obj
    assert dump(back) == doc


# -- which keys may be left out: what the hand-written converters allowed ----------------------
EVERY = object()  # every key of the record may be absent
ABSENT_OK: dict[type, Any] = {
    gpu.RuntimeClassInfo: {"handler"},
    gpu.NodeInfo: {"kernel_version", "ready", "stand_in", "stand_in_why"},
    gpu.PluginPod: {"node", "phase", "waiting"},
    # dra: added with the DRA preflight (issue 20), absent from older bundles
    gpu.ClusterGpuEvidence: {"runtime_classes", "nodes", "plugin_pods", "plugin_selector",
                             "plugin_namespace", "dra"},
    gpu.PodCondition: {"reason", "message"},
    gpu.ContainerState: {"reason", "message", "exit_code", "last_reason", "last_exit_code"},
    gpu.PodEvent: {"type", "reason", "message", "source", "last_seen"},
    gpu.GpuPodEvidence: {"target_node", "node", "node_kernel", "create_error", "phase", "reason",
                         "message", "waited_s", "budget_s", "log_error", "guest",
                         # DRA (issue 20): added later, absent from older bundles
                         "request_mode", "claims", "extended_claim", "extended_mappings"},
    gpu.ClaimResult: EVERY,
    gpu.ClaimEvidence: {"name", "node", "error"},
    gpu.GpuRunEvidence: set(),
    sizing.GuestSize: EVERY,
    KataSizing: {"memory_block_mib"},
    # stand_in / stand_in_why: added with the stand-in marking (issue 18), absent before
    sizing.KataConfigSource: {"stand_in"},
    sizing.ShapeObservation: {"node", "error", "simulated", "waited_s", "stand_in_why"},
    sizing.ClusterObjects: EVERY,
    sizing.SizingEvidence: EVERY,
    keda.Stamp: set(),
    keda.ClockOffset: {"method"},
    keda.PodRecord: {"observed", "api", "node", "uid", "detail"},
    keda.ScaleMark: set(),
    keda.Stall: {"detail", "pod", "at"},
    keda.Repetition: {"active", "scale", "pods", "lowered", "scaled_down", "stalls"},
    keda.ScalingConfig: EVERY,
    keda.ClassRun: {"repetitions", "config", "deployment", "scaled_object"},
    keda.Preflight: EVERY,
    keda.KedaEvidence: {"message", "preflight", "kata", "baseline", "clock", "nodes"},
}


def test_the_table_names_every_record_class() -> None:
    assert set(ABSENT_OK) == set(RECORDS)


@pytest.mark.parametrize("cls", RECORDS, ids=[c.__name__ for c in RECORDS])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_key_left_out_is_refused_unless_the_old_converter_allowed_it(
        cls: type, data: st.DataObject) -> None:
    doc = dump(data.draw(_record(cls)))
    ok = ABSENT_OK[cls]
    for name in [f.name for f in dataclasses.fields(cls)]:
        short = {k: v for k, v in doc.items() if k != name}
        if ok is EVERY or name in ok:
            load(cls, short, "x")
        else:
            with pytest.raises(EvidenceError) as exc:
                load(cls, short, "x")
            assert str(exc.value) == f"x.{name}: missing"


def test_the_gpu_format_tag_is_written_first_and_required() -> None:
    run = gpu.GpuRunEvidence(gpu.ClusterGpuEvidence((), ()))
    assert next(iter(run.to_dict().items())) == ("format", gpu.FORMAT)
    d = run.to_dict()
    del d["format"]
    with pytest.raises(EvidenceError, match=r"^gpu\.format: missing$"):
        gpu.GpuRunEvidence.from_dict(d)
    with pytest.raises(EvidenceError, match=r"^gpu\.format: expected 'kgc-gpu/1', got 'x'$"):
        gpu.GpuRunEvidence.from_dict(d | {"format": "x"})


def test_older_records_without_node_origins_stay_as_they_were() -> None:
    n = gpu.NodeInfo("a", None)
    assert "stand_in" not in n.to_dict() and "stand_in_why" not in n.to_dict()
    real = dataclasses.replace(n, stand_in=False)
    assert real.to_dict()["stand_in_why"] == ""
    assert gpu.NodeInfo.from_dict(real.to_dict() | {"stand_in_why": None}) == real
    assert "nodes" not in keda.KedaEvidence("done").to_dict()


# -- the generic rules, on records of their own -------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Inner(Record):
    n: int
    f: float = 0.0


@dataclasses.dataclass(frozen=True)
class Outer(Record):
    recorded_as = Rules(closed=True)
    record_name = "outer"

    name: str
    inner: Inner | None
    items: tuple[Inner, ...] = dataclasses.field(default=(), metadata=key(optional=True))
    kind: Literal["a", "b"] = "a"
    by: Mapping[str, int] = dataclasses.field(default_factory=dict,
                                              metadata=key(keys_one_of=("x", "y")))
    raw: Any = None
    must: str = dataclasses.field(default="", metadata=key(required=True))


@dataclasses.dataclass(frozen=True)
class Strict(Record):
    recorded_as = Rules(keys=OPTIONAL)

    a: str
    b: str | None
    c: int = dataclasses.field(default=1, metadata=key(minimum=1))


GOOD = {"name": "n", "inner": {"n": 1}, "must": ""}


@pytest.mark.parametrize(("doc", "message"), [
    ([], "outer: expected an object, got list"),
    ({"inner": None, "must": ""}, "outer.name: missing"),
    ({"name": "n", "must": ""}, "outer.inner: missing"),  # no default: present, maybe null
    ({"name": "n", "inner": None}, "outer.must: missing"),  # required despite its default
    (GOOD | {"inner": {"n": True}}, "outer.inner.n: expected an integer, got True"),
    (GOOD | {"inner": {"n": 1.0}}, "outer.inner.n: expected an integer, got 1.0"),
    (GOOD | {"inner": {"n": 1, "f": "1"}}, "outer.inner.f: expected a number, got '1'"),
    (GOOD | {"inner": {"n": 1, "f": float("inf")}}, "outer.inner.f: expected a finite number"),
    (GOOD | {"inner": {"n": 1, "f": False}}, "outer.inner.f: expected a number, got False"),
    (GOOD | {"items": [{"n": 1}, {"n": "2"}]}, "outer.items[1].n: expected an integer, got '2'"),
    (GOOD | {"items": {"n": 1}}, "outer.items: expected a list, got dict"),
    (GOOD | {"kind": "c"}, "outer.kind: 'c' is not one of a, b"),
    (GOOD | {"by": {"z": 1}}, "outer.by['z']: 'z' is not one of x, y"),
    (GOOD | {"by": {"x": "1"}}, "outer.by.x: expected an integer, got '1'"),
    (GOOD | {"raw": {"a": [1, {"b": float("nan")}]}}, "outer.raw.a[1].b: expected a finite"),
    (GOOD | {"raw": {"a\nb": {1: 2}}}, "outer.raw['a\\nb']: object key 1 is not a string"),
    (GOOD | {"extra": 1}, "outer: unknown field 'extra'"),
    (GOOD | {"name": None}, "outer.name: expected a string, got null"),
])
def test_a_malformed_record_is_one_error_line_naming_the_field(doc: Any, message: str) -> None:
    with pytest.raises(EvidenceError) as exc:
        Outer.from_dict(doc)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_null_and_absence_read_as_declared() -> None:
    assert Outer.from_dict(GOOD) == Outer("n", Inner(1))
    assert Outer.from_dict(GOOD | {"items": None}).items == ()  # optional: null is the default
    assert Outer.from_dict(GOOD | {"inner": None}).inner is None
    assert Outer.from_dict(GOOD | {"items": [{"n": 2}]}).items == (Inner(2),)  # list -> tuple
    assert Outer.from_dict(GOOD | {"inner": {"n": 1, "f": 2}}).inner == Inner(1, 2.0)
    # OPTIONAL: only an ``X | None`` key may be absent, even where the field has a default
    assert Strict.from_dict({"a": "x", "c": 1}, "s") == Strict("x", None)
    with pytest.raises(EvidenceError, match=r"^s\.c: missing$"):
        Strict.from_dict({"a": "x"}, "s")
    with pytest.raises(EvidenceError, match=r"^s\.a: missing$"):
        Strict.from_dict({"c": 1}, "s")
    with pytest.raises(EvidenceError, match=r"^s\.c: expected an integer, got None$"):
        Strict.from_dict({"a": "x", "c": None}, "s")
    with pytest.raises(EvidenceError, match=r"^s\.c: must be >= 1, got 0$"):
        Strict.from_dict({"a": "x", "c": 0}, "s")


def test_dump_writes_fields_in_order_tuples_as_lists() -> None:
    o = Outer("n", Inner(1, 0.5), (Inner(2),), "b", {"x": 1}, {"k": (1, 2)}, "m")
    assert list(o.to_dict()) == ["name", "inner", "items", "kind", "by", "raw", "must"]
    assert o.to_dict()["items"] == [{"n": 2, "f": 0.0}]
    assert o.to_dict()["raw"] == {"k": [1, 2]}
    assert Outer.from_dict(json.loads(json.dumps(o.to_dict()))) == dataclasses.replace(
        o, raw={"k": [1, 2]})


# -- stricter than the converters before it, on purpose ---------------------------------------
# A differential run of the old and the new loaders over ~49,000 single-field mutations of the
# recorded corpus differed only here: the keda converters read ``m.get(key) or []``, so any
# falsy value of the wrong type (0, "", false, [] for an object) passed as "empty", and the gpu
# converters took NaN for a duration. Both are malformed evidence and are refused now.
KEDA_DOC = BEFORE["keda"][0]


@pytest.mark.parametrize(("path", "value", "message"), [
    (("kata", "repetitions"), 0, "keda.kata.repetitions: expected a list, got int"),
    (("kata", "config"), False, "keda.kata.config: expected an object, got bool"),
    (("preflight",), [], "keda.preflight: expected an object, got list"),
    (("preflight", "missing"), "", "keda.preflight.missing: expected a list, got str"),
])
def test_a_falsy_value_of_the_wrong_type_is_not_an_empty_keda_list(path: tuple[str, ...],
                                                                   value: Any,
                                                                   message: str) -> None:
    d = json.loads(json.dumps(KEDA_DOC))
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    cur[path[-1]] = value
    with pytest.raises(EvidenceError) as exc:
        keda.KedaEvidence.from_dict(d)
    assert str(exc.value) == message
    cur[path[-1]] = None  # null still reads as empty, as it did
    keda.KedaEvidence.from_dict(d)


def test_a_gpu_pod_that_waited_nan_seconds_is_refused() -> None:
    d = json.loads(json.dumps(BEFORE["gpu"][0]))
    d["pods"][0]["waited_s"] = float("nan")
    with pytest.raises(EvidenceError, match=r"^gpu\.pods\[0\]\.waited_s: expected a finite number"):
        gpu.GpuRunEvidence.from_dict(d)


def test_a_layer_error_met_while_recording_replays_as_that_error(tmp_path) -> None:
    """Before: a layer whose evidence errored was left out of the bundle, and offline it was a
    SKIP ("holds no gpu evidence") where the live run said ERROR: the cause was lost."""
    from kgc.core.bundle import load_bundle, write_bundle
    from kgc.core.engine import Context
    from kgc.core.layer import Scope
    from kgc.core.profile import DEFAULT_PROFILE, load_profile
    from kgc.core.registry import load_layers

    layers = load_layers()
    why = {"status": "error", "reason": "evidence could not be collected: 403 on pods",
           "remediation": "grant list pods", "category": "environment"}
    path = write_bundle(tmp_path / "b.json", scope=Scope.CLUSTER, target="c",
                        unavailable={"gpu": why})
    ctx = Context(target=load_bundle(path, layers), profile=load_profile(DEFAULT_PROFILE),
                  layers=layers)
    gpu = ctx.judge_all(["gpu"])
    assert {(v.status, v.reason, v.remediation) for v in gpu} == {
        ("error", why["reason"], "grant list pods")}
    assert {v.status for v in ctx.judge_all(["sizing"])} == {"skip"}  # not recorded: as before


def test_a_failure_bundle_is_incomplete_and_judges_every_layer_error(tmp_path) -> None:
    from kgc.core.bundle import BundleError, load_bundle, write_bundle
    from kgc.core.engine import Context
    from kgc.core.layer import Scope
    from kgc.core.profile import DEFAULT_PROFILE, load_profile
    from kgc.core.registry import load_layers

    layers = load_layers()
    path = write_bundle(tmp_path / "b.json", scope=Scope.NODE, target="gpu-a",
                        failure={"reason": "evidence could not be collected: refused",
                                 "remediation": "ssh -p 1 root@gpu-a true"})
    doc = json.loads(path.read_text())
    assert doc["complete"] is False and "host" not in doc
    ctx = Context(target=load_bundle(path, layers), profile=load_profile(DEFAULT_PROFILE),
                  layers=layers)
    assert {(v.status, v.reason) for v in ctx.judge_all(["iommu", "vfio"])} == {
        ("error", "evidence could not be collected: refused")}
    doc.pop("failure")
    path.write_text(json.dumps(doc))
    with pytest.raises(BundleError, match="marked incomplete"):
        load_bundle(path, layers)
