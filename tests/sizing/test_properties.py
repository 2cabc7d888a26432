"""Properties of the sizing model, and total parsers (hypothesis)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kgc.core.hostfs import CommandResult, HostSnapshot
from kgc.core.model import EvidenceError
from kgc.layers.sizing.evidence import (
    GuestSize,
    SizingEvidence,
    cpu_list_count,
    cpuinfo_processors,
    kata_sizing_from_toml,
    meminfo_kib,
    nproc_output,
    zoneinfo_pages,
)
from kgc.layers.sizing.model import (
    HostCaps,
    KataSizing,
    PodShape,
    SizingInputError,
    cpu_millis,
    expected_vm,
    memory_bytes,
)

HOST = HostCaps(cpus=512, memory_mib=1 << 24)

kata_configs = st.builds(
    KataSizing,
    runtime=st.sampled_from(["go", "runtime-rs"]),
    static=st.booleans(),
    default_vcpus=st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 4.0]),
    default_memory=st.sampled_from([0, 128, 256, 512, 2048, 2080, 8192]),
    overhead_vcpus=st.sampled_from([0.0, 0.2, 0.5]),
    overhead_memory=st.sampled_from([32, 128, 512]),
    memory_slots=st.just(1000),
).filter(lambda k: k.runtime == "go" or k.static)  # runtime-rs dynamic is not modelled

cpu_q = st.one_of(st.none(), st.integers(1, 16000).map(lambda m: f"{m}m"),
                  st.sampled_from(["1", "2", "0.5", "1.2", "250m"]))
mem_q = st.one_of(st.none(), st.integers(1, 32768).map(lambda m: f"{m}Mi"),
                  st.sampled_from(["1Gi", "2.5Gi", "500M", "128974848"]))


@st.composite
def containers(draw: Any, kind: str) -> dict:
    lim = {}
    cpu, mem = draw(cpu_q), draw(mem_q)
    if cpu is not None:
        lim["cpu"] = cpu
    if mem is not None:
        lim["memory"] = mem
    c: dict = {"name": f"{kind}-{draw(st.integers(0, 10**6))}", "resources": {"limits": lim}}
    if kind == "sidecar":
        c["restartPolicy"] = "Always"
    return c


@st.composite
def pods(draw: Any) -> dict:
    apps = draw(st.lists(containers("app"), min_size=1, max_size=3))
    inits = draw(st.lists(st.one_of(containers("init"), containers("sidecar")), max_size=2))
    names = [c["name"] for c in apps + inits]
    assume(len(set(names)) == len(names))
    spec: dict = {"containers": apps}
    if inits:
        spec["initContainers"] = inits
    return {"metadata": {"name": "p"}, "spec": spec}


def _bump(p: dict, which: int, key: str, factor: int) -> dict:
    """The same pod with one container's limit raised (or set, when absent)."""
    import copy

    q = copy.deepcopy(p)
    allc = q["spec"]["containers"] + q["spec"].get("initContainers", [])
    c = allc[which % len(allc)]
    lim = c["resources"]["limits"]
    if key == "cpu":
        lim["cpu"] = f"{cpu_millis(lim['cpu'], 'x') * factor if 'cpu' in lim else 100}m"
    else:
        b = memory_bytes(lim["memory"], "x") if "memory" in lim else 0
        lim["memory"] = str(b * factor + (64 << 20))
    return q


def _has_both_limits(p: dict) -> bool:
    s = PodShape.from_manifest(p)
    return any(c.cpu_limit_m for c in s.containers) and any(c.memory_limit for c in s.containers)


@settings(deadline=2000, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(pods(), kata_configs, st.integers(0, 5), st.sampled_from(["cpu", "memory"]),
       st.integers(1, 4))
def test_monotone_in_each_limit(p: dict, k: KataSizing, which: int, key: str,
                                factor: int) -> None:
    """Raising (or adding) any one container's limit never shrinks the VM. runtime-rs is
    monotone once the pod has limits: crossing from "no limits" to "a limit" replaces the
    defaults by the overheads (initial_size.rs), which test_model covers explicitly."""
    q = _bump(p, which, key, factor)
    if k.runtime == "runtime-rs":
        assume(_has_both_limits(p))
    a, b = expected_vm(p, k, HOST), expected_vm(q, k, HOST)
    assert b.vcpus >= a.vcpus
    assert b.memory_mib >= a.memory_mib


@settings(deadline=2000, max_examples=300)
@given(pods(), kata_configs.filter(lambda k: k.runtime == "go"), st.integers(1, 8),
       st.integers(2048, 65536))
def test_caps_are_respected(p: dict, k: KataSizing, maxv: int, maxm: int) -> None:
    """default_maxvcpus / default_maxmemory: the dynamic VM never exceeds them; a static VM
    that would is a refusal (QEMU does not start it), never a silent bigger VM."""
    from dataclasses import replace

    k = replace(k, default_maxvcpus=maxv, default_maxmemory=maxm)
    vm = expected_vm(p, k, HOST)
    if vm.refusal:
        return
    if not k.static:
        assert vm.vcpus <= max(maxv, vm.boot_vcpus)
    assert vm.memory_mib <= maxm


@settings(deadline=2000, max_examples=200)
@given(kata_configs, st.integers(1, 4), st.booleans())
def test_a_pod_without_limits_gets_exactly_the_default_vm(k: KataSizing, n: int,
                                                          with_requests: bool) -> None:
    ctrs = []
    for i in range(n):
        c: dict = {"name": f"c{i}"}
        if with_requests:  # requests never size the VM
            c["resources"] = {"requests": {"cpu": "3", "memory": "5Gi"}}
        ctrs.append(c)
    vm = expected_vm({"metadata": {"name": "p"}, "spec": {"containers": ctrs}}, k, HOST)
    dv = k.default_vcpus or 1.0
    if k.runtime == "go":
        dm = k.default_memory if k.default_memory >= 256 else 2048
    else:
        dm = k.default_memory or 128
    if vm.refusal:
        assert k.runtime == "runtime-rs" and dm < 64
        return
    assert (vm.vcpus, vm.memory_mib) == (math.ceil(dv), dm)


@settings(deadline=2000, max_examples=200)
@given(pods(), kata_configs.filter(lambda k: k.runtime == "go"))
def test_go_vm_is_never_below_its_defaults(p: dict, k: KataSizing) -> None:
    vm = expected_vm(p, k, HOST)
    assert vm.vcpus >= math.ceil(k.default_vcpus or 1)
    assert vm.memory_mib >= (k.default_memory if k.default_memory >= 256 else 2048)


# -- total parsers -----------------------------------------------------------------------------
lines = st.lists(st.one_of(
    st.text(max_size=40),
    st.sampled_from(["MemTotal:       4006892 kB", "MemTotal: x kB", "processor\t: 0",
                     "processor : 99999999999999999999", "        present  520160",
                     "        managed  499255", "  present 1e9", "16", "0-15", "0,2-3",
                     "3-1", "99999999-0", "nvidia", "MemTotal:" + "9" * 40 + " kB"]),
), max_size=30).map("\n".join)


@settings(deadline=2000, max_examples=400)
@given(lines)
def test_guest_parsers_are_total(text: str) -> None:
    for v in (meminfo_kib(text), cpuinfo_processors(text), cpu_list_count(text)):
        assert v is None or (isinstance(v, int) and v >= 0)
    p, m = zoneinfo_pages(text)
    assert p is None or p >= 0
    assert m is None or m >= 0
    a, b = nproc_output(text)
    assert a is None or a >= 0


@settings(deadline=2000, max_examples=300)
@given(st.dictionaries(st.sampled_from(["/proc/meminfo", "/proc/cpuinfo", "/proc/zoneinfo",
                                        "/sys/devices/system/memory/block_size_bytes",
                                        "/sys/devices/system/cpu/present",
                                        "/sys/devices/system/cpu/online"]), lines),
       st.one_of(st.none(), lines), st.integers(-5, 300))
def test_guest_size_from_any_snapshot_never_raises(files: dict, nproc: str | None,
                                                   rc: int) -> None:
    cmds = {} if nproc is None else {"nproc": CommandResult(rc, nproc)}
    g = GuestSize.from_snapshot(HostSnapshot(files=files, commands=cmds,
                                             dirs={"/sys/devices/system/memory": ("memory0",)}))
    assert GuestSize.from_dict(g.to_dict()) == g


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(),
              st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=25,
)


@settings(deadline=2000, max_examples=300)
@given(json_values)
def test_quantities_and_pods_raise_only_sizing_input_error(v: Any) -> None:
    for fn in (cpu_millis, memory_bytes):
        try:
            fn(v, "x")
        except SizingInputError:
            pass
    try:
        PodShape.from_manifest(v)
    except SizingInputError:
        pass


@settings(deadline=2000, max_examples=300)
@given(st.one_of(json_values, st.fixed_dictionaries(
    {"metadata": st.fixed_dictionaries({"name": st.text(min_size=1, max_size=5)}),
     "spec": st.fixed_dictionaries({"containers": st.lists(st.fixed_dictionaries({
         "name": st.text(min_size=1, max_size=4),
         "resources": st.fixed_dictionaries({"limits": st.dictionaries(
             st.sampled_from(["cpu", "memory", "hugepages-2Mi"]),
             st.one_of(st.text(max_size=8), st.integers(-5, 10**19)))})}), max_size=3)})})))
def test_pod_manifests_never_crash_the_model(v: Any) -> None:
    try:
        expected_vm(v, KataSizing(), HOST)
    except SizingInputError as exc:
        assert str(exc)


@settings(deadline=2000, max_examples=300)
@given(json_values)
def test_evidence_from_dict_raises_only_evidence_error(v: Any) -> None:
    try:
        SizingEvidence.from_dict(v)
    except EvidenceError as exc:
        assert str(exc)
    try:
        GuestSize.from_dict(v)
    except EvidenceError:
        pass


@settings(deadline=2000, max_examples=300)
@given(st.dictionaries(st.sampled_from(["runtime", "hypervisor", "x"]), json_values))
def test_kata_toml_adapter_raises_only_sizing_input_error(data: dict) -> None:
    try:
        kata_sizing_from_toml(data, "/etc/kata-containers/configuration.toml")
    except SizingInputError:
        pass
