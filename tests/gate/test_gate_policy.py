"""The release policy and `kgc gate`'s decision (pure: verdict + policy -> result)."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from vdoc import ALL_LAYERS, DIGEST, NODE_LAYERS, full_node, result, verdict

from kgc.core.policy import Policy
from kgc.core.profile import Profile, ProfileError, load_profile
from kgc.gate.gate import VerdictError, evaluate, parse_verdict, render

NODE = tuple(NODE_LAYERS)


def gate(doc: dict, policy: Policy | None = None, profile: str = "lab",
         layers: dict | None = None, checks: dict | None = None):
    d = parse_verdict(json.dumps(doc).encode(), "v.json")
    pol = policy if policy is not None else Policy(require_layers=NODE)
    return evaluate(d, pol, profile, layers or NODE_LAYERS, checks, digest=DIGEST)


def blocking_checks(res) -> set[str]:
    return {f.check for f in res.blocking if f.kind == "check"}


# -- the policy model ------------------------------------------------------------------------
def test_policy_is_strict_like_every_profile_section(tmp_path) -> None:
    with pytest.raises(ValidationError, match="extra"):
        Policy.model_validate({"block_severity": ["blocker"]})
    with pytest.raises(ValidationError):
        Policy.model_validate({"warn": "sometimes"})
    with pytest.raises(ValidationError, match="check-id glob"):
        Policy.model_validate({"block_checks": ["persistence.* ; rm -rf /"]})
    with pytest.raises(ValidationError, match="needs a reason"):
        Policy.model_validate({"waive": {"nri.handshake": "  "}})
    with pytest.raises(ValidationError, match="layer name"):
        Policy.model_validate({"require_layers": ["Persistence!"]})
    bad = tmp_path / "p.yaml"
    bad.write_text("name: x\npolicy:\n  warn: per-check\n  blok_checks: []\n")
    with pytest.raises(ProfileError, match=r"policy\.blok_checks: unknown field"):
        load_profile(bad)


def test_builtin_profiles_carry_the_default_policy() -> None:
    for name in ("lab", "generic-nvidia-passthrough"):
        p = load_profile(name).policy
        assert p.require_layers is None  # every layer this build has
        assert p.image_require_layers == ("persistence", "runtime")
        assert not p.accept_simulated and p.accept_replayed
        assert p.warn == "pass" and p.skip == "per-layer"
    pol = Profile.model_validate({"name": "x", "policy": {"warn": "per-check"}}).policy
    assert pol.warn == "per-check"


# -- what blocks -------------------------------------------------------------------------------
def test_all_green_node_run_is_certified() -> None:
    res = gate(verdict(full_node()))
    assert res.green, render(res)
    assert set(res.judged) == set(NODE)
    assert "CERTIFIED" in render(res).splitlines()[0]


def test_failures_block_by_severity_and_by_glob_and_waivers_win() -> None:
    rs = full_node(**{"persistence.cmdline": "fail", "runtime.nri-ignored-keys": "fail"})
    res = gate(verdict(rs))
    assert blocking_checks(res) == {"persistence.cmdline"}  # normal blocks, minor does not
    assert [f.check for f in res.not_blocking] == ["runtime.nri-ignored-keys"]
    res = gate(verdict(rs), Policy(require_layers=NODE, block_severities=("blocker",),
                                   block_checks=("runtime.nri-*",)))
    assert blocking_checks(res) == {"runtime.nri-ignored-keys"}
    res = gate(verdict(rs), Policy(require_layers=NODE, waive={
        "persistence.cmd*": "KGC-12: grub regenerated at first boot"}))
    assert blocking_checks(res) == set()
    assert res.green and "KGC-12" in res.waived[0].text


def test_error_blocks_like_a_fail() -> None:
    res = gate(verdict(full_node(**{"iommu.enabled": "error"})))
    assert blocking_checks(res) == {"iommu.enabled"} and not res.green


@pytest.mark.parametrize("mode,blocks", [("pass", False), ("per-check", True),
                                         ("per-layer", False)])
def test_warn_per_check(mode: str, blocks: bool) -> None:
    res = gate(verdict(full_node(**{"persistence.cmdline": "warn"})),
               Policy(require_layers=NODE, warn=mode))  # type: ignore[arg-type]
    assert (not res.green) is blocks
    assert ("persistence.cmdline" in blocking_checks(res)) is blocks


def test_warn_per_layer_needs_a_pass_in_each_required_layer() -> None:
    rs = [r for r in full_node() if r["layer"] != "persistence"]
    rs += [result("persistence.coverage", "warn", severity="blocker"),
           result("persistence.cmdline", "skip", severity="normal")]
    assert gate(verdict(rs), Policy(require_layers=NODE, warn="pass")).green
    res = gate(verdict(rs), Policy(require_layers=NODE, warn="per-layer"))
    assert not res.green
    assert any(f.layer == "persistence" and "no check passed" in f.text for f in res.blocking)


def test_skip_per_layer_and_per_check() -> None:
    rs = full_node(**{"persistence.cmdline": "skip"})
    assert gate(verdict(rs)).green
    res = gate(verdict(rs), Policy(require_layers=NODE, skip="per-check"))
    assert blocking_checks(res) == {"persistence.cmdline"}
    assert gate(verdict(rs), Policy(require_layers=NODE, skip="per-check",
                                    skip_allowed=("persistence.cmd*",))).green


def test_skip_per_check_also_blocks_a_check_with_no_verdict() -> None:
    checks = {"persistence": ("persistence.coverage", "persistence.cmdline",
                              "persistence.initramfs")}
    res = gate(verdict(full_node()), Policy(require_layers=NODE, skip="per-check"),
               checks=checks)
    assert [f.check for f in res.blocking] == ["persistence.initramfs"]
    assert "no verdict" in res.blocking[0].text


def test_a_run_that_left_out_a_required_layer_cannot_gate_green() -> None:
    rs = [r for r in full_node() if r["layer"] != "reboot"]
    res = gate(verdict(rs))
    assert not res.green and blocking_checks(res) == set()
    assert any("reboot was not run on node-a" in f.text for f in res.blocking)
    # every check of the layer skipped: not judged, and the skip reason is shown
    rs2 = rs + [result("reboot.returned", "skip",
                       reason="not run: needs --allow-reboot (it reboots the node)")]
    res = gate(verdict(rs2))
    assert any("reboot was not judged on node-a" in f.text and "--allow-reboot" in f.text
               for f in res.blocking)
    # a layer with results that run.layers_judged omits: inconsistent, not green
    doc = verdict(full_node(), layers_judged=[n for n in NODE if n != "vfio"])
    res = gate(doc)
    assert any("layers_judged omits it" in f.text for f in res.blocking)


def test_required_layers_default_to_every_layer_of_this_build() -> None:
    res = gate(verdict(full_node()), Policy(), layers=ALL_LAYERS)
    assert not res.green
    texts = " ".join(f.text for f in res.blocking)
    for lay in ("gpu", "sizing", "keda"):
        assert f"required layer {lay} was not judged: the run had no cluster target" in texts
    res = gate(verdict(full_node()), Policy(require_layers=("iommu", "magic")))
    assert any("magic: not in this build" in f.text for f in res.blocking)


def test_required_layer_must_be_judged_on_every_node_target() -> None:
    rs = full_node("node-a") + [r for r in full_node("node-b") if r["layer"] != "runtime"]
    res = gate(verdict(rs))
    assert [(f.layer, f.target) for f in res.blocking] == [("runtime", "node-b")]
    assert res.judged["runtime"] == ("node-a",)


def test_simulated_and_replayed_results_are_accepted_only_if_the_policy_says_so() -> None:
    rs = [r for r in full_node() if r["layer"] != "runtime"]
    rs += [result("runtime.nri-enabled", simulated=True),
           result("runtime.nri-ignored-keys", "fail", simulated=True, severity="blocker")]
    res = gate(verdict(rs))
    assert not res.green
    assert blocking_checks(res) == set()  # a simulated fail does not block ...
    assert any("runtime" in f.text and "no accepted result" in f.text for f in res.blocking)
    assert len(res.not_accepted) == 2  # ... and nothing simulated counts as judged
    res = gate(verdict(rs), Policy(require_layers=NODE, accept_simulated=True))
    assert blocking_checks(res) == {"runtime.nri-ignored-keys"}
    replayed = [dict(r, origin="bundle") for r in full_node()]
    assert gate(verdict(replayed)).green
    res = gate(verdict(replayed), Policy(require_layers=NODE, accept_replayed=False))
    assert not res.green and len(res.not_accepted) == len(replayed)


def test_run_level_blockers() -> None:
    assert "judged against profile 'generic'" in gate(
        verdict(full_node(), profile="generic")).blocking[0].text
    assert "did not finish" in gate(verdict(full_node(), incomplete=True)).blocking[0].text
    res = gate(verdict([]))
    assert "holds no result" in res.blocking[0].text


def test_image_verdicts_use_the_image_required_layers() -> None:
    rs = [result("persistence.coverage", severity="blocker"), result("runtime.nri-enabled")]
    rs += [result("iommu.enabled", "skip", reason="needs a running node")]
    res = gate(verdict(rs, image=True), Policy())
    assert res.green and res.required == ("persistence", "runtime") and res.image
    res = gate(verdict(rs, image=True), Policy(image_require_layers=("persistence", "iommu")))
    assert not res.green


def test_summary_fits_one_screen_blockers_first_with_their_fix() -> None:
    rs = []
    for i in range(30):
        rs.append(result(f"runtime.c{i:02d}", "fail", severity="minor" if i % 2 else "blocker",
                         remediation="Add to /etc/containerd/config.toml:\n[plugins.x]\n"
                         "  disable = false\n  socket = 1\n  more = 2\n  even = 3"))
    rs += [r for r in full_node() if r["layer"] != "runtime"]
    rs = [r for r in rs if r["layer"] != "reboot"]
    text = render(gate(verdict(rs)))
    lines = text.splitlines()
    assert len(lines) <= 42
    assert lines[0].startswith("kgc gate: NOT CERTIFIED")
    assert lines[2].startswith("blocking (16)")
    assert "required layer reboot" in lines[3]  # layers not judged come first
    assert "runtime.c00 on node-a (fail, blocker)" in text
    assert "  disable = false" in text  # remediation keeps its line breaks
    assert "kgc gate --json" in text
    assert lines[-1].startswith("exit 1")


# -- bad input: one VerdictError line, never another exception -----------------------------------
@pytest.mark.parametrize("data,msg", [
    (b"", "empty file"),
    (b"   \n", "empty file"),
    (b"\xff\xfe\x00x", "not UTF-8"),
    (b"{not json", "not JSON"),
    (b"[1, 2]", "top level is a list"),
    (b'{"schema": "junit/9"}', "not a kgc verdict (schema 'junit/9'"),
    (b'{"format": "kgc-bundle/2", "host": {}}', "an evidence bundle"),
    (b'{"schema": "kgc-verdict/1", "run": []}', "`run` must be an object"),
])
def test_corrupt_and_foreign_input(data: bytes, msg: str) -> None:
    with pytest.raises(VerdictError, match="v.json: ") as ei:
        parse_verdict(data, "v.json")
    assert msg in str(ei.value) and "\n" not in str(ei.value)


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d["results"][0].pop("origin"), "has no `origin`"),
    (lambda d: d["results"][0].update(simulated="yes"), "simulated must be true or false"),
    (lambda d: d["results"][0].update(status="maybe"), "status 'maybe' is not one of"),
    (lambda d: d["results"][0].update(severity=None), "severity must be text, got null"),
    (lambda d: d["results"][0].update(check="vfio.driver"), "is not in its layer"),
    (lambda d: d["counts"].update({"pass": 99}), "do not match the results"),
    (lambda d: d.update(incomplete="no"), "`incomplete` must be true or false"),
    (lambda d: d["run"].pop("layers_judged"), "run has no `layers_judged`"),
    # the lab's main job merges runs judged under profiles of their own (kgc lab certify):
    # said as such, not as a missing field
    (lambda d: d.update(run={"kind": "merged", "stages": {"node": d["run"], "cluster": {}}}),
     "merged from 2 runs (node, cluster), each judged under its own profile: not one run "
     "the gate can judge; gate each run's own verdict.json"),
    (lambda d: d.update(results=[None]), "results[0] must be an object, got null"),
])
def test_malformed_verdicts_name_the_field(mutate, msg: str) -> None:
    doc = verdict(full_node())
    mutate(doc)
    with pytest.raises(VerdictError) as ei:
        parse_verdict(json.dumps(doc).encode(), "v.json")
    assert msg in str(ei.value)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                     | st.text(max_size=20),
                     lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10),
                                                                        c, max_size=4),
                     max_leaves=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=_json, keep_schema=st.booleans())
def test_parser_is_total(doc, keep_schema: bool) -> None:
    if keep_schema and isinstance(doc, dict):
        doc["schema"] = "kgc-verdict/1"
    try:
        d = parse_verdict(json.dumps(doc).encode(), "v.json")
    except VerdictError as exc:
        assert "\n" not in str(exc)
        return
    evaluate(d, Policy(), "lab", NODE_LAYERS, digest=DIGEST)


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(["check", "layer", "target", "status", "severity", "reason",
                              "remediation", "origin", "simulated", "evidence", "title"]),
       value=_json)
def test_any_wrong_field_value_is_one_line_or_accepted(field: str, value) -> None:
    doc = verdict(full_node())
    doc["results"][2][field] = value
    doc.pop("counts")
    try:
        d = parse_verdict(json.dumps(doc).encode(), "v.json")
    except VerdictError as exc:
        assert "results[2]" in str(exc) and "\n" not in str(exc)
        return
    render(evaluate(d, Policy(), "lab", NODE_LAYERS, digest=DIGEST))


# -- what was really run (issue 21): the profile's content, the selection, the targets --------
CAT = {"iommu": {"iommu.enabled": "blocker", "iommu.cmdline": "critical",
                 "iommu.mode": "normal", "iommu.extra": "minor"}}


def test_the_profiles_content_must_be_the_policys() -> None:
    rs = full_node()
    assert gate(verdict(rs)).green
    res = gate(verdict(rs, digest="sha256:" + "1" * 64))
    assert not res.green and "whose content is not the policy's profile 'lab'" in \
        res.blocking[0].text and res.blocking[0].remediation
    res = gate(verdict(rs, digest=None))
    assert "written before kgc recorded the profile digest" in res.blocking[0].text
    res = gate(verdict(rs, selection=None))
    assert [f.text for f in res.blocking if f.kind == "run"] == [
        "the verdict was written before kgc recorded the run's selection (run.selection: -m, "
        "-k, the checks not run): it cannot show that nothing was left out — run it again"]
    # another profile's name: that finding alone (its digest differs anyway)
    res = gate(verdict(rs, profile="generic", digest="sha256:other"))
    assert len([f for f in res.blocking if f.kind == "run"]) == 1


def test_a_check_the_policy_blocks_on_must_not_be_left_out() -> None:
    base = [r for r in full_node() if r["layer"] != "iommu"]
    have = [result("iommu.cmdline")]
    res = gate(verdict(base + have, keywords="not enabled"), checks=CAT)
    missing = {f.check: f for f in res.blocking if f.status == "missing"}
    assert set(missing) == {"iommu.enabled", "iommu.mode"}  # the minor one cannot block
    assert "left out of the selection -k 'not enabled'" in missing["iommu.enabled"].text
    assert missing["iommu.enabled"].severity == "blocker"
    assert missing["iommu.enabled"].remediation.startswith("Judge every check")
    # waived or allowed to skip: may be absent; block_checks makes a minor one count
    pol = Policy(require_layers=NODE, waive={"iommu.enabled": "KGC-1: no IOMMU on CI"},
                 skip_allowed=("iommu.mode",))
    assert gate(verdict(base + have), pol, checks=CAT).green
    pol = Policy(require_layers=NODE, block_checks=("iommu.extra",), waive={
        "iommu.enabled": "x"}, skip_allowed=("iommu.mode",))
    assert {f.check for f in gate(verdict(base + have), pol, checks=CAT).blocking} == {
        "iommu.extra"}
    # a layer not required: nothing it left out blocks
    pol = Policy(require_layers=tuple(n for n in NODE if n != "iommu"))
    assert gate(verdict(base + have), pol, checks=CAT).green
    # the whole layer missing: one layer finding, not one per check
    res = gate(verdict(base), checks=CAT)
    assert [(f.kind, f.layer) for f in res.blocking] == [("layer", "iommu")]
    # a bare list of ids (severity unknown) counts as blocking
    res = gate(verdict(base + have), checks={"iommu": ["iommu.cmdline", "iommu.x"]})
    assert [f.check for f in res.blocking] == ["iommu.x"]


def test_every_listed_target_needs_its_required_layers() -> None:
    rs = full_node("a")
    res = gate(verdict(rs, targets={"a": "node", "b": "node"}))
    assert {(f.layer, f.target) for f in res.blocking} == {(n, "b") for n in NODE}
    assert all("was not run on b" in f.text for f in res.blocking)
    doc = verdict(rs, targets={"a": "node"})
    doc["run"]["targets"].append("c")
    res = gate(doc)
    assert [f.text for f in res.blocking] == [
        "target c is in run.targets but has no result and no recorded scope: it was never "
        "judged"]
    ok = gate(verdict(rs, targets={"a": "node", "k": "cluster"}))
    assert ok.green and any(f.target == "k" for f in ok.not_run) is False
    # a verdict without a selection: run.targets (addresses, in older runs) are not read
    doc = verdict(rs, selection=None)
    doc["run"]["targets"] = ["local://"]
    assert not any("local://" in f.text for f in gate(doc).blocking)
