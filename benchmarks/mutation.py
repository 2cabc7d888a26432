"""Mutation score of the check evaluators and the verdict logic, per module (issues 9, 21).

    python benchmarks/mutation.py [--modules a,b] [--keep] [--max-children N] [--json OUT]
    python benchmarks/mutation.py --list                      # the modules and their tests
    tox -e mutation [-- --modules sizing.model]

Each MODULE below is one figure: the files mutated, the functions whose mutants count, and
the FAST self-tests (``-m "not lab and not slow"``) allowed to kill them. ``node`` is the
figure of issue 9 (``src/kgc/layers/<layer>/checks.py`` of the node and runtime layers,
``Check.judge`` and ``overall``); the others (issue 21) are the cluster layers' evaluators
and models, the gpu layer's DRA and confidential-GPU evaluators (``gpu.dra``,
``gpu.dra_pod``, ``gpu.cc``, ``gpu.dra_causes``), the gate's policy and evaluation,
``kgc diff`` and the fleet merge. Hypothesis is pinned to a small derandomised profile so
every mutant sees the same examples.

mutmut (pinned in tox.ini) runs in a scratch copy of the repository per module, so neither
its ``mutants/`` tree nor its configuration touches the work tree. Survivors that are
equivalent mutants (no test can tell them apart from the original) are listed with the
reason in ``benchmarks/mutation_equivalent.json``; the script prints per module the raw
score (killed / all), the score with those excluded, and every survivor that is not listed
-- it exits 1 if any module has one, or a raw score under the goal. A mutant mutmut files as
"check was interrupted by user" (pytest's exit 2: the tests could not be collected with it)
counts as killed once a fresh ``--collect-only`` with it active fails where the original
collects; the JSON gives their number (``collection_kills``) and names.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GOAL = 0.90
MAX_EXAMPLES = 15
EQUIVALENT = REPO / "benchmarks" / "mutation_equivalent.json"


@dataclass(frozen=True)
class Module:
    """One mutation figure: what is mutated, which mutants count, what may kill them."""

    name: str
    mutate: tuple[str, ...]  # files (mutmut only_mutate)
    select: tuple[str, ...]  # mutant-name globs that count (and are run)
    tests: tuple[str, ...]  # fast test paths; ones that do not exist yet are left out
    what: str = ""


# the node and runtime layers of issue 9
NODE_LAYERS = ("iommu", "vfio", "persistence", "reboot", "runtime", "nri")
# mutants of model.py / report.py outside the verdict logic are not run
CORE_SELECT = (
    "kgc.core.model.xǁCheckǁjudge__mutmut_*",
    "kgc.core.report.x_overall__mutmut_*",
)
# fast self-tests that judge in-process (tests that start a pytest/kgc subprocess import the
# installed package, not the mutant, so they cannot kill one and only cost time)
NODE_TESTS = (
    "tests/layers",
    "tests/nri",
    "tests/node/test_bundles.py",
    "tests/test_iommu.py",
    "tests/test_evidence_input.py",
    "tests/test_report_verdicts.py",
    "tests/test_verdict_corpus.py",
)
GPU_TESTS = ("tests/gpu/test_gpu_checks.py", "tests/gpu/test_classify.py",
             "tests/gpu/test_gpu_layer.py", "tests/gpu/test_gpu_survivors.py")
SIZING_TESTS = ("tests/sizing/test_checks.py", "tests/sizing/test_model.py",
                "tests/sizing/test_properties.py", "tests/sizing/test_bad_input.py",
                "tests/sizing/test_sizing_survivors.py")
# test_keda_mutants.py is left out: it rebuilds the layer from its source files, which in
# mutmut's tree carry every mutant at once
KEDA_TESTS = ("tests/keda/test_keda_checks.py", "tests/keda/test_keda_stats.py",
              "tests/keda/test_keda_phases.py",
              "tests/keda/test_keda_survivors.py", "tests/keda/test_keda_verdicts.py")
# the phases' own out-of-order tests judge in-process too (records read by observe.py)
PHASES_TESTS = (*KEDA_TESTS, "tests/keda/test_keda_out_of_order.py")
GATE_TESTS = ("tests/gate/test_gate_policy.py", "tests/gate/test_gate_diff_cli.py",
              "tests/test_gate_survivors.py", "tests/gate/test_diff_survivors.py")
FLEET_TESTS = ("tests/fleet/test_collect.py", "tests/fleet/test_merge_exact.py",
               "tests/test_fleet.py")
# issue 20's DRA and confidential-GPU evaluators: their own tests, the layer's (every check on
# the recorded bundles) and the fixture verdicts (every check on every fixture, in-process)
GPU_LAYER_TESTS = ("tests/gpu/test_gpu_layer.py", "tests/test_fixture_verdicts.py")
DRA_TESTS = ("tests/gpu/test_dra_preflight.py", "tests/gpu/test_dra_pod.py",
             "tests/gpu/test_plan.py", "tests/gpu/test_gpu_checks.py", *GPU_LAYER_TESTS,
             "tests/gpu/test_dra_survivors.py")
DRA_POD_TESTS = ("tests/gpu/test_dra_pod.py", "tests/gpu/test_kata_events.py", *GPU_LAYER_TESTS,
                 "tests/gpu/test_dra_survivors.py")
CC_TESTS = ("tests/gpu/test_cc.py", *GPU_LAYER_TESTS, "tests/gpu/test_cc_survivors.py")
DRA_CAUSE_TESTS = ("tests/gpu/test_classify.py", "tests/gpu/test_kata_events.py",
                   "tests/gpu/test_dra_pod.py", "tests/gpu/test_plan.py", *GPU_LAYER_TESTS,
                   "tests/gpu/test_dra_survivors.py")


def _whole(path: str) -> str:
    """The mutant-name glob of every function of a source file."""
    return path.removeprefix("src/").removesuffix(".py").replace("/", ".") + ".*"


def _funcs(path: str, *names: str) -> tuple[str, ...]:
    """Mutant-name globs of some functions of a file (``Class.method`` for a method)."""
    mod = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
    out = []
    for n in names:
        cls, _, fn = n.rpartition(".")
        out.append(f"{mod}.xǁ{cls}ǁ{fn}__mutmut_*" if cls else f"{mod}.x_{fn}__mutmut_*")
    return tuple(out)


def _funcs_except(path: str, *skip: str) -> tuple[str, ...]:
    """Mutant-name globs of every function and method of a file but ``skip`` (e.g. a
    ``register`` function that only applies the registry's decorator, like module-level
    code)."""
    tree = ast.parse((REPO / path).read_text())
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    names += [f"{c.name}.{f.name}" for c in tree.body if isinstance(c, ast.ClassDef)
              for f in c.body if isinstance(f, ast.FunctionDef)]
    return _funcs(path, *(n for n in names if n not in skip))


def _file_module(name: str, path: str, tests: tuple[str, ...], what: str) -> Module:
    return Module(name, (path,), (_whole(path),), tests, what)


_NODE_FILES = tuple(f"src/kgc/layers/{x}/checks.py" for x in NODE_LAYERS)
_GATE = "src/kgc/gate/gate.py"
_DIFF = "src/kgc/gate/diff.py"
_FLEET = "src/kgc/fleet/collect.py"
_DRA = "src/kgc/layers/gpu/dra.py"
_CLASSIFY = "src/kgc/layers/gpu/classify.py"
_PLAN = "src/kgc/layers/gpu/plan.py"
MODULES: dict[str, Module] = {m.name: m for m in (
    Module("node", (*_NODE_FILES, "src/kgc/core/model.py", "src/kgc/core/report.py"),
           tuple(_whole(f) for f in _NODE_FILES) + CORE_SELECT, NODE_TESTS,
           "node and runtime layers' checks.py + Check.judge + overall (issue 9)"),
    _file_module("gpu.checks", "src/kgc/layers/gpu/checks.py", GPU_TESTS, "gpu evaluators"),
    _file_module("gpu.classify", "src/kgc/layers/gpu/classify.py", GPU_TESTS,
                 "gpu device classifier"),
    _file_module("sizing.checks", "src/kgc/layers/sizing/checks.py", SIZING_TESTS,
                 "sizing evaluators"),
    _file_module("sizing.model", "src/kgc/layers/sizing/model.py", SIZING_TESTS,
                 "Kata VM sizing model"),
    _file_module("keda.checks", "src/kgc/layers/keda/checks.py", KEDA_TESTS, "keda evaluators"),
    _file_module("keda.stats", "src/kgc/layers/keda/stats.py", KEDA_TESTS,
                 "keda percentiles and ratios"),
    _file_module("keda.phases", "src/kgc/layers/keda/phases.py", PHASES_TESTS,
                 "keda phase computation"),
    Module("gpu.dra", (_DRA,), _funcs_except(_DRA, "register"), DRA_TESTS,
           "gpu DRA preflight: evaluators and evidence readers (register excluded)"),
    _file_module("gpu.dra_pod", "src/kgc/layers/gpu/dra_pod.py", DRA_POD_TESTS,
                 "gpu DRA pod: gpu.dra-allocation, gpu.dra-device-match, claim readers"),
    _file_module("gpu.cc", "src/kgc/layers/gpu/cc.py", CC_TESTS,
                 "gpu confidential GPUs: gpu.cc-tee/-mode/-ready/-attestation"),
    Module("gpu.dra_causes", (_CLASSIFY, _PLAN),
           _funcs(_CLASSIFY, "_scheduling", "_kata", "dra_publishers")
           + _funcs(_PLAN, "settled"), DRA_CAUSE_TESTS,
           "the classifier's scheduling/Kata stages (DRA causes incl.) + the waiter's settled"),
    Module("gate.evaluate", (_GATE,),
           _funcs(_GATE, "evaluate", "_accept", "_check_finding", "_target_scopes",
                  "_skip_summary", "_run_findings", "_missing_checks"), GATE_TESTS,
           "kgc gate: evaluate and its helpers"),
    _file_module("core.policy", "src/kgc/core/policy.py", GATE_TESTS, "gate policy"),
    Module("gate.diff", (_DIFF,),
           _funcs(_DIFF, "diff", "pair_targets", "figures", "_numbers", "_leaves",
                  "_env_figures", "DiffResult.regressed", "Figure.delta", "_vanished",
                  "profile_warnings", "is_timing"), GATE_TESTS,
           "kgc diff (rendering and to_dict excluded)"),
    Module("fleet.merge", (_FLEET,),
           _funcs(_FLEET, "merge", "judge_node", "_valid_verdict", "_node_error",
                  "NodeOutcome.judged", "_not_this_nodes", "check_distinct_hosts",
                  "_merge_selection", "_same_run_fields", "_rank"), FLEET_TESTS,
           "kgc fleet collect: judge_node and merge (with their helpers)"),
)}

HYPOTHESIS_PROFILE = f'''

# -- added by benchmarks/mutation.py in its scratch copy only --------------------------------
from hypothesis import HealthCheck as _HC
from hypothesis import settings as _settings

_settings.register_profile("kgc-mutation", max_examples={MAX_EXAMPLES}, derandomize=True,
                           deadline=None, suppress_health_check=list(_HC), database=None)
_settings.load_profile("kgc-mutation")
'''


# mutmut 3 never mutates a decorated function (the decorator runs at import), so every
# ``@CHECKS.check(...)`` evaluator would be left out of its figure; in the scratch copy the
# registration is moved below the function (``f = CHECKS.check(...)(f)``, the same Check
# object, registered in the same order) so the evaluators' bodies are mutated too
# the fast tests, as mutmut runs them (its pytest_add_cli_args)
PYTEST_ARGS = ("-m", "not lab and not slow", "-p", "no:cacheprovider", "-p", "no:randomly", "-q")

REGISTERING = ("CHECKS.check", "_scoped")


def undecorate(src: str) -> str:
    """``@CHECKS.check(...)`` / ``@_scoped(...)`` on a module-level function -> the same
    call applied after its body (what the decorator does, minus the syntax mutmut skips)."""
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    edits: list[tuple[int, int, int, str]] = []  # (deco start, deco end, fn end, stmt)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef) or len(node.decorator_list) != 1:
            continue
        d = node.decorator_list[0]
        if not (isinstance(d, ast.Call) and ast.unparse(d.func) in REGISTERING):
            continue
        call = ast.get_source_segment(src, d)
        assert call is not None and node.end_lineno is not None
        edits.append((d.lineno, d.end_lineno or d.lineno, node.end_lineno,
                      f"{node.name} = {call}({node.name})\n"))
    for start, end, fn_end, stmt in reversed(edits):
        lines[fn_end:fn_end] = [stmt]
        del lines[start - 1:end]
    return "".join(lines)


def scratch_copy(dest: Path, tests: list[str], mutate: list[str]) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    for rel in files:
        src = REPO / rel
        if not src.is_file() or rel.startswith(("node_modules/", "reports/")):
            continue
        dst = dest / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    (dest / "conftest.py").write_text((dest / "conftest.py").read_text() + HYPOTHESIS_PROFILE)
    for rel in mutate:
        f = dest / rel
        f.write_text(undecorate(f.read_text()))
    # an explicit @settings(max_examples=N) wins over a profile: cap it in the copy, so a fuzz
    # test costs every mutant it covers seconds, not minutes
    for t in (dest / "tests").rglob("*.py"):
        text = t.read_text()
        if "max_examples=" in text:
            t.write_text(re.sub(r"max_examples=\d+", f"max_examples={MAX_EXAMPLES}", text))
    # mutmut reads [tool.mutmut] from pyproject.toml before setup.cfg: keep only setup.cfg
    py = (dest / "pyproject.toml").read_text()
    if "[tool.mutmut]" in py:
        raise SystemExit("pyproject.toml has a [tool.mutmut] section; this script owns the config")
    (dest / "setup.cfg").write_text(
        "[mutmut]\n"
        "source_paths = src\n"
        "only_mutate =\n" + "".join(f"    {m}\n" for m in mutate)
        + "pytest_add_cli_args_test_selection =\n" + "".join(f"    {t}\n" for t in tests)
        + "pytest_add_cli_args =\n" + "".join(f"    {a}\n" for a in PYTEST_ARGS)
        + "timeout_multiplier = 10.0\n"
        "use_git_change_detection = false\n"
        # what the tests read besides tests/ (mutmut runs them inside mutants/)
        "also_copy =\n    profiles\n    fixtures\n    conftest.py\n    README.md\n    conformance\n"
    )


def statuses(work: Path) -> dict[str, str]:
    """mutant name -> status, from mutmut's own result files."""
    out: dict[str, str] = {}
    res = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], cwd=work,
                         capture_output=True, text=True, env=dict(os.environ), check=False)
    for line in res.stdout.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name:
            out[name] = status.strip()
    return out


# mutmut's status for pytest's exit code 2 (INTERRUPTED). In an unattended run it means the
# tests could not even be collected with the mutant active (e.g. a quantity parser refusing
# the profile's defaults, which are built at import): the tests did fail. Each such mutant is
# confirmed before it counts as killed (see collection_kill)
INTERRUPTED = "check was interrupted by user"


def _collect(work: Path, tests: list[str], mutant: str) -> tuple[int, str]:
    """``pytest --collect-only`` of the module's tests in a fresh process in mutmut's tree,
    with ``mutant`` active ("" = the original code), importing the mutated sources first as
    mutmut's runner does."""
    tree = work / "mutants"
    env = dict(os.environ, MUTANT_UNDER_TEST=mutant,
               PYTHONPATH=os.pathsep.join([str(tree / "src"), str(tree),
                                           os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    res = subprocess.run([sys.executable, "-m", "pytest", "--rootdir=.", "--collect-only",
                          *PYTEST_ARGS, *tests], cwd=tree, env=env, text=True,
                         capture_output=True, check=False, timeout=600)
    return res.returncode, res.stdout + res.stderr


def collection_kill(work: Path, tests: list[str], mutant: str) -> bool:
    """Whether ``mutant`` (filed by mutmut as interrupted) makes the tests fail before any
    runs: collecting them with it active fails (pytest exit 2, errors during collection, or 4,
    a conftest that cannot be imported — in a fresh process the conftest imports the mutated
    module itself), where the very same command collects cleanly without it (the caller
    checks that once per run). Exit 5 (nothing collected) is not a failure."""
    rc, _ = _collect(work, tests, mutant)
    return rc in (1, 2, 3, 4)


def in_scope(name: str, select: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pat) for pat in select)


def _mutmut(work: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=work, text=True,
                          capture_output=True, check=False)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson interval of a kill rate k/n (what a sampled figure can claim)."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def run_module(m: Module, max_children: int, tests: list[str] | None, keep: bool,
               equivalent: dict[str, str], sample: int = 0,
               seed: str = "kgc") -> dict[str, object]:
    """One module's figure, measured in its own scratch copy; with ``sample`` a seeded
    uniform sample of that many of its mutants (the figure then says so, with its 95 %
    interval)."""
    sel_tests = tests or [t for t in m.tests if (REPO / t).exists()]
    work = Path(tempfile.mkdtemp(prefix=f"kgc-mutation-{m.name}-"))
    try:
        scratch_copy(work, sel_tests, list(m.mutate))
        t0 = time.monotonic()
        select: list[str] = list(m.select)
        population = 0
        if sample:
            # generate the mutants and collect which tests reach them, without running any
            # (mutmut refuses a filter that matches nothing, after those two steps)
            _mutmut(work, "run", "--max-children", str(max_children), "kgc.NO-SUCH-MUTANT")
            names = sorted(k for k in statuses(work) if in_scope(k, m.select))
            population = len(names)
            if population > sample:
                select = sorted(random.Random(f"{seed}:{m.name}").sample(names, sample))
        run = _mutmut(work, "run", "--max-children", str(max_children), *select)
        wall = time.monotonic() - t0
        if run.returncode not in (0, 1):
            return {"module": m.name, "error": f"mutmut exited {run.returncode}",
                    "output": (run.stdout[-3000:] + "\n" + run.stderr[-3000:]).strip()}
        st = {k: v for k, v in statuses(work).items() if in_scope(k, tuple(select))}
        if st and all(v == "not checked" for v in st.values()):  # e.g. the clean run failed
            return {"module": m.name, "error": "mutmut ran no mutant",
                    "output": (run.stdout[-3000:] + "\n" + run.stderr[-3000:]).strip()}
        interrupted = sorted(k for k, v in st.items() if v == INTERRUPTED)
        collection: list[str] = []
        if interrupted:
            rc, out = _collect(work, sel_tests, "")
            if rc != 0:
                return {"module": m.name, "error": f"the original code's tests do not collect "
                        f"(pytest exited {rc})", "output": out[-3000:]}
            collection = [k for k in interrupted if collection_kill(work, sel_tests, k)]
        killed = sorted(k for k, v in st.items() if v == "killed" or k in collection)
        survived = sorted(k for k in st if k not in killed)
        unexplained = [k for k in survived if k not in equivalent]
        n = len(st)
        adj_n = n - (len(survived) - len(unexplained))
        by_status: dict[str, int] = {}
        for v in st.values():
            by_status[v] = by_status.get(v, 0) + 1
        lo, hi = wilson(len(killed), n)
        return {"module": m.name, "what": m.what, "mutants": n, "killed": len(killed),
                "population": population or n, "sampled": bool(population > n),
                "score_95ci": [round(lo, 4), round(hi, 4)],
                "survived": len(survived), "by_status": by_status,
                # killed at collection (pytest exit 2, confirmed), included in "killed"
                "collection_kills": len(collection), "collection_killed": collection,
                "interrupted_unconfirmed": [k for k in interrupted if k not in collection],
                "score": round(len(killed) / n, 4) if n else 0.0,
                "score_without_equivalent": round(len(killed) / adj_n, 4) if adj_n else 0.0,
                "equivalent": len(survived) - len(unexplained),
                "unexplained_survivors": unexplained, "wall_s": round(wall, 1),
                "max_children": max_children, "tests": sel_tests,
                "survivor_diffs": {k: _diff(work, k) for k in survived}}
    finally:
        if keep:
            print(f"scratch copy of {m.name} kept: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default=",".join(MODULES),
                    help=f"comma-separated modules (default all: {','.join(MODULES)})")
    ap.add_argument("--list", action="store_true", help="print the modules and exit")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copies (prints them)")
    ap.add_argument("--max-children", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--tests", help="comma-separated test paths instead of each module's own")
    ap.add_argument("--sample", type=int, default=0,
                    help="run a seeded uniform sample of N mutants per module (0: all)")
    ap.add_argument("--seed", default="kgc", help="the sample's seed")
    a = ap.parse_args()
    if a.list:
        for m in MODULES.values():
            print(f"{m.name:14} {m.what}\n{'':14} mutates {', '.join(m.mutate)}\n"
                  f"{'':14} tests {', '.join(m.tests)}")
        return 0
    names = [x for x in a.modules.split(",") if x]
    unknown = [x for x in names if x not in MODULES]
    if unknown:
        ap.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    equivalent = json.loads(EQUIVALENT.read_text()) if EQUIVALENT.exists() else {}
    reports = []
    for name in names:
        r = run_module(MODULES[name], a.max_children, a.tests.split(",") if a.tests else None,
                       a.keep, equivalent, a.sample, a.seed)
        reports.append(r)
        print(json.dumps({k: v for k, v in r.items() if k != "survivor_diffs"}, indent=1,
                         ensure_ascii=False), flush=True)
        for k in r.get("unexplained_survivors", ()):  # type: ignore[attr-defined]
            print(f"\n--- survivor {k}\n{r['survivor_diffs'][k]}", flush=True)  # type: ignore[index]
        if a.json:  # after every module: a long run keeps what it has measured
            a.json.write_text(json.dumps(reports, indent=1, ensure_ascii=False))
    ok = all("error" not in r and float(r["score"]) >= GOAL  # type: ignore[arg-type]
             and not r["unexplained_survivors"] for r in reports)
    return 0 if ok else 1


def _diff(work: Path, name: str) -> str:
    res = subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=work,
                         capture_output=True, text=True, check=False)
    return res.stdout.strip()[-3000:]


if __name__ == "__main__":
    sys.exit(main())
