"""The keda verdict corpus: the complete verdict (status, reason, remediation, expected,
found, evidence digest) every ``keda.*`` check gives on every hand-made vector of
``kedavectors.VECTORS`` (issue 21 item 8).

``tests/data/keda_verdicts.json`` holds the verdicts; ``test_keda_verdicts.py`` re-judges
the vectors (built in code, no I/O) and wants the same verdicts, word for word: what lets
mutation testing (benchmarks/mutation.py) notice a changed reason, remedy, expected/found
text or evidence key of the evaluators, not just a flipped status.

Regenerate after an intended change, then review the diff of the JSON:

    .venv/bin/python tests/keda/keda_verdicts.py

Every vector states by hand the statuses (and words) it is about; the generator refuses to
write a corpus that contradicts them (``kedavectors.mismatch``), so the file is never a
blind recording.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
CORPUS = HERE.parent / "data" / "keda_verdicts.json"

from kedavectors import VECTORS, Vector, mismatch  # noqa: E402

from kgc.layers.keda.checks import CHECKS  # noqa: E402

FIELDS = ("status", "reason", "remediation", "expected", "found", "evidence")


def digest(evidence: Any) -> str:
    return hashlib.sha256(json.dumps(evidence, sort_keys=True, default=str)
                          .encode()).hexdigest()[:16]


def verdicts(v: Vector) -> dict[str, dict[str, Any]]:
    """check id -> what the evaluator decided on vector ``v``."""
    out = {}
    for chk in CHECKS:
        full = chk.judge(v.evidence, v.profile, "corpus").to_dict()
        row = {k: full.get(k) for k in FIELDS}
        row["evidence"] = digest(row["evidence"])
        out[chk.id] = json.loads(json.dumps(row, sort_keys=True, default=str))
    return out


def build() -> dict[str, Any]:
    names = [v.name for v in VECTORS]
    if len(set(names)) != len(names):
        raise SystemExit("two vectors share a name")
    problems = [f"{v.name}: {p}" for v in VECTORS for p in mismatch(CHECKS, v)]
    if problems:
        raise SystemExit("the verdicts contradict the hand-written vectors:\n  "
                         + "\n  ".join(problems))
    return {"format": "kgc-keda-verdicts/1",
            "vectors": {v.name: {"expect": dict(v.expect), "verdicts": verdicts(v)}
                        for v in VECTORS}}


if __name__ == "__main__":
    doc = build()
    CORPUS.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    n = sum(len(x["verdicts"]) for x in doc["vectors"].values())
    print(f"{CORPUS}: {len(doc['vectors'])} vectors, {n} verdicts")
