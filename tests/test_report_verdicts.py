"""The core verdict logic the mutation run covers: ``Check.judge`` (an evaluator's outcome
-> a verdict, crashes included) and ``overall`` (only invariants every version keeps: no
result is not a pass, any fail or error is a fail, a clean pass is a pass)."""

from __future__ import annotations

from kgc.core.model import (
    Check,
    Outcome,
    Severity,
    Status,
    errored,
    failed,
    passed,
    skipped,
    warned,
)
from kgc.core.report import overall


def _check(fn) -> Check:  # type: ignore[no-untyped-def]
    return Check("x.y", "x", "Title", Severity.CRITICAL, "default fix", fn, "doc")


def test_judge_copies_every_field_of_the_outcome() -> None:
    v = _check(lambda e, p: failed("bad", "do this", expected="a", found="b", k=1)).judge(
        None, None, "node1")
    assert (v.check, v.layer, v.title, v.severity, v.target) == (
        "x.y", "x", "Title", Severity.CRITICAL, "node1")
    assert (v.status, v.reason, v.remediation, v.expected, v.found) == (
        Status.FAIL, "bad", "do this", "a", "b")
    assert v.evidence == {"k": 1}
    d = v.to_dict()
    assert d["status"] == "fail" and d["severity"] == "critical" and d["evidence"] == {"k": 1}
    assert d["expected"] == "a" and d["found"] == "b" and d["target"] == "node1"


def test_judge_uses_the_check_remediation_when_the_outcome_has_none() -> None:
    assert _check(lambda e, p: failed("bad")).judge(None, None, "t").remediation == "default fix"
    assert _check(lambda e, p: warned("meh")).judge(None, None, "t").remediation == "default fix"
    assert _check(lambda e, p: errored("?")).judge(None, None, "t").remediation == "default fix"


def test_a_pass_or_a_plain_skip_has_nothing_to_fix() -> None:
    assert _check(lambda e, p: passed("ok")).judge(None, None, "t").remediation == ""
    assert _check(lambda e, p: skipped("n/a")).judge(None, None, "t").remediation == ""
    out = Outcome(Status.SKIP, "n/a", {}, "enable the thing")
    assert _check(lambda e, p: out).judge(None, None, "t").remediation == "enable the thing"
    out = Outcome(Status.PASS, "ok", {}, "ignored")
    assert _check(lambda e, p: out).judge(None, None, "t").remediation == ""


def test_a_crashing_evaluator_is_an_error_verdict_naming_the_exception() -> None:
    def boom(e, p):  # type: ignore[no-untyped-def]
        raise KeyError("socket_path")

    v = _check(boom).judge({}, None, "t")
    assert v.status is Status.ERROR
    assert v.reason.startswith("evaluator crashed: KeyError")
    assert "socket_path" in v.reason
    assert v.remediation == ("This is a defect in kgc; please report it with the evidence "
                             "bundle (`kgc snapshot`).")
    assert v.evidence == {}


def test_an_evaluator_returning_no_outcome_is_an_error() -> None:
    v = _check(lambda e, p: "pass").judge(None, None, "t")
    assert v.status is Status.ERROR
    assert v.reason == "evaluator returned str, not Outcome"
    assert v.remediation == "default fix"


def test_the_evaluator_sees_the_evidence_and_the_profile() -> None:
    seen = []
    _check(lambda e, p: seen.append((e, p)) or passed("ok")).judge("EV", "PROF", "t")
    assert seen == [("EV", "PROF")]


def _r(*statuses: str) -> list[dict[str, str]]:
    return [{"status": s, "check": f"c{i}", "target": "t"} for i, s in enumerate(statuses)]


def test_overall_invariants() -> None:
    assert overall([]) == "fail"
    assert overall(_r("pass")) == "pass"
    assert overall(_r("pass", "warn", "skip")) == "pass"
    assert overall(_r("pass", "fail")) == "fail"
    assert overall(_r("pass", "error")) == "fail"
    assert overall(_r("error")) == "fail"
    assert overall(_r("fail", "pass", "pass")) == "fail"
    assert overall(iter(_r("pass", "pass"))) == "pass"


# -- what was really judged: the profile's digest and the selection (issue 21) ----------------
def test_profile_digest_is_the_profiles_judging_content(tmp_path) -> None:
    from kgc.core.profile import load_profile
    from kgc.core.report import profile_digest

    lab = load_profile("lab")
    text = (tmp_path / "x").parent.joinpath("lab.yaml")
    src = lab.source
    text.write_text("# a copy, reformatted\n" + open(src).read()
                    + "policy:\n  warn: per-check\n")  # another release policy: same content
    assert profile_digest(load_profile(text)) == profile_digest(lab)
    assert profile_digest(lab).startswith("sha256:") and len(profile_digest(lab)) == 71
    looser = lab.model_copy(update={"host": lab.host.model_copy(update={
        "iommu": lab.host.iommu.model_copy(update={"require_interrupt_remapping": False})})})
    assert profile_digest(looser) != profile_digest(lab)
    assert profile_digest(lab.model_copy(update={"name": "other"})) != profile_digest(lab)
    assert profile_digest(load_profile("generic-nvidia-passthrough")) != profile_digest(lab)


def test_run_identity_says_what_the_selection_left_out() -> None:
    from kgc.core.registry import load_layers
    from kgc.core.report import run_identity

    layers = load_layers()
    iommu = [c.id for c in layers["iommu"].checks]
    rs = [{"target": "n1", "check": c} for c in iommu[1:]] + [
        {"target": "n2", "check": c} for c in iommu]
    ident = run_identity("sha256:x", {"n1": "node", "n2": "node", "k": "cluster"}, ["iommu"],
                         rs, markers="iommu", keywords="not platform", registry=layers)
    assert ident["profile_digest"] == "sha256:x"
    sel = ident["selection"]
    assert sel["markers"] == "iommu" and sel["keywords"] == "not platform"
    assert sel["targets"] == {"n1": "node", "n2": "node", "k": "cluster"}
    assert sel["checks_not_run"] == {"n1": [iommu[0]]}  # a cluster has no iommu checks
    assert sel["layers_not_selected"] == [n for n in layers if n != "iommu"]
