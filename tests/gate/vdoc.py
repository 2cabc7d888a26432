"""Verdict documents for the gate's self-tests, shaped exactly as kgc.core.report writes
them (``kgc-verdict/1``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kgc.core import report

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
            duration_s: float = 1.0) -> dict[str, Any]:
    if layers_judged is None:
        layers_judged = list(dict.fromkeys(r["layer"] for r in results
                                           if r["status"] != "skip"))
    layers = list(dict.fromkeys(r["layer"] for r in results))
    status, why = report.overall_and_reason(results)
    run: dict[str, Any] = {
        "started_at": "2026-12-01T00:00:00Z", "finished_at": "2026-12-01T00:00:01Z",
        "duration_s": duration_s, "kgc_version": "0.1.0", "profile": profile,
        "profile_source": "", "targets": sorted({r["target"] for r in results}),
        "layers": layers, "layers_judged": layers_judged, "scope": "", "command": [],
        "environment": environment or {},
    }
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
