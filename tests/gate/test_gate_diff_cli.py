"""`kgc diff` (what changed, regression under the policy) and the `kgc gate` / `kgc diff`
command lines: exit 0 / 1, bad input exit 2 with one line and nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from vdoc import NODE_LAYERS, full_node, result, verdict, write

from kgc.gate import diff as gdiff
from kgc.gate.gate import parse_verdict
from kgc.gate.policy import Policy

NODE = tuple(NODE_LAYERS)
POL = Policy(require_layers=NODE)


def d(old: dict, new: dict, policy: Policy = POL) -> gdiff.DiffResult:
    return gdiff.diff(parse_verdict(json.dumps(old).encode(), "old.json"),
                      parse_verdict(json.dumps(new).encode(), "new.json"), policy, "lab",
                      NODE_LAYERS)


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
    assert [c.new for c in r.targets[1].changed] == [None] * len(full_node())
    assert not r.regressed  # node b is gone, node c passes: nothing new blocks


# -- the command line ---------------------------------------------------------------------------
def kgc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kgc.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, check=False)


def test_kgc_gate_and_diff_exit_codes(tmp_path: Path) -> None:
    green = write(tmp_path / "green.json", verdict(full_node(), profile="lab-gate"))
    red = write(tmp_path / "red.json",
                verdict(full_node(**{"persistence.coverage": "fail"}), profile="lab-gate"))
    prof = tmp_path / "lab-gate.yaml"
    prof.write_text("name: lab-gate\npolicy:\n  require_layers: [iommu, vfio, persistence, "
                    "reboot, runtime, nri]\n")
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
    lab = write(tmp_path / "lab.json", verdict(full_node()))
    out = kgc("gate", str(lab), cwd=tmp_path)
    assert "profile lab," in out.stdout.splitlines()[0]
    # (green only while this build has no cluster layers: lab requires every layer)
    from kgc.core.registry import load_layers

    cluster = [n for n, lay in load_layers().items() if str(lay.scope) == "cluster"]
    assert out.returncode == (1 if cluster else 0), out.stdout


@pytest.mark.parametrize("content", [None, b"", b"{", b'{"schema": "other/1"}',
                                     b'{"format": "kgc-bundle/2"}', b"\x00\x01binary"])
def test_bad_input_is_exit_2_one_line_nothing_written(tmp_path: Path, content) -> None:
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


def test_unknown_profile_of_a_verdict_is_bad_input(tmp_path: Path) -> None:
    v = write(tmp_path / "v.json", verdict(full_node(), profile="someone-elses"))
    out = kgc("gate", str(v), cwd=tmp_path)
    assert out.returncode == 2 and "give --profile" in out.stderr
    out = kgc("gate", str(v), "--profile", "no-such-profile", cwd=tmp_path)
    assert out.returncode == 2 and "profile not found" in out.stderr
