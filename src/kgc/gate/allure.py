"""The release policy as Allure 3 quality-gate rules (the ``qualityGate`` key of allurerc).

Allure evaluates quality gates only in ``allure quality-gate`` (and ``allure run``), never in
``allure generate`` (allure-framework discussion #3441). :func:`quality_gate_config` turns a
:class:`~kgc.core.policy.Policy` into two rulesets that decide as ``kgc gate`` does on the
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

The config is data with JavaScript in it: values of type :class:`~kgc.core.report.Js` are
code. ``allurerc_text`` writes a minimal ``allurerc.mjs``; the HTML report's own allurerc
takes the ruleset as ``kgc.core.report.generate_html(..., quality_gate=...)`` (core renders
an allurerc with :func:`~kgc.core.report.to_js` and needs no gate: it sits below it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from kgc.core.policy import Policy
from kgc.core.report import NODE20_PRELUDE, Js, to_js
from kgc.gate.gate import layer_catalogue


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


# `kgc gate`'s own decision on the run's verdict.json, computed by kgc before Allure runs:
# what Allure cannot see from the results (the run's profile and its digest, whether it
# finished, the checks a selection left out) still decides Allure's exit code, and so the
# report's status badge, as it decides `kgc gate`'s word
KGC_GATE_RULE = Js("""{
  rule: "kgcGate",
  message: ({ expected }) => `kgc gate: ${expected.word} (${expected.reason})`,
  successMessage: ({ expected }) => `kgc gate: ${expected.word} (${expected.reason})`,
  validate: async ({ expected }) =>
    ({ success: expected.green === true, actual: expected.word, testResults: [] }),
}""")


def quality_gate_config(policy: Policy, layers: Mapping[str, str] | None = None,
                        *, image: bool = False,
                        gate: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``qualityGate`` value for an allurerc (render it with :func:`to_js`).

    ``layers``: every layer of this build -> its scope, in report order (default: the
    registry's). ``image``: gate as for ``kgc image check`` results (image_require_layers).
    ``gate``: `kgc gate`'s result on the run's verdict (a :func:`kgc.gate.gate.headline`),
    a third rule, so that Allure fails exactly when the gate does.
    """
    if layers is None:
        layers = layer_catalogue()[0]
    required = policy.required(tuple(layers), image)
    rules: list[dict[str, Any]] = [
        {"id": "kgc-blocking", "filter": blocking_filter(policy, required),
         "kgcMaxResults": 0},
        {"id": "kgc-required-layers", "filter": accepted_filter(policy),
         "kgcLayersJudged": {"layers": list(required), "scopes": dict(layers),
                             "warn": policy.warn}},
    ]
    use = [MAX_RESULTS_RULE, LAYERS_JUDGED_RULE]
    if gate is not None:
        rules.append({"id": "kgc-gate", "kgcGate": {
            "green": gate["word"] == "CERTIFIED", "word": gate["word"],
            "reason": gate["reason"]}})
        use.append(KGC_GATE_RULE)
    return {"rules": rules, "use": use}


def allurerc_text(policy: Policy, *, name: str = "kata-gpu-conformance",
                  layers: Mapping[str, str] | None = None, image: bool = False) -> str:
    """A minimal allurerc.mjs holding only the quality gate (for `allure quality-gate`)."""
    cfg = {"name": name, "plugins": {}, "qualityGate": quality_gate_config(
        policy, layers, image=image)}
    return ("// written by kgc (kgc.gate.allure): the release policy as quality gates\n"
            + NODE20_PRELUDE + f"export default {to_js(cfg)};\n")
