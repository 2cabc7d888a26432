"""Bad input never crashes the sizing layer: malformed quantities and pods in the cluster's
objects, absurd Kata configurations in the profile, malformed shapes — each becomes a verdict
whose reason names the thing (or, for the profile, a load error naming the field)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.core.model import Status
from kgc.core.profile import Profile, ProfileError, load_profile
from kgc.layers.sizing.checks import CHECKS
from kgc.layers.sizing.collect import cluster_objects
from kgc.layers.sizing.evidence import (
    ClusterObjects,
    GuestSize,
    KataConfigSource,
    ShapeObservation,
    SizingEvidence,
    resolve_config,
)
from kgc.layers.sizing.model import KATA_PRESETS
from kgc.layers.sizing.profile import KataSizingProfile, SizingProfile, shape_pod

QUANTITIES = ["2", "500m", "2.5Gi", "0.1m", "1e3", "", "2.5.5Gi", "-1", "1Ki", "NaN", "1_000",
              "99999999999999999999Ei", "1e400", " 1", "１", "3Gb", "0x10"]
RES_KEYS = ["cpu", "memory", "nvidia.com/gpu"]

quantity = st.one_of(st.sampled_from(QUANTITIES), st.integers(-5, 10**20), st.none(),
                     st.booleans(), st.floats(allow_nan=True))
resources = st.dictionaries(st.sampled_from(["limits", "requests", "bogus"]),
                            st.one_of(st.dictionaries(st.sampled_from(RES_KEYS), quantity,
                                                      max_size=3), st.text(max_size=3)),
                            max_size=3)
container = st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "", None])},
                                  optional={"resources": st.one_of(resources, st.none()),
                                            "restartPolicy": st.sampled_from(["Always", 1])})
pod = st.fixed_dictionaries(
    {"metadata": st.one_of(st.fixed_dictionaries(
        {"name": st.sampled_from(["p1", "p2", "", None])},
        optional={"namespace": st.sampled_from(["ns", 3])}), st.none(), st.text(max_size=2))},
    optional={"spec": st.one_of(st.fixed_dictionaries(
        {"runtimeClassName": st.sampled_from(["kata", "runc", None, 5])},
        optional={"nodeName": st.sampled_from(["n1", "n2", None]),
                  "containers": st.one_of(st.lists(container, max_size=3), st.text(max_size=2)),
                  "initContainers": st.lists(container, max_size=2),
                  "overhead": st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity,
                                              max_size=2)}), st.none()),
              "status": st.fixed_dictionaries({}, optional={
                  "phase": st.sampled_from(["Running", "Pending", "Succeeded", 7])})})
node = st.fixed_dictionaries({"metadata": st.fixed_dictionaries(
    {"name": st.sampled_from(["n1", "n2", None])})}, optional={"status": st.fixed_dictionaries(
        {}, optional={"allocatable": st.dictionaries(st.sampled_from(["memory", "cpu"]),
                                                     quantity, max_size=2),
                      "capacity": st.dictionaries(st.sampled_from(["cpu"]), quantity)})})
kata_profile = st.builds(
    KataSizingProfile,
    runtime=st.sampled_from(["go", "runtime-rs"]),
    static_sandbox_resource_mgmt=st.booleans(),
    hypervisor=st.sampled_from(["qemu", "clh", "fc"]),
    default_vcpus=st.floats(-1024, 1024, allow_nan=False),
    default_memory=st.integers(0, 10**7),
    default_maxvcpus=st.integers(0, 1000),
    default_maxmemory=st.integers(0, 10**7),
    overhead_vcpus=st.floats(0, 64, allow_nan=False),
    overhead_memory=st.integers(0, 10**6),
    memory_slots=st.integers(0, 64),
    enable_virtio_mem=st.booleans(),
)


@settings(max_examples=300, deadline=2000, suppress_health_check=[HealthCheck.too_slow])
@given(pods=st.lists(pod, max_size=4), nodes=st.lists(node, max_size=2), k=kata_profile,
       guest=st.builds(GuestSize, nproc_all=st.one_of(st.none(), st.integers(0, 300)),
                       memtotal_kib=st.one_of(st.none(), st.integers(0, 10**9)),
                       present_kib=st.one_of(st.none(), st.integers(0, 10**9))))
def test_no_input_crashes_a_check(pods: list[Any], nodes: list[Any], k: KataSizingProfile,
                                  guest: GuestSize) -> None:
    objs, _ = cluster_objects([p for p in pods if isinstance(p, dict)], nodes, [], "kgc.io/run")
    raw = ClusterObjects(pods=tuple(pods), nodes=tuple(nodes))  # as an edited bundle might be
    src = resolve_config("kata", profile_entry=k)
    for cluster in (objs, raw):
        ev = SizingEvidence(configs={"kata": src}, cluster=cluster, shapes=(
            ShapeObservation("one-container", shape_pod("one-container", runtime_class="kata"),
                             "kata", guest=guest),))
        for c in CHECKS:
            v = c.judge(ev, None, "c")
            assert not v.reason.startswith("evaluator crashed"), (c.id, v.reason)


@pytest.mark.parametrize(("entry", "status", "text"), [
    ({"default_memory": 0}, Status.WARN,
     "kata (profile: profile cluster.sizing.kata.kata): default_memory=0 is below Kata's 256 MiB "
     "minimum: the Go runtime silently uses 2048"),
    ({"default_vcpus": 4, "default_maxvcpus": 2}, Status.FAIL,
     "default_maxvcpus=2 is below default_vcpus=4: QEMU refuses to boot the VM"),
    ({"default_memory": 4096, "default_maxmemory": 1024}, Status.FAIL,
     "default_maxmemory=1024 is below default_memory=4096: QEMU refuses the VM"),
    ({"runtime": "runtime-rs", "static_sandbox_resource_mgmt": True, "overhead_memory": 0},
     Status.WARN, "overhead_memory=0: a pod with a CPU limit but no memory limit gets a 0 MiB VM"),
])
def test_absurd_kata_configs_in_the_profile_get_verdicts(entry: dict[str, Any], status: Status,
                                                         text: str) -> None:
    sp = SizingProfile.model_validate({"kata": {"kata": entry}})
    src = resolve_config("kata", profile_entry=sp.kata["kata"])
    ev = SizingEvidence(configs={"kata": src}, shapes=(ShapeObservation(
        "one-container", shape_pod("one-container", runtime_class="kata"), "kata",
        guest=GuestSize(nproc_all=3, memtotal_kib=4 * 1024 * 1024)),))
    v = CHECKS.get("sizing.kata-config").judge(ev, None, "c")
    assert v.status is status and text in v.reason, v.reason
    shape = CHECKS.get("sizing.vm-matches-limits").judge(ev, None, "c")
    assert not shape.reason.startswith("evaluator crashed")


@pytest.mark.parametrize(("section", "field"), [
    ({"shapes": [{"name": "x", "containers": [{"cpu": "2.5.5"}]}]},
     "shapes[0].containers[0].cpu: Value error, '2.5.5' is not a Kubernetes quantity"),
    ({"shapes": [{"name": "x", "containers": [{"memory": "-1Gi"}]}]},
     "shapes[0].containers[0].memory: Value error, '-1Gi' is negative"),
    ({"kata": {"kata": {"default_memory": -5}}}, "kata.kata.default_memory"),
    ({"kata": {"kata": {"default_vcpus": "inf"}}}, "kata.kata.default_vcpus"),
    ({"kata": {"kata": {"preset": "nope"}}}, "kata.kata.preset"),
    ({"shapes": [{"name": "probe", "containers": [{}]}]}, "reserved for the probe pod"),
    ({"schedule_timeout_s": 600, "finish_timeout_s": 60}, "at least schedule_timeout_s"),
])
def test_a_bad_sizing_section_is_refused_naming_the_field(tmp_path: Any,
                                                          section: dict[str, Any],
                                                          field: str) -> None:
    import yaml

    f = tmp_path / "p.yaml"
    f.write_text(yaml.safe_dump({"name": "bad", "cluster": {"sizing": section}}))
    with pytest.raises(ProfileError) as ei:
        load_profile(str(f))
    assert field in str(ei.value)


def test_huge_and_fractional_quantities_are_sized_or_named() -> None:
    ok = Profile.model_validate({"name": "x", "cluster": {"sizing": {"shapes": [
        {"name": "frac", "containers": [{"cpu": "0.1m", "memory": "2.5Gi"}]}]}}})
    assert ok.cluster.sizing.shapes[0].containers[0].memory == "2.5Gi"
    ev = SizingEvidence(
        configs={"kata": KataConfigSource("kata", "profile", "p", KATA_PRESETS["qemu"])},
        cluster=ClusterObjects(pods=({
            "metadata": {"name": "huge", "namespace": "ns"},
            "spec": {"runtimeClassName": "kata", "nodeName": "n1", "containers": [
                {"name": "c", "resources": {"limits": {"memory": "99999999999999999999Ei"}}}]},
            "status": {"phase": "Running"}},), nodes=({"metadata": {"name": "n1"}, "status": {
                "allocatable": {"memory": "256Gi"}}},)))
    v = CHECKS.get("sizing.node-overcommit").judge(ev, None, "c")
    assert v.status is Status.ERROR
    assert "ns/huge" in v.reason and "exceeds what Kubernetes can represent" in v.reason
