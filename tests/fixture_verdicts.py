"""Every fixture bundle's verdicts, recorded: what `kgc evaluate` says on each bundle under
fixtures/ (status, reason, remediation, expected, found, simulated and a digest of the
evidence each check shows), so that a redesign that must not change what users see (issue
17: "every verdict on every fixture bundle is the same before and after") is held to it by
tests/test_fixture_verdicts.py.

Each bundle is judged with the profile beside it when there is one (``NAME.profile.yaml``
for ``NAME.bundle.json``; ``NAME.profile.yaml`` for ``NAME-*.bundle.json`` in fixtures/gpu),
else with the built-in ``generic-nvidia-passthrough`` profile. Regenerate after an intended
change, then review the diff:

    .venv/bin/python tests/fixture_verdicts.py
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
FIXTURES = REPO / "fixtures"
RECORD = HERE / "data" / "fixture_verdicts.json"
DEFAULT_PROFILE = "generic-nvidia-passthrough"
# fields of a verdict that are what the user sees; the evidence is kept as a digest
FIELDS = ("check", "layer", "target", "status", "reason", "remediation", "expected", "found",
          "simulated", "simulated_why", "category", "origin")


def bundles() -> list[Path]:
    """Every bundle under fixtures/: kgc-bundle files (``*.bundle.json``, fixtures/bundles)."""
    found = sorted(FIXTURES.rglob("*.bundle.json")) + sorted((FIXTURES / "bundles").glob("*.json"))
    return sorted(set(found))


def profile_for(bundle: Path) -> str:
    stem = bundle.name.removesuffix(".bundle.json").removesuffix(".json")
    for cand in (bundle.with_name(f"{stem}.profile.yaml"),
                 bundle.with_name(f"{stem.split('-')[0]}.profile.yaml")):
        if cand.is_file():
            return str(cand)
    return DEFAULT_PROFILE


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def judge(bundle: Path) -> list[dict[str, Any]]:
    from kgc.cli import evaluate_bundles

    out = []
    for r in evaluate_bundles([str(bundle)], profile_for(bundle)):
        row = {k: r.get(k) for k in FIELDS}
        row["evidence_sha"] = _digest(r.get("evidence"))
        out.append(json.loads(json.dumps(row, default=str)))
    return out


def key(bundle: Path) -> str:
    return str(bundle.relative_to(REPO))


def generate() -> dict[str, Any]:
    return {"format": "kgc-fixture-verdicts/1",
            "bundles": {key(b): {"profile": Path(profile_for(b)).name,
                                 "verdicts": judge(b)} for b in bundles()}}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "src"))
    # the containerd lab's recorded profiles name its /tmp/kgc-* instance files (as
    # tests/conftest.py accepts them for the self-tests)
    os.environ.setdefault("KGC_PATH_ROOTS", "/tmp/kgc-")
    doc = generate()
    RECORD.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    n = sum(len(v["verdicts"]) for v in doc["bundles"].values())
    print(f"wrote {RECORD.relative_to(REPO)}: {len(doc['bundles'])} bundles, {n} verdicts")
