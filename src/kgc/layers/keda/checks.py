"""The ``keda.*`` checks: pure evaluators over :class:`KedaEvidence` and the profile.

Every evaluator takes ``(evidence, profile)`` where ``profile`` is the whole
:class:`kgc.core.profile.Profile` (its ``cluster.keda`` is used) or a
:class:`KedaProfile` itself. Missing evidence is never a pass: a run that was not made is
``skip`` with the reason, a run whose driver failed or whose record is unusable is
``error``, a stalled scale-up is ``fail`` naming the phase.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kgc.core.model import (
    Outcome,
    Registry,
    Severity,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from kgc.core.profile import layer_section
from kgc.layers.keda.evidence import ClassRun, KedaEvidence
from kgc.layers.keda.phases import (
    BOUNDS,
    CHAIN,
    MEASURES,
    PHASES,
    STALLED,
    TITLES,
    PodPhases,
    class_phases,
    receipt_lags,
    scale_downs,
)
from kgc.layers.keda.profile import KedaProfile
from kgc.layers.keda.stats import (
    ClassStats,
    Ratio,
    difference,
    fmt_num,
    fmt_s,
    ratios,
    stats_of,
)

CHECKS = Registry()

# Where the time of a phase goes and what shortens it.
PHASE_REMEDIATION: Mapping[str, str] = {
    "decision": (
        "The time goes to KEDA/HPA deciding to scale, not to the runtime: lower the "
        "ScaledObject's pollingInterval (KEDA looks at the trigger once per interval), keep "
        "warm replicas with minReplicaCount >= 1, or use a push trigger (external-push); for "
        "1->N lower the controller-manager's --horizontal-pod-autoscaler-sync-period and "
        "widen the HPA's scaleUp policy (advanced.horizontalPodAutoscalerConfig.behavior)."),
    "creation": (
        "The ReplicaSet controller is slow to create the pods: check kube-controller-manager "
        "load and its --kube-api-qps/--kube-api-burst, and the latency of admission webhooks "
        "on pod CREATE (it is counted in this phase)."),
    "scheduling": (
        "Pods wait for the scheduler: read the FailedScheduling events, the RuntimeClass's "
        "scheduling constraints and pod overhead, and the free GPUs/CPU on the nodes."),
    "sandbox": (
        "Sandbox creation -- for Kata the microVM boot -- is slow: size the VM down "
        "(default_memory, default_vcpus in the Kata configuration), use a smaller guest "
        "image/initrd, consider VM templating, and check the VFIO device reset time of "
        "passed-through GPUs; the evidence has the baseline's sandbox time to compare."),
    "start": (
        "Containers start late after the sandbox is ready: pre-pull the image on the nodes "
        "(imagePullPolicy IfNotPresent), shrink it, and look for slow volume mounts."),
    "ready": (
        "Containers run but become Ready late: shorten the readiness probe's "
        "initialDelaySeconds / periodSeconds."),
}

STALL_REMEDIATION: Mapping[str, str] = {
    "trigger": (
        "kgc could not raise its own trigger: check that the run's metrics endpoint pod "
        "started in the run's namespace and is reachable from the KEDA operator."),
    "decision": (
        "KEDA never scaled the Deployment: read the ScaledObject's conditions and events "
        "(kubectl describe scaledobject; KEDAScalerFailed names the cause), the KEDA "
        "operator's log, and that the metrics-api endpoint answers from the operator's pod; "
        "for 1->N read the HPA's conditions (kubectl describe hpa keda-hpa-<name>)."),
    "creation": (
        "The Deployment was scaled but its pods were not created: read the ReplicaSet's "
        "events (ResourceQuota, LimitRange, admission webhooks)."),
    "scheduling": (
        "Pods stayed Pending: read their FailedScheduling events (insufficient GPU/CPU, "
        "taints, the RuntimeClass's nodeSelector and overhead)."),
    "sandbox": (
        "The pod sandbox -- for Kata the microVM -- never became ready: read the pod's "
        "FailedCreatePodSandBox events and the containerd / Kata shim logs on its node."),
    "start": (
        "The containers never started: read the pod's events (image pull, "
        "CreateContainerError) and the runtime's logs on its node."),
    "ready": (
        "The containers run but never became Ready: check the readiness probe."),
    "scale-down": (
        "KEDA scales to zero only after cooldownPeriod once every trigger is inactive: "
        "check the ScaledObject's Active condition after the trigger was lowered, that "
        "activationTargetValue lies above the lowered value, and that minReplicaCount is 0."),
}


def keda_profile(profile: Any) -> KedaProfile:
    """The layer's profile: a :class:`KedaProfile`, or ``profile.cluster.keda``
    (:func:`kgc.core.profile.layer_section`)."""
    return layer_section(profile, "keda", KedaProfile)


@dataclass(frozen=True)
class Analysis:
    """Everything the evaluators derive from one record (pure, recomputed per check)."""

    profile: KedaProfile
    rows: Mapping[str, tuple[PodPhases, ...]]
    stats: Mapping[str, ClassStats]
    ratios: Mapping[str, Ratio] | None

    @property
    def kata(self) -> ClassStats:
        return self.stats["kata"]


def analyse(ev: KedaEvidence, profile: Any) -> Analysis:
    kp = keda_profile(profile)
    rows: dict[str, tuple[PodPhases, ...]] = {}
    stats: dict[str, ClassStats] = {}
    for run in ev.runs():
        rows[run.role] = class_phases(run)
        stats[run.role] = stats_of(rows[run.role], run.role, run.runtime_class,
                                   len(run.repetitions))
    rats = None
    if "kata" in stats and "baseline" in stats:
        rats = ratios(stats["kata"], stats["baseline"], kp.budgets.ratio_stat)
    return Analysis(kp, rows, stats, rats)


def _gate(ev: Any, *, preflight: bool = False) -> Outcome | None:
    """The common "can this be judged at all" answer, or None to go on."""
    if not isinstance(ev, KedaEvidence):
        return errored(f"no KEDA evidence to judge (got {type(ev).__name__})")
    if ev.status == "not-run":
        return skipped(ev.message or "the KEDA latency run was not made")
    if ev.status == "error":
        return errored(f"the KEDA latency run failed: {ev.message or 'no message recorded'}",
                       "Fix what the message names and rerun; nothing was measured.")
    if ev.status == "preflight-failed" and not preflight:
        return skipped("not measured: the preflight failed (see keda.preflight): "
                       + (ev.preflight.message or ", ".join(ev.preflight.missing) or "no detail"))
    if preflight:
        return None
    if ev.kata is None or not ev.kata.repetitions:
        return errored("the run is recorded as done but holds no Kata repetition",
                       "This is a defect in the live driver; rerun and report the bundle.")
    if all(rep.target_replicas < 1 and not rep.pods for rep in ev.kata.repetitions):
        # a bundle cannot say this (target_replicas >= 1 on read); an in-memory record
        # whose repetitions asked for no pod measured nothing: never a vacuous pass
        return errored("the run is recorded as done but no Kata repetition asked for a pod",
                       "This is a defect in the live driver; rerun and report the bundle.")
    if not ev.kata.runtime_class:
        # a blank class is missing (kgc.evidence.present): nothing says the measured pods
        # ran in Kata, so their latency certifies nothing
        return errored("the Kata class's RuntimeClass is not recorded: nothing says which "
                       "runtime the measured pods ran with",
                       "Rerun the layer (platform.kata.runtime_class names the Kata "
                       "RuntimeClass) and report the bundle: the live driver always records "
                       "it.")
    return None


def _list(items: Sequence[str], n: int = 3) -> str:
    if len(items) <= n:
        return "; ".join(items)
    return "; ".join(items[:n]) + f"; and {len(items) - n} more"


def _stat_table(a: Analysis) -> dict[str, Any]:
    return {role: s.to_dict()["measures"] for role, s in a.stats.items()}


# ---------------------------------------------------------------------------------------


@CHECKS.check(
    "keda.preflight",
    title="KEDA is installed and ready, and the runtime classes to compare exist",
    remediation="Install KEDA (e.g. `helm install keda kedacore/keda --namespace keda "
    "--create-namespace`) and create the RuntimeClasses the profile names.",
    severity=Severity.BLOCKER,
)
def preflight(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev, preflight=True)
    if gate is not None:
        return gate
    pf = ev.preflight
    missing = list(pf.missing)
    if pf.keda_installed is False or missing or pf.operator_ready is False:
        what = []
        fixes = []
        crds = [m for m in missing if "CRD" in m or "keda.sh" in m]
        rcs = [m for m in missing if m.startswith("RuntimeClass")]
        other = [m for m in missing if m not in crds and m not in rcs]
        if pf.keda_installed is False or crds:
            what.append("KEDA is not installed" + (f" ({', '.join(crds)} missing)" if crds
                                                    else ""))
            fixes.append("Install KEDA: `helm repo add kedacore https://kedacore.github.io/"
                         "charts && helm install keda kedacore/keda --namespace keda "
                         "--create-namespace`; the CRDs scaledobjects.keda.sh and "
                         "triggerauthentications.keda.sh must exist.")
        if pf.operator_ready is False:
            what.append("the KEDA operator is not Ready")
            fixes.append("Read `kubectl -n keda get pods` and the keda-operator log; the "
                         "operator and its metrics API server must both be Ready.")
        if rcs:
            what.append(", ".join(rcs) + " missing")
            fixes.append("Create the missing RuntimeClass(es) with the handler containerd "
                         "knows (see runtime.kata-handler), e.g. `kind: RuntimeClass, "
                         "handler: kata`.")
        if other:
            what.append(", ".join(other) + " missing")
        reason = "; ".join(what)
        if pf.message:
            reason += f" ({pf.message})"
        return failed(reason, " ".join(fixes) or None, expected="KEDA installed and Ready",
                      found=reason, missing=missing, keda_version=pf.keda_version)
    if pf.keda_installed is None:
        if ev.status == "preflight-failed":
            return errored(f"the preflight failed without saying why: {pf.message or 'n/a'}",
                           "This is a defect in the live driver; rerun and report the bundle.")
        return skipped("the preflight was not recorded (KEDA's presence not looked at)")
    ver = f" {pf.keda_version}" if pf.keda_version else ""
    present = ", ".join(r.label for r in ev.runs()) or "the profile's runtime classes"
    return passed(f"KEDA{ver} is installed" +
                  (" and its operator is Ready" if pf.operator_ready else "") +
                  f"; RuntimeClasses present for {present}",
                  expected="KEDA installed and Ready", found=f"KEDA{ver}",
                  keda_version=pf.keda_version)


@CHECKS.check(
    "keda.scale-up-completes",
    title="Every scale-up 0 -> K completes: KEDA activates, the Deployment scales, every pod "
    "becomes Ready within the bounded waits",
    remediation="Read the stalled phase's events named in the reason.",
    severity=Severity.BLOCKER,
)
def scale_up_completes(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    a = analyse(ev, profile)
    kp = a.profile
    # the run's own failure first: it could not raise its trigger
    trig = []
    for run in ev.runs():
        for rep in run.repetitions:
            for st in rep.stalls:
                if st.phase == "trigger":
                    trig.append(f"{run.label} repetition {rep.index}: "
                                f"{st.detail or 'the trigger could not be raised'}")
            if rep.trigger is None and not any(s.phase == "trigger" for s in rep.stalls):
                trig.append(f"{run.label} repetition {rep.index}: no trigger time recorded")
    if trig:
        return errored(f"the run could not raise its {kp.trigger} trigger: {_list(trig)}",
                       STALL_REMEDIATION["trigger"], stalls=trig)
    k = max((rep.target_replicas for run in ev.runs() for rep in run.repetitions),
            default=kp.replicas)
    stuck: list[tuple[str, PodPhases]] = []
    for rows in a.rows.values():
        for r in rows:
            if not r.ready:
                phase = next((p for p in PHASES if r.values[p].status == STALLED), "ready")
                stuck.append((phase, r))
    total = sum(len(rows) for rows in a.rows.values())
    if stuck:
        order = {p: i for i, p in enumerate(PHASES)}
        first = min(stuck, key=lambda x: order[x[0]])[0]
        by_phase: dict[str, list[str]] = {}
        labels = {run.role: run.label for run in ev.runs()}
        for phase, r in stuck:
            lab = labels[r.role]
            v = r.values[phase]
            lb = f", waited {fmt_num(v.seconds)} s" if v.seconds is not None else ""
            det = f": {r.stall.detail}" if r.stall is not None and r.stall.detail else ""
            node = f" on {r.node}" if r.node else ""
            by_phase.setdefault(phase, []).append(
                f"{lab} r{r.repetition} #{r.rank} {r.pod or '(never created)'}{node}{lb}{det}")
        parts = [f"stalled in {TITLES[p]} ({len(v)}): {_list(v, 2)}"
                 for p, v in sorted(by_phase.items(), key=lambda x: order[x[0]])]
        waits = [r.stall.timeout_s for _, r in stuck if r.stall is not None]
        reason = (f"{len(stuck)} of {total} pods never became Ready within "
                  f"{_wait_words(waits, kp.timeouts.ready_s)} -- " + " | ".join(parts))
        remediation = " ".join(STALL_REMEDIATION[p] for p in PHASES if p in by_phase)
        return failed(reason, remediation, expected=f"every repetition reaches {k} Ready pods",
                      found=f"{len(stuck)} pods stalled, first in {TITLES[first]}",
                      stalled={p: v for p, v in by_phase.items()})
    reps = ", ".join(f"{len(r.repetitions)} of {r.label}" for r in ev.runs())
    return passed(f"every repetition reached its Ready pods ({reps} repetitions, {total} pods)",
                  expected=f"every repetition reaches {k} Ready pods",
                  found=f"{total} pods Ready")


def _wait_words(recorded: Sequence[float], fallback: float) -> str:
    """The wait the run used, as recorded with its stalls (the judging profile may differ
    from the recording one); the profile's value only when none was recorded."""
    vals = sorted(set(recorded))
    if not vals:
        return f"the {fmt_num(fallback)} s wait"
    if len(vals) == 1:
        return f"the {fmt_num(vals[0])} s wait"
    return f"the {fmt_num(vals[0])}-{fmt_num(vals[-1])} s waits"


@CHECKS.check(
    "keda.scale-down-completes",
    title="After the trigger is lowered every Deployment returns to zero pods within the wait",
    remediation=STALL_REMEDIATION["scale-down"],
    severity=Severity.NORMAL,
)
def scale_down_completes(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    kp = keda_profile(profile)
    stalled, gaps, done = [], [], []
    waits = [st.timeout_s for run in ev.runs() for rep in run.repetitions for st in rep.stalls
             if st.phase == "scale-down"]
    for run in ev.runs():
        cool = run.config.cooldown_period_s
        for sd in scale_downs(run):
            tag = f"{run.label} r{sd.repetition}"
            if sd.status == STALLED:
                c = f" (cooldownPeriod {fmt_num(cool)} s)" if cool is not None else ""
                stalled.append(f"{tag}: {sd.note}{c}")
            elif sd.seconds is None:
                gaps.append(f"{tag}: {sd.note}")
            else:
                done.append(sd.seconds)
    rec: dict[str, Any] = {"stalled": stalled, "not_recorded": gaps,
             "durations_s": [round(x, 3) for x in done]}
    if stalled:
        return failed(f"{len(stalled)} scale-down(s) never completed within "
                      f"{_wait_words(waits, kp.timeouts.scale_down_s)}: {_list(stalled)}",
                      expected="0 pods after cooldownPeriod", found=f"{len(stalled)} stalled",
                      **rec)
    if gaps:
        return skipped(f"scale-down not recorded for {len(gaps)} repetition(s): {_list(gaps)}",
                       **rec)
    return passed(f"all {len(done)} scale-downs returned to 0 pods (slowest "
                  f"{fmt_s(max(done))} after the trigger was lowered)",
                  expected="0 pods after cooldownPeriod", found=f"max {fmt_s(max(done))}",
                  **rec)


def _over_budgets(kata: ClassStats, budgets: Mapping[Any, float]) -> tuple[list[str], list[str]]:
    """(phases past their p95 budget, phases that could not be judged), in words."""
    over, unjudged = [], []
    for phase in MEASURES:
        if phase not in budgets:
            continue
        b, s = budgets[phase], kata[phase]
        if s.counted == 0:
            unjudged.append(f"{TITLES[phase]}: not measured on any pod"
                            + (f" ({s.notes[0]})" if s.notes else ""))
        elif s.p95 is not None and s.p95 > b:
            over.append(f"{TITLES[phase]} p95 {fmt_s(s.p95, s.lower_bound)} > {fmt_num(b)} s "
                        "budget")
        elif s.missing or s.invalid:
            unjudged.append(f"{TITLES[phase]}: {s.missing + s.invalid} of "
                            f"{s.counted + s.missing + s.invalid} pods lack it"
                            + (f" ({'; '.join(s.notes)})" if s.notes else ""))
    return over, unjudged


def _dominant(kata: ClassStats, within: str = "e2e") -> str | None:
    """The phase with the largest p50 (where the time goes), among the phases of the span
    ``within`` (end to end: all of them)."""
    first, last = BOUNDS[within]
    best, val = None, -1.0
    for p in PHASES:
        if CHAIN.index(BOUNDS[p][0]) < CHAIN.index(first) or \
                CHAIN.index(BOUNDS[p][1]) > CHAIN.index(last):
            continue
        v = kata[p].p50
        if v is not None and v > val:
            best, val = p, v
    return best


@CHECKS.check(
    "keda.e2e-p95",
    title="End-to-end scale-up (trigger -> pod Ready) of the Kata class is within the "
    "profile's p95 budget",
    remediation="Shorten the phase the reason names.",
    severity=Severity.CRITICAL,
)
def e2e_p95(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    a = analyse(ev, profile)
    kp, kata = a.profile, a.kata
    budget = kp.budgets.e2e_p95_s
    s = kata["e2e"]
    ev_: dict[str, Any] = {"budget_s": budget, "stats": _stat_table(a),
                           "percentile": "nearest rank"}
    if s.counted == 0:
        return errored("no end-to-end sample for " + kata.label + ": "
                       + ("; ".join(s.notes) or "no pod recorded"),
                       "The record holds no complete trigger -> Ready measurement; rerun.",
                       **ev_)
    if s.missing or s.invalid:
        return errored(f"{s.missing + s.invalid} of {s.counted + s.missing + s.invalid} "
                       f"end-to-end samples of {kata.label} are unusable: "
                       + "; ".join(s.notes),
                       "The watch record has gaps or out-of-order times; rerun, and report "
                       "the bundle if it repeats.", **ev_)
    found = f"p95 {fmt_s(s.p95, s.lower_bound)} (p50 {fmt_s(s.p50)}, max " \
            f"{fmt_s(s.max, s.lower_bound)}, n={s.counted})"
    over, unjudged = _over_budgets(kata, kp.budgets.phase_p95_s)
    base = a.stats.get("baseline")
    vs = (f"; {base.label} p95 {fmt_s(base['e2e'].p95, base['e2e'].lower_bound)}"
          if base is not None and base["e2e"].p95 is not None else "")
    if s.p95 is not None and s.p95 > budget:
        if s.censored:
            return failed(f"{kata.label} end-to-end p95 is {fmt_s(s.p95, s.lower_bound)}: "
                          f"{s.censored} of {s.counted} pods never became Ready "
                          "(keda.scale-up-completes names the stalled phase)",
                          "Make the stalled scale-ups complete first (see "
                          "keda.scale-up-completes); their pods count as slower than any "
                          "budget.", expected=f"p95 <= {fmt_num(budget)} s", found=found, **ev_)
        if over:
            why = "; ".join(over) + ("; everything else within budget" if not unjudged
                                     else "; " + "; ".join(unjudged))
            phases = [p for p in PHASES if any(o.startswith(TITLES[p] + " ") for o in over)]
        else:
            dom = _dominant(kata)
            why = (f"no phase is past its own budget; most time goes to {TITLES[dom]} "
                   f"(p50 {fmt_s(kata[dom].p50)})" if dom else "no phase measured")
            phases = [dom] if dom else []
        return failed(f"{kata.label} end-to-end p95 {fmt_s(s.p95)} > {fmt_num(budget)} s "
                      f"budget{vs}; {why}",
                      " ".join(PHASE_REMEDIATION[p] for p in phases) or None,
                      expected=f"p95 <= {fmt_num(budget)} s", found=found, **ev_)
    return passed(f"{kata.label} end-to-end p95 {fmt_s(s.p95)} <= {fmt_num(budget)} s budget "
                  f"over {s.counted} pods{vs}", expected=f"p95 <= {fmt_num(budget)} s",
                  found=found, **ev_)


@CHECKS.check(
    "keda.phase-budgets",
    title="Every phase the profile budgets (e.g. sandbox ready) is within its p95 budget for "
    "the Kata class",
    remediation="Shorten the phase the reason names.",
    severity=Severity.CRITICAL,
)
def phase_budgets(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    a = analyse(ev, profile)
    budgets = a.profile.budgets.phase_p95_s
    if not budgets:
        return skipped("the profile sets no per-phase budget (cluster.keda.budgets.phase_p95_s)")
    kata = a.kata
    over, unjudged = _over_budgets(kata, budgets)
    exp = ", ".join(f"{TITLES[p]} p95 <= {fmt_num(b)} s" for p, b in budgets.items())
    found = ", ".join(f"{TITLES[p]} p95 {fmt_s(kata[p].p95, kata[p].lower_bound)}"
                      for p in budgets)
    ev_: dict[str, Any] = {"budgets_s": dict(budgets), "stats": _stat_table(a),
                           "percentile": "nearest rank"}
    if over:
        tail = "everything else within budget" if not unjudged else "; ".join(unjudged)
        phases = [p for p in PHASES if any(o.startswith(TITLES[p] + " ") for o in over)]
        return failed(f"{kata.label}: " + "; ".join(over) + f"; {tail}",
                      " ".join(PHASE_REMEDIATION[p] for p in phases),
                      expected=exp, found=found, **ev_)
    if unjudged:
        return skipped(f"{kata.label}: cannot judge " + "; ".join(unjudged), **ev_)
    return passed(f"{kata.label}: every budgeted phase within budget ({found})",
                  expected=exp, found=found, **ev_)


@CHECKS.check(
    "keda.kata-overhead",
    title="Kata's scale-up latency stays within the profile's ratio to the baseline runtime",
    remediation="Shorten the phase where Kata adds the most (named in the reason).",
    severity=Severity.NORMAL,
)
def kata_overhead(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    a = analyse(ev, profile)
    bud = a.profile.budgets
    if not a.profile.compare_baseline:
        return skipped("the profile turns the baseline comparison off "
                       "(cluster.keda.compare_baseline: false)")
    if a.ratios is None or ev.baseline is None:
        return errored("the baseline runtime was not measured although the profile compares "
                       "against it", "This is a defect in the live driver or the record; "
                       "rerun.")
    kata, base = a.stats["kata"], a.stats["baseline"]
    rats = a.ratios
    diffs = {m: difference(kata, base, m, bud.ratio_stat) for m in MEASURES}
    ev_: dict[str, Any] = {"ratios": {m: r.to_dict() for m, r in rats.items()},
           "differences_s": {m: None if d is None else round(d, 6) for m, d in diffs.items()},
           "stat": bud.ratio_stat, "percentile": "nearest rank"}
    limits: dict[str, float] = {str(k): v for k, v in bud.phase_ratio_max.items()}
    if bud.ratio_max is not None:
        limits[bud.ratio_measure] = bud.ratio_max
    if not limits:
        return skipped("the profile sets no ratio budget; ratios are reported only: "
                       + ", ".join(f"{TITLES[m]} {_rx(rats[m])}" for m in MEASURES), **ev_)
    over, unjudged, within = [], [], []
    for m in MEASURES:
        if m not in limits:
            continue
        r, lim = rats[m], limits[m]
        desc = (f"{TITLES[m]} {bud.ratio_stat} {kata.label} {fmt_s(r.kata)} / {base.label} "
                f"{fmt_s(r.baseline)} = {_rx(r)}")
        if r.value is None:
            unjudged.append(f"{TITLES[m]}: ratio undefined ({r.note})")
        elif r.value > lim:
            over.append(f"{desc} > {fmt_num(lim)}x budget")
        else:
            within.append(f"{desc} <= {fmt_num(lim)}x")
    exp = ", ".join(f"{TITLES[m]} <= {fmt_num(x)}x" for m, x in limits.items())
    adds = [(d, p) for p in PHASES if (d := diffs[p]) is not None and d > 0]
    most = max(adds)[1] if adds else None
    most_txt = (f"; Kata adds the most in {TITLES[most]} (+{fmt_num(diffs[most])} s at "
                f"{bud.ratio_stat})" if most is not None else "")
    if over:
        return failed("; ".join(over) + most_txt,
                      PHASE_REMEDIATION[most] if most is not None else None,
                      expected=exp, found="; ".join(over), **ev_)
    if unjudged:
        return skipped("cannot judge " + "; ".join(unjudged), **ev_)
    return passed("; ".join(within) + most_txt, expected=exp, found="; ".join(within), **ev_)


@CHECKS.check(
    "keda.baseline-budgets",
    title="The baseline runtime's own pod start (the cluster apart from Kata: scheduler, "
    "CNI, image, kubelet) is within the profile's p95 budgets",
    remediation="Shorten the phase the reason names; it is slow without Kata too.",
    severity=Severity.NORMAL,
)
def baseline_budgets(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    a = analyse(ev, profile)
    kp = a.profile
    budgets = kp.budgets.baseline_p95_s
    if not kp.compare_baseline:
        return skipped("the profile turns the baseline comparison off "
                       "(cluster.keda.compare_baseline: false)")
    if not budgets:
        return skipped("the profile sets no baseline budget "
                       "(cluster.keda.budgets.baseline_p95_s)")
    base = a.stats.get("baseline")
    if base is None or ev.baseline is None or not ev.baseline.repetitions:
        return errored("the baseline runtime was not measured although the profile budgets "
                       "it", "This is a defect in the live driver or the record; rerun.")
    nodes = sorted({r.node for r in a.rows["baseline"] if r.node})
    over, unjudged = _over_budgets(base, budgets)
    exp = ", ".join(f"{TITLES[m]} p95 <= {fmt_num(b)} s" for m, b in budgets.items())
    found = ", ".join(f"{TITLES[m]} p95 {fmt_s(base[m].p95, base[m].lower_bound)} "
                      f"(p50 {fmt_s(base[m].p50)}, n={base[m].counted})" for m in budgets)
    where = f" on {_list(nodes)}" if nodes else ""
    ev_: dict[str, Any] = {"budgets_s": dict(budgets), "baseline": _stat_table(a)["baseline"],
                           "nodes": nodes, "percentile": "nearest rank"}
    if over:
        fixes = []
        remedied: set[str] = set()  # each phase's remedy once (phases come before spans)
        for m in MEASURES:
            if m in budgets and any(o.startswith(TITLES[m] + " ") for o in over):
                if m in PHASE_REMEDIATION:
                    fixes.append(PHASE_REMEDIATION[m])
                    remedied.add(m)
                else:  # a span: the phase inside it that takes the most
                    dom = _dominant(base, within=m)
                    if dom is not None and dom not in remedied:
                        fixes.append(f"Most of {TITLES[m]} is {TITLES[dom]} (p50 "
                                     f"{fmt_s(base[dom].p50)}): "
                                     + PHASE_REMEDIATION[dom])
                        remedied.add(dom)
        tail = "everything else within budget" if not unjudged else "; ".join(unjudged)
        return failed(f"{base.label}{where}: " + "; ".join(over) + f"; {tail}",
                      " ".join(fixes) or None, expected=exp, found=found,
                      **ev_)
    if unjudged:
        return skipped(f"{base.label}: cannot judge " + "; ".join(unjudged), **ev_)
    return passed(f"{base.label}{where}: every budgeted measure within budget ({found})",
                  expected=exp, found=found, **ev_)


def _rx(r: Ratio) -> str:
    if r.value is None:
        return "n/a"
    return "inf (stalled)" if math.isinf(r.value) else f"{r.value:.2f}x"


def _config_words(run: ClassRun) -> tuple[str, dict[str, Any]]:
    c = run.config
    parts = [
        f"pollingInterval {fmt_num(c.polling_interval_s)} s" if c.polling_interval_s is not None
        else "pollingInterval not visible (KEDA default 30 s)",
        f"cooldownPeriod {fmt_num(c.cooldown_period_s)} s" if c.cooldown_period_s is not None
        else "cooldownPeriod not visible (KEDA default 300 s)",
        (f"HPA sync period {fmt_num(c.hpa_sync_period_s)} s"
         + (f" ({c.hpa_sync_source})" if c.hpa_sync_source else ""))
        if c.hpa_sync_period_s is not None
        else "HPA sync period not visible (Kubernetes default 15 s assumed; "
        "cluster.keda.hpa_sync_period_s states it)",
    ]
    if c.min_replica_count is not None:
        parts.append(f"minReplicaCount {c.min_replica_count}")
    up = (c.hpa_behavior or {}).get("scaleUp") if c.hpa_behavior else None
    if isinstance(up, Mapping):
        win = up.get("stabilizationWindowSeconds")
        if win is not None:
            parts.append(f"HPA scaleUp stabilizationWindowSeconds {win}")
    return ", ".join(parts), c.to_dict()


@CHECKS.check(
    "keda.scaling-config",
    title="KEDA's and the HPA's settings that bound scale-up latency are reported, and do not "
    "dominate it",
    remediation=PHASE_REMEDIATION["decision"],
    severity=Severity.NORMAL,
)
def scaling_config(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    a = analyse(ev, profile)
    kp = a.profile
    assert ev.kata is not None  # _gate
    words, cfg = _config_words(ev.kata)
    kata = a.kata
    rows = a.rows["kata"]
    first = stats_of([r for r in rows if r.rank == 1])["decision"]
    later = stats_of([r for r in rows if r.rank > 1])["decision"]
    dec, e2e = kata["decision"], kata["e2e"]
    ev_: dict[str, Any] = {"config": {run.role: run.config.to_dict() for run in ev.runs()},
           "decision": dec.to_dict(), "activation_rank1": first.to_dict(),
           "hpa_ranks_2_plus": later.to_dict(), "e2e": e2e.to_dict()}
    if e2e.p50 is not None and math.isinf(e2e.p50):
        return skipped(f"the decision share cannot be judged: end-to-end p50 is censored "
                       f"({e2e.censored} of {e2e.counted} pods never became Ready, see "
                       f"keda.scale-up-completes); configuration: {words}", **ev_)
    if e2e.n and e2e.p50 is not None and e2e.p50 <= 0:
        return skipped("the decision share cannot be judged: end-to-end p50 is 0 s (below the "
                       f"watch resolution); configuration: {words}", **ev_)
    if dec.n == 0 or dec.p50 is None:
        # every row (pods and the phantoms up to K, which _gate guarantees) notes why its
        # decision is missing or censored: the notes are never empty here
        return skipped(f"the decision phase was not measured ({'; '.join(dec.notes)}); "
                       f"configuration: {words}",
                       **ev_)
    if e2e.n == 0 or e2e.p50 is None:
        return skipped(f"the end-to-end time was not measured ({'; '.join(e2e.notes)}); "
                       f"configuration: {words}",
                       **ev_)
    share = dec.p50 / e2e.p50
    # pods 2..K whose request never came (the HPA never scaled 1->N within the wait) count
    # as censored, not as absent: the HPA's step is then where the decision time goes
    split = (f"KEDA activation (first pod) p50 {fmt_s(first.p50, first.lower_bound)}"
             + (f", HPA scale-up (pods 2..K) p50 {fmt_s(later.p50, later.lower_bound)}"
                if later.counted else ""))
    c = ev.kata.config
    budget = kp.budgets.e2e_p95_s
    cap = (f"; pollingInterval alone ({fmt_num(c.polling_interval_s)} s) can use up the "
           f"{fmt_num(budget)} s end-to-end budget" if c.polling_interval_s is not None
           and c.polling_interval_s >= budget else "")
    if share >= kp.budgets.decision_dominance or cap:
        hpa_dom = later.counted > 0 and later.p50 is not None and first.p50 is not None \
            and later.p50 > first.p50
        fix = []
        if hpa_dom:
            per = (f"{fmt_num(c.hpa_sync_period_s)} s" if c.hpa_sync_period_s is not None
                   else "not visible, 15 s by default assumed")
            fix.append(f"Most of the decision is the HPA's 1->N step: lower the "
                       f"controller-manager's --horizontal-pod-autoscaler-sync-period (now "
                       f"{per}) and allow a larger scaleUp step in the ScaledObject's "
                       "advanced.horizontalPodAutoscalerConfig.behavior.")
        else:
            pi = (f"now {fmt_num(c.polling_interval_s)} s" if c.polling_interval_s is not None
                  else "not visible, 30 s by default")
            fix.append(f"Lower the ScaledObject's pollingInterval ({pi}; KEDA looks at the "
                       "trigger once per interval, so activation waits up to one interval), "
                       "keep warm microVMs with minReplicaCount >= 1, or use a push trigger "
                       "(external-push) that bypasses polling.")
        # under the dominance share only the polling cap warns: the reason must not claim
        # the configuration dominates a scale-up whose time went elsewhere
        if share >= kp.budgets.decision_dominance:
            lead = "the configuration, not the runtime, dominates scale-up latency"
            exp, got = (f"decision < {kp.budgets.decision_dominance:.0%} of end to end",
                        f"{share:.0%}")
        else:
            lead = "the configuration alone can use up the end-to-end budget"
            exp = f"pollingInterval < the {fmt_num(budget)} s end-to-end budget"
            got = f"pollingInterval {fmt_num(c.polling_interval_s)} s"
        return warned(f"{lead}: decision p50 {fmt_s(dec.p50)} is {share:.0%} of end-to-end p50 "
                      f"{fmt_s(e2e.p50)} ({split}){cap}; {words}", " ".join(fix),
                      expected=exp, found=got, **ev_)
    return passed(f"decision p50 {fmt_s(dec.p50)} is {share:.0%} of end-to-end p50 "
                  f"{fmt_s(e2e.p50)} ({split}): the runtime, not the configuration, "
                  f"dominates; {words}",
                  expected=f"decision < {kp.budgets.decision_dominance:.0%} of end to end",
                  found=f"{share:.0%}", **ev_)


@CHECKS.check(
    "keda.watch-precision",
    title="Watch receipt times agree with the API's own timestamps (the timing is real)",
    remediation="Check the clocks (NTP) of the API server and the nodes, and the load of "
    "the machine running kgc.",
    severity=Severity.MINOR,
)
def watch_precision(ev: KedaEvidence, profile: Any) -> Outcome:
    gate = _gate(ev)
    if gate is not None:
        return gate
    kp = keda_profile(profile)
    if ev.clock is None:
        return skipped("no client/API clock offset was estimated; receipt times cannot be "
                       "compared with the API's timestamps")
    lags = receipt_lags(ev)
    if not lags:
        return skipped("no milestone has both a receipt time and an API timestamp")
    unc, tol = ev.clock.uncertainty_s, kp.budgets.watch_lag_tolerance_s
    hi, lo = 1.0 + unc + tol, -(unc + tol)
    late = sorted((x for x in lags if x.lag_s > hi), key=lambda x: -x.lag_s)
    early = sorted((x for x in lags if x.lag_s < lo), key=lambda x: x.lag_s)
    ev_: dict[str, Any] = {"clock": ev.clock.to_dict(), "lags": len(lags),
           "max_lag_s": round(max(x.lag_s for x in lags), 3),
           "min_lag_s": round(min(x.lag_s for x in lags), 3),
           "allowed_s": [round(lo, 3), round(hi, 3)]}

    def say(x: Any) -> str:
        return f"{x.role} r{x.repetition} {x.pod} {x.milestone} {x.lag_s:+.2f} s"

    if late or early:
        msgs = []
        if late:
            msgs.append(f"{len(late)} of {len(lags)} milestones received more than "
                        f"{hi:.2f} s after the API's timestamp (worst: {say(late[0])}): the "
                        "watch delivered late and the measured phases are inflated")
        if early:
            msgs.append(f"{len(early)} received before the API's timestamp by more than "
                        f"{-lo:.2f} s (worst: {say(early[0])}): a node's clock is skewed "
                        "against the API server (the kubelet stamps conditions)")
        return warned("; ".join(msgs), expected=f"lag in [{lo:.2f}, {hi:.2f}] s",
                      found=f"[{ev_['min_lag_s']}, {ev_['max_lag_s']}] s", **ev_)
    return passed(f"all {len(lags)} receipt times lie within [{lo:.2f}, {hi:.2f}] s of the "
                  f"API's whole-second timestamps (clock offset "
                  f"{ev.clock.offset_s:+.3f} ± {unc:.3f} s): the watch timing is prompt",
                  expected=f"lag in [{lo:.2f}, {hi:.2f}] s",
                  found=f"[{ev_['min_lag_s']}, {ev_['max_lag_s']}] s", **ev_)

