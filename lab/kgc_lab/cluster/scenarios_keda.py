"""KEDA latency scenarios of the cluster lab (``kgc lab run --scenario NAME``).

Each scenario brings up its own cluster lab (real control plane and KEDA, kwok pods whose
sandbox delay per runtime class comes from the profile), runs the ``keda`` layer against it
exactly as ``pytest -m keda --kubeconfig <lab> --profile lab`` does (the layer's live driver,
the same checks), takes the lab down, and writes ``verdict.json`` plus the layer's
artefacts (timestamps CSV, timeline SVG, per-phase table) into the report directory.

=====================  =================================================================
scenario               documented verdicts
=====================  =================================================================
keda-good              every check passes (``keda.watch-precision`` may warn on a loaded
                       machine); the measured Kata - runc sandbox difference (p50) lies
                       within +-20 % of the configured delay difference (3 s - 0.3 s):
                       the timing is real, not an artefact of the watch
slow-boot              Kata's sandbox takes 8 s (budget 5 s): ``keda.phase-budgets`` fails
                       naming "sandbox ready", ``keda.kata-overhead`` fails (pod startup
                       ratio past 8x) naming sandbox ready; the rest passes
keda-missing           the lab without KEDA: ``keda.preflight`` fails naming the missing
                       CRD with the helm remediation; every other check skips
keda-unschedulable     each measured pod asks for 8 GPUs (nodes have 4): no pod schedules;
                       the bounded wait gives up and ``keda.scale-up-completes`` fails
                       naming the scheduling phase and the scheduler's message
=====================  =================================================================

Expectations are ``check -> status`` (``pass|warn`` accepts either) plus words each reason
must contain.
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kgc.core.engine import Context, Unavailable
from kgc.core.profile import Profile, profiles_dir
from kgc.core.target import ClusterTarget
from kgc_lab.cluster.lab import LAB_PROFILE, Lab, down, keda_profile_fields
from kgc_lab.cluster.shape import ClusterLabProfile, lab_cluster, shape_of
from kgc_lab.common import LabError
from kgc_lab.scenarios import (
    LabScenario,
    ScenarioOutcome,
    register_scenarios,
    write_scenario_verdict,
)

TIMING_TOLERANCE = 0.20  # measured Kata - runc sandbox difference vs configured, relative

OTHERS_PASS = {
    "keda.preflight": "pass", "keda.scale-up-completes": "pass",
    "keda.scale-down-completes": "pass", "keda.e2e-p95": "pass",
    "keda.phase-budgets": "pass", "keda.kata-overhead": "pass",
    "keda.scaling-config": "pass", "keda.watch-precision": "pass|warn",
    "keda.baseline-budgets": "pass",
}
ALL_SKIP_BUT_PREFLIGHT = {c: "skip" for c in OTHERS_PASS if c != "keda.preflight"}


@dataclass(frozen=True)
class KedaScenario:
    name: str
    description: str
    expected: Mapping[str, str]
    reasons: Mapping[str, Sequence[str]] = field(default_factory=dict)
    overrides: Mapping[str, Any] = field(default_factory=dict)  # merged into lab.yaml
    shape: Mapping[str, Any] = field(default_factory=dict)  # the lab's shape (not a profile key)
    keda: bool = True  # KEDA installed in the scenario's lab
    timing: bool = False  # assert the sandbox difference against the configured delays


SCENARIOS: dict[str, KedaScenario] = {sc.name: sc for sc in (
    KedaScenario(
        "keda-good",
        "The lab profile as shipped (Kata sandbox 3 s, runc 0.3 s): every KEDA check passes "
        "and the measured Kata - runc sandbox difference is within +-20 % of the configured "
        "one.",
        OTHERS_PASS, timing=True,
    ),
    KedaScenario(
        "slow-boot",
        "Kata's simulated sandbox (microVM boot) takes 8 s against a 5 s budget: the phase "
        "budget check fails naming the sandbox phase.",
        {**OTHERS_PASS, "keda.phase-budgets": "fail", "keda.kata-overhead": "fail"},
        reasons={"keda.phase-budgets": ["sandbox ready p95", "> 5 s budget",
                                        "everything else within budget"],
                 "keda.kata-overhead": ["pod startup", "Kata adds the most in sandbox ready"]},
        shape={"kata_sandbox_delay_ms": 8000},
    ),
    KedaScenario(
        "keda-missing",
        "The lab without KEDA (no CRDs, no operator): the preflight fails naming the missing "
        "CRD with the install command; nothing else is measured.",
        {"keda.preflight": "fail", **ALL_SKIP_BUT_PREFLIGHT},
        reasons={"keda.preflight": ["KEDA is not installed", "scaledobjects.keda.sh"],
                 "keda.scale-up-completes": ["preflight failed"]},
        keda=False,
    ),
    KedaScenario(
        "keda-unschedulable",
        "Every measured pod asks for 8 GPUs (the lab's nodes have 4): KEDA scales, the "
        "pods stay Pending, the bounded wait gives up and the verdict names the scheduling "
        "phase with the scheduler's message.",
        {"keda.preflight": "pass", "keda.scale-up-completes": "fail",
         "keda.scale-down-completes": "pass", "keda.e2e-p95": "fail",
         "keda.phase-budgets": "skip", "keda.kata-overhead": "skip",
         "keda.scaling-config": "pass|warn|skip", "keda.watch-precision": "pass|warn|skip",
         "keda.baseline-budgets": "fail"},
        reasons={"keda.scale-up-completes": ["stalled in scheduling", "Insufficient",
                                             "nvidia.com/gpu"],
                 "keda.baseline-budgets": ["pod startup p95 >", "(stalled) > 5 s budget"]},
        # the keda layer requests the platform's first GPU resource
        overrides={"platform": {"gpu": {"resources": ["nvidia.com/gpu", "nvidia.com/pgpu"]}},
                   "cluster": {"keda": {
            "repetitions": 1, "gpu": {"per_pod": 8},
            "timeouts": {"activation_s": 15, "ready_s": 20, "scale_down_s": 60}}}},
    ),
)}


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def scenario_profile(sc: KedaScenario, state: Mapping[str, Any] | None = None) -> Profile:
    """profiles/lab.yaml with the scenario's overrides (validated like any profile); with
    the running lab's ``state``, also its keda profile fields (trigger endpoint URL, HPA
    sync period: :func:`keda_profile_fields`)."""
    path = profiles_dir() / f"{LAB_PROFILE}.yaml"
    raw = _merge(yaml.safe_load(path.read_text()), sc.overrides)
    if state is not None:
        raw = _merge(raw, {"cluster": {"keda": keda_profile_fields(state)}})
    return Profile.model_validate(raw).model_copy(
        update={"source": f"{path} + scenario {sc.name}"})


def scenario_shape(sc: KedaScenario) -> ClusterLabProfile:
    """The lab's shape for ``sc``: the lab's own with the scenario's changes."""
    return ClusterLabProfile.model_validate({**ClusterLabProfile().model_dump(), **sc.shape})


def sandbox_timing(ev: Any, profile: Profile,
                   shape: ClusterLabProfile | None = None) -> dict[str, Any]:
    """Measured Kata - baseline sandbox p50 against the lab's configured delay difference
    (``shape``: the lab's, default the one the cluster section carries or the lab's own)."""
    from kgc.layers.keda.checks import analyse

    lab = shape or shape_of(profile.cluster)
    configured = (lab.kata_sandbox_delay_ms - lab.runc_sandbox_delay_ms) / 1000.0
    out: dict[str, Any] = {"configured_difference_s": configured,
                           "tolerance": TIMING_TOLERANCE}
    a = analyse(ev, profile)
    k, b = a.stats.get("kata"), a.stats.get("baseline")
    kp = k["sandbox"].p50 if k is not None else None
    bp = b["sandbox"].p50 if b is not None else None
    if kp is None or bp is None:
        out.update(measured_difference_s=None, within=False,
                   why="no sandbox p50 for both classes")
        return out
    diff = kp - bp
    out.update(measured_difference_s=round(diff, 4), kata_sandbox_p50_s=round(kp, 4),
               baseline_sandbox_p50_s=round(bp, 4),
               relative_error=round(abs(diff - configured) / configured, 4)
               if configured else None,
               within=configured > 0 and abs(diff - configured) <= TIMING_TOLERANCE
               * configured)
    return out


def mismatches(sc: KedaScenario, results: Sequence[Mapping[str, Any]],
               timing: Mapping[str, Any] | None) -> dict[str, str]:
    """``check -> what differs`` against the documented expectation."""
    by = {r["check"]: r for r in results}
    out: dict[str, str] = {}
    for cid, want in sc.expected.items():
        r = by.get(cid)
        if r is None:
            out[cid] = f"no verdict (expected {want})"
            continue
        if r["status"] not in want.split("|"):
            out[cid] = f"{r['status']} (expected {want}): {r['reason'][:300]}"
            continue
        lacking = [w for w in sc.reasons.get(cid, ()) if w not in r["reason"]]
        if lacking:
            out[f"{cid} reason"] = f"lacks {lacking}: {r['reason'][:300]}"
    if sc.timing and (timing is None or not timing.get("within")):
        out["timing"] = ("measured Kata - runc sandbox difference "
                         f"{(timing or {}).get('measured_difference_s')} s is not within "
                         f"{TIMING_TOLERANCE:.0%} of the configured "
                         f"{(timing or {}).get('configured_difference_s')} s")
    return out


@dataclass
class KedaScenarioResult:
    scenario: KedaScenario
    results: list[dict[str, Any]]
    mismatches: dict[str, str]
    timing: dict[str, Any] | None
    seconds: float
    verdict_json: Path
    artefacts: list[Path]


def run_scenario(sc: KedaScenario, report_dir: Path, keep: bool = False,
                 run_dir: Path | None = None) -> KedaScenarioResult:
    """Bring a lab up for ``sc``, judge the keda layer on it live, take the lab down, write
    ``report_dir/verdict.json`` and the artefacts. ``keep``: leave the lab running."""
    from kgc.layers.keda.timeline import artefacts

    t0 = time.monotonic()
    profile = scenario_profile(sc)
    own = run_dir is None
    rd = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix=f"kgc-{sc.name}-"))
    shape = scenario_shape(sc)
    lab = Lab(rd, cluster=lab_cluster(profile.cluster, shape), keda=sc.keda,
              die_with_parent=True)
    try:
        state = lab.up()
        profile = scenario_profile(sc, state)
        ctx = Context(ClusterTarget(state["kubeconfig"]), profile)
        verdicts = ctx.judge_all(["keda"])
        try:
            ev = ctx.evidence("keda")
        except Unavailable:
            ev = None
    finally:
        if not keep:
            down(rd)
            if own:
                shutil.rmtree(rd, ignore_errors=True)
    results = [v.to_dict() for v in verdicts]
    timing = sandbox_timing(ev, profile, shape) if sc.timing and ev is not None else None
    mis = mismatches(sc, results, timing)
    report_dir = Path(report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for name, _mime, data in (artefacts(ev, profile) if ev is not None else []):
        (report_dir / name).write_bytes(data)
        files.append(report_dir / name)
    seconds = time.monotonic() - t0
    out = write_scenario_verdict(
        report_dir / "verdict.json", "cluster", sc.name, sc.description, results,
        dict(sc.expected), mis, layers=("keda",), seconds=round(seconds, 3),
        timing=timing, lab_run_dir=str(rd) if keep else None,
        reasons_expected={k: list(v) for k, v in sc.reasons.items()})
    return KedaScenarioResult(sc, results, mis, timing, seconds, out, files)


def _outcome(name: str) -> Any:
    def run(report_dir: Path, keep: bool = False) -> ScenarioOutcome:
        try:
            res = run_scenario(SCENARIOS[name], Path(report_dir), keep)
        except LabError as exc:
            path = write_scenario_verdict(
                Path(report_dir) / "verdict.json", "cluster", name,
                SCENARIOS[name].description, [], dict(SCENARIOS[name].expected),
                {"lab": f"the cluster lab did not come up: {exc}"}, layers=("keda",))
            return ScenarioOutcome(name, "cluster", path, {"lab": str(exc)})
        print(json.dumps({"scenario": name, "seconds": round(res.seconds, 1),
                          "timing": res.timing}, indent=1))
        return ScenarioOutcome(name, "cluster", res.verdict_json, res.mismatches)

    return run


register_scenarios(*(
    LabScenario(n, "cluster", sc.description, _outcome(n)) for n, sc in SCENARIOS.items()
))
