"""Outputs from one verdict model: verdict.json, the console, Allure extras, HTML.

verdict.json schema (``kgc-verdict/1``)::

    {
      "schema": "kgc-verdict/1",
      "run": {started_at, finished_at, duration_s, kgc_version, profile, profile_source,
              profile_digest, targets[], layers[] (selected), layers_judged[], selection{},
              command[], pytest_exit, environment{}},
      "overall": "pass" | "fail",
      "overall_reason": "...",
      "incomplete": false,                 # true while a run is in progress or if it crashed
      "counts": {"pass": n, "fail": n, "warn": n, "skip": n, "error": n},
      "results": [ {check, layer, title, severity, target, status, reason, remediation,
                    expected, found, origin, simulated, simulated_why, evidence{}, test} ]
    }

``overall`` is ``pass`` only when at least one check passed, every selected check has a
verdict, and none is ``fail`` or ``error``. A run that selected only some layers passes
*for those layers*: ``run.layers`` says which, and so does the console.

What was really judged, for ``kgc gate`` (every writer fills these with :func:`run_identity`):

- ``run.targets``: the names of the run's targets, as the results name them;
- ``run.profile_digest``: ``sha256:<hex>`` of the loaded profile's content that judges
  (:func:`profile_digest`), so a lenient copy under a strict profile's name is told apart;
- ``run.selection``: ``markers`` (``-m``), ``keywords`` (``-k``), ``targets`` (name ->
  ``node``/``cluster``), ``layers_not_selected`` (this build's layers the run left out) and
  ``checks_not_run`` (target -> this build's checks of the run's layers of that target's
  scope that left no result on it: deselected, not collected, or broken off).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kgc.core.registry import label_of, load_layers

SCHEMA = "kgc-verdict/1"
STATUSES = ("pass", "fail", "warn", "skip", "error")
# Allure 3 (npm package `allure`), the version kgc's report is built and tested with
ALLURE_VERSION = "3.18.0"


def overall_and_reason(
    results: Iterable[Mapping[str, Any]], missing: int = 0
) -> tuple[str, str]:
    rs = list(results)
    c = counts(rs)
    if missing:
        return "fail", f"{missing} selected check(s) left no verdict (the run broke off)"
    if not rs:
        return "fail", "nothing was judged"
    bad = c["fail"] + c["error"]
    if bad:
        return "fail", f"{c['fail']} failed, {c['error']} could not decide (error)"
    if not c["pass"]:
        return "fail", (f"no check passed ({c['skip']} skipped, {c['warn']} warned): nothing "
                        "was certified")
    return "pass", f"{c['pass']} passed" + (f", {c['warn']} warned" if c["warn"] else "") + (
        f", {c['skip']} skipped" if c["skip"] else "")


def overall(results: Iterable[Mapping[str, Any]]) -> str:
    return overall_and_reason(results)[0]


def counts(results: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    c = dict.fromkeys(STATUSES, 0)
    for r in results:
        c[r["status"]] = c.get(r["status"], 0) + 1
    return c


def profile_digest(profile: Any) -> str:
    """``sha256:<hex>`` of the canonical form of a loaded profile's content that judges:
    every field (its name included) with the defaults filled in, keys sorted, compact JSON.
    What the profile *says* decides it — not its file name, comments, key order or spelt-out
    defaults, and not where the file lay (``source`` is not part of the model's dump).

    ``policy:`` is left out: no check reads it (it is the gate's input, applied by ``kgc
    gate`` from the profile the gate itself loads), so one run can be gated under another
    release policy of the same profile, while a copy that judges differently — looser
    thresholds, another IOMMU mode, more simulated checks — under the same name has another
    digest and is refused."""
    data = profile.model_dump(mode="json", by_alias=True, exclude={"policy"})
    canon = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canon.encode("utf-8")).hexdigest()


def run_identity(
    profile: Any,
    targets: Mapping[str, str],
    layers: Sequence[str],
    results: Iterable[Mapping[str, Any]],
    *,
    markers: str = "",
    keywords: str = "",
    registry: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``run`` fields that say what was really judged: ``profile_digest`` and
    ``selection`` (see the module docstring). ``profile``: the loaded profile, or the digest
    text itself (a writer that merges verdicts judged elsewhere, like the fleet's, passes
    the one digest they all recorded — or ``""`` when they disagree, which the gate
    refuses); ``targets``: name -> scope (``node`` or ``cluster``) of every target of the
    run; ``layers``: the layers the run selected; ``registry``: this build's layers
    (default: :func:`kgc.core.registry.load_layers`). Every verdict writer (the pytest
    plugin, ``kgc image check``, the fleet's merge) calls this, so the gate reads the same
    fields whoever wrote the file."""
    registry = _registry(registry)
    have: dict[str, set[str]] = {}
    for r in results:
        have.setdefault(str(r["target"]), set()).add(str(r["check"]))
    chosen = set(layers)
    not_run: dict[str, list[str]] = {}
    for name, scope in targets.items():
        left = [c.id for lay_name, lay in registry.items()
                if lay_name in chosen and str(lay.scope) == scope
                for c in lay.checks if c.id not in have.get(name, set())]
        if left:
            not_run[name] = left
    return {
        "profile_digest": profile if isinstance(profile, str) else profile_digest(profile),
        "selection": {
            "markers": markers or "",
            "keywords": keywords or "",
            "targets": {name: str(scope) for name, scope in targets.items()},
            "layers_not_selected": [n for n in registry if n not in chosen],
            "checks_not_run": not_run,
        },
    }


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def verdict_doc(
    results: list[dict[str, Any]],
    run: Mapping[str, Any],
    *,
    missing: int = 0,
    incomplete: bool = False,
) -> dict[str, Any]:
    """The whole ``kgc-verdict/1`` document (see the module docstring)."""
    status, why = overall_and_reason(results, missing)
    if incomplete:
        status, why = "fail", "the run did not finish (in progress, or it crashed)"
    return {
        "schema": SCHEMA,
        "run": dict(run),
        "overall": status,
        "overall_reason": why,
        "incomplete": incomplete,
        "counts": counts(results),
        "results": sorted(results, key=lambda r: (r["target"], r["check"])),
    }


def write_verdict_json(
    path: Path,
    results: list[dict[str, Any]],
    run: Mapping[str, Any],
    *,
    missing: int = 0,
    incomplete: bool = False,
) -> Path:
    doc = verdict_doc(results, run, missing=missing, incomplete=incomplete)
    _atomic_write(Path(path), json.dumps(doc, indent=2, default=str))
    return Path(path)


def scope_note(selected: Sequence[str], judged: Sequence[str], all_layers: Sequence[str]) -> str:
    """Which layers a result covers: 'for iommu, vfio only (not run: ...)'."""
    if set(all_layers) <= set(judged):
        return "for every layer"
    left = [n for n in all_layers if n not in judged]
    if not judged:
        return f"for no layer (not judged: {', '.join(left)})"
    return f"for {', '.join(judged)} only (not judged: {', '.join(left)})"


def _registry(registry: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """This build's layers, unless the caller has them."""
    return registry if registry is not None else load_layers()


def layer_labels(layer: str, registry: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """The Allure labels that place a result of ``layer`` in the report, from the registry:
    ``epic`` = the layer package (what the quality gate reads), ``suite`` = its card layer
    "N. title" (under ``parentSuite`` = the target), ``subSuite`` = the package. The pytest
    plugin and the fleet's merge both label with this."""
    return [("epic", layer), ("suite", label_of(layer, _registry(registry))),
            ("subSuite", layer)]


def terminal_width(width: int | None = None) -> int:
    """``width``, else the terminal's as pytest reads it (``$COLUMNS``, the tty, else 80;
    under 40 counts as 80), so kgc's commands and a pytest run wrap alike."""
    if width:
        return width
    cols = shutil.get_terminal_size(fallback=(80, 24)).columns
    return cols if cols >= 40 else 80


def wrap(text: str, width: int, first: str = "", rest: str | None = None) -> list[str]:
    """``text`` on lines of at most ``width`` (a word longer than the room, a path or a URL,
    stays whole), the first prefixed ``first``, the others ``rest`` (default: as many spaces).
    Never cut: a reason is read whole, the terminal width only decides where it breaks."""
    rest = " " * len(first) if rest is None else rest
    flat = " ".join(str(text).split())
    return textwrap.wrap(flat, width=max(width, len(first) + 20), initial_indent=first,
                         subsequent_indent=rest, break_long_words=False,
                         break_on_hyphens=False) or [first.rstrip()]


_SEV = {"blocker": 0, "critical": 1, "normal": 2, "minor": 3, "trivial": 4}


def _one_row(trows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]] | None:
    """The rows of one target that the verdict table shows as one row: all of them when
    every check did not pass for one reason (an unreachable node), or every judged check
    when those share one reason and the others skip for reasons of their own (the same
    node, whose nri and reboot checks wait for their flags). None: row by row."""
    if (len(trows) > 2 and len({(r["status"], r["reason"]) for r in trows}) == 1
            and trows[0]["status"] != "pass"):
        return list(trows)
    judged = [r for r in trows if r["status"] != "skip"]
    if (len(judged) > 2 and len({(r["status"], r["reason"]) for r in judged}) == 1
            and judged[0]["status"] != "pass"):
        return judged
    return None


def _shown_in_one_row(results: Iterable[Mapping[str, Any]]) -> set[tuple[str, str, str]]:
    """(target, status, reason) of every target whose checks the table shows as one row
    with that reason, whole: what ``details`` need not print again."""
    by_target: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        by_target.setdefault(str(r["target"]), []).append(r)
    out = set()
    for target, trows in by_target.items():
        one = _one_row(trows)
        if one is not None:
            out.add((target, str(one[0]["status"]), str(one[0]["reason"])))
    return out


def summary_table(results: Iterable[Mapping[str, Any]], width: int | None = None,
                  registry: Mapping[str, Any] | None = None) -> list[str]:
    """One row per verdict, per target under its card layer's "N. title" in report order;
    each reason whole, wrapped to ``width`` (default: the terminal's) under the reason
    column. Within a target, a reason already shown names the row that shows it; a target
    whose every check did not pass for one reason (an unreachable node) is one row, and so
    are its judged checks when the others skip (for reasons of their own, which keep their
    rows)."""
    width = terminal_width(width)
    layers = _registry(registry)
    order = {name: i for i, name in enumerate(layers)}
    label = {name: lay.label for name, lay in layers.items()}
    rows = sorted(results, key=lambda r: (r["target"], order.get(r["layer"], len(order)),
                                          r["layer"], r["check"]))
    if not rows:
        return ["(no checks ran)"]
    cw = max(len(r["check"]) for r in rows)
    lines: list[str] = []
    by_target: dict[str, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_target.setdefault(r["target"], []).append(r)
    for target, trows in by_target.items():
        lines.append(f"-- {target}")
        one = _one_row(trows)
        if one is not None:
            lays = list(dict.fromkeys(r["layer"] for r in one))
            every = "all " if len(one) == len(trows) else ""
            head = (f"    {one[0]['status'].upper():5} {every}{len(one)} checks "
                    f"({', '.join(lays)}): ")
            lines.extend(wrap(one[0]["reason"], width, head, " " * 10))
            # the skips beside them (for reasons of their own) keep their rows
            trows = [r for r in trows if r not in one]
            if not trows:
                continue
        heading = None
        first: dict[tuple[str, str], str] = {}
        for r in trows:
            if label.get(r["layer"], r["layer"]) != heading:
                heading = label.get(r["layer"], r["layer"])
                lines.append(f"  {heading}")
            key = (r["status"], r["reason"])
            reason = (f"(the same as {first[key]})" if key in first else r["reason"])
            first.setdefault(key, r["check"])
            lead = f"    {r['status'].upper():5} {r['check']:<{cw}}  "
            if width - len(lead) < 30:  # a narrow terminal: the reason on its own lines
                lines.append(lead.rstrip())
                lines.extend(wrap(reason, width, " " * 10))
            else:
                lines.extend(wrap(reason, width, lead))
    c = counts(rows)
    lines.append("  " + ", ".join(f"{n} {s}" for s, n in c.items() if n))
    return lines


MANY_CHECKS = 6  # more checks than this share one reason: counted, by layer, not listed


def _checks_words(rows: Sequence[Mapping[str, Any]], checks: Sequence[str]) -> str:
    if len(checks) <= MANY_CHECKS:
        return ", ".join(checks)
    layers = list(dict.fromkeys(str(r["layer"]) for r in rows if r["check"] in checks))
    return f"{len(checks)} checks of {', '.join(layers)}"


def _applies_to(rows: Sequence[Mapping[str, Any]]) -> str:
    """What one shared reason applies to: "c1, c2 on t1, t2" when every target has the same
    checks, else "c1 on t1; c2, c3 on t2"; many checks (an unreachable target's every
    check) are "15 checks of iommu, vfio on t1"."""
    per: dict[str, list[str]] = {}
    for r in rows:
        checks = per.setdefault(str(r["target"]), [])
        if r["check"] not in checks:
            checks.append(str(r["check"]))
    sets = {tuple(v) for v in per.values()}
    if len(sets) == 1:
        return f"{_checks_words(rows, next(iter(sets)))} on {', '.join(per)}"
    return "; ".join(f"{_checks_words(rows, v)} on {t}" for t, v in per.items())


def _grouped(results: Iterable[Mapping[str, Any]], statuses: Sequence[str],
             key: Any) -> list[list[Mapping[str, Any]]]:
    """The verdicts of ``statuses``, grouped by ``key`` (first seen first), each group's
    rows and the groups sorted: by status, then the group's most severe check, then name."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for r in sorted((r for r in results if r["status"] in statuses),
                    key=lambda r: (r["target"], r["check"])):
        groups.setdefault(key(r), []).append(r)
    return sorted(groups.values(), key=lambda g: (
        statuses.index(g[0]["status"]), min(_SEV.get(r.get("severity", ""), 9) for r in g),
        g[0]["check"], g[0]["target"]))


def _detail_key(r: Mapping[str, Any]) -> tuple[str, ...]:
    return (r["status"], str(r["reason"]), str(r.get("remediation") or ""),
            repr(r.get("expected")), repr(r.get("found")))


def details(results: Iterable[Mapping[str, Any]], width: int | None = None,
            statuses: Sequence[str] = ("fail", "error", "warn")) -> list[str]:
    """The full reason and remediation of every fail, error and warn (kube-bench's
    remediation section), blockers first. Verdicts that say the same thing (status,
    reason, remediation, expected, found) are one entry naming every check and target it
    applies to. The reason wraps to ``width``; remediation keeps its lines as written (a
    command stays one line to paste: the terminal folds it, a newline would split it)."""
    width = terminal_width(width)
    results = list(results)
    # a reason the table printed whole in one target's single row (an unreachable node)
    # is not printed a second time here: the entry is its fix
    shown = _shown_in_one_row(results)
    lines: list[str] = []
    for g in _grouped(results, statuses, _detail_key):
        r = g[0]
        sev = min((str(x.get("severity", "")) for x in g), key=lambda s: _SEV.get(s, 9))
        titles = {x.get("title", "") for x in g}
        title = f": {r.get('title', '')}" if len(titles) == 1 and r.get("title") else ""
        lines.extend(wrap(f"[{r['status'].upper()}] {_applies_to(g)} ({sev}){title}", width,
                          "", "    "))
        if not all((str(x["target"]), str(x["status"]), str(x["reason"])) in shown
                   for x in g):
            lines.extend(wrap(str(r["reason"]), width, "  why: ", " " * 7))
        if r.get("expected") is not None or r.get("found") is not None:
            lines.append(f"  expected: {r.get('expected')}")
            lines.append(f"  found:    {r.get('found')}")
        if r.get("remediation"):
            lines.append("  fix:")
            lines.extend(f"    {ln}" for ln in str(r["remediation"]).splitlines())
        lines.append("")
    return lines


def skips(results: Iterable[Mapping[str, Any]], width: int | None = None) -> list[str]:
    """Every skip with its whole reason; the checks that skip for one reason are one entry
    (a layer the run recorded no evidence for is one line, not one per check)."""
    width = terminal_width(width)
    lines: list[str] = []
    for g in _grouped(results, ("skip",), lambda r: str(r["reason"])):
        lines.extend(wrap(f"[SKIP] {_applies_to(g)}", width, "", "    "))
        lines.extend(wrap(str(g[0]["reason"]), width, "  why: ", " " * 7))
    return lines


SECTIONS = (
    ("fail", "what to fix: {n} failed"),
    ("error", "what to fix: {n} could not decide (error)"),
    ("warn", "to look at: {n} warned"),
    ("skip", "not judged: {n} skipped"),
)


def sections(results: Iterable[Mapping[str, Any]],
             width: int | None = None) -> list[tuple[str, list[str]]]:
    """The console's sections after the verdict table, one per status that needs a
    reader, in this order: fail, error, warn (reason and remediation, blockers first),
    then skip (every reason). ``(title, lines)``; a status no verdict has is left out."""
    rs = list(results)
    c = counts(rs)
    out = []
    for status, title in SECTIONS:
        if not c.get(status):
            continue
        lines = (skips(rs, width) if status == "skip"
                 else details(rs, width, statuses=(status,)))
        while lines and not lines[-1]:
            lines.pop()
        out.append((title.format(n=c[status]), lines))
    return out


def write_allure_environment(alluredir: Path, env: Mapping[str, str]) -> None:
    alluredir.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}={str(v).replace(chr(10), ' ')}" for k, v in sorted(env.items())]
    (alluredir / "environment.properties").write_text("\n".join(lines) + "\n")


# kgc's own categories (label ``kgc_category`` on every result that needs someone to act)
CATEGORIES = (
    ("node", "Node defect: not conformant (fail/warn)"),
    ("environment", "Environment or lab problem: kgc could not decide (error)"),
    ("suite", "Suite defect: a bug in kgc (error)"),
)


def write_allure_categories(alluredir: Path) -> None:
    """Allure 2's categories.json (read by Allure 2 viewers); Allure 3 reads the same
    rules from the allurerc written by :func:`generate_html`."""
    cats = [{"name": name, "matchedStatuses": ["failed", "broken"],
             "messageRegex": ".*", "labels": {"kgc_category": key}} for key, name in CATEGORIES]
    (alluredir / "categories.json").write_text(json.dumps(cats, indent=1))


def clean_skipped_results(alluredir: Path) -> None:
    """A skip is a decision with a reason, not an error: move pytest's "Skipped: ..." message
    out of the status details (shown in an error box) into the description."""
    for f in alluredir.glob("*-result.json"):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if doc.get("status") != "skipped" or not doc.get("statusDetails"):
            continue
        doc.pop("statusDetails", None)
        f.write_text(json.dumps(doc))


def place_results(alluredir: Path, registry: Mapping[str, Any] | None = None) -> None:
    """Each kgc result's ``titlePath`` is its card layer ("N. title", as the ``suite`` label):
    allure-pytest derives it from the test's path under pytest's rootdir, which is the
    common ancestor of the working directory and any path on the command line (a
    ``--kubeconfig`` file, the venv) — so the report's tree would start at ``venv > lib >
    python3.11 > site-packages``. Results without a kgc layer are left as they are."""
    layers = _registry(registry)
    for f in alluredir.glob("*-result.json"):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        epic = next((lab.get("value") for lab in doc.get("labels") or []
                     if isinstance(lab, dict) and lab.get("name") == "epic"), None)
        if epic not in layers:
            continue
        want = [label_of(str(epic), layers)]
        if doc.get("titlePath") != want:
            doc["titlePath"] = want
            f.write_text(json.dumps(doc))


class ReportError(Exception):
    pass


INSTALL_ALLURE = (
    f"install Allure 3 with Node.js >= 20: `npm install --global allure@{ALLURE_VERSION}` "
    "(or put it anywhere and set KGC_ALLURE=/path/to/node_modules/.bin/allure)"
)


def _dev_checkout_allure() -> Path | None:
    """A source checkout's own pinned Allure (`npm ci` in the repository)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "node_modules" / ".bin" / "allure"
        if (parent / "package-lock.json").exists() and cand.exists():
            return cand
    return None


def allure_bin() -> Path:
    """Where Allure 3 is: $KGC_ALLURE, a source checkout's pinned copy, then PATH."""
    env = os.environ.get("KGC_ALLURE")
    if env:
        p = Path(env)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ReportError(f"KGC_ALLURE={env} is not an executable file; {INSTALL_ALLURE}")
        return p
    dev = _dev_checkout_allure()
    if dev is not None:
        return dev
    found = shutil.which("allure")
    if found:
        return Path(found)
    raise ReportError(f"Allure 3 not found; {INSTALL_ALLURE}")


def _check_allure_major(binp: Path) -> None:
    try:
        out = subprocess.run([str(binp), "--version"], capture_output=True, text=True,
                             timeout=60, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise ReportError(f"{binp} does not run ({exc}); {INSTALL_ALLURE}") from None
    if not out.split(".")[0].strip().isdigit() or int(out.split(".")[0]) < 3:
        raise ReportError(f"{binp} is Allure {out or '(unknown version)'}, not Allure 3; "
                          f"{INSTALL_ALLURE}")


def headline(verdict: Mapping[str, Any] | None, head: Mapping[str, Any] | None = None) -> str:
    """The report's name: the gate's word (``head``: :func:`kgc.gate.gate.headline`), for
    which profile and layers. Core decides no word itself: a verdict that was not gated is
    NOT CERTIFIED."""
    if not verdict:
        return "kata-gpu-conformance"
    run = verdict.get("run", {})
    word = str((head or {}).get("word") or "NOT CERTIFIED")
    scope = run.get("scope") or ""
    return f"{word} — profile {run.get('profile', '?')} {scope}".strip()


def _esc(x: Any) -> str:
    import html

    return html.escape("" if x is None else str(x), quote=True)


# a list longer than this shows its first items and collapses the rest
BANNER_OPEN = 5
_SEV = {"blocker": 0, "critical": 1, "normal": 2, "minor": 3, "trivial": 4}


def _link(text: str, test_id: str | None) -> str:
    """``text`` linking to the Allure test result ``test_id`` (the single-file report's
    router: ``#<id>``), or plain when the check left no test result."""
    if not test_id:
        return text
    return f'<a class="kgc-check-link" href="#{_esc(test_id)}">{text}</a>'


def _collapsing(items: list[str], list_id: str, what: str) -> list[str]:
    """An ordered list whose items past :data:`BANNER_OPEN` fold into a <details>."""
    out = [f'<ol id="{list_id}">', *items[:BANNER_OPEN], "</ol>"]
    if len(items) > BANNER_OPEN:
        out += [f'<details class="kgc-more"><summary>… and {len(items) - BANNER_OPEN} more '
                f"{what}</summary>",
                f'<ol start="{BANNER_OPEN + 1}">', *items[BANNER_OPEN:], "</ol></details>"]
    return out


def banner_html(verdict: Mapping[str, Any], head: Mapping[str, Any] | None = None,
                links: Mapping[tuple[str, str], str] | None = None) -> str:
    """The report's first screen: the gate's word and why (``head``:
    :func:`kgc.gate.gate.headline`; without one, NOT CERTIFIED: not gated), each blocking
    finding with its reason and remediation (line breaks kept) linked to its check's result
    (``links``: (check, target) -> Allure test result id), what was simulated, each
    target's environment, and every result with its reason (collapsed)."""
    run = verdict.get("run", {})
    head = head or {"word": "NOT CERTIFIED", "reason": "not gated (build the report with "
                    "kgc report, which applies the release policy)", "blocking": []}
    links = links or {}
    ok = head.get("word") == "CERTIFIED"
    results = list(verdict.get("results", []))
    simulated = [r for r in results if r.get("simulated")]
    colour = "#1b7f3b" if ok else "#b3261e"
    parts = [
        '<section id="kgc-verdict" style="font-family:sans-serif;margin:0;padding:16px 24px;'
        f'border-bottom:4px solid {colour};background:#fafafa">',
        f'<h1 id="kgc-headline" style="color:{colour};margin:0 0 6px 0;font-size:28px;'
        f'font-weight:bold">{_esc(head.get("word"))}</h1>',
        f'<p id="kgc-reason"><b>{_esc(head.get("reason"))}</b></p>',
        f'<p id="kgc-scope">profile <b>{_esc(run.get("profile"))}</b> — '
        f'{_esc(run.get("scope", ""))} — {_esc(verdict.get("overall_reason", ""))}</p>',
    ]
    if simulated:
        parts.append(f'<p id="kgc-simulated"><b>{len(simulated)} result(s) come from simulated '
                     "evidence</b> (lab stand-ins): they prove the suite, not a node or a "
                     "cluster.</p>")
    blocking = list(head.get("blocking") or [])
    if blocking:
        items = []
        for f in blocking:
            tid = links.get((f.get("check", ""), f.get("target", "")))
            title = _esc(f.get("text"))
            items.append(
                f'<li class="kgc-blocker" data-check="{_esc(f.get("check"))}"><b>'
                + _link(title, tid) + "</b>"
                + (f"<br>{_esc(f.get('reason'))}" if f.get("reason") else "")
                + (f'<pre class="kgc-remediation" style="white-space:pre-wrap;'
                   f'background:#fff;border:1px solid #ddd;padding:6px">'
                   f'{_esc(f.get("remediation"))}</pre>' if f.get("remediation") else "")
                + "</li>")
        parts.append(f'<h2 style="margin:12px 0 4px 0">Blocking ({len(blocking)})</h2>')
        parts += _collapsing(items, "kgc-blocking", "blocking finding(s)")
    env = run.get("environment", {}) or {}
    targets = sorted({k.rsplit(".", 1)[0] for k in env if "." in k and not k.startswith(
        ("kgc", "python", "pytest"))})
    if targets:
        keys = sorted({k.rsplit(".", 1)[1] for k in env if k.rsplit(".", 1)[0] in targets})
        parts.append('<h2 style="margin:12px 0 4px 0">Targets</h2><table id="kgc-targets" '
                     'style="border-collapse:collapse"><tr><th>target</th>'
                     + "".join(f"<th>{_esc(k)}</th>" for k in keys) + "</tr>")
        for t in targets:
            parts.append(f"<tr><td>{_esc(t)}</td>"
                         + "".join(f"<td>{_esc(env.get(f'{t}.{k}', ''))}</td>" for k in keys)
                         + "</tr>")
        parts.append("</table>")
    if results:
        order = {"fail": 0, "error": 1, "warn": 2, "skip": 3, "pass": 4}
        rows = sorted(results, key=lambda r: (order.get(r.get("status", ""), 9),
                                              _SEV.get(r.get("severity", ""), 9),
                                              r.get("target", ""), r.get("check", "")))
        parts.append(f'<details id="kgc-results"><summary>Every result ({len(rows)}) with its '
                     'reason</summary><table style="border-collapse:collapse">'
                     "<tr><th>status</th><th>check</th><th>target</th><th>reason</th></tr>")
        for r in rows:
            tid = links.get((r.get("check", ""), r.get("target", "")))
            parts.append(f'<tr class="kgc-result"><td>{_esc(r.get("status", "")).upper()}</td>'
                         f'<td>{_link(_esc(r.get("check")), tid)}</td>'
                         f'<td>{_esc(r.get("target"))}</td><td>{_esc(r.get("reason"))}</td>'
                         "</tr>")
        parts.append("</table></details>")
    parts.append("</section>")
    return "\n".join(parts)


def result_links(page: str) -> dict[tuple[str, str], str]:
    """(check, target) -> the Allure test result id, from the test results a single-file
    Allure 3 report embeds (base64 JSON under ``data/test-results/<id>.json``; the check is
    the ``feature`` label, the target the ``parentSuite``, as the pytest plugin labels)."""
    import base64
    import re

    out: dict[tuple[str, str], str] = {}
    for m in re.finditer(r'"data/test-results/([A-Za-z0-9_-]+)\.json","([A-Za-z0-9+/=]+)"',
                         page):
        try:
            doc = json.loads(base64.b64decode(m.group(2)))
        except ValueError:
            continue
        labels = {lab.get("name"): lab.get("value") for lab in doc.get("labels") or []
                  if isinstance(lab, dict)}
        if labels.get("feature"):
            out.setdefault((str(labels["feature"]), str(labels.get("parentSuite", ""))),
                           m.group(1))
    return out


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


def config_module(cfg: Mapping[str, Any]) -> str:
    """An allurerc.mjs from a config mapping whose values may hold :class:`Js` (e.g. a
    ``qualityGate`` from ``kgc.gate.allure.quality_gate_config``): JSON for plain data, code
    for code, and :data:`NODE20_PRELUDE` first when it carries a quality gate."""
    head = NODE20_PRELUDE if "qualityGate" in cfg else ""
    return head + f"export default {to_js(cfg)};\n"


def allure_config(name: str, out_dir: Path, extra: Mapping[str, Any] | None = None) -> str:
    """allurerc.mjs: one self-contained page, kgc's categories, and any extra settings (the
    verdict policy's quality gate, history)."""
    cats = [{"name": name_, "matchers": {"labels": {"kgc_category": key}}}
            for key, name_ in CATEGORIES]
    cfg: dict[str, Any] = {
        "name": name,
        "output": str(out_dir),
        "categories": cats,
        # the tree is layer -> check ("N. title" -> each result), from kgc's labels, whatever
        # directory pytest took as its rootdir (titlePath follows it)
        "plugins": {"awesome": {"options": {"singleFile": True, "reportLanguage": "en",
                                            "reportName": name, "groupBy": ["suite"]}}},
        **(extra or {}),
    }
    return config_module(cfg)


def generate_html(results_dir: Path, out_dir: Path, verdict: Path | None = None,
                  extra_config: Mapping[str, Any] | None = None,
                  history: Path | None = None,
                  quality_gate: Mapping[str, Any] | None = None,
                  head: Mapping[str, Any] | None = None) -> Path:
    """Allure 3 static report, one self-contained index.html (renders from file://), whose
    first screen is kgc's verdict (from ``verdict``, default: verdict.json beside the
    results). ``quality_gate``: the ``qualityGate`` of the allurerc, e.g. the release
    policy's rules (``kgc.gate.allure.quality_gate_config``: the caller, above both core and
    the gate, passes them in); ``head``: the gate's headline on the verdict
    (:func:`kgc.gate.gate.headline`, computed by the caller: core decides no word)."""
    if not results_dir.is_dir() or not any(results_dir.glob("*-result.json")):
        raise ReportError(f"no allure results in {results_dir}: run the suite first")
    vpath = verdict if verdict is not None else results_dir.parent / "verdict.json"
    doc: dict[str, Any] | None = None
    if vpath.is_file():
        try:
            doc = json.loads(vpath.read_text())
        except ValueError:
            raise ReportError(f"{vpath}: not JSON (a verdict.json from kgc)") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ReportError(f"{vpath}: not a {SCHEMA} verdict")
    elif verdict is not None:
        raise ReportError(f"{vpath}: no such verdict file")
    binp = allure_bin()
    _check_allure_major(binp)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    cfg = out_dir.parent / "allurerc.mjs"
    extra = dict(extra_config or {})
    if history is not None:
        # Allure 3 appends this run to the file and draws trends from it: a nightly job keeps
        # the file between runs (e.g. --history /var/lib/kgc/history.jsonl)
        history.parent.mkdir(parents=True, exist_ok=True)
        extra.update({"historyPath": str(history.resolve()), "historyLimit": 60})
    if quality_gate is not None:
        extra["qualityGate"] = quality_gate
    cfg.write_text(allure_config(headline(doc, head), out_dir, extra))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    if quality_gate is None:
        cmd = [str(binp), "generate", str(results_dir), "--config", str(cfg), "-o", str(out_dir)]
        ok_codes: tuple[int, ...] = (0,)
    else:
        # Allure evaluates quality gates only while it collects results (`allure run`), not
        # in `allure generate`: let it collect a copy of the results so the report's
        # Quality Gates tab shows the gate (exit 1 = the gate failed, the report is built)
        feed = Path(tempfile.mkdtemp(prefix="kgc-allure-feed-"))
        cmd = [str(binp), "run", "--config", str(cfg), "--results-dir", str(feed), "--",
               "cp", "-R", f"{results_dir}/.", str(feed)]
        ok_codes = (0, 1)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if quality_gate is not None:
        shutil.rmtree(feed, ignore_errors=True)
    index = out_dir / "index.html"
    if proc.returncode not in ok_codes or not index.exists():
        raise ReportError(
            f"allure generate failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
            f"{proc.stdout.strip()[-1000:]}"
        )
    if doc is not None:
        page = index.read_text()
        at = page.find("<body")
        at = page.find(">", at) + 1 if at >= 0 else -1
        if at <= 0:
            raise ReportError(f"{index}: no <body> to put the verdict on")
        index.write_text(page[:at] + banner_html(doc, head, result_links(page)) + page[at:])
    return index
