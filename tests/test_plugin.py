"""The suite as users run it: `pytest -m host`, outputs read back. In this process
(pytester) where the test is about what the plugin judges and writes; in a real process
where it is about the process (exit status of a usage error, the console, xdist)."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import REPO, KgcMain
from kgc.core.profile import load_profile
from kgc.core.report import profile_digest
from systree import intel_good

# What `pytest -m host` adds to the suites' command line (no random order: the console
# summary is compared in order).
SUITE = ("-m", "host and not destructive", "-p", "no:randomly")
Run = Callable[..., "subprocess.CompletedProcess[str]"]


def run_suite(*args: str, report_dir: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """The suites in a real `python -m pytest` process from the repository."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", *SUITE, "--report-dir", str(report_dir), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def pytest_in(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Run:
    """`pytest ARGS` from CWD in this process (pytester): the plugin's behaviour without a
    Python + pytest start-up per run; shaped as the subprocess result the tests read. What
    only a real process shows (the exit status of a usage error, which pytester cannot
    report, the console of a whole run, xdist) stays in run_suite's processes."""

    def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        r = pytester.runpytest_inprocess(*args)
        return subprocess.CompletedProcess(list(args), int(r.ret), "\n".join(r.outlines),
                                           "\n".join(r.errlines))

    return run


@pytest.fixture
def suite_here(pytest_in: Run) -> Run:
    """run_suite in this process."""

    def run(*args: str, report_dir: Path) -> subprocess.CompletedProcess[str]:
        return pytest_in(REPO, *SUITE, "--report-dir", str(report_dir), *args)

    return run


def verdicts(report_dir: Path) -> dict:
    return json.loads((report_dir / "verdict.json").read_text())


def test_this_machine_has_no_iommu_and_the_suite_says_so(tmp_path: Path) -> None:
    """The CI machine is a VM without an IOMMU: the host layer must fail, with remediation,
    in every output — never pass."""
    proc = run_suite("conformance/iommu", report_dir=tmp_path)
    assert proc.returncode == 1, proc.stdout[-3000:]
    doc = verdicts(tmp_path)
    assert doc["schema"] == "kgc-verdict/1" and doc["overall"] == "fail"
    by = {r["check"]: r for r in doc["results"]}
    for cid in ("iommu.platform", "iommu.enabled"):
        assert by[cid]["status"] == "fail", by[cid]
        assert by[cid]["remediation"], cid
        assert by[cid]["layer"] == "iommu" and by[cid]["target"]
    reason = by["iommu.enabled"]["reason"]
    if Path("/sys/module/kvm_pvm").exists():
        # a PVM guest (this project's CI machines): no VT-x/AMD-V, so the reason says
        # passthrough is impossible here and names its evidence (issue 18, PVM hosts)
        assert "GPU passthrough is impossible" in reason and "IOMMU groups" in reason, reason
    else:
        assert "/sys/kernel/iommu_groups" in reason, reason
    # JUnit: the same failures
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert int(suite.get("failures")) == doc["counts"]["fail"] + doc["counts"]["error"]
    # allure-results: one result per check, labelled by layer/check/severity
    results = [
        json.loads(p.read_text()) for p in (tmp_path / "allure-results").glob("*-result.json")
    ]
    assert len(results) == len(doc["results"])
    labels = [{(lab["name"], lab["value"]) for lab in r["labels"]} for r in results]
    assert all(("epic", "iommu") in ls for ls in labels)
    assert any(("feature", "iommu.enabled") in ls for ls in labels)
    assert any(("severity", "blocker") in ls for ls in labels)
    env = (tmp_path / "allure-results" / "environment.properties").read_text()
    assert "kernel=" in env and "profile=generic-nvidia-passthrough" in env
    # the console summary names the failing checks
    assert "iommu.enabled" in proc.stdout and "overall: FAIL" in proc.stdout


def test_a_healthy_node_tree_certifies(tmp_path: Path, suite_here: Run) -> None:
    node = intel_good(tmp_path / "node")
    proc = suite_here("conformance/iommu", "--kgc-root", str(node.root), report_dir=tmp_path / "r")
    assert proc.returncode == 0, proc.stdout[-3000:]
    doc = verdicts(tmp_path / "r")
    assert doc["overall"] == "pass"
    assert doc["counts"]["pass"] == len(doc["results"]) >= 8


def test_bundle_replay_gives_the_live_verdicts(tmp_path: Path, kgc_main: KgcMain,
                                               suite_here: Run) -> None:
    node = intel_good(tmp_path / "node")
    node.write("proc/interrupts", "0: 1 IO-APIC timer\n")  # one failing check, for contrast
    bundle = tmp_path / "node.json"
    snap = kgc_main("snapshot", "--root", str(node.root), "-o", str(bundle), cwd=REPO)
    assert snap.returncode == 0, snap.stderr
    assert "1 round trip" in snap.stdout
    live = suite_here(
        "conformance/iommu", "--kgc-root", str(node.root), report_dir=tmp_path / "live"
    )
    replay = suite_here(
        "conformance/iommu", "--snapshot", str(bundle), report_dir=tmp_path / "replay"
    )
    assert live.returncode == replay.returncode == 1

    def essence(d: Path) -> dict:
        return {
            r["check"]: (r["status"], r["reason"], r["remediation"]) for r in verdicts(d)["results"]
        }

    assert essence(tmp_path / "live") == essence(tmp_path / "replay")
    assert essence(tmp_path / "replay")["iommu.interrupt-remapping"][0] == "fail"


def test_fleet_of_bundles_with_xdist_gives_one_merged_report(tmp_path: Path,
                                                             kgc_main: KgcMain) -> None:
    """The bundles are recorded in this process; the fleet run is a real pytest process
    (xdist's workers are processes anyway)."""
    bundles = []
    for i in range(3):
        node = intel_good(tmp_path / f"n{i}")
        if i == 1:
            node.write("proc/interrupts", "0: 1 IO-APIC timer\n")  # interrupt remapping off
        b = tmp_path / f"node{i}.json"
        snap = kgc_main("snapshot", "--root", str(node.root), "-o", str(b), cwd=REPO)
        assert snap.returncode == 0, snap.stderr
        doc = json.loads(b.read_text())
        doc["target"] = f"node{i}"
        b.write_text(json.dumps(doc))
        bundles.append(str(b))
    proc = run_suite(
        "conformance/iommu",
        "--snapshot",
        ",".join(bundles),
        "-n",
        "2",
        "--dist",
        "loadgroup",
        report_dir=tmp_path / "fleet",
    )
    doc = verdicts(tmp_path / "fleet")
    targets = {r["target"] for r in doc["results"]}
    assert targets == {"node0", "node1", "node2"}
    failing = {(r["target"], r["check"]) for r in doc["results"] if r["status"] == "fail"}
    assert ("node1", "iommu.interrupt-remapping") in failing
    assert all(t == "node1" for t, _ in failing)
    assert proc.returncode == 1 and doc["overall"] == "fail"


def test_misspelt_profile_key_is_a_usage_error_naming_the_field(tmp_path: Path,
                                                                kgc_main: KgcMain) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nhost:\n  iommu:\n    mdoe: passthrough\n")
    proc = run_suite("conformance/iommu", "--profile", str(bad), report_dir=tmp_path)
    assert proc.returncode == 2  # bad input: one line, exit 2, nothing written
    assert f"{bad}: host.iommu.mdoe: unknown field" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not any(tmp_path.iterdir()) or list(tmp_path.iterdir()) == [bad]
    cli = kgc_main("profile", "check", str(bad), cwd=REPO)
    assert cli.returncode == 2 and "host.iommu.mdoe" in cli.stderr and "Traceback" not in cli.stderr


@pytest.mark.parametrize("profile", sorted(p.stem for p in (REPO / "profiles").glob("*.yaml")))
def test_every_shipped_profile_is_valid(profile: str, kgc_main: KgcMain) -> None:
    proc = kgc_main("profile", "check", profile, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


def test_unknown_option_is_the_standard_usage_error(tmp_path: Path,
                                                     kgc_main: KgcMain) -> None:
    proc = run_suite("--no-such-kgc-option", report_dir=tmp_path)
    assert proc.returncode == 4
    assert "unrecognized arguments: --no-such-kgc-option" in proc.stderr
    cli = kgc_main("--bogus")
    assert cli.returncode == 2 and "usage: kgc" in cli.stderr


# -- the plugin never judges nothing in silence (issue 21, item 6) -----------------------------
NO_RANDOM = ("-p", "no:cacheprovider", "-p", "no:randomly")


def test_pyargs_runs_the_installed_suites_like_their_paths(tmp_path: Path,
                                                           pytest_in: Run) -> None:
    """`pytest --pyargs kgc.conformance -m iommu` from anywhere: the plugin is on, the checks
    are judged and verdict.json is written (it used to switch itself off: every check
    skipped, exit 0, no verdict)."""
    node = intel_good(tmp_path / "node")
    out = tmp_path / "r"
    proc = pytest_in(tmp_path, *NO_RANDOM, "--pyargs", "kgc.conformance", "-m", "iommu",
                     "--kgc-root", str(node.root), "--report-dir", str(out))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = verdicts(out)
    assert doc["overall"] == "pass" and doc["counts"]["pass"] == len(doc["results"]) >= 8
    assert {r["layer"] for r in doc["results"]} == {"iommu"}
    # what the gate reads: the targets as the results name them, the profile's content
    # digest and the selection
    run = doc["run"]
    assert run["targets"] == sorted({r["target"] for r in doc["results"]})
    assert run["profile_digest"] == profile_digest(load_profile("generic-nvidia-passthrough"))
    assert run["selection"]["markers"] == "iommu" and run["selection"]["keywords"] == ""
    assert run["selection"]["checks_not_run"] == {}
    assert "iommu" not in run["selection"]["layers_not_selected"]
    assert set(run["selection"]["targets"].values()) == {"node"}
    # a module of the package, too; and this machine (no IOMMU) is not certified
    proc = pytest_in(tmp_path, *NO_RANDOM, "--pyargs", "kgc.conformance.iommu.test_iommu",
                     "--report-dir", str(tmp_path / "here"))
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert verdicts(tmp_path / "here")["overall"] == "fail"


def test_pyargs_cluster_layer_with_an_unreachable_cluster_is_not_certified(
        tmp_path: Path, pytest_in: Run) -> None:
    kube = tmp_path / "kubeconfig"
    kube.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n")
    proc = pytest_in(tmp_path, *NO_RANDOM, "--pyargs", "kgc.conformance", "-m", "gpu",
                     "--kubeconfig", str(kube), "--report-dir", str(tmp_path / "r"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = verdicts(tmp_path / "r")
    assert doc["overall"] == "fail" and doc["results"]
    assert not any(r["status"] == "pass" for r in doc["results"])


def test_a_suite_the_plugin_does_not_run_errors_instead_of_skipping(tmp_path: Path,
                                                                    pytest_in: Run) -> None:
    """A copy of a suite outside the installed suites (the plugin stays out of the way
    there): every check errors and says how to run the suites; never a silent exit 0."""
    (tmp_path / "test_copy.py").write_text(
        (REPO / "conformance" / "iommu" / "test_iommu.py").read_text())
    proc = pytest_in(tmp_path, *NO_RANDOM, "test_copy.py", "-rA")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "skipped" not in proc.stdout.splitlines()[-1]
    assert "8 error" in proc.stdout.splitlines()[-1], proc.stdout[-2000:]
    assert "--pyargs kgc.conformance" in proc.stdout
    assert not (tmp_path / "reports").exists()
