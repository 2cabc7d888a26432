"""Outputs from one verdict model: verdict.json, the console table, Allure extras, HTML.

verdict.json schema (``kgc-verdict/1``)::

    {
      "schema": "kgc-verdict/1",
      "run": {started_at, finished_at, duration_s, kgc_version, profile, profile_source,
              targets[], command[], pytest_exit, environment{}},
      "overall": "pass" | "fail",          # fail if any result is fail or error, or none ran
      "counts": {"pass": n, "fail": n, "warn": n, "skip": n, "error": n},
      "results": [ {check, layer, title, severity, target, status, reason, remediation,
                    expected, found, evidence{}, test} ... ]
    }
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

SCHEMA = "kgc-verdict/1"
STATUSES = ("pass", "fail", "warn", "skip", "error")
REPO_ROOT = Path(__file__).resolve().parents[3]


def overall(results: Iterable[Mapping[str, Any]]) -> str:
    rs = list(results)
    if not rs:
        return "fail"
    return "fail" if any(r["status"] in ("fail", "error") for r in rs) else "pass"


def counts(results: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    c = dict.fromkeys(STATUSES, 0)
    for r in results:
        c[r["status"]] = c.get(r["status"], 0) + 1
    return c


def write_verdict_json(path: Path, results: list[dict[str, Any]], run: Mapping[str, Any]) -> Path:
    doc = {
        "schema": SCHEMA,
        "run": dict(run),
        "overall": overall(results),
        "counts": counts(results),
        "results": sorted(results, key=lambda r: (r["target"], r["check"])),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str))
    os.replace(tmp, path)
    return path


def summary_table(results: Iterable[Mapping[str, Any]], width: int = 110) -> list[str]:
    rows = sorted(results, key=lambda r: (r["target"], r["check"]))
    if not rows:
        return ["(no checks ran)"]
    cw = max(len(r["check"]) for r in rows)
    lines = []
    target = None
    for r in rows:
        if r["target"] != target:
            target = r["target"]
            lines.append(f"-- {target}")
        reason = r["reason"].replace("\n", " ")
        room = max(20, width - cw - 10)
        if len(reason) > room:
            reason = reason[: room - 1] + "…"
        lines.append(f"  {r['status'].upper():5} {r['check']:<{cw}}  {reason}")
    c = counts(rows)
    lines.append("  " + ", ".join(f"{n} {s}" for s, n in c.items() if n))
    return lines


def write_allure_environment(alluredir: Path, env: Mapping[str, str]) -> None:
    alluredir.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}={str(v).replace(chr(10), ' ')}" for k, v in sorted(env.items())]
    (alluredir / "environment.properties").write_text("\n".join(lines) + "\n")


def write_allure_categories(alluredir: Path) -> None:
    cats = [
        {"name": "Check could not decide (error)", "matchedStatuses": ["broken"]},
        {"name": "Node not certified (fail)", "matchedStatuses": ["failed"]},
        {"name": "Skipped with a reason", "matchedStatuses": ["skipped"]},
    ]
    (alluredir / "categories.json").write_text(json.dumps(cats, indent=1))


class ReportError(Exception):
    pass


def allure_bin(tool_dir: Path = REPO_ROOT) -> Path:
    b = tool_dir / "node_modules" / ".bin" / "allure"
    if not b.exists():
        raise ReportError(
            f"Allure 3 is not installed ({b} missing): run `npm ci` in {tool_dir} "
            "(scripts/bootstrap.sh does it)"
        )
    return b


def generate_html(results_dir: Path, out_dir: Path, name: str = "kata-gpu-conformance") -> Path:
    """Allure 3 static report, one self-contained index.html (renders from file://)."""
    if not results_dir.is_dir() or not any(results_dir.glob("*-result.json")):
        raise ReportError(f"no allure results in {results_dir}: run the suite first")
    binp = allure_bin()
    cfg = out_dir.parent / "allurerc.mjs"
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(
        "export default {\n"
        f"  name: {json.dumps(name)},\n"
        f"  output: {json.dumps(str(out_dir))},\n"
        '  plugins: { awesome: { options: { singleFile: true, reportLanguage: "en" } } },\n'
        "};\n"
    )
    if out_dir.exists():
        shutil.rmtree(out_dir)
    proc = subprocess.run(
        [str(binp), "generate", str(results_dir), "--config", str(cfg), "-o", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    index = out_dir / "index.html"
    if proc.returncode != 0 or not index.exists():
        raise ReportError(
            f"allure generate failed (exit {proc.returncode}): {proc.stderr.strip()[-2000:]}"
            f"{proc.stdout.strip()[-1000:]}"
        )
    return index
