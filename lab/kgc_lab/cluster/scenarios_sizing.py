"""The cluster lab's sizing scenarios (``kgc lab run --scenario NAME``), each with its
documented verdicts:

==============  ===============================================================================
sizing-good     Two well-sized Kata pods (limits = requests). Every ``sizing.*`` check passes;
                the shapes report recorded real guests of the predicted size (simulated).
overcommit      Three Kata pods of 80Gi on ``kgc-cpu-0``: the scheduler fits them (3 x (80Gi
                + 320Mi overhead) < 256Gi) but Kata's VMs (8192 MiB default + 80 GiB each)
                do not -> ``sizing.node-overcommit`` fails naming the node, the pods, the table.
no-limits       Two Kata pods with requests only: their VMs get the default size whatever
                the scheduler reserved -> ``sizing.starved-pods`` warns naming them.
==============  ===============================================================================

A scenario brings the cluster lab up (its own run directory, without KEDA), creates its
workload pods in a labelled namespace (as the lab's admin), judges the sizing layer exactly as
``pytest -m sizing --profile lab`` would, as the least-privilege ServiceAccount of
``deploy/rbac/kgc-certify.yaml`` (the lab profile: verdicts marked simulated), writes
``verdict.json`` and takes everything down. :func:`run_on` runs one against a lab that is
already up.

The guests the lab's shape pods report are chosen by :mod:`kgc_lab.cluster.sim_sizing` from
a table of the VM sizes Kata gives each lab shape, worked out by hand, never from kgc's own
sizing model: so ``sizing.vm-matches-limits`` in these scenarios judges the model, and a
wrong model fails ``sizing-good``. :func:`offline_shapes` is the same shape-pod path without
a cluster (plan, the lab's answer, observe), for fast tests of exactly that.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgc_lab.scenarios import (
    LabScenario,
    ScenarioOutcome,
    register_scenarios,
    write_scenario_verdict,
)

LAB = "cluster"
WORKLOAD_LABEL = "kgc.io/lab-workload"  # not the run label: these pods ARE the workload
WORKLOAD_PREFIX = "kgc-lab-"
CPU_NODE = "kgc-cpu-0"


def _pod(name: str, rc: str, *, limits: Mapping[str, str] | None = None,
         requests: Mapping[str, str] | None = None, node: str | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if limits:
        res["limits"] = dict(limits)
    if requests:
        res["requests"] = dict(requests)
    spec: dict[str, Any] = {
        "runtimeClassName": rc,
        "containers": [{"name": "app", "image": "busybox:1.36",
                        "command": ["sleep", "infinity"], "resources": res}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _good(rc: str) -> list[dict[str, Any]]:
    lim = {"cpu": "1", "memory": "2Gi"}
    return [_pod(f"web-{i}", rc, limits=lim, requests=lim) for i in range(2)]


def _overcommit(rc: str) -> list[dict[str, Any]]:
    lim = {"cpu": "4", "memory": "80Gi"}
    return [_pod(f"train-{i}", rc, limits=lim, requests=lim, node=CPU_NODE) for i in range(3)]


def _no_limits(rc: str) -> list[dict[str, Any]]:
    req = {"cpu": "2", "memory": "4Gi"}
    return [_pod(f"batch-{i}", rc, requests=req) for i in range(2)]


@dataclass(frozen=True)
class SizingScenario:
    name: str
    description: str
    workload: Callable[[str], list[dict[str, Any]]]
    expected: Mapping[str, str]
    # substrings the reason must carry, per check
    reasons: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


_ALL_PASS = {"sizing.kata-config": "pass", "sizing.vm-matches-limits": "pass",
             "sizing.starved-pods": "pass", "sizing.node-overcommit": "pass"}

SCENARIOS: dict[str, SizingScenario] = {s.name: s for s in (
    SizingScenario(
        "sizing-good",
        "two well-sized Kata pods (limits = requests); every pod shape's simulated guest is a "
        "recorded real QEMU guest of the predicted size: every sizing check passes (simulated)",
        _good, _ALL_PASS,
        {"sizing.vm-matches-limits": ("one-container", "expected 3 vCPU / 10240 MiB",
                                      "found 3 / ", "simulated"),
         "sizing.kata-config": ("from profile",)},
    ),
    SizingScenario(
        "overcommit",
        f"three Kata pods of cpu 4 / 80Gi on {CPU_NODE}: the scheduler fits them, Kata's VMs "
        "(8192 MiB default + 80 GiB each, + 320Mi overhead) exceed its 256Gi allocatable: "
        "sizing.node-overcommit fails naming the node and the pods",
        _overcommit, {**_ALL_PASS, "sizing.node-overcommit": "fail"},
        {"sizing.node-overcommit": (f"node {CPU_NODE}", "train-0", "train-1", "train-2",
                                    "90112 MiB VM", "> allocatable 262144 MiB")},
    ),
    SizingScenario(
        "no-limits",
        "two Kata pods with requests only (cpu 2, memory 4Gi, no limits): their VMs get the "
        "default size whatever the scheduler reserved: sizing.starved-pods warns naming them",
        _no_limits, {**_ALL_PASS, "sizing.starved-pods": "warn"},
        {"sizing.starved-pods": ("batch-0", "batch-1", "cpu request 2 without a limit",
                                 "its VM gets 1 vCPU for 2 requested")},
    ),
)}


# the checks whose verdicts rest on the lab's kwok pods or nodes (the Kata configurations
# the lab profile names, and the pods' specs, are no stand-in's)
RESTS_ON_PODS = ("sizing.vm-matches-limits", "sizing.node-overcommit")
OFFLINE_NODE = "kgc-gpu-0"  # a kwok node of the lab: what makes the shapes simulated


def offline_shapes(profile: Any = None) -> Any:
    """The sizing evidence of the profile's shape pods as the lab answers them, without a
    cluster: each pod planned as the layer plans it (:func:`kgc.layers.sizing.collect.plan`),
    answered by the lab's simulator (:func:`kgc_lab.cluster.sim_sizing.decide`: a recorded
    guest of the size worked out by hand), observed as the layer observes it, with the
    Kata configurations the profile names. No cluster objects: the static checks skip."""
    from types import SimpleNamespace

    from kgc.core.profile import load_profile, profiles_dir
    from kgc.layers.sizing.checks import sizing_profile
    from kgc.layers.sizing.collect import NODE_NOT_READ, observe, plan
    from kgc.layers.sizing.evidence import (
        SOURCE_NONE,
        KataConfigSource,
        SizingEvidence,
        resolve_config,
    )
    from kgc_lab.cluster import sim_sizing

    prof = profile or load_profile(profiles_dir() / "lab.yaml")
    sp = sizing_profile(prof)
    plans, _ = plan(None, sp, prof.cluster, namespace="kgc-offline", labels={})
    shapes = []
    for p in plans:
        c = sim_sizing.decide(p.manifest)
        pod = {**p.manifest, "spec": {**p.manifest["spec"], "nodeName": OFFLINE_NODE},
               "status": {"phase": "Succeeded" if c.exit_code == 0 else "Failed"}}
        outcome = SimpleNamespace(pod=pod, create_error=None, log=c.text, events=(),
                                  timed_out=False, waited_s=0.0, settled=None, log_error=None)
        shapes.append(observe(p, outcome, {OFFLINE_NODE: {"metadata": {
            "name": OFFLINE_NODE, "annotations": {"kwok.x-k8s.io/node": "fake"}}}}))
    configs = {rc: resolve_config(rc, node=KataConfigSource(rc, SOURCE_NONE, "",
                                                            tried=(NODE_NOT_READ,)),
                                  profile_entry=sp.kata.get(rc), probe=None)
               for rc in sorted({p.runtime_class for p in plans})}
    return SizingEvidence(configs=configs, shapes=tuple(shapes))


def mismatches(sc: SizingScenario, verdicts: list[Any]) -> dict[str, str]:
    got = {v.check: v for v in verdicts}
    out: dict[str, str] = {}
    for cid, want in sc.expected.items():
        v = got.get(cid)
        if v is None:
            out[cid] = "no verdict"
        elif str(v.status) != want:
            out[cid] = f"expected {want}, got {v.status}: {v.reason}"
        elif not v.simulated and cid in RESTS_ON_PODS and want == "pass":
            out[cid] = "the verdict is not marked simulated"
    for cid, subs in sc.reasons.items():
        v = got.get(cid)
        missing = [s for s in subs if v is None or s not in v.reason]
        if missing:
            out[f"{cid} reason"] = f"lacks {missing}: {v.reason if v else '(none)'}"
    return out


def certify_kubeconfig(admin_kubeconfig: Path, run_dir: Path, server: str) -> Path:
    """The kubeconfig of the least-privilege ServiceAccount (deploy/rbac/kgc-certify.yaml),
    applied to the lab first: the layer is judged as a user's certification run would be."""
    from kgc import kube
    from kgc_lab.cluster import rbac

    admin = kube.connect(admin_kubeconfig)
    try:
        rbac.apply_certify_rbac(admin)
        sa = rbac.certify_kubeconfig(admin, server, Path(run_dir) / "pki" / "ca.crt",
                                     Path(run_dir) / "kubeconfig-kgc-certify")
        rbac.wait_policy_enforced(kube.connect(sa))
    finally:
        admin.close()
    return sa


def run_on(sc: SizingScenario, kubeconfig: Path, report_dir: Path,
           profile: Any = None, keep: bool = False,
           judge_kubeconfig: Path | None = None) -> tuple[ScenarioOutcome, list[Any]]:
    """Run ``sc`` against a lab that is up: its admin ``kubeconfig`` arranges the workload,
    ``judge_kubeconfig`` (default: the same) is what the layer is judged with; returns the
    outcome and the verdicts."""
    from kgc import kube
    from kgc.core.engine import Context
    from kgc.core.profile import load_profile, profiles_dir
    from kgc.core.registry import load_layers
    from kgc.core.target import ClusterTarget

    prof = profile or load_profile(profiles_dir() / "lab.yaml")
    rc = prof.cluster.sizing.runtime_class
    k = kube.connect(kubeconfig)
    t0 = time.monotonic()
    try:
        with kube.Run(k, prefix=WORKLOAD_PREFIX, label_key=WORKLOAD_LABEL, keep=keep,
                      teardown_wait_s=120) as wl:
            pods = sc.workload(rc)
            for p in pods:
                wl.create(p)
            kube.wait_for_pods(k, wl.namespace, kube.pod_phase("Running"), 120,
                               count=len(pods))
            ctx = Context(ClusterTarget(str(judge_kubeconfig or kubeconfig)), prof,
                          load_layers(), options={})
            verdicts = ctx.judge_all(["sizing"])
            try:
                ev = ctx.evidence("sizing")
                walls = {o.shape: o.waited_s for o in ev.shapes or ()}
            except Exception:  # noqa: BLE001 - the verdicts already say what went wrong
                walls = {}
    finally:
        k.close()
    seconds = time.monotonic() - t0
    mm = mismatches(sc, verdicts)
    path = write_scenario_verdict(
        Path(report_dir) / "verdict.json", LAB, sc.name, sc.description,
        [v.to_dict() for v in verdicts], dict(sc.expected), mm, layers=("sizing",),
        seconds=round(seconds, 2), shape_pod_wall_s=walls,
        workload=[p["metadata"]["name"] for p in sc.workload(rc)])
    return ScenarioOutcome(sc.name, LAB, path, mm), verdicts


def render(sc: SizingScenario, verdicts: list[Any], mm: Mapping[str, str]) -> str:
    lines = [f"scenario {sc.name}: {sc.description}"]
    for v in verdicts:
        lines.append(f"  [{str(v.status).upper():5}] {v.check}: {v.reason}")
    lines.append("as documented" if not mm else "MISMATCH:\n  " + "\n  ".join(
        f"{k}: {m}" for k, m in mm.items()))
    return "\n".join(lines)


def _standalone(sc: SizingScenario) -> Callable[[Path, bool], ScenarioOutcome]:
    def run(report_dir: Path, keep: bool) -> ScenarioOutcome:
        from kgc_lab.cluster.lab import Lab, down

        run_dir = Path(tempfile.mkdtemp(prefix=f"kgc-lab-{sc.name}-"))
        lab = Lab(run_dir, keda=False)
        try:
            state = lab.up(say=lambda m: print(f"[{sc.name}] cluster lab: {m}", flush=True))
            admin = Path(state["kubeconfig"])
            sa = certify_kubeconfig(admin, run_dir, state["server"])
            out, verdicts = run_on(sc, admin, report_dir, keep=keep, judge_kubeconfig=sa)
            print(render(sc, verdicts, out.mismatches))
            return out
        finally:
            rep = down(run_dir)
            if not keep and not rep["left"] and not rep["listening"]:
                shutil.rmtree(run_dir, ignore_errors=True)

    return run


register_scenarios(*(LabScenario(s.name, LAB, s.description, _standalone(s))
                     for s in SCENARIOS.values()))

__all__ = ["SCENARIOS", "SizingScenario", "mismatches", "offline_shapes", "render", "run_on"]
