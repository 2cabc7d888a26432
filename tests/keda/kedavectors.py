"""Hand-made verdict vectors for the ``keda.*`` evaluators: each names an evidence record,
a profile, and the status (and words) each check must give. Shared by the check tests and
the mutation test (a mutant evaluator must contradict at least one vector)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kedasynth import pod, synth, uniform

from kgc.layers.keda.evidence import (
    ClockOffset,
    KedaEvidence,
    PodRecord,
    Preflight,
    Repetition,
    ScalingConfig,
    Stall,
    Stamp,
)
from kgc.layers.keda.profile import KedaBudgets, KedaProfile


@dataclass(frozen=True)
class Vector:
    name: str
    evidence: Any
    profile: Any
    expect: Mapping[str, str]  # check id -> status
    words: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # id -> in reason
    fix: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # id -> in remediation
    exact: Mapping[str, str] = field(default_factory=dict)  # id -> the whole reason


def mismatch(reg: Any, v: Vector) -> list[str]:
    """How the checks of registry ``reg`` contradict vector ``v`` (empty: they agree)."""
    out = []
    for cid, want in v.expect.items():
        got = reg.get(cid).judge(v.evidence, v.profile, "cluster")
        if str(got.status) != want:
            out.append(f"{cid}: {got.status} != {want} ({got.reason})")
            continue
        if cid in v.exact and got.reason != v.exact[cid]:
            out.append(f"{cid}: reason {got.reason!r} != {v.exact[cid]!r}")
        for w in v.words.get(cid, ()):
            if w not in got.reason:
                out.append(f"{cid}: {w!r} not in reason {got.reason!r}")
        for w in v.fix.get(cid, ()):
            if w not in got.remediation:
                out.append(f"{cid}: {w!r} not in remediation {got.remediation!r}")
    return out


def prof(**budgets: Any) -> KedaProfile:
    top = {k: budgets.pop(k) for k in ("compare_baseline", "polling_interval_s")
           if k in budgets}
    return KedaProfile(budgets=KedaBudgets(**budgets), **top)


# binary-exact durations: sums are exact, so boundaries are exact
EXACT = {"decision": 1.0, "creation": 0.25, "scheduling": 0.25, "sandbox": 0.25,
         "start": 0.125, "ready": 0.125}  # e2e 2.0, startup 0.75


def exact(**over: float) -> dict:
    return {**EXACT, **over}


def good() -> KedaEvidence:
    return synth({"kata": uniform(3, 3, sandbox=1.0), "baseline": uniform(3, 3, sandbox=0.5)})


def _with(ev: KedaEvidence, **kw: Any) -> KedaEvidence:
    return dataclasses.replace(ev, **kw)


def _kata_reps(ev: KedaEvidence, fn: Callable[[Repetition], Repetition]) -> KedaEvidence:
    assert ev.kata is not None
    return _with(ev, kata=dataclasses.replace(ev.kata, repetitions=tuple(
        fn(r) for r in ev.kata.repetitions)))


def _lag_evidence(lag: float) -> KedaEvidence:
    """One kata pod whose 'ready' API timestamp lies ``lag`` s before its receipt."""
    ev = synth({"kata": [[exact()]], "baseline": [[exact()]]},
               clock=ClockOffset(0.0, 0.25, 10, "test"))

    def fix(rep: Repetition) -> Repetition:
        p = rep.pods[0]
        api = {m: float(int(s.wall)) for m, s in p.observed.items()}  # lag in [0, 1)
        api["ready"] = p.observed["ready"].wall - lag
        return dataclasses.replace(rep, pods=(dataclasses.replace(p, api=api),))

    return _kata_reps(ev, fix)


def _sandbox_missing(all_pods: bool) -> KedaEvidence:
    ev = synth({"kata": [[pod(sandbox=None), pod(sandbox=None if all_pods else 2.0)]],
                "baseline": uniform(1, 2)})
    return ev


def _stall_trigger() -> KedaEvidence:
    ev = good()
    return _kata_reps(ev, lambda r: dataclasses.replace(
        r, trigger=None, stalls=(Stall("trigger", 60, 60, "metrics endpoint not ready"),))
        if r.index == 2 else r)


def _scale_down(kind: str) -> KedaEvidence:
    ev = good()
    if kind == "stalled":
        return _kata_reps(ev, lambda r: dataclasses.replace(
            r, scaled_down=None, stalls=(Stall("scale-down", 45, 45, "2 pods left"),)))
    return _kata_reps(ev, lambda r: dataclasses.replace(r, scaled_down=None)
                      if r.index == 3 else r)


def _exact_e2e(k: float = 1.0) -> KedaEvidence:
    return synth({"kata": [[exact(), exact()]], "baseline": [[exact(sandbox=0.25 * k)] * 2]})


def _hpa_heavy() -> KedaEvidence:
    # the first pod comes after 1 s (KEDA), pods 2..3 after 9 s (HPA)
    return synth({"kata": [[exact(), exact(decision=9.0), exact(decision=9.0)]],
                  "baseline": [[exact(), exact(decision=9.0), exact(decision=9.0)]]})


def _polling(ev: KedaEvidence, polling: float | None) -> KedaEvidence:
    assert ev.kata is not None
    cfg = dataclasses.replace(ev.kata.config, polling_interval_s=polling)
    return _with(ev, kata=dataclasses.replace(ev.kata, config=cfg))


def _no_replica_signal() -> KedaEvidence:
    ev = good()
    return _kata_reps(ev, lambda r: dataclasses.replace(r, scale=(), active=None))


def _no_e2e() -> KedaEvidence:
    ev = good()
    return _kata_reps(ev, lambda r: dataclasses.replace(r, trigger=None))


def _one_invalid_e2e() -> KedaEvidence:
    ev = good()

    def fix(rep: Repetition) -> Repetition:
        if rep.index != 1:
            return rep
        p = rep.pods[0]
        obs = dict(p.observed)
        obs["ready"] = Stamp(rep.trigger.mono - 1.0, rep.trigger.wall - 1.0)  # type: ignore
        return dataclasses.replace(rep, pods=(PodRecord(p.name, obs),) + rep.pods[1:])

    return _kata_reps(ev, fix)


def _config(ev: KedaEvidence, cfg: ScalingConfig) -> KedaEvidence:
    assert ev.kata is not None
    return _with(ev, kata=dataclasses.replace(ev.kata, config=cfg))


def _baseline_sandbox_unobserved() -> KedaEvidence:
    return synth({"kata": [[exact()]], "baseline": [[exact(sandbox=None)]]})


NOT_RUN = KedaEvidence("not-run", "recorded without the cluster layers")
DRIVER_ERROR = KedaEvidence("error", "apiserver unreachable: connection refused")
PREFLIGHT_KEDA = KedaEvidence("preflight-failed", "",
                              Preflight(False, None, ("CRD scaledobjects.keda.sh",), None))
PREFLIGHT_RC = KedaEvidence("preflight-failed", "",
                            Preflight(True, "2.21.0", ("RuntimeClass kata",), True))
PREFLIGHT_OP = KedaEvidence("preflight-failed", "", Preflight(True, "2.21.0", (), False))
PREFLIGHT_CRD = KedaEvidence("preflight-failed", "", Preflight(
    None, None, ("CRD scaledjobs", "scaledobjects.keda.sh", "Deployment keda-operator"), None))
PREFLIGHT_SILENT = KedaEvidence("preflight-failed", "", Preflight())
NO_KATA = KedaEvidence("done", "", Preflight(True, "2.21", (), True))

MEASURING = ("keda.scale-up-completes", "keda.scale-down-completes", "keda.e2e-p95",
             "keda.phase-budgets", "keda.kata-overhead", "keda.scaling-config",
             "keda.watch-precision", "keda.baseline-budgets")


def _all(status: str, ids: tuple[str, ...] = MEASURING) -> dict[str, str]:
    return {i: status for i in ids}


D = KedaProfile()  # defaults: e2e 60 s, sandbox 10 s, ratio 1.5 on e2e p50

VECTORS: list[Vector] = [
    Vector("good", good(), D, {
        "keda.preflight": "pass", "keda.scale-up-completes": "pass",
        "keda.scale-down-completes": "pass", "keda.e2e-p95": "pass",
        "keda.phase-budgets": "pass", "keda.kata-overhead": "pass",
        "keda.scaling-config": "pass", "keda.watch-precision": "pass",
        "keda.baseline-budgets": "skip"},
        words={"keda.e2e-p95": ("end-to-end p95 2.37 s <= 60 s budget", "runc p95 1.87 s"),
               "keda.kata-overhead": ("Kata adds the most in sandbox ready (+0.5 s",)}),
    Vector("not run", NOT_RUN, D, {"keda.preflight": "skip", **_all("skip")},
           words={"keda.e2e-p95": ("recorded without the cluster layers",)}),
    Vector("driver error", DRIVER_ERROR, D, {"keda.preflight": "error", **_all("error")},
           words={"keda.e2e-p95": ("apiserver unreachable",)}),
    Vector("not evidence", {"status": "done"}, D, {"keda.preflight": "error",
                                                   **_all("error")}),
    Vector("no kata run", NO_KATA, D, {"keda.preflight": "pass", **_all("error")}),
    # in memory only (a bundle refuses target_replicas 0): nothing asked for, nothing passes
    Vector("no pod asked", synth({"kata": [[]], "baseline": [[]]}), D,
           {"keda.preflight": "pass", **_all("error")},
           words={"keda.scale-up-completes": ("no Kata repetition asked for a pod",)}),
    Vector("keda missing", PREFLIGHT_KEDA, D, {"keda.preflight": "fail", **_all("skip")},
           words={"keda.preflight": ("KEDA is not installed (CRD scaledobjects.keda.sh",),
                  "keda.e2e-p95": ("preflight failed",)},
           fix={"keda.preflight": ("helm install keda",)}),
    Vector("runtimeclass missing", PREFLIGHT_RC, D, {"keda.preflight": "fail"},
           exact={"keda.preflight": "RuntimeClass kata missing"},
           fix={"keda.preflight": ("RuntimeClass",)}),
    Vector("operator not ready", PREFLIGHT_OP, D, {"keda.preflight": "fail"},
           exact={"keda.preflight": "the KEDA operator is not Ready"}),
    Vector("crds and more missing", PREFLIGHT_CRD, D, {"keda.preflight": "fail"},
           exact={"keda.preflight": "KEDA is not installed (CRD scaledjobs, scaledobjects.keda.sh "
                                    "missing); Deployment keda-operator missing"}),
    Vector("preflight silent", PREFLIGHT_SILENT, D, {"keda.preflight": "error"}),
    Vector("preflight not recorded", _with(good(), preflight=Preflight()), D,
           {"keda.preflight": "skip", "keda.e2e-p95": "pass"}),
    # --- stalls
    Vector("sandbox stall", synth({"kata": [[pod(), pod(sandbox=None, start=None, ready=None,
                                                        stall=True)]],
                                   "baseline": uniform(1, 2)}), D,
           {"keda.scale-up-completes": "fail", "keda.e2e-p95": "fail",
            "keda.phase-budgets": "fail"},
           exact={"keda.scale-up-completes": (
               "1 of 4 pods never became Ready within the 300 s wait -- stalled in sandbox "
               "ready (1): kata r1 #2 kata-1-2 on node-a, waited 300 s: never ready")},
           words={"keda.e2e-p95": ("never became Ready",)},
           fix={"keda.scale-up-completes": ("FailedCreatePodSandBox",)}),
    Vector("the recorded wait, not the judging profile's", synth(
        {"kata": [[pod(), pod(sandbox=None, stall=True)]]}, stall_wait=20.0),
        prof(compare_baseline=False), {"keda.scale-up-completes": "fail"},
        words={"keda.scale-up-completes": ("1 of 2 pods never became Ready within the 20 s "
                                           "wait",)}),
    Vector("never scaled", synth({"kata": [[pod()]], "baseline": uniform(1, 1)}, k=3), D,
           {"keda.scale-up-completes": "fail", "keda.e2e-p95": "fail"},
           exact={"keda.scale-up-completes": (
               "4 of 6 pods never became Ready within the 300 s wait -- stalled in decision "
               "(4): kata r1 #2 (never created); kata r1 #3 (never created); and 2 more")},
           fix={"keda.scale-up-completes": ("KEDAScalerFailed",)}),
    Vector("trigger stall", _stall_trigger(), D, {"keda.scale-up-completes": "error"},
           exact={"keda.scale-up-completes": "the run could not raise its metrics-api trigger: "
                                             "kata repetition 2: metrics endpoint not ready"}),
    Vector("trigger unrecorded", _kata_reps(good(), lambda r: dataclasses.replace(
        r, trigger=None)), D, {"keda.scale-up-completes": "error", "keda.e2e-p95": "error"},
        words={"keda.scale-up-completes": ("no trigger time recorded",)}),
    Vector("scale-down stalled", _scale_down("stalled"), D,
           {"keda.scale-down-completes": "fail"},
           words={"keda.scale-down-completes": ("2 pods left", "cooldownPeriod 10 s",
                                                "never completed within the 45 s wait")}),
    Vector("scale-down unrecorded", _scale_down("missing"), D,
           {"keda.scale-down-completes": "skip"},
           words={"keda.scale-down-completes": ("kata r3",)}),
    # --- end to end budget, at and past the boundary (e2e exactly 2.0 s)
    Vector("e2e at budget", _exact_e2e(), prof(e2e_p95_s=2.0), {"keda.e2e-p95": "pass"}),
    Vector("e2e over budget", _exact_e2e(), prof(e2e_p95_s=1.875),
           {"keda.e2e-p95": "fail"},
           words={"keda.e2e-p95": ("end-to-end p95 2 s > 1.88 s budget",
                                   "most time goes to decision")},
           fix={"keda.e2e-p95": ("pollingInterval",)}),
    Vector("e2e over, phase named", synth({"kata": uniform(2, 2, sandbox=7.9),
                                           "baseline": uniform(2, 2)}),
           prof(e2e_p95_s=5.0, phase_p95_s={"sandbox": 5.0}),
           {"keda.e2e-p95": "fail", "keda.phase-budgets": "fail"},
           words={"keda.e2e-p95": ("sandbox ready p95 7.9 s > 5 s budget; everything else "
                                   "within budget",),
                  "keda.phase-budgets": ("sandbox ready p95 7.9 s > 5 s budget; everything "
                                         "else within budget",)},
           fix={"keda.e2e-p95": ("microVM boot",), "keda.phase-budgets": ("microVM boot",)}),
    Vector("no e2e sample", _no_e2e(), D, {"keda.e2e-p95": "error"}),
    Vector("invalid e2e sample", _one_invalid_e2e(), D, {"keda.e2e-p95": "error"},
           words={"keda.e2e-p95": ("1 of 9 end-to-end samples",)}),
    # --- phase budgets
    Vector("phase at budget", _exact_e2e(), prof(phase_p95_s={"sandbox": 0.25}),
           {"keda.phase-budgets": "pass"}),
    Vector("phase over budget", _exact_e2e(), prof(phase_p95_s={"sandbox": 0.125,
                                                                "scheduling": 1.0}),
           {"keda.phase-budgets": "fail"},
           words={"keda.phase-budgets": ("sandbox ready p95 0.25 s > 0.125 s budget; "
                                         "everything else within budget",)}),
    Vector("no phase budget", good(), prof(phase_p95_s={}), {"keda.phase-budgets": "skip"}),
    Vector("sandbox never observed", _sandbox_missing(True), D,
           {"keda.phase-budgets": "skip", "keda.e2e-p95": "pass"},
           words={"keda.phase-budgets": ("sandbox ready: not measured on any pod",
                                         "PodReadyToStartContainers")}),
    Vector("sandbox partly observed", _sandbox_missing(False), D,
           {"keda.phase-budgets": "skip"},
           words={"keda.phase-budgets": ("sandbox ready: 1 of 2 pods lack it",)}),
    Vector("over and unjudged", _sandbox_missing(False),
           prof(phase_p95_s={"sandbox": 10.0, "decision": 0.5}),
           {"keda.phase-budgets": "fail"},
           words={"keda.phase-budgets": ("decision p95 1 s > 0.5 s budget; sandbox ready: 1 "
                                         "of 2 pods lack it",)}),
    # --- Kata / baseline ratio, at and past the boundary (kata e2e 2.0 / runc 1.75)
    Vector("ratio at budget", synth({"kata": [[exact()]], "baseline": [[exact(decision=0.75)]]}),
           prof(ratio_max=2.0 / 1.75), {"keda.kata-overhead": "pass"}),
    Vector("ratio over budget", synth({"kata": [[exact()]],
                                       "baseline": [[exact(decision=0.75)]]}),
           prof(ratio_max=1.125), {"keda.kata-overhead": "fail"},
           words={"keda.kata-overhead": ("end to end p50 kata 2 s / runc 1.75 s = 1.14x > "
                                         "1.12x budget", "adds the most in decision")},
           fix={"keda.kata-overhead": ("pollingInterval",)}),
    Vector("phase ratio over", good(), prof(phase_ratio_max={"sandbox": 1.5}),
           {"keda.kata-overhead": "fail"},
           words={"keda.kata-overhead": ("sandbox ready p50 kata 1 s / runc 0.5 s = 2.00x > "
                                         "1.5x budget",)}),
    Vector("no baseline compare", good(), prof(compare_baseline=False),
           {"keda.kata-overhead": "skip", "keda.baseline-budgets": "skip"},
           words={"keda.baseline-budgets": ("compare_baseline: false",)}),
    # --- the baseline's own budgets (exact: startup 0.75 = scheduling 0.25 + sandbox 0.25
    # + start 0.125 + ready 0.125; e2e 2.0)
    Vector("no baseline budget", good(), D, {"keda.baseline-budgets": "skip"},
           words={"keda.baseline-budgets": ("budgets.baseline_p95_s",)}),
    Vector("baseline at budget", synth({"kata": [[exact()]], "baseline": [[exact()]]}),
           prof(baseline_p95_s={"startup": 0.75, "sandbox": 0.25}),
           {"keda.baseline-budgets": "pass"},
           words={"keda.baseline-budgets": ("runc on node-a: every budgeted measure",
                                            "pod startup p95 0.75 s (p50 0.75 s, n=1)")}),
    Vector("baseline startup over budget", synth({"kata": [[exact()]],
                                                  "baseline": [[exact(sandbox=0.5)]]}),
           prof(baseline_p95_s={"startup": 0.875, "e2e": 5.0}),
           {"keda.baseline-budgets": "fail"},
           exact={"keda.baseline-budgets": "runc on node-a: pod startup p95 1 s > 0.875 s "
                                           "budget; everything else within budget"},
           fix={"keda.baseline-budgets": ("Most of pod startup is sandbox ready (p50 0.5 s)",
                                          "Sandbox creation")}),
    Vector("baseline e2e over budget", synth({"kata": [[exact()]],
                                              "baseline": [[exact(decision=3.0)]]}),
           prof(baseline_p95_s={"e2e": 2.0}), {"keda.baseline-budgets": "fail"},
           words={"keda.baseline-budgets": ("end to end p95 4 s > 2 s budget",)},
           fix={"keda.baseline-budgets": ("Most of end to end is decision (p50 3 s)",)}),
    Vector("baseline phase over budget", _exact_e2e(), prof(baseline_p95_s={"start": 0.0625}),
           {"keda.baseline-budgets": "fail"},
           words={"keda.baseline-budgets": ("containers started p95 0.125 s > 0.0625 s",)},
           fix={"keda.baseline-budgets": ("pre-pull the image",)}),
    Vector("baseline stalled", synth({"kata": uniform(1, 2), "baseline": [[
        pod(sandbox=None, start=None, ready=None, stall=True)] * 2]}),
           prof(baseline_p95_s={"startup": 5.0}), {"keda.baseline-budgets": "fail"},
           words={"keda.baseline-budgets": ("pod startup p95 > 300 s (stalled) > 5 s",)}),
    Vector("baseline budget, baseline not measured", _with(good(), baseline=None),
           prof(baseline_p95_s={"startup": 5.0}), {"keda.baseline-budgets": "error"}),
    Vector("baseline sandbox unobserved, budgeted", _baseline_sandbox_unobserved(),
           prof(baseline_p95_s={"sandbox": 5.0}), {"keda.baseline-budgets": "skip"},
           words={"keda.baseline-budgets": ("cannot judge sandbox ready",)}),
    Vector("baseline not measured", _with(good(), baseline=None), D,
           {"keda.kata-overhead": "error", "keda.e2e-p95": "pass"}),
    Vector("ratio report only", good(), prof(ratio_max=None),
           {"keda.kata-overhead": "skip"}, words={"keda.kata-overhead": ("sandbox ready 2.00x",)}),
    Vector("ratio undefined", synth({"kata": [[exact()]], "baseline": [[exact(sandbox=0.0)]]}),
           prof(ratio_max=None, phase_ratio_max={"sandbox": 2.0}),
           {"keda.kata-overhead": "skip"},
           words={"keda.kata-overhead": ("ratio undefined", "0 s")}),
    Vector("baseline sandbox unobserved", _baseline_sandbox_unobserved(),
           prof(ratio_max=None, phase_ratio_max={"sandbox": 2.0}),
           {"keda.kata-overhead": "skip"},
           exact={"keda.kata-overhead": "cannot judge sandbox ready: ratio undefined (the "
                                        "baseline has no sandbox ready sample)"}),
    Vector("no extra Kata cost", synth({"kata": [[exact()]], "baseline": [[exact()]]}), D,
           {"keda.kata-overhead": "pass"}, words={"keda.kata-overhead": ("= 1.00x <= 1.5x",)}),
    # --- configuration dominance (decision 1.0 of e2e 2.0 = exactly 50 %)
    Vector("decision half", _exact_e2e(), prof(decision_dominance=0.5),
           {"keda.scaling-config": "warn"},
           words={"keda.scaling-config": ("decision p50 1 s is 50% of end-to-end p50 2 s",
                                          "pollingInterval 5 s")},
           fix={"keda.scaling-config": ("Lower the ScaledObject's pollingInterval (now 5 s",)}),
    Vector("decision below", _exact_e2e(), prof(decision_dominance=0.625),
           {"keda.scaling-config": "pass"},
           words={"keda.scaling-config": ("the runtime, not the configuration",)}),
    Vector("hpa dominates", _hpa_heavy(), D, {"keda.scaling-config": "warn"},
           fix={"keda.scaling-config": ("--horizontal-pod-autoscaler-sync-period (now 5 s)",)}),
    Vector("polling at budget", _polling(_exact_e2e(), 60.0), D,
           {"keda.scaling-config": "warn"},
           words={"keda.scaling-config": ("the configuration, not the runtime, dominates "
                                          "scale-up latency",
                                          "pollingInterval alone (60 s) can use up",)},
           fix={"keda.scaling-config": ("now 60 s",)}),
    # the polling cap alone: decision 11 % of end to end, pollingInterval 5 s >= 5 s budget
    Vector("polling cap only", synth({"kata": uniform(2, 2, sandbox=7.9),
                                      "baseline": uniform(2, 2)}), prof(e2e_p95_s=5.0),
           {"keda.scaling-config": "warn"},
           words={"keda.scaling-config": ("the configuration alone can use up the end-to-end "
                                          "budget: decision p50 1 s is 11% of end-to-end",)}),
    Vector("zero end to end", synth({"kata": [[pod(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)]]}),
           prof(compare_baseline=False), {"keda.scaling-config": "skip"},
           words={"keda.scaling-config": ("end-to-end p50 is 0 s (below the watch "
                                          "resolution)",)}),
    Vector("polling under budget", _polling(_exact_e2e(), 59.0), prof(decision_dominance=0.75),
           {"keda.scaling-config": "pass"}),
    Vector("polling unknown", _polling(_exact_e2e(), None), D,
           {"keda.scaling-config": "warn"},
           words={"keda.scaling-config": ("pollingInterval not visible",)},
           fix={"keda.scaling-config": ("not visible, 30 s by default",)}),
    Vector("config not visible", _config(_exact_e2e(), ScalingConfig()),
           prof(decision_dominance=0.75), {"keda.scaling-config": "pass"},
           words={"keda.scaling-config": (
               "; pollingInterval not visible (KEDA default 30 s), cooldownPeriod not visible "
               "(KEDA default 300 s), HPA sync period not visible (Kubernetes default 15 s "
               "assumed; cluster.keda.hpa_sync_period_s states it)",)},
           exact={}),
    Vector("config visible", _config(_exact_e2e(), ScalingConfig(
        polling_interval_s=10, cooldown_period_s=20, min_replica_count=0, hpa_sync_period_s=15,
        hpa_sync_source="kube-controller-manager flag",
        hpa_behavior={"scaleUp": {"stabilizationWindowSeconds": 0}})),
        prof(decision_dominance=0.75), {"keda.scaling-config": "pass"},
        words={"keda.scaling-config": (
            "; pollingInterval 10 s, cooldownPeriod 20 s, HPA sync period 15 s "
            "(kube-controller-manager flag), minReplicaCount 0, HPA scaleUp "
            "stabilizationWindowSeconds 0",)}),
    Vector("config without window", _config(_exact_e2e(), ScalingConfig(
        polling_interval_s=10, hpa_behavior={"scaleUp": {"policies": []}})),
        prof(decision_dominance=0.75), {"keda.scaling-config": "pass"},
        words={"keda.scaling-config": ("HPA sync period not visible (Kubernetes default 15 s "
                                       "assumed",)},
        exact={}),
    Vector("no replica signal", _no_replica_signal(), D, {"keda.scaling-config": "skip"},
           words={"keda.scaling-config": ("the decision phase was not measured",)}),
    Vector("every pod stalled", synth({"kata": [[pod(sandbox=None, stall=True)] * 3]}),
           prof(compare_baseline=False), {"keda.scaling-config": "skip"},
           words={"keda.scaling-config": ("end-to-end p50 is censored",
                                          "3 of 3 pods never became Ready")}),
    # --- watch precision: allowed lag [-0.5, 1.5] s (offset ± 0.25, tolerance 0.25)
    Vector("lag at upper bound", _lag_evidence(1.5), prof(watch_lag_tolerance_s=0.25),
           {"keda.watch-precision": "pass"}),
    Vector("lag past upper bound", _lag_evidence(1.625), prof(watch_lag_tolerance_s=0.25),
           {"keda.watch-precision": "warn"},
           words={"keda.watch-precision": ("received more than 1.50 s after",
                                           "ready +1.62 s")}),
    Vector("lag at lower bound", _lag_evidence(-0.5), prof(watch_lag_tolerance_s=0.25),
           {"keda.watch-precision": "pass"}),
    Vector("lag past lower bound", _lag_evidence(-0.625), prof(watch_lag_tolerance_s=0.25),
           {"keda.watch-precision": "warn"},
           words={"keda.watch-precision": ("before the API's timestamp",)}),
    Vector("no clock", synth({"kata": [[pod()]], "baseline": [[pod()]]}, clock=None), D,
           {"keda.watch-precision": "skip"}),
    Vector("no api stamps", _kata_reps(synth({"kata": [[pod()]]}), lambda r: dataclasses.replace(
        r, pods=tuple(dataclasses.replace(p, api={}) for p in r.pods))),
        prof(compare_baseline=False), {"keda.watch-precision": "skip"}),
]

