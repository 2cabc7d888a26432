"""`kgc diff` (what changed, regression under the policy) and the `kgc gate` / `kgc diff`
command lines: exit 0 / 1, bad input exit 2 with one line and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vdoc import DIGEST, NODE_LAYERS, complete, full_node, result, verdict, write

from conftest import KgcMain
from kgc.core.policy import Policy
from kgc.core.profile import load_profile
from kgc.core.report import profile_digest
from kgc.gate import diff as gdiff
from kgc.gate.gate import parse_verdict

NODE = tuple(NODE_LAYERS)
POL = Policy(require_layers=NODE)


def d(old: dict, new: dict, policy: Policy = POL) -> gdiff.DiffResult:
    return gdiff.diff(parse_verdict(json.dumps(old).encode(), "old.json"),
                      parse_verdict(json.dumps(new).encode(), "new.json"), policy, "lab",
                      NODE_LAYERS, digest=DIGEST)


def test_new_failures_fixed_changed_and_regression() -> None:
    old = verdict(full_node(**{"iommu.cmdline": "fail", "vfio.driver": "warn"}))
    new = verdict(full_node(**{"persistence.coverage": "fail", "runtime.nri-enabled": "error",
                               "vfio.driver": "pass", "nri.events": "skip"}))
    r = d(old, new)
    t = r.targets[0]
    assert [c.check for c in t.new_failures] == ["persistence.coverage", "runtime.nri-enabled"]
    assert all(c.blocking for c in t.new_failures)
    assert [c.check for c in t.fixed] == ["iommu.cmdline"]
    assert {(c.check, c.old, c.new) for c in t.changed} == {("vfio.driver", "warn", "pass"),
                                                           ("nri.events", "pass", "skip")}
    assert r.regressed
    assert {f.check or f.layer for f in r.regressions} == {
        "persistence.coverage", "runtime.nri-enabled", "nri"}
    text = gdiff.render(r)
    assert "persistence.coverage: pass -> FAIL  BLOCKS" in text
    assert text.splitlines()[-1].startswith("  - ")  # the regressions are listed last


def test_not_regressed_when_the_same_blockers_stay_or_a_failure_does_not_block() -> None:
    old = verdict(full_node(**{"iommu.enabled": "fail"}))
    new = verdict(full_node(**{"iommu.enabled": "fail", "runtime.nri-ignored-keys": "fail"}))
    r = d(old, new)
    assert [c.check for c in r.targets[0].new_failures] == ["runtime.nri-ignored-keys"]
    assert not r.targets[0].new_failures[0].blocking  # minor: does not block
    assert not r.regressed and r.targets[0].still_failing == 1
    assert "not regressed" in gdiff.render(r)


def test_a_warn_regresses_under_a_per_check_warn_policy() -> None:
    old = verdict(full_node())
    new = verdict(full_node(**{"persistence.cmdline": "warn"}))
    assert not d(old, new).regressed
    assert d(old, new, Policy(require_layers=NODE, warn="per-check")).regressed


def test_changed_figures_from_evidence_expected_found_and_environment() -> None:
    def run(ms: float, rt: str, vcpus: int, found: str) -> dict:
        rs = full_node()
        rs[0] = dict(rs[0], evidence={"latency_ms": {"p50": ms, "p95": ms * 2}, "ok": True,
                                      "note": "same text"},
                     found=found, expected="4 vCPUs")
        rs.append(result("nri.handshake", evidence={"handshake_ms": 12.5, "events": [1, 2]}))
        rs.append(result("vfio.host-kept", evidence={"vcpus": vcpus}))
        return verdict(rs, environment={"node-a.round_trips": rt, "kgc": "0.1.0"})

    r = d(run(10.0, "1", 4, "boot 3.5 s after 2 tries"), run(25.0, "3", 4,
                                                              "boot 7 s after 2 tries"))
    figs = {(f.check, f.field): (f.old, f.new) for f in r.targets[0].figures}
    assert figs == {
        ("iommu.enabled", "evidence.latency_ms.p50"): (10.0, 25.0),
        ("iommu.enabled", "evidence.latency_ms.p95"): (20.0, 50.0),
        ("iommu.enabled", "found#1"): (3.5, 7.0),
    }
    assert [(f.field, f.old, f.new) for f in r.run_figures] == [
        ("environment.node-a.round_trips", 1.0, 3.0)]
    assert "+150%" in gdiff.render(r)


def test_targets_pair_by_name_and_a_single_renamed_target_is_compared() -> None:
    r = d(verdict(full_node("image:n1.qcow2")),
          verdict(full_node("image:n2.qcow2", **{"persistence.coverage": "fail"})))
    assert len(r.targets) == 1 and r.targets[0].old_name == "image:n1.qcow2"
    assert "image:n2.qcow2 (compared with image:n1.qcow2)" in gdiff.render(r)
    assert r.regressed and [f.check for f in r.regressions] == ["persistence.coverage"]
    r = d(verdict(full_node("a") + full_node("b")),
          verdict(full_node("a") + full_node("c")))
    heads = [t.target for t in r.targets]
    assert heads == ["a", "b", "c"]
    assert r.targets[1].new_name is None and r.targets[2].old_name is None
    assert [c.new for c in r.targets[1].vanished] == [None] * len(full_node())
    # node b is gone: what is no longer judged is not known to be good (it used to be only
    # "changed", exit 0 — issue 21)
    assert r.regressed and {f.target for f in r.regressions} == {"b"}
    assert any(f.kind == "run" and "target b" in f.text for f in r.regressions)


# -- the command line ---------------------------------------------------------------------------
# The commands run in this process (the kgc_main fixture: kgc.cli.main, stdout/stderr
# captured); test_the_real_entry_point runs the real `python -m kgc.cli` processes once.
def kgc_process(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kgc.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, check=False)


def test_kgc_gate_and_diff_exit_codes(tmp_path: Path, kgc: KgcMain) -> None:
    prof = tmp_path / "lab-gate.yaml"
    prof.write_text("name: lab-gate\npolicy:\n  require_layers: [iommu, vfio, persistence, "
                    "reboot, runtime, nri]\n")
    dig = profile_digest(load_profile(prof))
    green = write(tmp_path / "green.json", verdict(complete(full_node()), profile="lab-gate",
                                                  digest=dig))
    red = write(tmp_path / "red.json",
                verdict(complete(full_node(**{"persistence.coverage": "fail"})),
                        profile="lab-gate", digest=dig))
    out = kgc("gate", str(green), "--profile", str(prof), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("kgc gate: CERTIFIED")
    out = kgc("gate", str(red), "--profile", str(prof), cwd=tmp_path)
    assert out.returncode == 1 and "persistence.coverage on node-a (fail, blocker)" in out.stdout
    out = kgc("gate", str(red), "--profile", str(prof), "--json", cwd=tmp_path)
    assert json.loads(out.stdout)["status"] == "not certified"
    out = kgc("diff", str(green), str(red), "--profile", str(prof), cwd=tmp_path)
    assert out.returncode == 1 and "REGRESSED" in out.stdout
    out = kgc("diff", str(red), str(green), "--profile", str(prof), "--json", cwd=tmp_path)
    assert out.returncode == 0
    doc = json.loads(out.stdout)
    assert doc["targets"][0]["fixed"][0]["check"] == "persistence.coverage"
    # the verdict's own profile is used when --profile is not given (built-in by name)
    lab = write(tmp_path / "lab.json", verdict(complete(full_node())))
    out = kgc("gate", str(lab), cwd=tmp_path)
    assert "profile lab," in out.stdout.splitlines()[0]
    # (green only while this build has no cluster layers: lab requires every layer)
    from kgc.core.registry import load_layers

    cluster = [n for n, lay in load_layers().items() if str(lay.scope) == "cluster"]
    assert out.returncode == (1 if cluster else 0), out.stdout


@pytest.mark.parametrize("content", [None, b"", b"{", b'{"schema": "other/1"}',
                                     b'{"format": "kgc-bundle/2"}', b"\x00\x01binary"])
def test_bad_input_is_exit_2_one_line_nothing_written(tmp_path: Path, content,
                                                      kgc: KgcMain) -> None:
    f = tmp_path / "v.json"
    if content is not None:
        f.write_bytes(content)
    good = write(tmp_path / "good.json", verdict(full_node()))
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["gate", str(f)], ["diff", str(good), str(f)], ["diff", str(f), str(good)]):
        out = kgc(*args, "--profile", "lab", cwd=tmp_path)
        assert out.returncode == 2, (args, out.stdout, out.stderr)
        assert out.stdout == ""
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert out.stderr.startswith(f"kgc {args[0]}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_unknown_profile_of_a_verdict_is_bad_input(tmp_path: Path, kgc: KgcMain) -> None:
    v = write(tmp_path / "v.json", verdict(full_node(), profile="someone-elses"))
    out = kgc("gate", str(v), cwd=tmp_path)
    assert out.returncode == 2 and "give --profile" in out.stderr
    out = kgc("gate", str(v), "--profile", "no-such-profile", cwd=tmp_path)
    assert out.returncode == 2 and "profile not found" in out.stderr


# -- the gate judges what was really run (issue 21) ----------------------------------------------
LAB_YAML = (Path(__file__).resolve().parents[2] / "profiles" / "lab.yaml").read_text()
BUNDLES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
NODE_FILES_POLICY = ("policy:\n  require_layers: [iommu, vfio, persistence, reboot]\n"
                     "  waive: {'runtime.*': no containerd on the lab node image}\n")


def _lab_profile(path: Path, *, name: str = "lab-strict", mode: str = "any",
                 policy: str = NODE_FILES_POLICY) -> Path:
    text = LAB_YAML.replace("name: lab\n", f"name: {name}\n", 1).replace(
        "    mode: any\n", f"    mode: {mode}\n", 1)
    path.write_text(text + policy)
    return path


def _judge(pytester: pytest.Pytester, bundle: str, profile: Path, out: Path,
           *args: str) -> Path:
    """`pytest --snapshot BUNDLE` in this process (pytester): the verdict it wrote."""
    r = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", "--snapshot",
                                     str(BUNDLES / f"{bundle}.json"), "--profile", str(profile),
                                     "--report-dir", str(out), *args)
    assert r.ret in (0, 1), "\n".join(r.outlines[-60:] + r.errlines[-20:])
    return out / "verdict.json"


def _failed_outside_the_waiver(doc: dict) -> set[str]:
    return {r["check"] for r in doc["results"] if r["status"] in ("fail", "error")
            and not r["check"].startswith("runtime.")}


def _texts(out: subprocess.CompletedProcess[str]) -> str:
    """Every blocking finding's text and remediation (the one-screen summary cuts them)."""
    doc = json.loads(out.stdout)
    return "\n".join(f["text"] + "\n" + f["remediation"] for f in doc["blocking"])


def test_deselecting_the_failing_blockers_does_not_gate_green(
        tmp_path: Path, kgc: KgcMain, pytester: pytest.Pytester) -> None:
    """`-k "not ..."` over the checks that fail: the run is PASS for its layers, but the gate
    needs every check it blocks on (the run used to gate CERTIFIED)."""
    prof = _lab_profile(tmp_path / "strict.yaml")
    full = _judge(pytester, "runtime-bind-only", prof, tmp_path / "full")
    assert kgc("gate", str(full), "--profile", str(prof), cwd=tmp_path).returncode == 1
    k = ("not no_host_driver_can_claim and not covered_by_a_boot_time and "
         "not bound_to_vfio_pci_again")
    cut = _judge(pytester, "runtime-bind-only", prof, tmp_path / "cut", "-k", k)
    doc = json.loads(cut.read_text())
    assert _failed_outside_the_waiver(doc) == set()  # nothing the run judged blocks
    sel = doc["run"]["selection"]
    assert sel["keywords"] == k
    (target,) = doc["run"]["targets"]
    assert {"vfio.competing-driver", "persistence.coverage",
            "reboot.binding-persists"} <= set(sel["checks_not_run"][target])
    out = kgc("gate", str(cut), "--profile", str(prof), "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    blocking = {f["check"]: f for f in json.loads(out.stdout)["blocking"]}
    for cid in ("vfio.competing-driver", "persistence.coverage", "reboot.binding-persists"):
        assert blocking[cid]["status"] == "missing"
        assert "left out of the selection -k" in blocking[cid]["text"]
        assert "without -k" in blocking[cid]["remediation"]
    # a minor check may be left out: it could not block anyway
    text = kgc("gate", str(cut), "--profile", str(prof), cwd=tmp_path).stdout
    assert text.startswith("kgc gate: NOT CERTIFIED") and "fix: as above" in text


def test_a_lenient_copy_under_the_strict_profiles_name_does_not_gate_green(
        tmp_path: Path, kgc: KgcMain, pytester: pytest.Pytester) -> None:
    """The strict profile wants translated IOMMU domains (the good bundle has passthrough
    ones); a copy under its name allows any: judged with the copy, the run passes — the
    gate, which loads the strict file, refuses it by the profile's content."""
    strict = _lab_profile(tmp_path / "strict.yaml", mode="translated")
    (tmp_path / "copy").mkdir()
    lenient = _lab_profile(tmp_path / "copy" / "strict.yaml", mode="any")
    v = _judge(pytester, "good", lenient, tmp_path / "r")
    assert _failed_outside_the_waiver(json.loads(v.read_text())) == set()
    assert _failed_outside_the_waiver(json.loads(_judge(pytester, "good", strict,
                                                        tmp_path / "s")
                                                 .read_text())) == {"iommu.mode"}
    out = kgc("gate", str(v), "--profile", str(strict), "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    assert "whose content is not the policy's profile 'lab-strict'" in _texts(out)
    # the same content in another file (comments, key order, spelt-out defaults, another
    # release policy) is the same profile: the run gates on its results alone
    same = tmp_path / "same.yaml"
    same.write_text("# reformatted\n" + LAB_YAML.replace("name: lab\n", "").replace(
        "    mode: any\n", "    mode: any\n    require_interrupt_remapping: true\n", 1)
        + "name: lab-strict\n" + NODE_FILES_POLICY.replace("reboot]", "reboot, vfio]"))
    out = kgc("gate", str(v), "--profile", str(same), cwd=tmp_path)
    assert out.returncode == 0, out.stdout


def test_a_copy_under_a_builtin_name_never_picks_the_gates_policy(tmp_path: Path,
                                                                  kgc: KgcMain) -> None:
    """Without --profile the gate reads a built-in name as the shipped profile, not the
    file the verdict says it came from (a lenient `lab.yaml` anywhere)."""
    lenient = tmp_path / "lab.yaml"
    lenient.write_text(LAB_YAML.replace("    mode: any\n", "    mode: passthrough\n", 1)
                       + "policy:\n  require_layers: [iommu]\n")
    rs = complete([result("iommu.enabled")], ("iommu",))
    v = write(tmp_path / "v.json", verdict(rs, profile_source=str(lenient),
                                           digest=profile_digest(load_profile(lenient))))
    out = kgc("gate", str(v), "--json", cwd=tmp_path)
    assert out.returncode == 1
    assert "whose content is not the policy's profile 'lab'" in _texts(out)
    assert "required layer vfio" in _texts(out)  # the built-in's policy: every layer


def test_a_verdict_without_digest_or_selection_is_refused(tmp_path: Path,
                                                          kgc: KgcMain) -> None:
    rs = complete(full_node())
    ok = kgc("gate", str(write(tmp_path / "ok.json", verdict(rs))), "--profile", "lab",
             "--json", cwd=tmp_path)
    assert "profile digest" not in _texts(ok) and "selection" not in _texts(ok)
    for over, needle in (({"digest": None}, "written before kgc recorded the profile digest"),
                         ({"selection": None}, "written before kgc recorded the run's selection"),
                         ({"digest": "sha256:" + "0" * 64}, "whose content is not")):
        v = write(tmp_path / "v.json", verdict(rs, **over))
        out = kgc("gate", str(v), "--profile", "lab", "--json", cwd=tmp_path)
        assert out.returncode == 1 and needle in _texts(out), (over, out.stdout)
        assert "run it again" in _texts(out) or "copy" in _texts(out)


def test_a_target_in_run_targets_without_results_blocks(tmp_path: Path,
                                                        kgc: KgcMain) -> None:
    prof = tmp_path / "node.yaml"
    prof.write_text("name: lab\npolicy:\n  require_layers: [iommu, vfio]\n")
    dig = profile_digest(load_profile(prof))
    rs = complete([], ("iommu", "vfio"), target="a")
    # b is one of the run's nodes (recorded scope) and has nothing: not judged there
    v = write(tmp_path / "v.json", verdict(rs, digest=dig, targets={"a": "node", "b": "node"}))
    out = kgc("gate", str(v), "--profile", str(prof), "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    texts = [f["text"] for f in json.loads(out.stdout)["blocking"]]
    assert texts == ["required layer iommu was not run on b (no result: deselected?)",
                     "required layer vfio was not run on b (no result: deselected?)"]
    # c is listed with no scope and no result: never judged
    doc = verdict(rs, digest=dig, targets={"a": "node"})
    doc["run"]["targets"].append("c")
    out = kgc("gate", str(write(tmp_path / "c.json", doc)), "--profile", str(prof), "--json",
              cwd=tmp_path)
    assert out.returncode == 1
    assert any("target c is in run.targets but has no result" in f["text"]
               for f in json.loads(out.stdout)["blocking"])
    # a node layer the policy does not require is not required of a cluster target
    ok = verdict(rs, digest=dig, targets={"a": "node", "k": "cluster"})
    assert kgc("gate", str(write(tmp_path / "ok.json", ok)), "--profile", str(prof),
               cwd=tmp_path).returncode == 0


# -- kgc diff: what is no longer judged regresses -------------------------------------------------
def test_a_check_that_vanished_is_a_regression_and_a_dropped_failure_is_not_fixed() -> None:
    old = verdict(full_node(**{"iommu.cmdline": "fail", "nri.events": "skip"}))
    new = verdict([r for r in full_node() if r["check"] not in (
        "iommu.cmdline", "nri.events", "vfio.driver")])
    r = d(old, new)
    t = r.targets[0]
    assert [c.check for c in t.fixed] == []
    assert {(c.check, c.old, c.new) for c in t.vanished} == {
        ("iommu.cmdline", "fail", None), ("nri.events", "skip", None),
        ("vfio.driver", "pass", None)}
    assert all(c.blocking for c in t.vanished) and not t.changed
    assert r.regressed
    assert {f.check for f in r.regressions if f.check} >= {"iommu.cmdline", "nri.events",
                                                            "vfio.driver"}
    text = gdiff.render(r)
    assert "vanished (3):" in text and "iommu.cmdline: fail -> ABSENT  BLOCKS" in text
    assert "REGRESSED" in text


def test_kgc_diff_exits_1_when_a_check_or_a_target_vanished(tmp_path: Path,
                                                             kgc: KgcMain) -> None:
    rs = complete(full_node())
    old = write(tmp_path / "old.json", verdict(rs + complete([], target="node-b")))
    new = write(tmp_path / "new.json", verdict(rs))
    out = kgc("diff", str(old), str(new), "--profile", "lab", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    assert "node-b (only in OLD)" in out.stdout and "target node-b: judged in OLD" in out.stdout
    fewer = write(tmp_path / "fewer.json", verdict([r for r in rs if r["check"] !=
                                                    "runtime.nri-ignored-keys"]))
    out = kgc("diff", str(new), str(fewer), "--profile", "lab", "--json", cwd=tmp_path)
    assert out.returncode == 1, out.stdout
    doc = json.loads(out.stdout)
    assert [c["check"] for c in doc["targets"][0]["vanished"]] == ["runtime.nri-ignored-keys"]
    assert kgc("diff", str(new), str(new), "--profile", "lab", cwd=tmp_path).returncode == 0


def test_duplicate_pairs_count_as_their_worst_result_whatever_the_order() -> None:
    base = [r for r in full_node() if r["check"] != "vfio.driver"]
    good, bad = result("vfio.driver"), result("vfio.driver", "fail", reason="unbound")
    other = result("vfio.driver", "fail", reason="another reason")
    renders = set()
    for dup in ([good, bad], [bad, good], [other, bad], [bad, other]):
        new = verdict(base + dup)
        r = d(verdict(full_node()), new)
        (ch,) = r.targets[0].new_failures
        assert ch.check == "vfio.driver" and ch.new == "fail" and r.regressed
        if good in dup:
            assert ch.reason == "unbound"
        renders.add(ch.reason if good not in dup else None)
        # and in OLD: a pair that failed once is fixed when it passes now, never "changed"
        r = d(new, verdict(full_node()))
        assert [c.check for c in r.targets[0].fixed] == ["vfio.driver"]
    assert len(renders - {None}) == 1  # two fails: the same one wins in either order


def test_a_listed_target_that_was_never_judged_is_not_lost() -> None:
    rs = full_node()
    old = verdict(rs, targets={"node-a": "node", "ghost": "node"})
    r = d(old, verdict(rs))
    assert not any(f.target == "ghost" for f in r.regressions)
    assert [f for f in r.regressions if f.kind == "run"] == []


def test_a_failure_that_now_skips_is_not_fixed() -> None:
    r = d(verdict(full_node(**{"vfio.driver": "fail"})),
          verdict(full_node(**{"vfio.driver": "skip"})))
    t = r.targets[0]
    assert t.fixed == [] and [(c.check, c.old, c.new) for c in t.changed] == [
        ("vfio.driver", "fail", "skip")]


@pytest.fixture
def kgc(kgc_main: KgcMain) -> KgcMain:
    """`kgc ARGS` in this process (tests/conftest.py's kgc_main)."""
    return kgc_main


def test_the_real_entry_point_exit_codes_one_stderr_line_nothing_written(
        tmp_path: Path) -> None:
    """The process boundary, once per command: `python -m kgc.cli gate|diff` exit 1 on a red
    verdict / a regression, and 2 on bad input with one stderr line, no stdout, no file."""
    green = write(tmp_path / "green.json", verdict(complete(full_node())))
    red = write(tmp_path / "red.json", verdict(complete(full_node(**{"vfio.driver": "fail"}))))
    out = kgc_process("gate", str(red), "--profile", "lab", cwd=tmp_path)
    assert out.returncode == 1 and "vfio.driver on node-a (fail, critical)" in out.stdout
    out = kgc_process("diff", str(green), str(red), "--profile", "lab", cwd=tmp_path)
    assert out.returncode == 1 and "REGRESSED" in out.stdout
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"{")
    before = sorted(p.name for p in tmp_path.iterdir())
    for args in (["gate", str(bad)], ["diff", str(green), str(bad)]):
        out = kgc_process(*args, "--profile", "lab", cwd=tmp_path)
        assert out.returncode == 2 and out.stdout == "", (args, out.stdout, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert out.stderr.startswith(f"kgc {args[0]}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_timing_noise_is_left_out_unless_asked() -> None:
    """Issue 19.7: a kernel log timestamp (seconds since boot: every boot differs) and a
    wait are not changes of the node; `--timing` shows them. The dmesg line is the real
    form (Linux printk, `[    0.123456] DMAR: ...`); a figure in the same line that is not
    the timestamp still counts."""
    def run(ts: str, waited: float, units: int) -> dict:
        rs = full_node()
        rs[0] = dict(rs[0], evidence={"dmesg": [f"[{ts}] DMAR: IOMMU enabled",
                                                f"[{ts}] DMAR: {units} units"],
                                      "waited_s": waited})
        return verdict(rs)

    old, new = run("    0.123456", 1.5, 2), run("    0.987654", 4.0, 3)
    r = d(old, new)
    figs = {f.field: (f.old, f.new) for f in r.targets[0].figures}
    assert figs == {"evidence.dmesg[1]": (2.0, 3.0)}, figs
    assert r.timing_left_out == 3
    assert "3 timing figure(s) left out" in gdiff.render(r)
    r = gdiff.diff(parse_verdict(json.dumps(old).encode(), "old.json"),
                   parse_verdict(json.dumps(new).encode(), "new.json"), POL, "lab",
                   NODE_LAYERS, digest=DIGEST, timing=True)
    fields = {f.field for f in r.targets[0].figures}
    assert {"evidence.dmesg[0]", "evidence.waited_s"} <= fields, fields
    assert r.timing_left_out == 0


def test_diff_warns_when_the_verdicts_had_different_profiles() -> None:
    old = verdict(full_node(), profile="lab")
    new = verdict(full_node(), profile="lab")
    new["run"]["profile_digest"] = "sha256:" + "0" * 64
    r = d(old, new)
    assert r.warnings and "different contents of profile 'lab'" in r.warnings[0]
    other = verdict(full_node(), profile="generic-nvidia-passthrough")
    r = d(old, other)
    assert "OLD was judged against profile 'lab', NEW against 'generic-nvidia-passthrough'" \
        in r.warnings[0]
    assert r.warnings[0] in gdiff.render(r)
    assert not d(old, verdict(full_node(), profile="lab")).warnings
