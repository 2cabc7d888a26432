"""Pure evaluators of the sizing layer (``sizing.*``).

* ``sizing.kata-config``    — the Kata sizing configuration of every Kata RuntimeClass is known
                              (source named: node file, profile, or measured) and sane.
* ``sizing.vm-matches-limits`` — live: each pod shape's guest has exactly the predicted vCPUs
                              and its RAM/MemTotal within the guest-derived tolerance.
* ``sizing.starved-pods``   — static: Kata pods whose requests the VM will not honour (requests
                              without limits, or a VM smaller than the requests).
* ``sizing.node-overcommit`` — static: per node, Σ(predicted VM memory + RuntimeClass
                              overhead) of Kata pods (+ other pods' requests) vs allocatable.

The formula each applies is in its docstring (the README's catalogue quotes them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kgc.core.model import (
    Outcome,
    Registry,
    Severity,
    Status,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from kgc.layers.sizing.evidence import (
    SOURCE_MEASURED,
    GuestSize,
    KataConfigSource,
    ShapeObservation,
    SizingEvidence,
)
from kgc.layers.sizing.model import (
    GO_MIN_MEMORY_MIB,
    MIB,
    HostCaps,
    KataSizing,
    PodShape,
    SizingInputError,
    VmSize,
    cpu_millis,
    expected_vm,
    fmt_cpu,
    fmt_mib,
    memory_bytes,
    pod_requests,
)
from kgc.layers.sizing.profile import MemTotalTolerance, sizing_profile

CHECKS = Registry()

FINISHED_PHASES = ("Succeeded", "Failed")


def _cluster_runtime_class(profile: Any) -> str:
    return sizing_profile(profile).runtime_class


# -- one guest against one predicted VM --------------------------------------------------------
@dataclass(frozen=True)
class GuestJudgement:
    status: Status
    reason: str
    expected: str
    found: str
    basis: str = ""  # what the memory comparison used
    window_mib: tuple[float, float] | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


def _f(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 0.05 else f"{x:.1f}"


def memtotal_window(vm: VmSize, tol: MemTotalTolerance) -> tuple[float, float]:
    """MemTotal bounds when only MemTotal is known: the kernel reserves at least the struct
    pages of the memory present at boot and at most those of all memory plus the profile's
    fixed allowance (kernel image, per-CPU areas, swiotlb, ACPI)."""
    n = float(vm.memory_mib)
    lo = n - tol.memmap_mib(n) - tol.kernel_fixed_reserve_max_mib
    hi = n - tol.memmap_mib(float(vm.boot_memory_mib or vm.memory_mib))
    return lo, hi


def judge_guest(vm: VmSize, guest: GuestSize, tol: MemTotalTolerance) -> GuestJudgement:
    """vCPUs exactly; memory by the guest's RAM (``/proc/zoneinfo`` present pages) within the
    firmware's holes when collected, else MemTotal within :func:`memtotal_window`."""
    expected = vm.describe()
    v = guest.vcpus
    mt = guest.memtotal_mib
    found = f"{v if v is not None else '?'} / {int(mt) if mt is not None else '?'} MiB"
    details: dict[str, Any] = {"expected": vm.to_dict(), "guest": guest.to_dict()}
    if v is None:
        return GuestJudgement(Status.ERROR, "the guest reported no vCPU count (nproc --all, "
                              f"{'/sys/devices/system/cpu/present'}, /proc/cpuinfo): "
                              + "; ".join(guest.problems or ("nothing collected",)),
                              expected, found, details=details)
    if mt is None:
        return GuestJudgement(Status.ERROR, "the guest reported no MemTotal: "
                              + "; ".join(guest.problems or ("/proc/meminfo missing",)),
                              expected, found, details=details)
    head = f"expected {vm.vcpus} vCPU / {vm.memory_mib} MiB ({vm.mode}, {vm.settings}), " \
           f"found {found}"
    if vm.refusal:
        return GuestJudgement(Status.FAIL, f"{head}: Kata should have refused this sandbox "
                              f"({vm.refusal}) yet it ran", expected, found, details=details)
    problems: list[str] = []
    if v != vm.vcpus:
        problems.append(f"{v} vCPUs instead of {vm.vcpus}")
    # either online count below the present one: a plugged vCPU the guest never scheduled
    for online, where in ((guest.cpuinfo_processors, "/proc/cpuinfo"),
                          (guest.cpus_online, "/sys/devices/system/cpu/online")):
        if online is not None and online != v:
            problems.append(f"{v} vCPUs present but {online} online ({where})")
            break
    ram = guest.ram_mib
    if ram is not None:
        basis = "guest RAM (/proc/zoneinfo present pages)"
        lo = vm.memory_mib - tol.firmware_reserved_max_mib
        hi = float(vm.memory_mib)
        reserved = ram - mt
        note = (f"guest RAM {_f(ram)} MiB by /proc/zoneinfo, accepted [{_f(lo)}, {_f(hi)}]; "
                f"the kernel keeps {_f(reserved)} MiB of it")
        if mt > ram + 0.01:
            return GuestJudgement(Status.ERROR, f"{head}: inconsistent evidence: MemTotal "
                                  f"{_f(mt)} MiB exceeds the guest's RAM {_f(ram)} MiB",
                                  expected, found, basis, (lo, hi), details)
        if not lo <= ram <= hi + 4 / 1024:
            problems.append(f"the VM has {_f(abs(ram - vm.memory_mib))} MiB "
                            f"{'more' if ram > hi else 'less'} RAM than predicted ("
                            + (f"{guest.block_mib} MiB memory blocks" if guest.block_mib
                               else "memory block size unknown") + ")")
    else:
        basis = "MemTotal only (no /proc/zoneinfo)"
        lo, hi = memtotal_window(vm, tol)
        note = (f"MemTotal window [{_f(lo)}, {_f(hi)}] MiB: struct pages 1/"
                f"{tol.page_bytes // max(tol.struct_page_bytes, 1)} plus at most "
                f"{_f(tol.kernel_fixed_reserve_max_mib)} MiB kernel reservations")
        if not lo <= mt <= hi:
            problems.append(f"MemTotal {_f(mt)} MiB is outside [{_f(lo)}, {_f(hi)}] MiB")
    if problems:
        return GuestJudgement(Status.FAIL, f"{head}: {'; '.join(problems)} ({note})",
                              expected, found, basis, (lo, hi), details)
    return GuestJudgement(Status.PASS, f"{head} ({note})", expected, found, basis, (lo, hi),
                          details)


# -- sizing.kata-config ------------------------------------------------------------------------
def config_findings(k: KataSizing) -> list[tuple[Status, str]]:
    """What is absurd or surprising about a Kata sizing configuration."""
    out: list[tuple[Status, str]] = []
    if k.runtime == "go" and k.default_memory < GO_MIN_MEMORY_MIB:
        out.append((Status.WARN, f"default_memory={k.default_memory} is below Kata's "
                    f"{GO_MIN_MEMORY_MIB} MiB minimum: the Go runtime silently uses 2048"))
    if k.runtime == "runtime-rs" and k.hypervisor == "qemu" and 0 < k.default_memory < 64:
        out.append((Status.FAIL, f"default_memory={k.default_memory} is below runtime-rs' QEMU "
                    "minimum of 64 MiB: the configuration does not load"))
    if k.default_vcpus < 0:
        out.append((Status.WARN, f"default_vcpus={k.default_vcpus:g}: every VM gets all host CPUs"))
    if 0 < k.default_maxvcpus < math.ceil(max(k.default_vcpus, 1)):
        if k.runtime == "go" and not k.static:
            out.append((Status.FAIL, f"default_maxvcpus={k.default_maxvcpus} is below "
                        f"default_vcpus={k.default_vcpus:g}: QEMU refuses to boot the VM"))
        else:
            out.append((Status.WARN, f"default_maxvcpus={k.default_maxvcpus} is below "
                        f"default_vcpus={k.default_vcpus:g}"
                        + (": runtime-rs clamps default_vcpus to it" if k.runtime != "go"
                           else ": static sizing ignores default_maxvcpus")))
    if 0 < k.default_maxmemory < k.default_memory:
        out.append((Status.FAIL, f"default_maxmemory={k.default_maxmemory} is below "
                    f"default_memory={k.default_memory}: QEMU refuses the VM"))
    if k.runtime == "runtime-rs" and k.static and k.overhead_memory == 0:
        out.append((Status.WARN, "overhead_memory=0: a pod with a CPU limit but no memory limit "
                    "gets a 0 MiB VM, which runtime-rs refuses"))
    if k.runtime == "runtime-rs" and not k.static:
        out.append((Status.WARN, "runtime-rs with static_sandbox_resource_mgmt=false: the "
                    "hot-plug sizing is not modelled, live shapes cannot be predicted"))
    if k.runtime == "go" and not k.static and k.hypervisor != "qemu":
        out.append((Status.WARN, f"Go dynamic sizing on {k.hypervisor} is not modelled"))
    return out


@CHECKS.check(
    "sizing.kata-config",
    title=("Each Kata RuntimeClass's sizing config is known (node file, else profile, else "
           "probe-measured; named) and sane: default_maxvcpus ≥ default_vcpus, default_maxmemory ≥ "
           "default_memory ≥ 256"),
    remediation="Let kgc read the node's Kata configuration (runtime layer), or describe it in "
    "the profile under cluster.sizing.kata.<runtime-class> (preset: qemu-nvidia-gpu, ...).",
    severity=Severity.NORMAL,
)
def kata_config(ev: SizingEvidence, profile: Any) -> Outcome:
    """Sources in order: the node's Kata TOML (the handler's ConfigPath, else the standard
    locations, with config.d drop-ins), the profile's ``cluster.sizing.kata`` entry, the
    default VM measured by a limit-less probe pod. Fails on a configuration Kata refuses
    (maxvcpus below default_vcpus in dynamic mode, maxmemory below default_memory); warns on
    ones Kata silently rewrites (default_memory < 256 MiB -> 2048)."""
    if not ev.configs:
        return skipped("no Kata RuntimeClass was found to size (no configs collected)")
    rows: list[dict[str, Any]] = []
    fails: list[str] = []
    warns: list[str] = []
    missing: list[str] = []
    for rc, src in sorted(ev.configs.items()):
        row: dict[str, Any] = {"runtime_class": rc, "source": src.describe(),
                               "tried": list(src.tried)}
        if src.error:
            fails.append(f"{rc}: {src.error} ({src.describe()})")
        elif src.sizing is None:
            missing.append(f"{rc}: no configuration ({'; '.join(src.tried) or src.detail})")
        else:
            k = src.sizing
            row.update(mode=k.mode, settings=k.settings(), sizing=k.to_dict())
            for st, msg in config_findings(k):
                (fails if st is Status.FAIL else warns).append(f"{rc} ({src.describe()}): {msg}")
        rows.append(row)
    if fails:
        return failed("; ".join(fails), "Fix the Kata configuration: " + "; ".join(fails),
                      configs=rows)
    if missing and len(missing) == len(ev.configs):
        return skipped("no Kata sizing configuration is known: " + "; ".join(missing),
                       configs=rows)
    known = "; ".join(f"{r['runtime_class']}: {r['mode']} ({r['settings']}) from "
                      f"{r['source']}" + (f" [before it: {'; '.join(r['tried'])}]"
                                          if r["tried"] else "")
                      for r in rows if "mode" in r)
    if warns or missing:
        return warned("; ".join(warns + missing) + f" — known: {known}",
                      "Review these Kata settings: " + "; ".join(warns + missing), configs=rows)
    return passed(known, configs=rows)


# -- sizing.vm-matches-limits ------------------------------------------------------------------
@dataclass(frozen=True)
class ShapeResult:
    shape: str
    status: Status
    reason: str
    expected: str = ""
    found: str = ""
    row: Mapping[str, Any] = field(default_factory=dict)


def judge_shape(obs: ShapeObservation, src: KataConfigSource | None,
                tol: MemTotalTolerance) -> ShapeResult:
    """One shape of the live matrix (pure): predict its VM and judge its guest."""
    tag = " (simulated)" if obs.simulated else ""
    row: dict[str, Any] = {"shape": obs.shape, "runtime_class": obs.runtime_class,
                           "node": obs.node, "simulated": obs.simulated,
                           "waited_s": obs.waited_s}
    if src is None or not src.usable:
        why = "no Kata configuration" if src is None else (src.error or src.detail)
        return ShapeResult(obs.shape, Status.SKIP,
                           f"{obs.shape}: cannot predict: {why} for {obs.runtime_class}", row=row)
    assert src.sizing is not None
    row["source"] = src.describe()
    if obs.error:
        return ShapeResult(obs.shape, Status.ERROR, f"{obs.shape}: {obs.error}{tag}", row=row)
    try:
        pod = PodShape.from_manifest(obs.pod)
    except SizingInputError as exc:
        return ShapeResult(obs.shape, Status.ERROR, f"{obs.shape}: the pod cannot be sized: {exc}",
                           row=row)
    if obs.guest is None:
        return ShapeResult(obs.shape, Status.ERROR,
                           f"{obs.shape}: the pod ran but its guest reported nothing{tag}", row=row)
    k = src.sizing
    if k.memory_block_mib is None and obs.guest.block_mib:
        k = replace(k, memory_block_mib=obs.guest.block_mib)  # the guest's hot-plug block
    candidates = [k]
    if src.kind == SOURCE_MEASURED:
        # a probe cannot tell static from dynamic: dynamic rounds hot-plugs to whole blocks
        candidates.append(replace(k, static=False))
    judgements = []
    for cand in candidates:
        try:
            vm = expected_vm(pod, cand)
        except SizingInputError as exc:
            return ShapeResult(obs.shape, Status.SKIP, f"{obs.shape}: cannot predict: {exc}",
                               row=row)
        judgements.append(judge_guest(vm, obs.guest, tol))
    j = next((x for x in judgements if x.status is Status.PASS), judgements[0])
    row.update(expected=j.expected, found=j.found, status=str(j.status), basis=j.basis,
               window_mib=list(j.window_mib) if j.window_mib else None, reason=j.reason)
    return ShapeResult(obs.shape, j.status, f"{obs.shape}{tag}: {j.reason}", j.expected,
                       j.found, row)


NO_SHAPE = ("Run the sizing layer with at least one pod shape that fits the cluster "
            "(cluster.sizing.shapes; the default matrix has CPU-only shapes), with the Kata "
            "RuntimeClass it names present; a profile that means to skip sizing leaves "
            "`sizing` out of policy.require_layers.")


@CHECKS.check(
    "sizing.vm-matches-limits",
    title=("Each pod shape's microVM is the model's: vCPUs = V exactly, guest RAM in "
           "[N − 8 MiB, N] (Go static: V = default_vcpus + ⌈Σ CPU limits⌉, "
           "N = default_memory + Σ memory limits)"),
    remediation="Make the Kata configuration match what the profile/node says, or fix the "
    "profile's sizing section; see the shape table in the evidence.",
    severity=Severity.CRITICAL,
)
def vm_matches_limits(ev: SizingEvidence, profile: Any) -> Outcome:
    """vCPUs must equal the model's exactly (``nproc --all``, and /proc/cpuinfo must show them
    online). Memory: with /proc/zoneinfo, the guest's RAM (Σ present pages) must lie in
    [N − firmware_reserved_max_mib, N]; with MemTotal alone, MemTotal must lie in
    [N − N/64 − kernel_fixed_reserve_max_mib, N − boot/64] (struct pages of boot memory are
    always reserved). N = the model's memory, with the guest's memory-block size."""
    sp = sizing_profile(profile)
    if not ev.shapes:  # the layer's subject is missing: nothing below would be judged
        why = ("the record holds no pod shapes (not collected)" if ev.shapes is None else
               "the profile's cluster.sizing.shapes matrix is empty")
        return errored(f"no shape was measured: {why}", NO_SHAPE)
    results = [
        ShapeResult(o.shape, Status.SKIP, f"{o.shape}: not run: {o.error}", row={
            "shape": o.shape, "runtime_class": o.runtime_class})
        if o.error.startswith("not applicable") else judge_shape(o, ev.configs.get(o.runtime_class),
                                                                   sp.memtotal)
        for o in ev.shapes
    ]
    rows = [dict(r.row, status=str(r.status), reason=r.reason) for r in results]
    by = {s: [r for r in results if r.status is s] for s in Status}
    simulated = any(o.simulated for o in ev.shapes)
    expected = "; ".join(f"{r.shape}: {r.expected}" for r in results if r.expected) or None
    found = "; ".join(f"{r.shape}: {r.found}" for r in results if r.found) or None
    sim = " [simulated pods: recorded guest evidence]" if simulated else ""
    if by[Status.FAIL]:
        return failed("; ".join(r.reason for r in by[Status.FAIL]) + sim,
                      _remediation(by[Status.FAIL]), expected=expected, found=found,
                      shapes=rows)
    if by[Status.ERROR]:
        return errored("; ".join(r.reason for r in by[Status.ERROR]) + sim,
                       "Check why these pods did not run or report (events, the collector "
                       "output) and rerun.", shapes=rows)
    if all(o.error.startswith("not applicable") for o in ev.shapes):
        return errored("no shape was measured: " + "; ".join(r.reason for r in results) + sim,
                       NO_SHAPE)
    if not by[Status.PASS]:
        # nothing was measured against a prediction: the layer's subject is missing, and a
        # skip here would let the layer pass on its static checks alone
        return errored("no shape could be judged: " + "; ".join(r.reason for r in results) + sim,
                       "Let kgc read each Kata RuntimeClass's configuration (runtime layer on "
                       "the node), or describe it in the profile under "
                       "cluster.sizing.kata.<runtime-class>, and rerun.", shapes=rows)
    skipped_txt = ("; not judged: " + "; ".join(r.reason for r in by[Status.SKIP])
                   if by[Status.SKIP] else "")
    return passed("; ".join(r.reason for r in by[Status.PASS]) + skipped_txt + sim,
                  expected=expected, found=found, shapes=rows)


def _remediation(fails: list[ShapeResult]) -> str:
    srcs = sorted({s for r in fails if (s := r.row.get("source"))})
    return ("The VM Kata booted differs from what its configuration implies ("
            + ", ".join(srcs) + "). Check that the handler really uses that file "
            "(`kata-runtime env --json` on the node), that no annotation overrides "
            "default_vcpus/default_memory, and whether static_sandbox_resource_mgmt is what the "
            "profile says.")


# -- cluster objects ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _KataPod:
    pod: PodShape
    runtime_class: str
    overhead_mib: float
    overhead_source: str


def _obj(v: Any) -> Mapping[str, Any]:
    """A field of an API object that should be an object ({} when it is not)."""
    return v if isinstance(v, Mapping) else {}


def _runtime_classes(ev: SizingEvidence) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for rc in ev.cluster.runtime_classes if ev.cluster else ():
        name = _obj(rc.get("metadata")).get("name")
        if isinstance(name, str):
            out[name] = rc
    return out


def _is_kata(rc_name: str, rcs: Mapping[str, Mapping[str, Any]], ev: SizingEvidence,
             profile: Any) -> bool:
    if rc_name in ev.configs or rc_name == _cluster_runtime_class(profile):
        return True
    h = rcs.get(rc_name, {}).get("handler")
    return isinstance(h, str) and h.startswith("kata")


def _rc_overhead(name: str, rc: Mapping[str, Any] | None) -> tuple[int | None, str]:
    """The RuntimeClass's ``overhead.podFixed.memory`` in bytes (None when it sets none).
    A malformed overhead raises naming the class: counting it as none would let an
    overcommitted node pass."""
    if not rc or rc.get("overhead") is None:
        return None, ""
    where = f"RuntimeClass {name}: overhead"
    ov = rc["overhead"]
    if not isinstance(ov, Mapping):
        raise SizingInputError(f"{where}: expected a mapping, got {type(ov).__name__}")
    pf = ov.get("podFixed")
    if pf is not None and not isinstance(pf, Mapping):
        raise SizingInputError(f"{where}.podFixed: expected a mapping, got {type(pf).__name__}")
    if not pf or "memory" not in pf:
        return None, ""
    return memory_bytes(pf["memory"], f"{where}.podFixed.memory"), "RuntimeClass"


def _kata_pods(ev: SizingEvidence, profile: Any) -> tuple[list[_KataPod], list[str]]:
    """Kata pods that are placed and not finished, and unreadable pods as reasons."""
    rcs = _runtime_classes(ev)
    out: list[_KataPod] = []
    bad: list[str] = []
    for i, obj in enumerate(ev.cluster.pods if ev.cluster else ()):
        spec = _obj(obj.get("spec"))
        rc = spec.get("runtimeClassName")
        if not isinstance(rc, str) or not _is_kata(rc, rcs, ev, profile):
            continue
        try:
            p = PodShape.from_manifest(obj)
            ov, src = (p.overhead_memory, "pod spec.overhead") if p.overhead_memory is not None \
                else _rc_overhead(rc, rcs.get(rc))
        except SizingInputError as exc:
            bad.append(f"pods[{i}]: {exc}")
            continue
        if p.phase in FINISHED_PHASES:
            continue
        out.append(_KataPod(p, rc, (ov or 0) / MIB, src or "none"))
    return out, bad


UNREADABLE = ("kgc's sizing model could not read these pods' resources: look at them with "
              "`kubectl get pod -o yaml`; if the API server accepted them, report it with the "
              "bundle (`kgc snapshot --kubeconfig`).")


def _no_cluster(ev: SizingEvidence) -> Outcome:
    err = ev.errors.get("cluster")
    if err:
        return errored(f"the cluster's pods, nodes and RuntimeClasses could not be read: {err}",
                       "Grant the run's credentials `list` on pods (all namespaces), nodes and "
                       "runtimeclasses.node.k8s.io, then rerun.")
    return skipped("the cluster's pods, nodes and RuntimeClasses were not collected")


# -- sizing.starved-pods -----------------------------------------------------------------------
@CHECKS.check(
    "sizing.starved-pods",
    title=("No Kata pod relies on requests the VM ignores: every request has its limit, VM vCPUs ≥ "
           "⌈Σ CPU requests⌉, VM MiB ≥ Σ memory requests"),
    remediation="Set limits on every container of a Kata pod (Kata sizes the VM from limits, "
    "never from requests); limits = requests gives Guaranteed QoS and a VM that fits.",
    severity=Severity.NORMAL,
)
def starved_pods(ev: SizingEvidence, profile: Any) -> Outcome:
    """A Kata pod warns when a container sets a request without the matching limit (the
    scheduler reserves it, the VM does not get it), or when the predicted VM is smaller than
    the pod's requests (ceil(Σ cpu requests) vCPUs, Σ memory requests MiB)."""
    if ev.cluster is None:
        return _no_cluster(ev)
    pods, bad = _kata_pods(ev, profile)
    if not pods:
        if bad:
            return errored("no readable running Kata pod to inspect; unreadable: "
                           + "; ".join(bad), UNREADABLE)
        return skipped("no running Kata pod to inspect")
    findings: list[str] = []
    fixes: list[str] = []
    rows = []
    for kp in pods:
        p = kp.pod
        issues: list[str] = []
        fix: list[str] = []
        for c in p.containers:
            miss = []
            if c.cpu_request_m and c.cpu_limit_m is None:
                miss.append(f"cpu request {fmt_cpu(c.cpu_request_m)} without a limit")
                fix.append(f"{c.name}: limits.cpu={fmt_cpu(c.cpu_request_m)}")
            if c.memory_request and c.memory_limit is None:
                miss.append(f"memory request {fmt_mib(c.memory_request)}Mi without a limit")
                fix.append(f"{c.name}: limits.memory={fmt_mib(c.memory_request)}Mi")
            if miss:
                issues.append(f"{c.name}: {', '.join(miss)}")
        src = ev.configs.get(kp.runtime_class)
        vm = None
        if src is not None and src.usable and src.sizing is not None:
            try:
                vm = expected_vm(p, src.sizing)
            except SizingInputError:
                vm = None
        req_cpu, req_mem = pod_requests(p)
        if vm is not None and not vm.refusal:
            if req_cpu and vm.vcpus < math.ceil(req_cpu / 1000):
                issues.append(f"its VM gets {vm.vcpus} vCPU for {fmt_cpu(req_cpu)} requested")
            if req_mem and vm.memory_mib * MIB < req_mem:
                issues.append(f"its VM gets {vm.memory_mib} MiB for {fmt_mib(req_mem)} MiB "
                              "requested")
            issues.extend(n for n in vm.notes if "only overhead_memory" in n)
        elif vm is not None and vm.refusal:
            issues.append(f"Kata refuses its sandbox: {vm.refusal}")
        rows.append({"pod": p.ref, "runtime_class": kp.runtime_class,
                     "vm": vm.describe() if vm else None, "issues": issues})
        if issues:
            findings.append(f"{p.ref}: {'; '.join(issues)}")
            if fix:
                fixes.append(f"{p.ref}: {', '.join(fix)}")
    tail = f"; unreadable pods: {'; '.join(bad)}" if bad else ""
    if findings:
        return warned(
            f"{len(findings)} Kata pod(s) the VM will starve: " + " | ".join(findings) + tail,
            "Kata sizes the VM from limits only. Set them: " + ("; ".join(fixes) if fixes
            else "raise the limits of these pods to at least their requests"), pods=rows)
    if bad:
        return errored(f"{len(pods)} Kata pod(s) fine, but some pods cannot be read: "
                       + "; ".join(bad), UNREADABLE, pods=rows)
    return passed(f"all {len(pods)} Kata pod(s) set limits for what they request", pods=rows)


# -- sizing.node-overcommit --------------------------------------------------------------------
def _node_alloc(obj: Mapping[str, Any]) -> tuple[str, int | None, int | None, str]:
    meta = _obj(obj.get("metadata"))
    name = meta.get("name")
    status = _obj(obj.get("status"))
    alloc = status.get("allocatable")
    cap = status.get("capacity")
    if not isinstance(name, str):
        return "", None, None, "a node without metadata.name"
    if not isinstance(alloc, Mapping) or "memory" not in alloc:
        return name, None, None, f"node {name}: status.allocatable.memory missing"
    try:
        mem = memory_bytes(alloc["memory"], f"node {name}: allocatable.memory")
        cpus = None
        if isinstance(cap, Mapping) and "cpu" in cap:
            cpus = cpu_millis(cap["cpu"], f"node {name}: capacity.cpu") // 1000
    except SizingInputError as exc:
        return name, None, None, str(exc)
    return name, mem, cpus, ""


@CHECKS.check(
    "sizing.node-overcommit",
    title=("Per node: Σ (predicted VM memory + RuntimeClass overhead) over Kata pods + other pods' "
           "memory requests ≤ allocatable memory"),
    remediation="Move or shrink the listed Kata pods, or give the node more memory; remember "
    "that the VM is default_memory + the limits, plus the RuntimeClass overhead.",
    severity=Severity.CRITICAL,
)
def node_overcommit(ev: SizingEvidence, profile: Any) -> Outcome:
    """Per node: Σ over its running Kata pods of (predicted VM memory + pod/RuntimeClass
    overhead.podFixed memory), plus the other pods' memory requests (profile
    ``overcommit_counts_other_pods``), must not exceed ``status.allocatable.memory``."""
    sp = sizing_profile(profile)
    if ev.cluster is None:
        return _no_cluster(ev)
    pods, bad = _kata_pods(ev, profile)
    placed = [kp for kp in pods if kp.pod.node]
    if not placed:
        if bad:
            return errored("no readable Kata pod placed on a node; unreadable: "
                           + "; ".join(bad), UNREADABLE)
        return skipped("no Kata pod is placed on a node")
    nodes: dict[str, tuple[int, int | None]] = {}
    node_errors: list[str] = []
    for n in ev.cluster.nodes:
        name, mem, cpus, err = _node_alloc(n)
        if err:
            node_errors.append(err)
        elif mem is not None:
            nodes[name] = (mem, cpus)
    other_req: dict[str, float] = {}
    if sp.overcommit_counts_other_pods:
        rcs = _runtime_classes(ev)
        for obj in ev.cluster.pods:
            spec = _obj(obj.get("spec"))
            rc = spec.get("runtimeClassName")
            node = spec.get("nodeName")
            if not isinstance(node, str) or (
                isinstance(rc, str) and _is_kata(rc, rcs, ev, profile)
            ):
                continue
            try:
                p = PodShape.from_manifest(obj)
            except SizingInputError as exc:
                bad.append(str(exc))
                continue
            if p.phase in FINISHED_PHASES:
                continue
            _, req_mem = pod_requests(p)
            extra = ((req_mem or 0) + (p.overhead_memory or 0)) / MIB
            other_req[node] = other_req.get(node, 0.0) + extra
    table = []
    over: list[str] = []
    undecided: list[str] = []
    for node in sorted({kp.pod.node for kp in placed if kp.pod.node}):
        alloc = nodes.get(node)
        mine = [kp for kp in placed if kp.pod.node == node]
        entries: list[dict[str, Any]] = []
        known = 0.0
        unknown: list[str] = []
        for kp in mine:
            src = ev.configs.get(kp.runtime_class)
            vm = None
            why = ""
            if src is None or not src.usable or src.sizing is None:
                why = f"no Kata configuration for {kp.runtime_class}"
            else:
                try:
                    vm = expected_vm(kp.pod, src.sizing,
                                     HostCaps(alloc[1] if alloc else None, None))
                except SizingInputError as exc:
                    why = str(exc)
            if vm is None:
                unknown.append(f"{kp.pod.ref} ({why})")
                entries.append({"pod": kp.pod.ref, "runtime_class": kp.runtime_class,
                                "vm_mib": None, "overhead_mib": kp.overhead_mib, "why": why})
                continue
            total = vm.memory_mib + kp.overhead_mib
            known += total
            entries.append({"pod": kp.pod.ref, "runtime_class": kp.runtime_class,
                            "vm": vm.describe(), "vm_mib": vm.memory_mib,
                            "overhead_mib": kp.overhead_mib,
                            "overhead_from": kp.overhead_source, "total_mib": total})
        others = other_req.get(node, 0.0)
        row: dict[str, Any] = {"node": node, "kata_pods": entries, "other_pods_requests_mib":
                               others, "kata_total_mib": known}
        if alloc is None:
            undecided.append(f"{node}: its allocatable memory is unknown")
            row["allocatable_mib"] = None
            table.append(row)
            continue
        alloc_mib = alloc[0] / MIB
        row.update(allocatable_mib=alloc_mib, sum_mib=known + others)
        table.append(row)
        if known + others > alloc_mib:
            pods_txt = ", ".join(
                f"{e['pod']} ({e['vm_mib']} MiB VM + {_f(e['overhead_mib'])} MiB overhead)"
                for e in entries if e.get("vm_mib") is not None)
            over.append(f"node {node}: Kata VMs + overhead {_f(known)} MiB + other pods' "
                        f"requests {_f(others)} MiB = {_f(known + others)} MiB > allocatable "
                        f"{_f(alloc_mib)} MiB; Kata pods: {pods_txt}")
        elif unknown:
            undecided.append(f"{node}: cannot size {', '.join(unknown)}")
    if over:
        return failed("; ".join(over), "Reschedule or shrink these Kata pods (a VM is "
                      "default_memory + limits, and the RuntimeClass overhead comes on top): "
                      + "; ".join(over), nodes=table)
    if bad or node_errors:
        return errored("cannot read: " + "; ".join(bad + node_errors), UNREADABLE
                       .replace("these pods' resources", "these pods' resources or nodes' "
                                "allocatable memory"), nodes=table)
    if undecided:
        return skipped("cannot decide: " + "; ".join(undecided), nodes=table)
    fit = ", ".join(f"{r['node']} {_f(r['sum_mib'])}/{_f(r['allocatable_mib'])} MiB"
                    for r in table)
    return passed(f"every node's Kata VMs fit its allocatable memory: {fit}", nodes=table)
