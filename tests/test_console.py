"""The console of a conformance run (issue 19.1): it ends with kgc's summary and nothing after
it — the verdict table with every reason whole (wrapped to the terminal, never cut), a
section per status that needs a reader (blockers first, one entry per distinct reason),
every skip, and the overall line last. pytest's own FAILURES section, short test summary
and warnings summary leave kgc's checks out unless the user asks (``--tb`` / ``-r``); the
plugin itself warns about nothing and leaves no ``.pytest_cache/`` behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from kgc.core import report

BAD = REPO / "fixtures" / "bundles" / "iommu-off.json"
KEDA = REPO / "fixtures" / "keda" / "lab-good.json"


def flat(text: str) -> str:
    return " ".join(text.split())


def _kgc_part(lines: list[str]) -> list[str]:
    """The lines from kgc's verdict table on."""
    at = next(i for i, ln in enumerate(lines) if "kata-gpu-conformance verdicts" in ln)
    return lines[at:]


@pytest.fixture
def in_process(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]  # noqa: E501
    """`pytest ARGS` in this process from an empty directory, at terminal width COLUMNS."""

    def run(*args: str, columns: int = 80) -> tuple[int, list[str], Path]:
        monkeypatch.setenv("COLUMNS", str(columns))
        monkeypatch.chdir(pytester.path)
        r = pytester.runpytest_inprocess("-p", "no:randomly", *args)
        return int(r.ret), r.outlines, pytester.path / "reports"

    return run


def test_a_failing_host_run_ends_with_the_overall_line_and_leaves_nothing_else(
        tmp_path: Path) -> None:
    """A real process from a directory outside the checkout (its own empty ini, so the
    checkout's addopts do not apply), without pytest-xdist: before, pytest's list of
    `FAILED test_…` names came after kgc's summary, the run warned
    PytestUnknownMarkWarning (xdist_group) and left .pytest_cache/ behind."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", "pytest.ini", "-p", "no:xdist", "-p",
         "no:randomly", "-m", "host", "--snapshot", str(BAD), "--profile", "lab"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "100", "HOME": str(tmp_path)})
    assert p.returncode == 1, p.stdout[-3000:] + p.stderr[-2000:]
    lines = p.stdout.rstrip("\n").splitlines()
    assert lines[-1].startswith("overall: FAIL "), lines[-5:]
    kgc = _kgc_part(lines)
    assert not [ln for ln in lines if ln.startswith(("FAILED ", "SKIPPED ", "ERROR "))]
    assert "FAILURES" not in p.stdout and "short test summary" not in p.stdout
    assert "Warning" not in p.stdout + p.stderr, p.stdout[-3000:]
    assert not (tmp_path / ".pytest_cache").exists()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["pytest.ini", "reports"]
    # a section per status that needs a reader, fail before skip, then the overall line
    titles = [ln.strip("= ") for ln in kgc if ln.startswith("==")]
    assert titles == ["kata-gpu-conformance verdicts", "what to fix: 16 failed",
                      "not judged: 9 skipped"], titles  # 2: the DRA-only rules (boot)
    doc = json.loads((tmp_path / "reports" / "verdict.json").read_text())
    text = flat("\n".join(kgc))
    for r in doc["results"]:
        assert flat(r["reason"]) in text, r["check"]  # whole, wherever it wraps
    # the four nri checks that skip for one reason: one entry naming all four
    nri = [r for r in doc["results"] if r["layer"] == "nri"]
    assert len(nri) == 4 and len({r["reason"] for r in nri}) == 1
    assert text.count(flat(nri[0]["reason"])) == 2  # the table's row, the skip section
    assert ("[SKIP] nri.adjustment, nri.events, nri.handshake, nri.own-pods-only on "
            in text)


@pytest.mark.parametrize("columns", [200, 80])
def test_a_long_reason_wraps_whole_at_the_terminal_width(columns: int) -> None:
    """Before, the table cut every reason at ~75 characters whatever the terminal."""
    long = ("the kernel has not enabled the IOMMU (/sys/kernel/iommu_groups is empty), so "
            "vfio-pci cannot bind any device; fix the IOMMU first (see iommu.enabled); "
            "and then some more words to make this reason longer than any terminal line "
            "of two hundred columns, which a reader still has to read whole to act on it")
    rows = [{"target": "n", "check": "vfio.driver", "layer": "vfio", "status": "fail",
             "reason": long, "severity": "blocker", "title": "t", "remediation": "do x"},
            {"target": "n", "check": "vfio.device-node", "layer": "vfio", "status": "pass",
             "reason": "ok"}]
    table = report.summary_table(rows, width=columns)
    assert "…" not in "\n".join(table)
    assert all(len(ln) <= columns for ln in table), [ln for ln in table if len(ln) > columns]
    assert flat(long) in flat("\n".join(table))
    row = next(i for i, ln in enumerate(table) if "vfio.driver" in ln)
    assert len([ln for ln in table if ln.startswith(" " * 10)]) >= (2 if columns == 80 else 1)
    assert table[row].startswith("    FAIL  vfio.driver")
    det = report.details(rows, width=columns)
    assert all(len(ln) <= columns for ln in det) and flat(long) in flat("\n".join(det))


def test_the_run_wraps_at_the_terminal_width(in_process) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
    for columns in (200, 80):
        rc, lines, rdir = in_process("-m", "vfio", "--snapshot", str(BAD), "--profile", "lab",
                                     columns=columns)
        assert rc == 1
        kgc = _kgc_part(lines)
        doc = json.loads((rdir / "verdict.json").read_text())
        for r in doc["results"]:
            assert flat(r["reason"]) in flat("\n".join(kgc))
        table = kgc[1:kgc.index(next(ln for ln in kgc[1:] if ln.startswith("==")))]
        assert "…" not in "\n".join(table)
        # a line over the width is one unbreakable word (a path) only
        over = [ln for ln in table if len(ln) > columns]
        assert all(len(max(ln.split(), key=len)) > columns // 3 for ln in over), over


def test_an_explicit_r_or_tb_still_shows_pytests_sections(in_process) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
    rc, lines, _ = in_process("-m", "iommu", "--snapshot", str(BAD), "--profile", "lab")
    assert rc == 1 and not [ln for ln in lines if ln.startswith("FAILED ")]
    assert not [ln for ln in lines if "= FAILURES =" in ln]
    rc, lines, _ = in_process("-m", "iommu", "--snapshot", str(BAD), "--profile", "lab",
                              "-rfs")
    assert [ln for ln in lines if ln.startswith("FAILED ")]
    assert not [ln for ln in lines if "= FAILURES =" in ln]
    assert lines[-1].startswith("overall: FAIL")
    rc, lines, _ = in_process("-m", "iommu", "--snapshot", str(BAD), "--profile", "lab",
                              "--tb=short")
    assert [ln for ln in lines if "= FAILURES =" in ln]
    assert not [ln for ln in lines if ln.startswith("FAILED ")]
    assert lines[-1].startswith("overall: FAIL")


def test_identical_reasons_across_targets_are_one_entry() -> None:
    rows = [{"target": t, "check": c, "layer": "iommu", "status": "fail", "severity": "blocker",
             "title": "T", "reason": "same words", "remediation": "fix it"}
            for t in ("n1", "n2", "n3") for c in ("iommu.enabled", "iommu.mode")]
    rows.append({"target": "n1", "check": "iommu.cmdline", "layer": "iommu", "status": "error",
                 "severity": "critical", "title": "U", "reason": "other", "remediation": ""})
    det = report.details(rows, width=100)
    heads = [ln for ln in det if ln.startswith("[")]
    assert heads == ["[FAIL] iommu.enabled, iommu.mode on n1, n2, n3 (blocker): T",
                     "[ERROR] iommu.cmdline on n1 (critical): U"], heads
    assert "\n".join(det).count("same words") == 1
    titles = [t for t, _ in report.sections(rows, width=100)]
    assert titles == ["what to fix: 6 failed", "what to fix: 1 could not decide (error)"]


def test_a_target_whose_every_check_says_one_thing_is_one_row() -> None:
    """An unreachable node: its 15 error verdicts share one reason — one row, not 15."""
    why = "cannot reach ssh://root@127.0.0.1:1: Connection refused"
    rows = [{"target": "far", "check": f"iommu.c{i}", "layer": "iommu", "status": "error",
             "reason": why} for i in range(15)]
    rows.append({"target": "near", "check": "iommu.enabled", "layer": "iommu",
                 "status": "pass", "reason": "ok"})
    table = report.summary_table(rows, width=120)
    far = table[table.index("-- far") + 1:table.index("-- near")]
    assert far == [f"    ERROR all 15 checks (iommu): {why}"], far


def test_the_keda_table_is_printed_once_per_text(in_process, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
    """Two cluster bundles with the same measurement: one per-phase table naming both."""
    other = tmp_path / "other.json"
    doc = json.loads(KEDA.read_text())
    doc["target"] = "other-cluster"
    other.write_text(json.dumps(doc))
    rc, lines, _ = in_process("-m", "keda", "--snapshot", f"{KEDA},{other}", "--profile",
                              "lab")
    assert rc == 0, lines[-30:]
    heads = [ln for ln in lines if "keda-phases.txt" in ln]
    assert len(heads) == 1 and "kgc-lab, other-cluster" in heads[0], heads
    assert sum("(seconds; percentiles by nearest rank)" in ln for ln in lines) == 1
    assert lines[-1].startswith("overall: PASS")


def test_a_warn_is_kgcs_section_not_pytests_warnings_summary(in_process) -> None:  # type: ignore[no-untyped-def]  # noqa: E501
    """A warn verdict (iommu.kernel-support on a Firecracker guest kernel, a recorded
    bundle) is raised as a KgcWarning; pytest's warnings summary repeated it by test id."""
    bundle = REPO / "fixtures" / "guest" / "h200-firecracker.bundle.json"
    rc, lines, _ = in_process("-m", "iommu", "--snapshot", str(bundle))
    assert rc == 1
    assert not [ln for ln in lines if "warnings summary" in ln or "KgcWarning" in ln]
    assert [ln for ln in lines if "to look at: 1 warned" in ln]
    rc, lines, _ = in_process("-m", "iommu", "--snapshot", str(bundle), "-rw")
    assert [ln for ln in lines if "warnings summary" in ln]
    assert lines[-1].startswith("overall: FAIL")


def test_one_broken_target_is_a_few_lines_of_kgc_output() -> None:
    """An unreachable node's 15 checks share one error: the table row and one entry in the
    error section (its checks counted by layer, not listed one by one)."""
    why = "cannot reach ssh://root@127.0.0.1:1: Connection refused"
    rows = [{"target": "far", "check": f"{lay}.c{i}", "layer": lay, "status": "error",
             "severity": "blocker", "title": "t", "reason": why,
             "remediation": "ssh -p 1 root@127.0.0.1 true"}
            for lay in ("iommu", "vfio", "runtime") for i in range(5)]
    table = report.summary_table(rows, width=80)
    secs = report.sections(rows, width=80)
    assert [t for t, _ in secs] == ["what to fix: 15 could not decide (error)"]
    body = secs[0][1]
    assert body[0] == "[ERROR] 15 checks of iommu, runtime, vfio on far (blocker): t", body
    # the table printed the reason whole in that one row: the entry is the fix, not the
    # reason again (issue 19: at most 5 lines of kgc output for one broken target)
    assert not [ln for ln in body if ln.startswith("  why:")], body
    assert len(table) - 2 + len(body) <= 5, (table, body)  # less the heading and the counts


def test_the_reason_is_said_again_under_what_to_fix_unless_its_one_row_said_it() -> None:
    """The entry's "why:" is left out only where the table showed those very checks as one
    row with that reason; a reason the table split over rows, or a target with another
    reason beside it, keeps its "why:"."""
    why = "cannot reach ssh://root@127.0.0.1:1: Connection refused"
    rows = [{"target": t, "check": f"{lay}.c{i}", "layer": lay, "status": "error",
             "severity": "blocker", "title": "t", "reason": why, "remediation": "fix it"}
            for t in ("far", "near") for lay in ("iommu", "vfio") for i in range(2)]
    body = report.details(rows, width=200)
    assert not [ln for ln in body if ln.startswith("  why:")], body
    # near: one check fails for another reason, so its rows are shown one by one
    rows[-1] = dict(rows[-1], status="fail", reason="something else")
    body = report.details(rows, width=200)
    assert [ln for ln in body if ln.startswith("  why:")] == [
        "  why: something else", f"  why: {why}"], body
    # two checks only: shown row by row, so the entry says why
    body = report.details(rows[:2], width=200)
    assert [ln for ln in body if ln.startswith("  why:")] == [f"  why: {why}"], body


def test_an_unreachable_target_with_skips_is_one_error_row() -> None:
    """`pytest -m host --hosts ssh://root@127.0.0.1:1`: the node's 29 judged checks share
    one error, and its nri and reboot checks skip for their flags (--nri-probe,
    --allow-reboot), as they do on every node. The error was 29 rows "(the same as …)";
    now it is one row, the skips keep theirs."""
    why = "evidence could not be collected: 127.0.0.1:1: Connection refused"
    rows = [{"target": "far", "check": f"{lay}.c{i}", "layer": lay, "status": "error",
             "reason": why} for lay in ("iommu", "vfio", "runtime") for i in range(5)]
    rows += [{"target": "far", "check": f"reboot.c{i}", "layer": "reboot", "status": "skip",
              "reason": "not run: needs --allow-reboot"} for i in range(2)]
    table = report.summary_table(rows, width=120)
    errors = [ln for ln in table if ln.lstrip().startswith("ERROR")]
    assert errors == [f"    ERROR 15 checks (iommu, vfio, runtime): {why}"], table
    assert [" ".join(ln.split()) for ln in table if ln.lstrip().startswith("SKIP")] == [
        "SKIP reboot.c0 not run: needs --allow-reboot",
        "SKIP reboot.c1 (the same as reboot.c0)"], table
    assert table[-1] == "  2 skip, 15 error"
    # one check of it that did not say the same thing: every row is shown again
    rows[0] = dict(rows[0], status="fail", reason="something else")
    table = report.summary_table(rows, width=120)
    assert len([ln for ln in table if ln.lstrip().startswith(("ERROR", "FAIL"))]) == 15
