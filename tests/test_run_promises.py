"""What a verdict file promises, and what a run does on bad input — as users run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from kgc.core import report
from kgc.core.bundle import load_bundle, write_bundle
from kgc.core.engine import Context
from kgc.core.hostfs import HostSnapshot
from kgc.core.layer import Layer, Scope
from kgc.core.model import Registry, Status, passed
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers

GOOD = REPO / "fixtures" / "bundles" / "good.json"


def run(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def kgc(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kgc.cli", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300, check=False)


def doc(d: Path) -> dict:
    return json.loads((d / "reports" / "verdict.json").read_text())


# -- overall ------------------------------------------------------------------------------
def _r(status: str) -> dict:
    return {"status": status, "check": "x.y", "target": "t"}


@pytest.mark.parametrize("statuses,want", [
    ([], "fail"), (["skip"], "fail"), (["warn"], "fail"), (["skip", "warn"], "fail"),
    (["pass"], "pass"), (["pass", "skip", "warn"], "pass"), (["pass", "fail"], "fail"),
    (["pass", "error"], "fail"),
])
def test_overall_passes_only_when_something_passed_and_nothing_blocks(statuses, want) -> None:
    assert report.overall([_r(s) for s in statuses]) == want


def test_a_missing_verdict_fails_the_run() -> None:
    assert report.overall_and_reason([_r("pass")], missing=1)[0] == "fail"


def test_every_check_skipped_is_not_certified(tmp_path: Path) -> None:
    """`pytest -m reboot` without --allow-reboot: each reboot check skips naming the flag,
    and nothing was certified (exit 1)."""
    no_reboot = write_bundle(tmp_path / "n.json", scope=Scope.NODE, target="gpu-a",
                             host=load_bundle(GOOD, load_layers()).host)
    p = run("-m", "reboot", "--snapshot", str(no_reboot), "--profile", "lab", cwd=tmp_path)
    assert p.returncode == 1, p.stdout[-2000:]
    d = doc(tmp_path)
    assert d["overall"] == "fail" and "no check passed" in d["overall_reason"]
    assert {r["status"] for r in d["results"]} == {"skip"}
    assert all("recorded without --allow-reboot" in r["reason"] for r in d["results"])
    assert d["run"]["layers"] == ["reboot"]


def test_live_reboot_without_the_flag_names_the_flag(tmp_path: Path) -> None:
    p = run("-m", "reboot", cwd=tmp_path)
    d = doc(tmp_path)
    assert p.returncode == 1
    assert all("--allow-reboot" in r["reason"] for r in d["results"]), d["results"]


def test_a_run_of_one_layer_says_so(tmp_path: Path) -> None:
    p = run("-m", "iommu", "--snapshot", str(GOOD), "--profile", "lab", cwd=tmp_path)
    d = doc(tmp_path)
    assert p.returncode == 0, p.stdout[-3000:]
    assert d["overall"] == "pass" and d["run"]["layers"] == ["iommu"]
    assert d["run"]["scope"].startswith("for iommu only")
    assert "PASS for iommu only" in p.stdout


def test_collect_only_leaves_the_verdict_alone(tmp_path: Path) -> None:
    run("-m", "iommu", "--snapshot", str(GOOD), "--profile", "lab", cwd=tmp_path)
    before = (tmp_path / "reports" / "verdict.json").read_text()
    p = run("--collect-only", "-m", "iommu", cwd=tmp_path)
    assert p.returncode == 0
    assert (tmp_path / "reports" / "verdict.json").read_text() == before


CRASHER = '''
import pytest
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    raise SystemExit("boom")
'''


def test_a_crashed_run_never_leaves_an_older_pass(tmp_path: Path) -> None:
    run("-m", "iommu", "--snapshot", str(GOOD), "--profile", "lab", cwd=tmp_path)
    assert doc(tmp_path)["overall"] == "pass"
    (tmp_path / "kgc_crasher.py").write_text(CRASHER)
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                        "kgc_crasher", "-m", "iommu", "--snapshot", str(GOOD), "--profile", "lab"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
                       env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert p.returncode != 0
    d = doc(tmp_path)
    assert d["overall"] == "fail", d["overall_reason"]


def test_console_ends_with_full_reason_and_remediation(tmp_path: Path) -> None:
    bad = REPO / "fixtures" / "bundles" / "iommu-off.json"
    p = run("-m", "iommu", "--snapshot", str(bad), "--profile", "lab", cwd=tmp_path)
    assert p.returncode == 1
    tail = p.stdout[p.stdout.index("what to fix"):]
    failed = [r for r in doc(tmp_path)["results"] if r["status"] == "fail"]
    assert failed
    # a reason is wrapped to the terminal (issue 19.1), so it is compared word for word
    for r in failed:
        assert flat(r["reason"]) in flat(tail)  # whole, not truncated
        assert r["remediation"].splitlines()[0] in tail  # a fix keeps its lines
    e = kgc("evaluate", str(bad), "--profile", "lab", "--layers", "iommu", cwd=tmp_path)
    for r in failed:
        assert flat(r["reason"]) in flat(e.stdout)


def flat(text: str) -> str:
    return " ".join(text.split())


# -- bad input: one line, exit 2, nothing written -----------------------------------------
def _bundle(tmp_path: Path, doc_: object, name: str = "b.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc_))
    return p


BAD_BUNDLES = {
    "not-json": "{",
    "list": [],
    "no-format": {"target": "x"},
    "nri-empty": {"format": "kgc-bundle/1", "target": "n", "host": {}, "nri": {}},
    "nri-list": {"format": "kgc-bundle/2", "scope": "node", "target": "n", "host": {},
                 "layers": {"nri": []}},
    "host-null": {"format": "kgc-bundle/2", "scope": "node", "target": "n", "host": None},
    "target-int": {"format": "kgc-bundle/2", "scope": "node", "target": 3, "host": {}},
    "incomplete": {"format": "kgc-bundle/2", "scope": "node", "target": "n", "host": {},
                   "complete": False},
    "host-incomplete": {"format": "kgc-bundle/2", "scope": "node", "target": "n",
                        "host": {"complete": False}},
    "scope-bogus": {"format": "kgc-bundle/2", "scope": "galaxy", "target": "n"},
}


@pytest.mark.parametrize("name", sorted(BAD_BUNDLES))
def test_a_bad_bundle_is_one_line_exit_2_nothing_written(name: str, tmp_path: Path) -> None:
    raw = BAD_BUNDLES[name]
    p = tmp_path / "b.json"
    p.write_text(raw if isinstance(raw, str) else json.dumps(raw))
    e = kgc("evaluate", str(p), cwd=tmp_path)
    assert e.returncode == 2 and len(e.stderr.strip().splitlines()) == 1, e.stderr
    assert str(p) in e.stderr and "Traceback" not in e.stderr
    t = run("--snapshot", str(p), cwd=tmp_path)
    assert t.returncode == 2 and len(t.stderr.strip().splitlines()) == 1, (t.stdout, t.stderr)
    assert "Traceback" not in t.stdout + t.stderr and len(t.stdout.splitlines()) < 5
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("spec", ["nope", "", "iommu,gpu", ","])
def test_snapshot_layers_outside_the_scope_are_bad_input_before_any_io(
        spec: str, tmp_path: Path) -> None:
    # a node snapshot (the default local:// target) knows only node layers; gpu is a
    # cluster layer: one line, exit 2, no bundle, and nothing collected first
    e = kgc("snapshot", "-o", "b.json", "--layers", spec, cwd=tmp_path)
    assert e.returncode == 2 and len(e.stderr.strip().splitlines()) == 1, e.stderr
    assert "a node snapshot records: iommu, vfio" in e.stderr and "Traceback" not in e.stderr
    assert e.stdout == "" and not (tmp_path / "b.json").exists()


def test_a_missing_snapshot_file_is_bad_input(tmp_path: Path) -> None:
    t = run("--snapshot", str(tmp_path / "nope.json"), cwd=tmp_path)
    assert t.returncode == 2 and "no such file" in t.stderr
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("content", [b"\xff\xfe name: x", b"name: [unclosed", b"- a list\n"])
def test_a_bad_profile_is_one_line_exit_2(content: bytes, tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_bytes(content)
    for proc in (run("-m", "iommu", "--profile", str(prof), cwd=tmp_path),
                 kgc("profile", "check", str(prof), cwd=tmp_path)):
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and str(prof) in proc.stderr
    assert not (tmp_path / "reports").exists()


# -- secrets and names --------------------------------------------------------------------
def test_credentials_in_a_target_never_reach_any_output(tmp_path: Path) -> None:
    secret = "s3cr3t-Pa55"
    p = run("-m", "iommu", "--hosts", f"ssh://root:{secret}@127.0.0.1:1", cwd=tmp_path,
            timeout=120)
    # a password in a target is refused before anything runs (issue 21: it would reach
    # sshpass -p on a command line ps shows): exit 2, nothing written, the secret nowhere
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--ssh-identity-file" in p.stdout + p.stderr
    for f in (tmp_path / "reports").rglob("*") if (tmp_path / "reports").exists() else ():
        if f.is_file():
            assert secret not in f.read_text(errors="replace"), f
    assert not (tmp_path / "reports" / "verdict.json").exists()
    assert secret not in p.stdout + p.stderr


# -- engine -------------------------------------------------------------------------------
def _layer(gather) -> dict[str, Layer]:  # type: ignore[no-untyped-def]
    reg = Registry()

    @reg.check("demo.one", title="demo", remediation="fix demo")
    def one(ev, prof):  # type: ignore[no-untyped-def]
        return passed(f"saw {ev}")

    lay = Layer("demo", Scope.NODE, "demo layer", reg, gather=gather,
                record=lambda ev: {"v": ev}, replay=lambda d: d["v"])
    return {"demo": lay}


class _T:
    name = "t"
    scope = Scope.NODE
    origin = "live"
    remediation = "transport remedy"


def test_any_collection_crash_is_an_error_verdict_never_a_hole() -> None:
    def boom(ctx):  # type: ignore[no-untyped-def]
        raise ValueError("profile value is not an integer")

    ctx = Context(_T(), load_profile("lab"), _layer(boom))  # type: ignore[arg-type]
    v = ctx.judge("demo.one")
    assert v.status is Status.ERROR and "ValueError" in v.reason and "defect in kgc" in \
        v.remediation


def test_stand_ins_are_marked_simulated() -> None:
    prof = load_profile("lab").model_copy(update={"simulated": {"demo.*": "a stub probe"}})
    ctx = Context(_T(), prof, _layer(lambda c: 1))  # type: ignore[arg-type]
    v = ctx.judge("demo.one")
    assert v.status is Status.PASS and v.simulated and "[simulated: a stub probe]" in v.reason
    assert v.to_dict()["simulated"] is True


def test_replayed_verdicts_say_they_came_from_a_bundle(tmp_path: Path) -> None:
    layers = load_layers()
    b = load_bundle(GOOD, layers)
    v = Context(b, load_profile("lab"), layers).judge("iommu.enabled")
    assert v.origin == "bundle"


def test_bundles_are_written_private(tmp_path: Path) -> None:
    p = write_bundle(tmp_path / "x.json", scope=Scope.NODE, target="ssh://u:pw@h",
                     host=HostSnapshot())
    assert p.stat().st_mode & 0o777 == 0o600
    assert "pw" not in p.read_text()
