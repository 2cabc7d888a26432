"""Verdict documents for the gate's self-tests, shaped exactly as kgc.core.report writes
them (``kgc-verdict/1``), run.profile_digest and run.selection included
(:func:`kgc.core.report.run_identity`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kgc.core import report
from kgc.core.profile import load_profile

# what the built-in `lab` profile's content hashes to: the default digest of these verdicts
DIGEST = report.profile_digest(load_profile("lab"))
UNSET: Any = object()

NODE_LAYERS = {"iommu": "node", "vfio": "node", "persistence": "node", "reboot": "node",
               "runtime": "node", "nri": "node"}
ALL_LAYERS = {**NODE_LAYERS, "gpu": "cluster", "sizing": "cluster", "keda": "cluster"}


def result(check: str, status: str = "pass", *, target: str = "node-a",
           severity: str = "critical", origin: str = "live", simulated: bool = False,
           reason: str = "", remediation: str = "", evidence: dict | None = None,
           expected: Any = None, found: Any = None) -> dict[str, Any]:
    return {
        "check": check, "layer": check.split(".", 1)[0], "title": f"title of {check}",
        "severity": severity, "target": target, "status": status,
        "reason": reason or f"{check} is {status}", "remediation": remediation,
        "expected": expected, "found": found, "origin": origin, "simulated": simulated,
        "simulated_why": "a lab stand-in" if simulated else "", "evidence": evidence or {},
    }


def verdict(results: list[dict[str, Any]], *, profile: str = "lab",
            layers_judged: list[str] | None = None, incomplete: bool = False,
            image: bool = False, environment: dict[str, str] | None = None,
            duration_s: float = 1.0, digest: str | None = DIGEST,
            targets: dict[str, str] | None = None, markers: str = "", keywords: str = "",
            selection: Any = UNSET, profile_source: str = "") -> dict[str, Any]:
    """``digest``: run.profile_digest (None: left out, as kgc wrote it before it recorded
    one); ``targets``: the run's targets -> scope (default: those the results name, scoped
    by their layers); ``selection``: None leaves run.selection out."""
    if layers_judged is None:
        layers_judged = list(dict.fromkeys(r["layer"] for r in results
                                           if r["status"] != "skip"))
    layers = list(dict.fromkeys(r["layer"] for r in results))
    if targets is None:
        targets = {r["target"]: ALL_LAYERS.get(r["layer"], "node")
                   for r in sorted(results, key=lambda r: r["target"])}
    status, why = report.overall_and_reason(results)
    ident = report.run_identity(digest or "", targets, layers, results, markers=markers,
                                keywords=keywords)
    run: dict[str, Any] = {
        "started_at": "2026-12-01T00:00:00Z", "finished_at": "2026-12-01T00:00:01Z",
        "duration_s": duration_s, "kgc_version": "0.1.0", "profile": profile,
        "profile_source": profile_source, "targets": list(targets),
        "layers": layers, "layers_judged": layers_judged, "scope": "", "command": [],
        "environment": environment or {}, **ident,
    }
    if digest is None:
        run.pop("profile_digest")
    if selection is None:
        run.pop("selection")
    elif selection is not UNSET:
        run["selection"] = selection
    if image:
        run["image"] = {"path": "/img/node.qcow2"}
    return {"schema": report.SCHEMA, "run": run, "overall": status, "overall_reason": why,
            "incomplete": incomplete, "counts": report.counts(results),
            "results": sorted(results, key=lambda r: (r["target"], r["check"]))}


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=1))
    return path


def full_node(target: str = "node-a", **over: str) -> list[dict[str, Any]]:
    """One passing result for every node layer (a check of each), statuses overridable
    by check id."""
    checks = ["iommu.enabled", "iommu.cmdline", "vfio.driver", "persistence.coverage",
              "persistence.cmdline", "reboot.returned", "runtime.nri-enabled",
              "runtime.nri-ignored-keys", "nri.events"]
    sev = {"iommu.enabled": "blocker", "persistence.coverage": "blocker",
           "runtime.nri-ignored-keys": "minor", "persistence.cmdline": "normal"}
    return [result(c, over.get(c, "pass"), target=target, severity=sev.get(c, "critical"))
            for c in checks]


def complete(results: list[dict[str, Any]], layers: tuple[str, ...] = tuple(NODE_LAYERS),
             target: str = "node-a") -> list[dict[str, Any]]:
    """``results`` plus a passing result for every other check this build has in ``layers``
    on ``target``: a run that left nothing out (what `kgc gate` on the command line, which
    knows the whole catalogue, needs to see)."""
    from kgc.core.registry import load_layers

    have = {(r["target"], r["check"]) for r in results}
    extra = [result(c.id, target=target, severity=str(c.severity))
             for name, lay in load_layers().items() if name in layers for c in lay.checks
             if (target, c.id) not in have]
    return results + extra
