"""`kgc checks ID`: one check explained — what it proves, the evidence it reads, its
remediation and the profile keys it uses.

What it reads and which profile keys it uses are found in the evaluator's own code (and
the helpers of its module it passes the evidence or the profile to), not written by hand
beside it, so the explanation cannot drift from what the check does: every attribute
chain on the evaluator's evidence parameter (``ev.groups``) and on its profile parameter
(``profile.host.iommu.vendor``) is listed.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from kgc.core.layer import Layer
from kgc.core.model import Check

MAX_HELPER_DEPTH = 3


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _uses(fn: Callable[..., Any], roles: Mapping[str, str], depth: int,
          seen: set[Any], out: dict[str, set[str]]) -> None:
    """Attribute chains on the parameters named in ``roles`` (name -> "evidence" or
    "profile"), following helpers of the same module the parameters are passed to."""
    if fn in seen or depth > MAX_HELPER_DEPTH:
        return
    seen.add(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return
    _mark_parents(tree)  # only the longest chain (a.b.c, not a.b) counts
    module = inspect.getmodule(fn)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and not isinstance(getattr(node, "parent", None),
                                                               ast.Attribute):
            ch = _chain(node)
            if ch and ch[0] in roles and len(ch) > 1:
                out[roles[ch[0]]].add(".".join(ch[1:]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and module:
            helper = getattr(module, node.func.id, None)
            if not inspect.isfunction(helper):
                continue
            params = list(inspect.signature(helper).parameters)
            sub = {params[i]: roles[a.id] for i, a in enumerate(node.args)
                   if i < len(params) and isinstance(a, ast.Name) and a.id in roles}
            if sub:
                _uses(helper, sub, depth + 1, seen, out)


def _mark_parents(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node  # type: ignore[attr-defined]


def reads(check: Check) -> dict[str, list[str]]:
    """``evidence``: the evidence fields the evaluator reads; ``profile``: the profile keys
    it uses (dotted, as in the profile file: ``host.iommu.vendor``)."""
    fn = check.evaluate
    out: dict[str, set[str]] = {"evidence": set(), "profile": set()}
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {k: [] for k in out}
    roles = dict(zip(params[:2], ("evidence", "profile"), strict=False))
    _uses(fn, roles, 0, set(), out)
    return {k: _longest(v) for k, v in out.items()}


def _longest(chains: set[str]) -> list[str]:
    """Drop a chain that is a prefix of a longer one (``host.iommu`` under
    ``host.iommu.vendor``)."""
    keep = [c for c in chains if not any(o != c and o.startswith(c + ".") for o in chains)]
    return sorted(keep)


def evidence_type(check: Check) -> str:
    try:
        ann = next(iter(inspect.signature(check.evaluate).parameters.values())).annotation
    except (StopIteration, TypeError, ValueError):
        return ""
    return ann if isinstance(ann, str) else getattr(ann, "__name__", "")


def explain(check: Check, layer: Layer) -> list[str]:
    """The lines `kgc checks ID` prints."""
    r = reads(check)
    lines = [f"{check.id} — {check.title}",
             f"layer: {layer.name} ({layer.label}, {layer.scope.value}); severity: "
             f"{check.severity}"]
    doc = " ".join(check.doc.split())
    lines += ["", "what it proves:", *textwrap.wrap(doc or check.title, 96,
                                                     initial_indent="  ",
                                                     subsequent_indent="  ")]
    et = evidence_type(check)
    lines += ["", f"evidence it reads{f' ({et})' if et else ''}:",
              *(f"  {e}" for e in r["evidence"] or ["(the whole evidence object)"])]
    query = layer.query
    if query is not None and not callable(query):
        got = [*query.files, *query.dirs, *(c for _, c in query.commands)]
        if got:
            lines.append(f"  (the {layer.name} layer collects: {', '.join(got[:12])}"
                         + (" …)" if len(got) > 12 else ")"))
    lines += ["", "profile keys it uses:",
              *(f"  {p}" for p in r["profile"] or ["(none)"])]
    lines += ["", "remediation (when it fails; a verdict may give a more specific one):",
              *(f"  {ln}" for ln in (check.remediation or "(none)").splitlines())]
    return lines
