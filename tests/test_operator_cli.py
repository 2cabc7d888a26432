"""Small things operators asked for (issue 19.7): `kgc evaluate --json` is a whole verdict
and `-o verdict.json` writes one `kgc gate` accepts; `kgc checks ID` explains one check."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from conftest import REPO
from kgc import cli
from kgc.core import explain
from kgc.core.registry import catalogue, load_layers

GOOD = REPO / "fixtures" / "bundles" / "good.json"


def _kgc(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_evaluate_json_is_a_whole_verdict_and_o_writes_one_the_gate_accepts(
        tmp_path: Path) -> None:
    rc, out, _ = _kgc("evaluate", str(GOOD), "--profile", "lab", "--json")
    doc = json.loads(out)
    assert doc["schema"] == "kgc-verdict/1"
    assert {"run", "counts", "overall", "results"} <= set(doc)
    assert sum(doc["counts"].values()) == len(doc["results"]) and rc in (0, 1)
    run = doc["run"]
    assert run["profile"] == "lab" and run["profile_digest"].startswith("sha256:")
    assert run["targets"] and run["selection"]["targets"]
    v = tmp_path / "verdict.json"
    rc2, out2, _ = _kgc("evaluate", str(GOOD), "--profile", "lab", "-o", str(v))
    assert rc2 == rc and f"verdict: {v}" in out2
    written = json.loads(v.read_text())
    assert written["results"] == doc["results"] and written["counts"] == doc["counts"]
    # the gate reads it (exit 0 or 1 with its word), not "bad input" (2)
    grc, gout, gerr = _kgc("gate", str(v))
    assert grc in (0, 1), gerr
    assert gout.startswith("kgc gate: ")


def test_evaluate_o_unwritable_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "ro").mkdir()
    rc, _, err = _kgc("evaluate", str(GOOD), "-o", str(tmp_path / "ro"))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err


def test_checks_id_explains_one_check() -> None:
    rc, out, _ = _kgc("checks", "iommu.cmdline")
    assert rc == 0
    assert out.startswith("iommu.cmdline — ")
    for part in ("what it proves:", "evidence it reads (IommuEvidence):", "cmdline",
                 "profile keys it uses:", "host.iommu.vendor", "remediation"):
        assert part in out, part
    rc, out, _ = _kgc("checks", "iommu.cmdline", "--format", "json")
    doc = json.loads(out)
    assert "host.iommu.vendor" in doc["profile_keys"] and "cmdline" in doc["evidence"]
    rc, _, err = _kgc("checks", "iommu.nope")
    assert rc == 2 and "iommu.cmdline" in err and len(err.strip().splitlines()) == 1


def test_every_check_can_be_explained() -> None:
    """The explanation comes from the evaluator's code: it works for every check, and
    every profile key it names is a real key of the default profile."""
    from kgc.core.profile import load_profile

    prof = load_profile("generic-nvidia-passthrough")
    layers = load_layers()
    for c in catalogue(layers):
        lines = explain.explain(c, layers[c.layer])
        assert lines[0].startswith(c.id)
        for key in explain.reads(c)["profile"]:
            assert hasattr(prof, key.split(".")[0]), (c.id, key)


def test_snapshot_names_the_layers_its_host_evidence_serves(tmp_path: Path) -> None:
    """`kgc snapshot -o node.json` of a node said "layers (none)" although the host evidence
    it recorded is what the iommu, vfio, persistence and runtime layers are judged from."""
    from systree import intel_good

    root = tmp_path / "node"
    intel_good(root)
    rc, out, err = _kgc("snapshot", "--root", str(root), "-o", str(tmp_path / "node.json"))
    assert rc == 0, err
    first = out.splitlines()[0]
    assert "layers (none)" not in first, first
    assert "layers iommu, vfio, persistence, runtime (host evidence)" in first, first


def test_an_output_under_a_regular_file_says_it_is_not_a_directory(tmp_path: Path) -> None:
    """`-o /a-file/x.json` said "(File exists)" (mkdir's word for the file in the way)."""
    from systree import intel_good

    intel_good(tmp_path / "node")
    (tmp_path / "a-file").write_text("x\n")
    rc, _, err = _kgc("snapshot", "--root", str(tmp_path / "node"),
                      "-o", str(tmp_path / "a-file" / "sub" / "b.json"))
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{tmp_path / 'a-file'} is not a directory" in err and "File exists" not in err, err


def test_a_run_that_judged_no_layer_does_not_say_only() -> None:
    """"FAIL for no layer only (not judged: …)" read as if one layer were missing."""
    from kgc.core.report import scope_note

    assert scope_note([], [], ["iommu", "vfio"]) == "for no layer (not judged: iommu, vfio)"
    assert scope_note(["iommu"], ["iommu"], ["iommu", "vfio"]) == \
        "for iommu only (not judged: vfio)"
