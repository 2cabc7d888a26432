"""Kill what mutmut left alive in ``kgc gate``'s evaluation (benchmarks/mutation.py module
``gate.evaluate``: 378 of 509 mutants killed by the gate's fast tests, issue 21).

The survivors were in what the gate's own tests never read: the informational "not run"
list, the order of the blocking findings (the most severe first is what the one-screen
summary shows), the fields of each finding, the per-layer warn rule with a failure, and the
per-check skip rule's allowances. Pure: a verdict document in, a GateResult out.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent / "gate"))
from vdoc import DIGEST, NODE_LAYERS, full_node, result, verdict  # noqa: E402

from kgc.core.policy import Policy  # noqa: E402
from kgc.gate.gate import evaluate, parse_verdict  # noqa: E402

LAYERS = {**NODE_LAYERS, "gpu": "cluster"}


def gate(doc: dict[str, Any], policy: Policy, layers: dict[str, str] | None = None,
         checks: dict[str, list[str]] | None = None, profile: str = "lab"):  # type: ignore[no-untyped-def]
    d = parse_verdict(json.dumps(doc).encode(), "v.json")
    return evaluate(d, policy, profile, layers or NODE_LAYERS, checks, digest=DIGEST)


def test_not_run_lists_skipped_and_absent_optional_layers_per_target() -> None:
    """A layer the policy does not require is listed, per target of its scope, as all
    skipped (with the skips' reasons) or as not run; a layer of another scope is not."""
    rs = [r for r in full_node("node-a") if r["layer"] != "nri"]
    rs = [dict(r, status="skip", reason="no reboot was requested [simulated pods]")
          if r["layer"] == "reboot" else r for r in rs]
    res = gate(verdict(rs), Policy(require_layers=("iommu",)), LAYERS)
    assert res.green
    got = {(f.kind, f.layer, f.target, f.text) for f in res.not_run}
    assert got == {
        ("layer", "reboot", "node-a", "reboot on node-a: 1 skipped — no reboot was requested"),
        ("layer", "nri", "node-a", "nri on node-a: not run"),
    }


def test_skip_summary_keeps_two_reasons_and_counts_the_rest() -> None:
    rs = [result("reboot.a", "skip", reason="one"), result("reboot.b", "skip", reason="two"),
          result("reboot.c", "skip", reason="three [simulated: x]"),
          result("reboot.d", "skip", reason="four"), result("iommu.enabled")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",)))
    (f,) = [f for f in res.not_run if f.layer == "reboot"]
    assert f.text == "reboot on node-a: 4 skipped — one; two (+2 other reasons)"
    rs = [result("reboot.a", "skip", reason="one"), result("reboot.b", "skip", reason="two"),
          result("iommu.enabled")]
    (f,) = [f for f in gate(verdict(rs), Policy(require_layers=("iommu",))).not_run
            if f.layer == "reboot"]
    assert f.text == "reboot on node-a: 2 skipped — one; two"


def test_blocking_findings_most_severe_first() -> None:
    """run findings, then layer findings, then checks: errors before fails, by severity,
    by target."""
    rs = [result("iommu.enabled", "fail", severity="normal", target="node-b"),
          result("iommu.cmdline", "fail", severity="blocker", target="node-b"),
          result("vfio.driver", "error", severity="normal", target="node-b"),
          result("iommu.enabled", "fail", severity="normal", target="node-a"),
          result("iommu.cmdline", "pass", target="node-a"),
          result("vfio.driver", "pass", target="node-a")]
    res = gate(verdict(rs, profile="other"), Policy(require_layers=("iommu", "vfio",
                                                                    "reboot")))
    kinds = [f.kind for f in res.blocking]
    assert kinds == sorted(kinds, key={"run": 0, "layer": 1, "check": 2}.get)
    assert kinds[0] == "run" and "layer" in kinds
    checks = [(f.status, f.severity, f.target, f.check) for f in res.blocking
              if f.kind == "check"]
    assert checks == [("error", "normal", "node-b", "vfio.driver"),
                      ("fail", "blocker", "node-b", "iommu.cmdline"),
                      ("fail", "normal", "node-a", "iommu.enabled"),
                      ("fail", "normal", "node-b", "iommu.enabled")]


def test_a_check_finding_carries_the_result_fields() -> None:
    rs = [*full_node(), result("iommu.extra", "fail", severity="blocker", reason="broken",
                               remediation="fix it")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",)))
    (f,) = [f for f in res.blocking if f.kind == "check"]
    assert (f.target, f.check, f.layer, f.status, f.severity, f.reason, f.remediation) == (
        "node-a", "iommu.extra", "iommu", "fail", "blocker", "broken", "fix it")
    assert f.text == "iommu.extra on node-a (fail, blocker)"
    rs = [*full_node(), result("iommu.extra", "fail", severity="blocker", reason="broken")]
    (f,) = [f for f in gate(verdict(rs), Policy(require_layers=("iommu",))).blocking
            if f.kind == "check"]
    assert f.remediation == ""


def test_warn_and_soft_findings_name_their_rule() -> None:
    rs = [*full_node(), result("iommu.w", "warn", severity="blocker"),
          result("iommu.n", "fail", severity="minor")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",), warn="per-check"))
    assert [f.text for f in res.blocking] == [
        "iommu.w on node-a (warn on a blocking check; policy warn: per-check)"]
    assert [f.text for f in res.not_blocking] == [
        "iommu.n on node-a (fail, minor: severity does not block under this policy)"]
    res = gate(verdict(rs), Policy(require_layers=("iommu",)))
    assert {f.text for f in res.not_blocking} == {
        "iommu.w on node-a (warn)",
        "iommu.n on node-a (fail, minor: severity does not block under this policy)"}


def test_per_layer_warn_counts_a_failure_as_judged() -> None:
    """warn: per-layer needs a pass in each required layer, or a judged failure (which
    blocks by itself): a layer with only a blocking fail gives exactly one finding."""
    rs = [result("iommu.enabled", "fail", severity="blocker")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",), warn="per-layer"))
    assert [f.text for f in res.blocking] == ["iommu.enabled on node-a (fail, blocker)"]
    rs = [result("iommu.enabled", "warn", severity="blocker")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",), warn="per-layer"))
    assert [f.text for f in res.blocking] == [
        "required layer iommu on node-a: no check passed (1 warned; policy warn: per-layer)"]


def test_per_check_skip_honours_skip_allowed_and_waivers_for_missing_checks() -> None:
    rs = [result("iommu.enabled")]
    checks = {"iommu": ["iommu.enabled", "iommu.cmdline", "iommu.groups"]}
    pol = Policy(require_layers=("iommu",), skip="per-check", skip_allowed=("iommu.cmdline",),
                 waive={"iommu.groups": "no groups on this platform (TICKET-1)"})
    assert gate(verdict(rs), pol, checks=checks).green
    pol = Policy(require_layers=("iommu",), skip="per-check")
    res = gate(verdict(rs), pol, checks=checks)
    missing = [(f.kind, f.target, f.check, f.layer, f.status) for f in res.blocking]
    assert missing == [("check", "node-a", "iommu.cmdline", "iommu", "missing"),
                       ("check", "node-a", "iommu.groups", "iommu", "missing")]
    assert res.blocking[0].text == ("iommu.cmdline on node-a: no verdict (not run: left out "
                                    "of the selection; policy skip: per-check needs every "
                                    "check of a required layer)")


def test_every_missing_required_layer_is_named() -> None:
    """Two required layers this build lacks, then one it has: all three findings."""
    rs = [result("iommu.enabled")]
    res = gate(verdict(rs), Policy(require_layers=("zz", "yy", "iommu", "gpu")))
    texts = [f.text for f in res.blocking]
    assert any(t.startswith("required layer zz: not in this build") for t in texts)
    assert any(t.startswith("required layer yy: not in this build") for t in texts)
    assert {f.layer for f in res.blocking} == {"zz", "yy", "gpu"}


def test_the_result_records_profile_verdict_and_run_meta() -> None:
    res = gate(verdict(full_node()), Policy(require_layers=("iommu",)))
    assert (res.profile, res.verdict) == ("lab", "v.json")
    assert res.meta == {"started_at": "2026-12-01T00:00:00Z", "kgc_version": "0.1.0",
                        "profile": "lab", "targets": ["node-a"]}


def test_simulated_results_not_accepted_say_why() -> None:
    rs = [dict(result("iommu.enabled", simulated=True), simulated_why="")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",)))
    (f,) = res.not_accepted
    assert f.text == "iommu.enabled on node-a (pass): not accepted, simulated (a lab stand-in)"
    rs = [result("iommu.enabled", origin="bundle")]
    (f,) = gate(verdict(rs), Policy(require_layers=("iommu",),
                                    accept_replayed=False)).not_accepted
    assert f.text.endswith("replayed from a bundle (policy accepts live results only)")


# -- a sample (100, seed `s27`, stop 27) of evaluate and its helpers ----------------------------
def test_every_missing_blocker_is_named_after_one_resting_on_a_stand_in() -> None:
    """A simulated (stand-in) result of one blocker does not hide the next blocker that left
    no verdict at all: each is its own finding, with the concrete check and the remedy."""
    from kgc.gate.gate import NOT_ACCEPTED, WHOLE_LAYERS

    rs = [dict(result("iommu.cmdline", simulated=True), simulated_why="kwok node"),
          result("iommu.enabled")]
    checks = {"iommu": {"iommu.cmdline": "critical", "iommu.enabled": "blocker",
                        "iommu.groups": "blocker"}}
    res = gate(verdict(rs), Policy(require_layers=("iommu",)), checks=checks)  # type: ignore[arg-type]
    got = [(f.kind, f.check, f.layer, f.status, f.severity, f.remediation, f.text)
           for f in res.blocking if f.layer == "iommu"]
    assert got == [  # the most severe first
        ("check", "iommu.groups", "iommu", "missing", "blocker", WHOLE_LAYERS,
         "iommu.groups on node-a: no verdict (not run: left out of the selection; a blocker "
         "check the policy blocks on: it must be judged)"),
        ("check", "iommu.cmdline", "iommu", "missing", "critical", NOT_ACCEPTED,
         "iommu.cmdline on node-a: no accepted verdict (its result is simulated (kwok node); "
         "a critical check the policy blocks on: it must be judged)"),
    ]


def test_a_check_of_unknown_severity_may_block_and_must_be_judged() -> None:
    rs = [result("iommu.enabled")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",)),
               checks={"iommu": ["iommu.enabled", "iommu.groups"]})
    (f,) = [f for f in res.blocking if f.check == "iommu.groups"]
    assert f.text == ("iommu.groups on node-a: no verdict (not run: left out of the selection; "
                      "a check the policy may block on: it must be judged)")
    assert f.severity == ""


def test_a_verdict_without_a_profile_name_says_none() -> None:
    res = gate(verdict(full_node(), profile=""), Policy(require_layers=("iommu",)))
    (f,) = [f for f in res.blocking if f.kind == "run"]
    assert f.text == ("the verdict was judged against profile '(none)', not 'lab': a "
                      "certification for 'lab' needs a run with --profile lab")


def test_a_digest_from_another_kgc_version_says_which() -> None:
    from kgc import __version__

    doc = verdict(full_node(), digest="sha256:" + "c" * 64)
    doc["run"]["kgc_version"] = "0.0.1"
    (f,) = [f for f in gate(doc, Policy(require_layers=("iommu",))).blocking if f.kind == "run"]
    assert f.text == (
        f"the verdict was judged against a profile named 'lab' whose content is not the "
        f"policy's profile 'lab' (digest sha256:cccccccccccccccc… in the verdict, "
        f"{DIGEST[:23]}… here; judged by kgc 0.0.1, this is kgc {__version__} (a newer kgc "
        "may fill in new profile defaults)): an edited or lenient copy under that name does "
        "not certify under it")
    doc["run"]["kgc_version"] = __version__  # the same kgc: no version note
    (f,) = [f for f in gate(doc, Policy(require_layers=("iommu",))).blocking if f.kind == "run"]
    assert "judged by kgc" not in f.text and f.text.endswith(
        "here): an edited or lenient copy under that name does not certify under it")


def test_three_skip_reasons_show_two_and_count_one() -> None:
    rs = [result("reboot.a", "skip", reason="one"), result("reboot.b", "skip", reason="two"),
          result("reboot.c", "skip", reason="three"), result("iommu.enabled")]
    (f,) = [f for f in gate(verdict(rs), Policy(require_layers=("iommu",))).not_run
            if f.layer == "reboot"]
    assert f.text == "reboot on node-a: 3 skipped — one; two (+1 other reasons)"


# -- a second sample (100, seed `wt3-unseen-a`) -------------------------------------------------
def test_per_check_skip_names_every_check_of_a_required_layer_never_run() -> None:
    rs = [r for r in full_node() if r["layer"] != "iommu"]
    pol = Policy(require_layers=("iommu",), skip="per-check")
    res = gate(verdict(rs), pol, checks={"iommu": {"iommu.enabled": "blocker",
                                                   "iommu.groups": "minor"}})
    got = {(f.check, f.text) for f in res.blocking if f.kind == "check"}
    assert got == {(c, f"{c} on node-a: no verdict (not run: left out of the selection; "
                       "policy skip: per-check needs every check of a required layer)")
                   for c in ("iommu.enabled", "iommu.groups")}


def test_a_missing_check_quotes_the_whole_selection() -> None:
    doc = verdict(full_node(), markers="host", keywords="not cmdline")
    res = gate(doc, Policy(require_layers=("iommu",)),
               checks={"iommu": {"iommu.enabled": "blocker", "iommu.groups": "blocker"}})
    (f,) = [f for f in res.blocking if f.check == "iommu.groups"]
    assert f.text == ("iommu.groups on node-a: no verdict (not run: left out of the selection "
                      "-m 'host' -k 'not cmdline'; a blocker check the policy blocks on: it "
                      "must be judged)")
    assert f.target == "node-a"
    # the layer itself was judged on node-a (its other checks ran), the finding names the gap
    assert res.judged == {"iommu": ("node-a",)}


def test_a_blocker_resting_on_a_stand_in_is_a_finding_on_its_target() -> None:
    rs = [dict(result("iommu.groups", simulated=True), simulated_why="kwok"),
          result("iommu.enabled")]
    res = gate(verdict(rs), Policy(require_layers=("iommu",)),
               checks={"iommu": {"iommu.enabled": "blocker", "iommu.groups": "blocker"}})
    (f,) = [f for f in res.blocking if f.check == "iommu.groups"]
    assert (f.target, f.layer, f.status) == ("node-a", "iommu", "missing")
    assert "iommu" not in res.judged  # a blocker judged only by a stand-in: never "judged"


def test_run_findings_carry_their_remedies() -> None:
    from kgc.gate.gate import RERUN

    (f,) = [f for f in gate(verdict(full_node(), digest=None),
                            Policy(require_layers=("iommu",))).blocking if f.kind == "run"]
    assert f.remediation == RERUN
    doc = verdict(full_node(), digest="sha256:" + "c" * 64)
    (f,) = [f for f in gate(doc, Policy(require_layers=("iommu",))).blocking if f.kind == "run"]
    assert f.remediation == (
        "Judge the run with the policy's own profile (--profile lab, the same file the gate "
        "reads) and gate that verdict; if the run's profile is the one that should decide, "
        "gate with it: kgc gate VERDICT --profile FILE.")


def test_a_target_is_scoped_by_its_results_when_the_selection_lists_none() -> None:
    doc = verdict(full_node())
    doc["run"]["selection"]["targets"] = {}
    res = gate(doc, Policy(require_layers=("iommu",)))
    assert res.green, [f.text for f in res.blocking]
    assert res.judged == {"iommu": ("node-a",)}


def test_findings_about_targets_and_layers_name_them() -> None:
    doc = verdict(full_node(), targets={"node-a": "node"})
    doc["run"]["targets"].append("ghost")
    (f,) = [f for f in gate(doc, Policy(require_layers=("iommu",))).blocking
            if "ghost" in f.text]
    assert (f.kind, f.target) == ("run", "ghost")
    res = gate(verdict(full_node()), Policy(require_layers=("gpu",)), LAYERS)
    (f,) = [f for f in res.blocking if f.layer == "gpu"]
    assert (f.kind, f.text) == ("layer", "required layer gpu was not judged: the run had no "
                                "cluster target")


def test_blocking_findings_sort_by_status_then_check_whatever_the_file_order() -> None:
    rs = [result("iommu.groups", "fail"), result("iommu.cmdline", "fail"),
          result("iommu.enabled", "error")]
    doc = verdict(rs)
    doc["results"] = [doc["results"][i] for i in (2, 0, 1)]  # groups, cmdline, enabled
    res = gate(doc, Policy(require_layers=("iommu",)),
               checks={"iommu": {"iommu.enabled": "critical", "iommu.groups": "critical",
                                 "iommu.cmdline": "critical", "iommu.dmar": "critical"}})
    assert [(f.check, f.status) for f in res.blocking] == [
        ("iommu.enabled", "error"), ("iommu.cmdline", "fail"), ("iommu.groups", "fail"),
        ("iommu.dmar", "missing")]


# -- a third sample (100, seed `wt3-unseen-b`) --------------------------------------------------
def test_run_findings_in_words() -> None:
    pol = Policy(require_layers=("iommu",))
    texts = [f.text for f in gate(verdict(full_node(), incomplete=True), pol).blocking
             if f.kind == "run"]
    assert texts == ["the run did not finish (verdict marked incomplete): run it again to the "
                     "end"]
    texts = [f.text for f in gate(verdict(full_node(), digest=None), pol).blocking
             if f.kind == "run"]
    assert texts == ["the verdict was written before kgc recorded the profile digest "
                     "(run.profile_digest): it cannot show which profile content judged it — "
                     "run it again"]
    texts = [f.text for f in gate(verdict([]), pol).blocking if f.kind == "run"]
    assert "the verdict holds no result: nothing was judged" in texts


def test_missing_checks_of_known_and_unknown_severity_sort_known_first() -> None:
    rs = [result("iommu.enabled"), result("vfio.driver")]
    res = gate(verdict(rs), Policy(require_layers=("iommu", "vfio")),
               checks={"iommu": {"iommu.enabled": "blocker", "iommu.groups": "blocker"},
                       "vfio": ["vfio.driver", "vfio.bound"]})  # type: ignore[dict-item]
    assert [(f.check, f.severity) for f in res.blocking] == [("iommu.groups", "blocker"),
                                                             ("vfio.bound", "")]
