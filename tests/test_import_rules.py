"""Import rules as a test: who may import whom inside src/kgc (tests/import_rules.yaml).

The rules file says the layering (kube below core, core below gate and the layers, no layer
importing another, the product never importing the lab) in the manner of Kubernetes'
``.import-restrictions``; this test parses every module with :mod:`ast` — top-level,
function-level and ``if TYPE_CHECKING:`` imports, relative imports resolved, ``from pkg
import mod`` read as the submodule — and lists every violation as ``module -> imported
(line N): rule``. Function-level imports of kgc modules hide circles (a core module that
imports the gate inside a function is still a core module that needs the gate), so each one
carries its reason, and the reason is checked: ``# cycle:`` only where the imported module
really imports the importer at module level, ``# startup:`` only where it really pulls a
heavy package the importer does not load. The synthetic-package tests prove the checker
bites; the tree test proves src/ keeps the rules.

tests/test_layout.py's two older promises (no product module imports the lab, no layer
imports another layer's private names) are covered here too, more strictly (no layer
imports another layer at all); that file stays for its other tests.
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO

RULES_FILE = REPO / "tests" / "import_rules.yaml"
SRC = REPO / "src"
REASON = re.compile(r"#\s*(cycle|startup):\s*(\S.*)")


# -- the rules ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    selector: re.Pattern[str]
    allowed: tuple[str, ...]
    why: str

    def allowed_for(self, module: str) -> tuple[str, ...]:
        """The allowed prefixes with the selector's named groups filled in."""
        m = self.selector.search(module)
        groups = {k: v for k, v in (m.groupdict() if m else {}).items() if v is not None}
        return tuple(p.format(**groups) for p in self.allowed)


@dataclass(frozen=True)
class Rules:
    package: str
    rules: tuple[Rule, ...]
    skip: tuple[str, ...] = ()
    forbidden: tuple[tuple[str, str], ...] = ()  # (prefix, why)
    shared: tuple[str, ...] = ()
    units: tuple[re.Pattern[str], ...] = ()
    startup_heavy: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> Rules:
        known = {"package", "skip", "forbidden", "shared", "units", "startup_heavy", "rules"}
        assert set(d) <= known, f"unknown keys in the import rules: {set(d) - known}"
        return cls(
            package=d["package"],
            rules=tuple(Rule(re.compile(r["selector"]), tuple(r["allowed"]),
                             " ".join(str(r["why"]).split())) for r in d["rules"]),
            skip=tuple(d.get("skip", ())),
            forbidden=tuple((f["prefix"], f["why"]) for f in d.get("forbidden", ())),
            shared=tuple(d.get("shared", ())),
            units=tuple(re.compile(u) for u in d.get("units", ())),
            startup_heavy=tuple(d.get("startup_heavy", ())),
        )

    def rule_for(self, module: str) -> Rule | None:
        return next((r for r in self.rules if r.selector.search(module)), None)

    def unit(self, module: str) -> str:
        for u in self.units:
            m = u.match(module)
            if m:
                return m.group(0)
        return module


def load_rules(path: Path = RULES_FILE) -> Rules:
    return Rules.from_mapping(yaml.safe_load(path.read_text()))


def under(name: str, prefix: str) -> bool:
    """``name`` is the module ``prefix`` or inside it (dotted, not textual: kgc.core is not
    under kgc.co)."""
    return name == prefix or name.startswith(prefix + ".")


# -- scanning -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Imp:
    """One imported module (or one name from it) as a module's source says."""

    importer: str
    target: str  # the module imported (submodules resolved)
    name: str | None  # the name taken from it, when not a submodule
    line: int
    function: bool  # inside a def/lambda: runs when called, not on import
    type_only: bool  # under ``if TYPE_CHECKING:``: never runs
    reason: tuple[str, str] | None  # ("cycle" | "startup", why) from an adjacent comment


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: list[Imp] = field(default_factory=list)
    # ``module._x`` reached through an imported module: (module, attribute, line)
    private_attrs: list[tuple[str, str, int]] = field(default_factory=list)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _comments(source: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def _reason(node: ast.stmt, lines: list[str], comments: Mapping[int, str]
            ) -> tuple[str, str] | None:
    """The ``# cycle:``/``# startup:`` reason on the import's lines or in the comment block
    right above it."""
    cand = [comments[n] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
            if n in comments]
    n = node.lineno - 1
    while n >= 1 and lines[n - 1].strip().startswith("#"):
        cand.append(lines[n - 1].strip())
        n -= 1
    for c in cand:
        m = REASON.search(c)
        if m:
            return m.group(1), m.group(2).strip()
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


class _Scanner(ast.NodeVisitor):
    def __init__(self, mod: Module, known: set[str], source: str) -> None:
        self.mod = mod
        self.known = known
        self.lines = source.splitlines()
        self.comments = _comments(source)
        self.depth = 0
        self.type_only = 0
        self.bindings: dict[str, str] = {}  # local name -> module it names
        self.attrs: list[tuple[str, str, int]] = []

    def _add(self, node: ast.stmt | ast.expr, target: str, name: str | None) -> None:
        reason = _reason(node, self.lines, self.comments) if isinstance(node, ast.stmt) else None
        self.mod.imports.append(Imp(self.mod.name, target, name, node.lineno, self.depth > 0,
                                    self.type_only > 0, reason))

    def _scoped(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self.type_only += 1
        for n in node.body:
            self.visit(n)
        self.type_only -= 1
        for n in node.orelse:
            self.visit(n)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._add(node, a.name, None)
            if a.asname:
                self.bindings[a.asname] = a.name
            else:
                self.bindings[a.name.split(".")[0]] = a.name.split(".")[0]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            pkg = self.mod.name if self.mod.is_package else self.mod.name.rpartition(".")[0]
            parts = pkg.split(".")
            parts = parts[:len(parts) - (node.level - 1)]
            base = ".".join(parts + ([node.module] if node.module else []))
        else:
            base = node.module or ""
        for a in node.names:
            sub = f"{base}.{a.name}"
            if sub in self.known:
                self._add(node, sub, None)
                self.bindings[a.asname or a.name] = sub
            else:
                self._add(node, base, a.name)

    def visit_Call(self, node: ast.Call) -> None:
        fn = _dotted(node.func)
        if fn in ("importlib.import_module", "import_module", "__import__") and node.args \
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            self._add(node, node.args[0].value, None)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if _private(node.attr):
            self.attrs.append((_dotted(node.value) or "", node.attr, node.lineno))
        self.generic_visit(node)


def scan(root: Path, rules: Rules) -> dict[str, Module]:
    """Every module of ``rules.package`` under ``root`` (a src/ folder), skips left out."""
    files: dict[str, tuple[Path, bool]] = {}
    for f in sorted((root / rules.package).rglob("*.py")):
        parts = f.relative_to(root).with_suffix("").parts
        is_pkg = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_pkg else parts)
        if not any(under(name, s) for s in rules.skip):
            files[name] = (f, is_pkg)
    known = set(files)
    mods: dict[str, Module] = {}
    for name, (path, is_pkg) in files.items():
        source = path.read_text()
        mod = Module(name, path, is_pkg)
        sc = _Scanner(mod, known, source)
        sc.visit(ast.parse(source, str(path)))
        for value, attr, line in sc.attrs:
            head, _, rest = value.partition(".")
            if head in sc.bindings:
                resolved = ".".join(x for x in (sc.bindings[head], rest) if x)
                if resolved in known:
                    mod.private_attrs.append((resolved, attr, line))
        mods[name] = mod
    return mods


# -- the module-level import graph (what runs on import) ----------------------------------
def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _runtime_closure(mods: Mapping[str, Module], start: str, loading: str = "") -> set[str]:
    """Every module (kgc or not) importing ``start`` runs, through module-level imports.
    ``loading``: the module that imports it; its packages are in ``sys.modules`` already
    (Python ran their ``__init__`` before it), so they are not run again."""
    seen: set[str] = set(_ancestors(loading)[:-1]) if loading else set()
    todo = _ancestors(start)
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m in mods:
            for i in mods[m].imports:
                if not i.function and not i.type_only:
                    todo += _ancestors(i.target)
    return seen


# -- the check ------------------------------------------------------------------------------
def violations(root: Path, rules: Rules, rules_name: str = "tests/import_rules.yaml"
               ) -> list[str]:
    mods = scan(root, rules)
    out: list[str] = []
    for name, mod in sorted(mods.items()):
        rule = rules.rule_for(name)
        if rule is None:
            out.append(f"{name}: no rule in {rules_name} selects this module (add one: where "
                       "does it sit in the layering?)")
        for i in mod.imports:
            where = f"{name} -> {i.target} (line {i.line})"
            bad = next((why for p, why in rules.forbidden if under(i.target, p)), None)
            if bad:
                out.append(f"{where}: forbidden: {bad}")
                continue
            if not under(i.target, rules.package):
                continue  # the standard library and third-party packages: not policed
            if rule is not None and i.target not in rules.shared:
                allowed = rule.allowed_for(name)
                if not any(under(i.target, p) for p in allowed):
                    out.append(f"{where}: {rule.why} (may import only "
                               f"{', '.join(allowed) or 'no kgc module'})")
            if i.name and _private(i.name) and rules.unit(i.target) != rules.unit(name):
                out.append(f"{name} -> {i.target}.{i.name} (line {i.line}): private name of "
                           f"{rules.unit(i.target)}, used outside it (make it public)")
            if i.function and not i.type_only:
                out += _function_level(mods, rules, i, where)
        for target, attr, line in mod.private_attrs:
            if rules.unit(target) != rules.unit(name):
                out.append(f"{name} -> {target}.{attr} (line {line}): private name of "
                           f"{rules.unit(target)}, used outside it (make it public)")
    return list(dict.fromkeys(out))  # `from m import a, b`: one line for the statement


def _function_level(mods: Mapping[str, Module], rules: Rules, i: Imp, where: str
                    ) -> Iterator[str]:
    if i.reason is None:
        yield (f"{where}: function-level import without '# cycle: <reason>' or "
               "'# startup: <reason>' (import it at the top)")
        return
    kind, _ = i.reason
    if kind == "cycle":
        if i.importer not in _runtime_closure(mods, i.target, i.importer):
            yield (f"{where}: '# cycle:' but {i.target} does not import {i.importer} at "
                   "module level (import it at the top)")
        return
    heavy = [h for h in rules.startup_heavy
             if any(under(m, h) for m in _runtime_closure(mods, i.target, i.importer))]
    mine = _runtime_closure(mods, i.importer)
    gained = [h for h in heavy if not any(under(m, h) for m in mine)]
    if not gained:
        yield (f"{where}: '# startup:' but importing {i.target} loads none of "
               f"{', '.join(rules.startup_heavy)} beyond what {i.importer} loads already "
               "(import it at the top)")


# -- the tree keeps the rules --------------------------------------------------------------
def test_src_kgc_keeps_the_import_rules() -> None:
    found = violations(SRC, load_rules())
    assert not found, "import rules (tests/import_rules.yaml) broken:\n  " + "\n  ".join(found)


def test_the_scan_sees_the_tree() -> None:
    """A scanner that saw nothing would pass the rules: it sees kgc's real imports, relative
    and function-level ones resolved."""
    mods = scan(SRC, load_rules())
    assert "kgc.core.model" in mods and "kgc.cli" in mods
    assert not any(under(m, "kgc.lab") for m in mods)
    targets = {i.target for i in mods["kgc.cli"].imports}
    assert {"kgc.core.report", "kgc.core.profile"} <= targets
    assert sum(len(m.imports) for m in mods.values()) > 300
    assert any(i.function for i in mods["kgc.cli"].imports)


def test_every_rule_selects_a_module() -> None:
    """A rule no module matches is a typo or a leftover."""
    rules = load_rules()
    names = list(scan(SRC, rules))
    dead = [r.selector.pattern for r in rules.rules
            if not any(rules.rule_for(n) is r for n in names)]
    assert not dead, f"rules that select no module: {dead}"


# -- the checker bites (a synthetic package) ----------------------------------------------
SYNTH_RULES = {
    "package": "pkg",
    "skip": ["pkg.lab"],
    "forbidden": [{"prefix": "pkg.lab", "why": "no lab"},
                  {"prefix": "pkg_lab", "why": "no lab"}],
    "shared": ["pkg"],
    "units": [r"^pkg\.layers\.\w+", r"^pkg\.\w+"],
    "startup_heavy": ["heavylib"],
    "rules": [
        {"selector": r"^pkg$", "why": "root", "allowed": []},
        {"selector": r"^pkg\.low(\.|$)", "why": "low is the bottom", "allowed": ["pkg.low"]},
        {"selector": r"^pkg\.layers\.(?P<layer>\w+)(\.|$)", "why": "one layer",
         "allowed": ["pkg.layers.{layer}", "pkg.low"]},
        {"selector": r"^pkg\.layers$", "why": "layers", "allowed": []},
        {"selector": r"^pkg\.high(\.|$)", "why": "high is above low",
         "allowed": ["pkg.high", "pkg.low"]},
    ],
}

CLEAN = {
    "__init__.py": "VERSION = '1'\n",
    "low/__init__.py": "",
    "low/base.py": "class _Base: ...\nclass Base: ...\n",
    "low/heavy.py": "import heavylib\n",
    "high/__init__.py": "",
    "high/a.py": "from pkg.low.base import Base\nfrom pkg import VERSION\nfrom . import b\n",
    "high/b.py": "def f():\n    import json  # stdlib: no reason needed\n    return json\n",
    "layers/__init__.py": "",
    "layers/one/__init__.py": "from .checks import C\n",
    "layers/one/checks.py": "from ..one import collect\nC = 1\n",
    "layers/one/collect.py": "",
    "layers/two/__init__.py": "",
    "lab/__init__.py": "import pkg.high.a\n",  # skipped: not scanned
}


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for rel, text in files.items():
        p = root / "pkg" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _check(tmp_path: Path, extra: Mapping[str, str]) -> list[str]:
    return violations(_write(tmp_path, {**CLEAN, **extra}), Rules.from_mapping(SYNTH_RULES),
                      "rules")


def test_a_clean_synthetic_package_passes(tmp_path: Path) -> None:
    assert _check(tmp_path, {}) == []


BITES: list[tuple[str, dict[str, str], str]] = [
    ("low imports high", {"low/x.py": "import os\nfrom pkg.high import a\n"},
     "pkg.low.x -> pkg.high.a (line 2): low is the bottom (may import only pkg.low)"),
    ("relative import resolved", {"low/x.py": "from ..high.a import Base\n"},
     "pkg.low.x -> pkg.high.a (line 1): low is the bottom"),
    ("function-level import counts for the layering",
     {"low/x.py": "def f():\n    from pkg.high import b  # cycle: none really\n"},
     "pkg.low.x -> pkg.high.b (line 2): low is the bottom"),
    ("TYPE_CHECKING import counts for the layering",
     {"low/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.high.a\n"},
     "pkg.low.x -> pkg.high.a (line 3): low is the bottom"),
    ("a layer imports another layer",
     {"layers/two/x.py": "from pkg.layers.one.checks import C\n"},
     "pkg.layers.two.x -> pkg.layers.one.checks (line 1): one layer (may import only "
     "pkg.layers.two, pkg.low)"),
    ("the lab, even lazily", {"high/x.py": "def f():\n    import pkg_lab.cluster\n"},
     "pkg.high.x -> pkg_lab.cluster (line 2): forbidden: no lab"),
    ("the lab through importlib",
     {"high/x.py": "import importlib\nM = importlib.import_module('pkg.lab.x')\n"},
     "pkg.high.x -> pkg.lab.x (line 2): forbidden: no lab"),
    ("a private name imported from another unit",
     {"high/x.py": "from pkg.low.base import _Base\n"},
     "pkg.high.x -> pkg.low.base._Base (line 1): private name of pkg.low, used outside it"),
    ("a private name reached as an attribute",
     {"high/x.py": "from pkg.low import base\nclass W(base._Base): ...\n"},
     "pkg.high.x -> pkg.low.base._Base (line 2): private name of pkg.low, used outside it"),
    ("a function-level kgc import without a reason",
     {"high/x.py": "def f():\n    from pkg.low import base\n    return base\n"},
     "pkg.high.x -> pkg.low.base (line 2): function-level import without '# cycle: <reason>'"),
    ("'# cycle:' where there is no cycle",
     {"high/x.py": "def f():\n    # cycle: it felt like one\n    from pkg.low import base\n"},
     "pkg.high.x -> pkg.low.base (line 3): '# cycle:' but pkg.low.base does not import "
     "pkg.high.x at module level"),
    ("'# startup:' where nothing heavy loads",
     {"high/x.py": "def f():\n    from pkg.low import base  # startup: slow\n"},
     "pkg.high.x -> pkg.low.base (line 2): '# startup:' but importing pkg.low.base loads none "
     "of heavylib"),
    ("'# startup:' where the importer loads the heavy package anyway",
     {"high/x.py": "import heavylib\ndef f():\n    from pkg.low import heavy  # startup: slow\n"},
     "pkg.high.x -> pkg.low.heavy (line 3): '# startup:' but"),
    ("a module no rule selects", {"other.py": ""},
     "pkg.other: no rule in rules selects this module"),
]


@pytest.mark.parametrize(("extra", "expected"), [b[1:] for b in BITES],
                         ids=[b[0] for b in BITES])
def test_the_checker_bites(tmp_path: Path, extra: dict[str, str], expected: str) -> None:
    found = _check(tmp_path, extra)
    assert any(v.startswith(expected) for v in found), found


def test_a_real_cycle_and_a_real_startup_gain_are_accepted(tmp_path: Path) -> None:
    extra = {
        "high/x.py": "import pkg.high.y\n",
        "high/y.py": ("def f():\n    # cycle: x imports y at module level\n"
                      "    from pkg.high import x\n    return x\n"
                      "def g():\n    from pkg.low import heavy  # startup: heavylib is slow\n"),
    }
    assert _check(tmp_path, extra) == []



def test_importing_the_product_loads_no_kubernetes_api_class() -> None:
    """The kubernetes client (37.x) loads an API class and the models it names on first
    access: touching eight of them at import cost every kgc and pytest process ≈ 1.9 CPU-s,
    also on a node where no cluster is ever contacted (benchmarks/README.md). What the
    entry points import must leave them unloaded until a cluster call needs one."""
    code = (
        "import sys\n"
        "import kgc.cli, kgc.plugin, kgc.kube, kgc.layers.gpu.collect\n"
        "from kgc.core.registry import load_layers\n"
        "load_layers()\n"
        "print(sorted(m for m in sys.modules if m.startswith('kubernetes.client.api.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout.strip().splitlines()[-1]
    assert out == "[]", f"API classes loaded at import: {out}"
