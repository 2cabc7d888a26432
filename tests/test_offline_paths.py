"""Every recorded bundle in fixtures/ gives the same verdicts through each offline path:
`kgc evaluate B`, `pytest --snapshot B` and `kgc certify --snapshot B` (README promise).

The three paths run in this process (``kgc.cli.main``; pytest's ``pytester`` for the plugin,
also under `kgc certify`, whose pytest command line is run here as it would be spawned): a
fresh Python + pytest + Kubernetes-client start-up per path and bundle cost `make check`
about 10 minutes on 2 cores. One test runs the real `kgc certify` process (which spawns the
real pytest) on one bundle: the process boundary, proven once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, KgcMain

NODE_BUNDLES = sorted((REPO / "fixtures" / "bundles").glob("*.json"))
NRI_BUNDLES = sorted((REPO / "fixtures" / "nri").glob("*.bundle.json"))
CASES = [(b, "lab") for b in NODE_BUNDLES] + [
    (b, str(b.with_name(b.name.replace(".bundle.json", ".profile.yaml")))) for b in NRI_BUNDLES
]


def _key(results: list[dict]) -> set[tuple[str, str, str, str, str]]:
    return {(r["target"], r["check"], r["status"], r["reason"], r["origin"]) for r in results}


def _evaluate(kgc_main: KgcMain, bundle: Path, profile: str) -> list[dict]:
    r = kgc_main("evaluate", str(bundle), "--profile", profile, "--json")
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)["results"]


def _verdicts(rc: int, out: Path, what: str) -> list[dict]:
    assert rc in (0, 1), what
    return json.loads((out / "verdict.json").read_text())["results"]


def _pytest(pytester: pytest.Pytester, args: list[str], out: Path) -> list[dict]:
    """``pytest ARGS --report-dir OUT`` in this process (from pytester's empty directory,
    as a user's run from anywhere): the verdicts it wrote."""
    r = pytester.runpytest_inprocess(*args, "--report-dir", str(out))
    return _verdicts(int(r.ret), out, "\n".join(r.outlines[-60:] + r.errlines[-20:]))


def _certify(kgc_main: KgcMain, spawned: list[list[str]], cwd: Path, args: list[str],
             out: Path) -> list[dict]:
    """`kgc certify ARGS --report-dir OUT` in this process (the certify_here fixture runs
    the pytest command line it spawns here)."""
    r = kgc_main("certify", *args, "--report-dir", str(out), cwd=cwd)
    assert len(spawned) == 1, spawned
    return _verdicts(r.returncode, out, r.stdout[-3000:] + r.stderr[-2000:])


def test_fixture_bundles_exist() -> None:
    assert len(NODE_BUNDLES) >= 7 and len(NRI_BUNDLES) >= 4


@pytest.mark.parametrize("bundle,profile", CASES, ids=[c[0].name for c in CASES])
def test_three_offline_paths_agree(bundle: Path, profile: str, tmp_path: Path,
                                   kgc_main: KgcMain, pytester: pytest.Pytester,
                                   certify_here: list[list[str]]) -> None:
    ev = _evaluate(kgc_main, bundle, profile)
    py = _pytest(pytester, ["-p", "no:cacheprovider", "-q", "--snapshot", str(bundle),
                            "--profile", profile], tmp_path / "py")
    cert = _certify(kgc_main, certify_here, pytester.path,
                    ["-q", "--snapshot", str(bundle), "--profile", profile], tmp_path / "cert")
    assert _key(ev) == _key(py) == _key(cert)
    # every node layer is judged (or says why not), nothing cluster-scoped sneaks in
    layers = {r["layer"] for r in ev}
    assert {"iommu", "vfio", "persistence", "reboot", "runtime", "nri"} <= layers
    assert all(r["origin"] == "bundle" for r in ev)


def test_the_real_kgc_certify_process_gives_evaluates_verdicts(tmp_path: Path,
                                                               kgc_main: KgcMain) -> None:
    """The real entry point: `python -m kgc.cli certify` spawns the real pytest, whose
    verdicts are `kgc evaluate`'s (one bundle with passes, failures and skips)."""
    bundle = REPO / "fixtures" / "bundles" / "group-not-viable.json"
    out = tmp_path / "cert"
    r = subprocess.run([sys.executable, "-m", "kgc.cli", "certify", "-q", "--snapshot",
                        str(bundle), "--profile", "lab", "--report-dir", str(out)],
                       capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    cert = _verdicts(r.returncode, out, r.stdout[-3000:] + r.stderr[-2000:])
    assert r.returncode == 1  # the bundle fails: not certified
    ev = _evaluate(kgc_main, bundle, "lab")
    assert _key(cert) == _key(ev)
    assert {r["status"] for r in ev} >= {"pass", "fail", "skip"}
