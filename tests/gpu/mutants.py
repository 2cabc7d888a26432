"""Comparison-flip mutation run over the gpu layer's pure code (a tool, not a test).

    .venv/bin/python tests/gpu/mutants.py [module ...]

For every comparison in the evaluators and the classifier it writes one mutant (``<`` <->
``>=``, ``<=`` <-> ``>``, ``==`` <-> ``!=``, ``in`` <-> ``not in``, ``is`` <-> ``is not``)
into a temporary copy of ``src/`` and runs the fast gpu tests against it (PYTHONPATH puts the
copy first). A mutant that no test kills is printed with its line; the exit status is the
number of survivors. Sequential and single-process: about 2 s per mutant here.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT = ["src/kgc/layers/gpu/checks.py", "src/kgc/layers/gpu/classify.py",
           "src/kgc/layers/gpu/plan.py", "src/kgc/layers/gpu/smi.py"]
TESTS = ["tests/gpu/test_gpu_checks.py", "tests/gpu/test_classify.py", "tests/gpu/test_plan.py",
         "tests/gpu/test_smi.py", "tests/gpu/test_kata_events.py"]
FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.Eq: ast.NotEq,
        ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot,
        ast.IsNot: ast.Is}


def mutants(src: str) -> list[tuple[int, str, str]]:
    """(line, description, mutated source) for every comparison operator."""
    tree = ast.parse(src)
    sites = [(n, i) for n in ast.walk(tree) if isinstance(n, ast.Compare)
             for i, op in enumerate(n.ops) if type(op) in FLIP]
    out = []
    for k, (node, _i) in enumerate(sites):
        t = ast.parse(src)
        target = [(n, j) for n in ast.walk(t) if isinstance(n, ast.Compare)
                  for j, op in enumerate(n.ops) if type(op) in FLIP][k]
        n2, j2 = target
        old = type(n2.ops[j2])
        n2.ops[j2] = FLIP[old]()
        desc = f"{old.__name__} -> {FLIP[old].__name__}: {ast.unparse(node)[:90]}"
        out.append((node.lineno, desc, ast.unparse(t)))
    return out


def main(argv: list[str]) -> int:
    files = argv or DEFAULT
    survivors = 0
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "src"
        shutil.copytree(REPO / "src", copy)
        env = {**os.environ, "PYTHONPATH": str(copy)}

        def tests_pass() -> bool:
            r = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *TESTS],
                cwd=REPO, env=env, capture_output=True, text=True, check=False,
            )
            return r.returncode == 0

        for rel in files:
            path = copy / Path(rel).relative_to("src")
            original = path.read_text()
            # baseline: the unmutated (re-printed) source must pass, or every mutant
            # would count as killed for the wrong reason
            path.write_text(ast.unparse(ast.parse(original)))
            if not tests_pass():
                print(f"baseline fails for {rel}: fix the tests first")
                return 99
            for line, desc, mutated in mutants(original):
                total += 1
                path.write_text(mutated)
                if tests_pass():
                    survivors += 1
                    print(f"SURVIVED {rel}:{line} {desc}", flush=True)
            path.write_text(original)
    print(f"{total} mutants, {total - survivors} killed, {survivors} survived")
    return survivors


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
