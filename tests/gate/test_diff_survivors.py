"""`kgc diff`: what the mutation samples of issue 21 item 8 (stop 27) showed no test read --
the regression findings of a vanished check, a new-only target's blocking marks, the figures
of `expected` and of the run, the timing figures left out (their count is printed), nested
timing keys and the profile warning's text."""

from __future__ import annotations

import json

from vdoc import DIGEST, NODE_LAYERS, full_node, verdict

from kgc.core.policy import Policy
from kgc.gate import diff as gdiff
from kgc.gate.gate import parse_verdict

POL = Policy(require_layers=tuple(NODE_LAYERS))


def d(old: dict, new: dict, *, timing: bool = False) -> gdiff.DiffResult:
    return gdiff.diff(parse_verdict(json.dumps(old).encode(), "old.json"),
                      parse_verdict(json.dumps(new).encode(), "new.json"), POL, "lab",
                      NODE_LAYERS, digest=DIGEST, timing=timing)


def test_a_vanished_check_is_a_finding_naming_it_its_layer_and_severity() -> None:
    old = verdict(full_node(**{"iommu.cmdline": "fail"}))
    new = verdict([r for r in full_node() if r["check"] != "iommu.cmdline"])
    r = d(old, new)
    (f,) = [f for f in r.regressions if f.check == "iommu.cmdline"]
    assert f.kind == "check" and f.target == "node-a" and f.layer == "iommu"
    assert f.status == "absent" and f.severity == "critical"
    assert f.text == ("iommu.cmdline on node-a: fail in OLD, no result in NEW (a check that is "
                      "no longer judged is a regression)")
    assert f.reason == "not judged in NEW"
    assert f"  - {f.text}" in gdiff.render(r)
    # the vanished row keeps OLD's severity and reason (NEW has none)
    (ch,) = r.targets[0].vanished
    assert (ch.severity, ch.reason, ch.blocking) == ("critical", "iommu.cmdline is fail", True)
    assert "iommu.cmdline: fail -> ABSENT  BLOCKS  iommu.cmdline is fail" in gdiff.render(r)


def test_a_target_gone_from_new_regresses_check_by_check() -> None:
    old = verdict(full_node("a") + full_node("b", **{"vfio.driver": "fail"}))
    new = verdict(full_node("a") + full_node("c"))
    r = d(old, new)
    lost = {f.check for f in r.regressions if f.kind == "check" and f.target == "b"}
    assert lost == {x["check"] for x in full_node()}
    (tb,) = [t for t in r.targets if t.target == "b"]
    assert all(c.blocking for c in tb.vanished)
    assert {c.check: c.severity for c in tb.vanished} == {x["check"]: x["severity"]
                                                          for x in full_node()}
    assert [c.reason for c in tb.vanished if c.check == "vfio.driver"] == ["vfio.driver is fail"]


def test_a_target_only_in_new_marks_its_blocking_failures() -> None:
    old = verdict(full_node("a") + full_node("b"))
    new = verdict(full_node("a") + full_node("c", **{"vfio.driver": "fail",
                                                     "runtime.nri-ignored-keys": "fail"}))
    r = d(old, new)
    (tc,) = [t for t in r.targets if t.target == "c"]
    marks = {c.check: c.blocking for c in tc.new_failures}
    assert marks == {"vfio.driver": True, "runtime.nri-ignored-keys": False}  # minor: no block
    assert "vfio.driver: absent -> FAIL  BLOCKS" in gdiff.render(r)
    assert all(not c.blocking for c in tc.changed)


def test_a_new_failure_carries_its_severity() -> None:
    r = d(verdict(full_node()), verdict(full_node(**{"iommu.enabled": "fail"})))
    (ch,) = r.targets[0].new_failures
    assert (ch.check, ch.severity, ch.reason) == ("iommu.enabled", "blocker",
                                                  "iommu.enabled is fail")


def test_a_changed_expected_value_is_a_figure() -> None:
    def run(vcpus: int) -> dict:
        rs = full_node()
        rs[0] = dict(rs[0], expected=f"{vcpus} vCPUs", found="4 vCPUs")
        return verdict(rs)

    figs = d(run(4), run(8)).targets[0].figures
    assert [(f.check, f.field, f.old, f.new) for f in figs] == [
        ("iommu.enabled", "expected", 4.0, 8.0)]


def test_a_number_that_became_text_is_still_a_figure() -> None:
    def run(v: object) -> dict:
        rs = full_node()
        rs[0] = dict(rs[0], evidence={"units": v})
        return verdict(rs)

    figs = d(run(2), run("3")).targets[0].figures
    assert [(f.field, f.old, f.new) for f in figs] == [("evidence.units", 2.0, 3.0)]


def test_run_environment_numbers_and_keys_new_has_alone() -> None:
    # a key only NEW has must not stop the comparison of the keys after it; a number
    # recorded as a number is a figure like one recorded as text
    old = verdict(full_node(), environment={"node-a.round_trips": "1", "node-a.vcpus": 4})
    new = verdict(full_node(), environment={"node-a.new_key": "5", "node-a.round_trips": "3",
                                            "node-a.vcpus": 8})
    r = d(old, new)
    assert [(f.check, f.field, f.old, f.new) for f in r.run_figures] == [
        ("(run)", "environment.node-a.round_trips", 1.0, 3.0),
        ("(run)", "environment.node-a.vcpus", 4.0, 8.0)]


def test_the_run_duration_is_a_timing_figure_shown_only_with_timing() -> None:
    old, new = verdict(full_node(), duration_s=10.0), verdict(full_node(), duration_s=12.5)
    r = d(old, new, timing=True)
    assert [(f.check, f.field, f.old, f.new) for f in r.run_figures] == [
        ("(run)", "duration_s", 10.0, 12.5)]
    assert "(run) duration_s: 10 -> 12.5 (+25%)" in gdiff.render(r)
    r = d(old, new)
    assert r.run_figures == [] and r.timing_left_out == 1
    assert "(1 timing figure(s) left out" in gdiff.render(r)


def test_timing_figures_of_the_run_environment_are_counted_as_left_out() -> None:
    old = verdict(full_node(), environment={"node-a.boot_wait_s": "3", "node-a.vcpus": "4"})
    new = verdict(full_node(), environment={"node-a.boot_wait_s": "5", "node-a.vcpus": "8"})
    r = d(old, new)
    assert [f.field for f in r.run_figures] == ["environment.node-a.vcpus"]
    assert r.timing_left_out == 1
    r = d(old, new, timing=True)
    assert [f.field for f in r.run_figures] == ["environment.node-a.boot_wait_s",
                                                "environment.node-a.vcpus"]
    assert r.timing_left_out == 0


def test_a_nested_wait_is_timing_noise() -> None:
    assert gdiff.is_timing("evidence.boot.waited_s")
    assert gdiff.is_timing("evidence.pods[3].started_at")
    assert not gdiff.is_timing("evidence.boot.vcpus")
    assert not gdiff.is_timing("evidence.waited_s.count")  # the last key decides

    def run(w: float) -> dict:
        rs = full_node()
        rs[0] = dict(rs[0], evidence={"boot": {"waited_s": w, "vcpus": 4}})
        return verdict(rs)

    r = d(run(1.0), run(2.0))
    assert r.targets[0].figures == [] and r.timing_left_out == 1


def test_the_profile_warning_names_both_digests() -> None:
    old = verdict(full_node())
    new = verdict(full_node())
    old["run"]["profile_digest"] = "sha256:" + "a" * 64
    new["run"]["profile_digest"] = "sha256:" + "b" * 64
    (w,) = d(old, new).warnings
    assert w == ("warning: OLD and NEW were judged against different contents of profile "
                 "'lab' (digest sha256:aaaaaaaaaaaa… vs sha256:bbbbbbbbbbbb…): what changed is "
                 "the profile too, not only the target")



# -- a second sample (100, seed `wt3-unseen-a`) ---------------------------------------------
def test_a_renamed_target_keeps_its_blockers_and_its_environment_figures() -> None:
    # one target each, named after the image files: the same blocker failing in both is no
    # regression, and the per-target environment keys are compared across the rename
    old = verdict(full_node("image:n1", **{"iommu.enabled": "fail"}),
                  environment={"image:n1.round_trips": "1", "guest.vcpus": "4"})
    new = verdict(full_node("image:n2", **{"iommu.enabled": "fail"}),
                  environment={"image:n2.round_trips": "3", "guest.vcpus": "8"})
    r = d(old, new)
    assert not r.regressed, [f.text for f in r.regressions]
    assert r.targets[0].still_failing == 1
    assert [(f.field, f.old, f.new) for f in r.run_figures] == [
        ("environment.image:n2.round_trips", 1.0, 3.0), ("environment.guest.vcpus", 4.0, 8.0)]


def test_a_failure_that_now_warns_is_fixed() -> None:
    r = d(verdict(full_node(**{"vfio.driver": "fail"})),
          verdict(full_node(**{"vfio.driver": "warn"})))
    assert [(c.check, c.old, c.new) for c in r.targets[0].fixed] == [
        ("vfio.driver", "fail", "warn")]
    assert r.targets[0].changed == []


def test_a_target_only_in_new_is_headed_as_such() -> None:
    r = d(verdict(full_node("a") + full_node("b")), verdict(full_node("a") + full_node("c")))
    (tc,) = [t for t in r.targets if t.target == "c"]
    assert (tc.old_name, tc.new_name) == (None, "c")
    assert "-- c (only in NEW)" in gdiff.render(r).splitlines()


def test_evidence_keys_on_one_side_only_are_no_figures() -> None:
    rs_old, rs_new = full_node(), full_node()
    rs_old[0] = dict(rs_old[0], evidence={"units": 2, "gone": 7})
    rs_new[0] = dict(rs_new[0], evidence={"units": 3, "added": 9})
    figs = d(verdict(rs_old), verdict(rs_new)).targets[0].figures
    assert [(f.field, f.old, f.new) for f in figs] == [("evidence.units", 2.0, 3.0)]


# -- a third sample (100, seed `wt3-unseen-b`) ----------------------------------------------
def test_a_text_whose_words_changed_is_no_figure() -> None:
    def run(found: str) -> dict:
        rs = full_node()
        rs[0] = dict(rs[0], found=found)
        return verdict(rs)

    assert d(run("boot 3 s"), run("halt 5 s")).targets[0].figures == []
    assert [(f.field, f.old, f.new) for f in d(run("boot 3 s"), run("boot 5 s"))
            .targets[0].figures] == [("found", 3.0, 5.0)]


def test_a_new_only_targets_rows_carry_their_severity() -> None:
    r = d(verdict(full_node("a") + full_node("b")),
          verdict(full_node("a") + full_node("c", **{"iommu.enabled": "fail"})))
    (tc,) = [t for t in r.targets if t.target == "c"]
    assert {c.check: c.severity for c in tc.new_failures + tc.changed} == {
        x["check"]: x["severity"] for x in full_node()}


def test_the_profile_warning_names_a_missing_old_profile() -> None:
    (w,) = d(verdict(full_node(), profile=""), verdict(full_node())).warnings
    assert w == ("warning: OLD was judged against profile '(none)', NEW against 'lab': what "
                 "changed is the profile too, not only the target")
