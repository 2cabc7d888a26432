"""Hardened parsers: nvidia-smi XML (defusedxml), the collector's output, Kubernetes objects
and events, recorded evidence. No input makes them crash or hang; XML entities are never
expanded and no DTD or external resource is fetched."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu.synth import GUEST_FIX, cases, h200_guest, snapshot
from kgc.core.model import EvidenceError
from kgc.evidence import guest as ge
from kgc.evidence.guest import (
    GuestEvidence,
    parse_guest_output,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
    parse_resource,
)
from kgc.layers.gpu.evidence import (
    GpuRunEvidence,
    event_from_api,
    node_from_api,
    plugin_pod_from_api,
    pod_from_api,
    runtime_class_from_api,
)

FUZZ = settings(max_examples=150, deadline=2000,
                suppress_health_check=[HealthCheck.too_slow])
H200_XML = snapshot("h200-firecracker.bundle.json").commands["nvidia_smi_xml"].output


# --------------------------------------------------------------------------- XML
def test_the_real_report_parses_through_defusedxml() -> None:
    smi = parse_nvidia_smi_xml(H200_XML)
    assert smi is not None and smi.gpus[0].virtualization_mode == "Pass-Through"
    assert smi.attached_gpus == 1


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n <!ENTITY a "aaaaaaaaaa">\n'
    + "".join(f' <!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">\n' for i in range(9))
    + ']>\n<nvidia_smi_log><driver_version>&j;</driver_version></nvidia_smi_log>'
)


def test_entity_expansion_is_refused_quickly() -> None:
    t0 = time.monotonic()
    assert parse_nvidia_smi_xml(BILLION_LAUGHS) is None
    assert time.monotonic() - t0 < 1.0


def test_external_entities_and_dtds_are_never_fetched(tmp_path: Any) -> None:
    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET")
    xxe = ('<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY x SYSTEM '
           f'"file://{secret}">]><nvidia_smi_log><driver_version>&x;</driver_version>'
           "</nvidia_smi_log>")
    assert parse_nvidia_smi_xml(xxe) is None
    # a parameter entity pulling an external DTD
    pe = ('<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY % p SYSTEM '
          f'"file://{secret}"> %p;]><nvidia_smi_log/>')
    assert parse_nvidia_smi_xml(pe) is None
    # the genuine report's SYSTEM DTD is not resolved (its name points nowhere here)
    assert parse_nvidia_smi_xml(H200_XML.replace("nvsmi_device_v13.dtd",
                                                 f"file://{secret}")) is not None


def test_oversized_xml_is_not_parsed() -> None:
    huge = H200_XML.replace("<timestamp>", "<timestamp>" + "x" * ge.MAX_XML_CHARS, 1)
    assert parse_nvidia_smi_xml(huge) is None


@FUZZ
@given(st.text(max_size=2000))
def test_xml_parser_is_total_on_text(text: str) -> None:
    parse_nvidia_smi_xml(text)
    parse_nvidia_smi_xml("<nvidia_smi_log>" + text)
    parse_nvidia_smi_csv(text)
    parse_nvidia_smi_csv("name, uuid, pci.bus_id, memory.total [MiB], driver_version\n" + text)


TAGS = st.sampled_from(["gpu", "product_name", "uuid", "fb_memory_usage", "total", "pci",
                        "pci_device_id", "driver_version", "cuda_version", "attached_gpus",
                        "gpu_virtualization_mode", "virtualization_mode", "x"])


def _xml(depth: int = 3) -> st.SearchStrategy[str]:
    leaf = st.builds(lambda t, v: f"<{t}>{v}</{t}>", TAGS,
                     st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc"),
                                                    blacklist_characters="<&"), max_size=30))
    return st.recursive(leaf, lambda kids: st.builds(
        lambda t, ks, attr: f'<{t}{attr}>{"".join(ks)}</{t}>', TAGS, st.lists(kids, max_size=4),
        st.sampled_from(["", ' id="00000000:01:00.0"'])), max_leaves=20)


@FUZZ
@given(_xml())
def test_xml_parser_is_total_on_report_shaped_trees(body: str) -> None:
    smi = parse_nvidia_smi_xml(f"<?xml version=\"1.0\" ?><nvidia_smi_log>{body}</nvidia_smi_log>")
    assert smi is not None
    for g in smi.gpus:
        assert g.memory_total_mib is None or g.memory_total_mib >= 0


# --------------------------------------------------------------------------- collector output
RAW = (GUEST_FIX / "h200-firecracker.raw.txt").read_text()
B = RAW.split(" ", 1)[0]


@FUZZ
@given(st.text(max_size=3000))
def test_collector_output_parser_is_total(text: str) -> None:
    g = parse_guest_output(text)
    assert isinstance(g, GuestEvidence)
    assert GuestEvidence.from_dict(json.loads(json.dumps(g.to_dict()))) == g


LINES = st.one_of(
    st.builds(lambda k, r: f"{B} {k} {r}", st.sampled_from(["V", "F", "LS", "D", "S", "C", "R",
                                                             "END", "L", "?"]),
              st.text(max_size=40)),
    st.sampled_from([f"{B} C nvidia_smi_xml", f"{B} C nproc", f"{B} C cuda_check",
                     f"{B} F /proc/cpuinfo", f"{B} D /sys/bus/pci/devices", f"{B} R 0",
                     f"{B} F /sys/bus/pci/devices/0000:00:06.0/resource", "<nvidia_smi_log>",
                     "0x1 0x0 0x200", "flags : fpu hypervisor", "{\"torch\": 1}", ""]),
    st.text(max_size=60),
)


@FUZZ
@given(st.lists(LINES, max_size=60))
def test_collector_output_parser_is_total_on_record_shaped_input(lines: list[str]) -> None:
    g = parse_guest_output(f"{B} V 2\n" + "\n".join(lines))
    assert GuestEvidence.from_dict(json.loads(json.dumps(g.to_dict()))) == g


@FUZZ
@given(st.integers(0, len(RAW)), st.integers(0, len(RAW)), st.text(max_size=50))
def test_the_real_capture_spliced_with_garbage_never_crashes(i: int, j: int, junk: str) -> None:
    i, j = sorted((i, j))
    parse_guest_output(RAW[:i] + junk + RAW[j:])


def test_output_over_the_bound_is_cut_and_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ge, "MAX_OUTPUT_CHARS", len(RAW) // 2)
    g = parse_guest_output(RAW)
    assert not g.complete and any("cut at" in p for p in g.problems)


@FUZZ
@given(st.text(max_size=400))
def test_resource_parser_is_total(text: str) -> None:
    bars = parse_resource(text)
    assert bars is None or all(b.size >= 0 for b in bars)


# --------------------------------------------------------------------------- API objects
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.sampled_from(["metadata", "name", "namespace", "spec", "status", "nodeName",
                         "phase", "conditions", "type", "status", "reason", "message",
                         "containerStatuses", "state", "waiting", "terminated", "exitCode",
                         "restartCount", "lastState", "labels", "capacity", "allocatable",
                         "nodeInfo", "kernelVersion", "handler", "overhead", "podFixed",
                         "count", "series", "source", "component", "note", "lastTimestamp",
                         "containers", "image", "runtimeClassName", "unschedulable", "x"]),
        kids, max_size=6),
    max_leaves=25,
)


@FUZZ
@given(JSON, st.lists(JSON, max_size=3))
def test_api_builders_are_total_and_their_output_replays(obj: Any, events: list[Any]) -> None:
    n = node_from_api(obj)
    assert type(n).from_dict(json.loads(json.dumps(n.to_dict()))) == n
    rc = runtime_class_from_api(obj)
    assert type(rc).from_dict(json.loads(json.dumps(rc.to_dict()))) == rc
    pp = plugin_pod_from_api(obj)
    assert type(pp).from_dict(json.loads(json.dumps(pp.to_dict()))) == pp
    for e in events:
        ev = event_from_api(e)
        assert type(ev).from_dict(json.loads(json.dumps(ev.to_dict()))) == ev
    p = pod_from_api(obj, events=events, node=n, resource="nvidia.com/gpu", count=1)
    assert type(p).from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_real_shaped_objects_are_read() -> None:
    ev = event_from_api({
        "type": "Warning", "reason": "FailedScheduling", "count": 3,
        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        "source": {"component": "default-scheduler"}, "lastTimestamp": "2026-11-30T01:29:39Z",
    })
    assert (ev.count, ev.source, ev.reason) == (3, "default-scheduler", "FailedScheduling")
    # events.k8s.io/v1 shape: note, reportingController, series
    ev2 = event_from_api({"type": "Warning", "reason": "FailedCreatePodSandBox", "note": "x",
                          "reportingController": "kubelet", "series": {"count": 7}})
    assert (ev2.message, ev2.source, ev2.count) == ("x", "kubelet", 7)
    n = node_from_api({
        "metadata": {"name": "g1", "labels": {"nvidia.com/gpu.product": "NVIDIA-H200",
                                              "topology.kubernetes.io/zone": "z"}},
        "status": {"nodeInfo": {"kernelVersion": "6.8.0-57-generic"},
                   "capacity": {"nvidia.com/gpu": "8"}, "allocatable": {"nvidia.com/gpu": "7"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
    assert n.labels == {"nvidia.com/gpu.product": "NVIDIA-H200"}  # only GPU-relevant labels
    assert (n.count("nvidia.com/gpu", "capacity"), n.count("nvidia.com/gpu"), n.ready) == \
        (8, 7, True)


# --------------------------------------------------------------------------- recorded evidence
def _paths(d: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(d, dict):
        for k, v in d.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d[:3]):
            out += _paths(v, (*prefix, i))
    return out


RUN = cases()["duplicate-uuid"].to_dict()
RUN_PATHS = _paths(RUN)


def _set(d: Any, path: tuple[Any, ...], value: Any) -> Any:
    d = json.loads(json.dumps(d))
    cur = d
    for k in path[:-1]:
        cur = cur[k]
    if value is _DELETE:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return d


_DELETE = object()


@FUZZ
@given(st.sampled_from(RUN_PATHS),
       st.one_of(st.just(_DELETE), st.none(), st.integers(), st.text(max_size=5),
                 st.booleans(), st.lists(st.integers(), max_size=2),
                 st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)))
def test_malformed_recorded_evidence_raises_only_evidence_error(path: tuple[Any, ...],
                                                                value: Any) -> None:
    bad = _set(RUN, path, value)
    try:
        GpuRunEvidence.from_dict(bad)
    except EvidenceError as exc:
        msg = str(exc)
        assert "\n" not in msg and ":" in msg  # one line, naming the field


@pytest.mark.parametrize("path,value,field", [
    (("pods", 0, "count"), "1", "gpu.pods[0].count: expected an integer, got '1'"),
    (("pods", 0, "guest", "vcpus"), None, None),  # optional: accepted
    (("pods", 0, "guest", "smi", "gpus"), None, "gpu.pods[0].guest.smi.gpus: expected list"),
    (("pods", 0, "guest", "pci", 0, "bdf"), 5, "gpu.pods[0].guest.pci[0].bdf: expected string"),
    (("cluster", "nodes", 0, "capacity", "nvidia.com/pgpu"), 2,
     "gpu.cluster.nodes[0].capacity.nvidia.com/pgpu: expected a string, got int"),
    (("pods", 0, "containers", 0, "state"), "exploded",
     "gpu.pods[0].containers[0].state: 'exploded' is not one of waiting, running"),
    (("pods", 0, "count"), 0, "must be >= 1"),
    (("format",), "kgc-gpu/0", "expected 'kgc-gpu/1'"),
])
def test_malformed_fields_are_named(path: tuple[Any, ...], value: Any, field: str | None) -> None:
    bad = _set(RUN, path, value)
    if field is None:
        GpuRunEvidence.from_dict(bad)
        return
    with pytest.raises(EvidenceError, match=field.replace("[", r"\[").replace("]", r"\]")
                       .replace(".", r"\.")):
        GpuRunEvidence.from_dict(bad)


def test_missing_keys_and_wrong_top_level_types() -> None:
    with pytest.raises(EvidenceError, match="gpu.cluster: missing"):
        GpuRunEvidence.from_dict({"format": "kgc-gpu/1", "pods": [], "plan_notes": []})
    with pytest.raises(EvidenceError, match="expected an object, got list"):
        GpuRunEvidence.from_dict([])
    with pytest.raises(EvidenceError, match="guest.hypervisor_flag: missing"):
        GuestEvidence.from_dict({})
    assert GuestEvidence.from_dict(h200_guest().to_dict()) == h200_guest()
