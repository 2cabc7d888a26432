"""The layout promises: the product never imports a lab (labs plug in through entry points),
and no layer reaches into another layer's private names."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

SRC = REPO / "src" / "kgc"


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
    return out


def test_no_product_module_imports_a_lab() -> None:
    bad = []
    for f in SRC.rglob("*.py"):
        if f.is_relative_to(SRC / "lab"):
            continue
        bad += [f"{f.relative_to(REPO)}: {m}" for m, _ in _imports(f)
                if m == "kgc_lab" or m.startswith("kgc_lab.")]
    assert not bad, bad


def test_no_layer_imports_another_layers_private_names() -> None:
    bad = []
    for f in (SRC / "layers").rglob("*.py"):
        own = f.relative_to(SRC / "layers").parts[0]
        for mod, names in _imports(f):
            if not mod.startswith("kgc.layers.") or mod.split(".")[2] == own:
                continue
            bad += [f"{f.relative_to(REPO)}: {mod}.{n}" for n in names if n.startswith("_")]
    assert not bad, bad
