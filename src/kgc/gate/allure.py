"""The release policy as Allure 3 quality-gate rules (the ``qualityGate`` key of allurerc).

Allure evaluates quality gates only in ``allure quality-gate`` (and ``allure run``), never in
``allure generate`` (allure-framework discussion #3441). :func:`quality_gate_config` turns a
:class:`~kgc.gate.policy.Policy` into two rulesets that decide as ``kgc gate`` does on the
same results:

- ``kgc-blocking`` — ``kgcMaxResults: 0`` over the results the policy blocks on (a fail or
  error of a blocking check, a warn under ``warn: per-check``, a skip of a required layer
  under ``skip: per-check``; waived checks and results the policy does not accept — tags
  ``simulated``, ``origin:bundle`` — left out; a failed test without a kgc check label is a
  suite defect and blocks);
- ``kgc-required-layers`` — ``kgcLayersJudged``: every required layer judged on every target
  of its scope (epic = layer, parentSuite = target, as the pytest plugin labels them).

The two rules are defined in the config itself (``use``), so the allurerc needs no import
and works with a global Allure. What Allure cannot see — the run's profile, whether it
finished (``incomplete``), ``run.layers_judged`` — only ``kgc gate`` judges.

The config is data with JavaScript in it: values of type :class:`Js` are code. Render the
whole thing with :func:`to_js` into an ``allurerc.mjs`` (``allurerc_text`` writes a minimal
one), and put :data:`NODE20_PRELUDE` at the top of that file: Allure 3.18's quality gate
needs Node >= 22 without it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kgc.gate.policy import Policy


class Js(str):
    """JavaScript source (a function), rendered verbatim by :func:`to_js`."""


def to_js(value: Any, indent: int = 0) -> str:
    """Python data -> a JavaScript expression (JSON, except :class:`Js` values)."""
    pad = "  " * (indent + 1)
    end = "  " * indent
    if isinstance(value, Js):
        return str(value).replace("\n", "\n" + end)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [f"{pad}{json.dumps(str(k))}: {to_js(v, indent + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(f"{pad}{to_js(v, indent + 1)}" for v in value) + "\n" + end + "]"
    return json.dumps(value)


def glob_regex(glob: str) -> str:
    """An fnmatch glob over check ids as an anchored JavaScript regular expression."""
    out = ""
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            out += ".*"
        elif c == "?":
            out += "."
        elif c == "[":
            j = glob.find("]", i + 1)
            if j == -1:
                out += "\\["
            else:
                body = glob[i + 1:j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out += "[" + body.replace("\\", "\\\\") + "]"
                i = j
        else:
            out += re.escape(c) if c not in "-_" else c
        i += 1
    return "^" + out + "$"


_LABELS = (
    "const labels = Array.isArray(tr.labels) ? tr.labels : [];\n"
    "  const one = (n) => (labels.find((l) => l.name === n) || {}).value || \"\";\n"
    "  const tags = labels.filter((l) => l.name === \"tag\").map((l) => l.value);\n"
)


def _accepted_js(policy: Policy) -> str:
    conds = []
    if not policy.accept_simulated:
        conds.append('tags.includes("simulated")')
    if not policy.accept_replayed:
        conds.append('tags.includes("origin:bundle")')
    return ("  if (" + " || ".join(conds) + ") return false;\n") if conds else ""


def _regexes(globs: Any) -> str:
    return "[" + ", ".join(f"new RegExp({json.dumps(glob_regex(g))})" for g in globs) + "]"


def blocking_filter(policy: Policy, required: tuple[str, ...]) -> Js:
    """The results the policy blocks on, as an Allure ruleset filter."""
    return Js(
        "(tr) => {\n  " + _LABELS
        + "  const check = one(\"feature\");\n"
        "  const failed = tr.status === \"failed\" || tr.status === \"broken\";\n"
        "  // a failed test that carries no kgc check: a suite defect, always blocking\n"
        "  if (!check) return failed;\n"
        + _accepted_js(policy)
        + f"  if ({_regexes(policy.waive)}.some((re) => re.test(check))) return false;\n"
        f"  const blocks = {json.dumps(list(policy.block_severities))}"
        ".includes(one(\"severity\")) ||\n"
        f"    {_regexes(policy.block_checks)}.some((re) => re.test(check));\n"
        "  if (failed) return blocks;\n"
        "  if (tags.includes(\"warn\")) return "
        + ("blocks;\n" if policy.warn == "per-check" else "false;\n")
        + "  if (tr.status === \"skipped\") return "
        + (f"{json.dumps(list(required))}.includes(one(\"epic\")) && "
           f"!{_regexes(policy.skip_allowed)}.some((re) => re.test(check));\n"
           if policy.skip == "per-check" else "false;\n")
        + "  return false;\n}"
    )


def accepted_filter(policy: Policy) -> Js:
    return Js("(tr) => {\n  " + _LABELS + _accepted_js(policy) + "  return true;\n}")


MAX_RESULTS_RULE = Js("""{
  rule: "kgcMaxResults",
  message: ({ actual, expected }) =>
    `${actual} result(s) block the release under the kgc policy (allowed: ${expected})`,
  successMessage: ({ actual, expected }) =>
    `${actual} result(s) block the release under the kgc policy (allowed: ${expected})`,
  validate: async ({ trs, expected, state }) => {
    const previous = Number(state.getResult()) || 0;
    const ids = trs.map((tr) => tr.id);
    const actual = previous + trs.length;
    state.setResult(actual, ids);
    return { success: actual <= expected, actual, testResults: ids };
  },
}""")

LAYERS_JUDGED_RULE = Js("""{
  rule: "kgcLayersJudged",
  message: ({ actual }) => `required layer(s) not judged: ${actual.join("; ")}`,
  successMessage: ({ expected }) =>
    `every required layer judged on every target: ${expected.layers.join(", ")}`,
  validate: async ({ trs, expected, state }) => {
    const seen = Array.isArray(state.getResult()) ? state.getResult() : [];
    for (const tr of trs) {
      const labels = Array.isArray(tr.labels) ? tr.labels : [];
      const one = (n) => (labels.find((l) => l.name === n) || {}).value || "";
      const layer = one("epic");
      if (!layer) continue;
      const tags = labels.filter((l) => l.name === "tag").map((l) => l.value);
      const failed = tr.status === "failed" || tr.status === "broken";
      const judged = expected.warn === "per-layer"
        ? failed || (tr.status === "passed" && !tags.includes("warn"))
        : tr.status !== "skipped";
      seen.push([layer, one("parentSuite"), judged]);
    }
    state.setResult(seen, []);
    const scopeOf = (layer) => expected.scopes[layer] || "";
    const targets = {};
    for (const [layer, target] of seen) {
      const s = scopeOf(layer);
      if (s && !(target in targets)) targets[target] = s;
    }
    const missing = [];
    for (const layer of expected.layers) {
      const s = scopeOf(layer);
      const mine = Object.keys(targets).filter((t) => !s || targets[t] === s);
      if (!s) { missing.push(`${layer} (not in this build of kgc)`); continue; }
      if (mine.length === 0) { missing.push(`${layer} (no ${s} target)`); continue; }
      for (const t of mine) {
        const judged = seen.some(([l, tt, j]) => l === layer && tt === t && j);
        if (!judged) missing.push(`${layer} on ${t}`);
      }
    }
    return { success: missing.length === 0, actual: missing, testResults: [] };
  },
}""")


def quality_gate_config(policy: Policy, layers: Mapping[str, str] | None = None,
                        *, image: bool = False) -> dict[str, Any]:
    """The ``qualityGate`` value for an allurerc (render it with :func:`to_js`).

    ``layers``: every layer of this build -> its scope, in report order (default: the
    registry's). ``image``: gate as for ``kgc image check`` results (image_require_layers).
    """
    if layers is None:
        from kgc.gate.gate import layer_catalogue

        layers = layer_catalogue()[0]
    required = policy.required(tuple(layers), image)
    return {
        "rules": [
            {"id": "kgc-blocking", "filter": blocking_filter(policy, required),
             "kgcMaxResults": 0},
            {"id": "kgc-required-layers", "filter": accepted_filter(policy),
             "kgcLayersJudged": {"layers": list(required), "scopes": dict(layers),
                                 "warn": policy.warn}},
        ],
        "use": [MAX_RESULTS_RULE, LAYERS_JUDGED_RULE],
    }


# Allure 3.18's quality gate calls Iterator.prototype.toArray() (iterator helpers: Node >= 22;
# the package does not declare that). On Node 20 `allure quality-gate` dies with "toArray is
# not a function". An allurerc that carries a quality gate starts with this (inert on 22+).
NODE20_PRELUDE = """// kgc: Iterator.prototype.toArray for Node 20 (Allure's quality gate needs it)
{
  const proto = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
  if (typeof proto.toArray !== "function") {
    Object.defineProperty(proto, "toArray", {
      value: function toArray() { return Array.from(this); }, writable: true, configurable: true,
    });
  }
}
"""


def allurerc_text(policy: Policy, *, name: str = "kata-gpu-conformance",
                  layers: Mapping[str, str] | None = None, image: bool = False) -> str:
    """A minimal allurerc.mjs holding only the quality gate (for `allure quality-gate`)."""
    cfg = {"name": name, "plugins": {}, "qualityGate": quality_gate_config(
        policy, layers, image=image)}
    return ("// written by kgc (kgc.gate.allure): the release policy as quality gates\n"
            + NODE20_PRELUDE + f"export default {to_js(cfg)};\n")


def config_module(cfg: Mapping[str, Any]) -> str:
    """An allurerc.mjs from a config mapping whose values may hold :class:`Js` (e.g. a
    ``qualityGate`` from :func:`quality_gate_config`): JSON for plain data, code for code,
    and :data:`NODE20_PRELUDE` first when it carries a quality gate."""
    head = NODE20_PRELUDE if "qualityGate" in cfg else ""
    return head + f"export default {to_js(cfg)};\n"

