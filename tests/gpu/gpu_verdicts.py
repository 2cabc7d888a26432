"""The gpu verdict corpus: the complete verdict (status, reason, remediation, expected,
found, evidence digest) each of the gpu layer's own checks (``kgc.layers.gpu.checks``; the
DRA and CC checks have their own tests) gives on every subject of every hand-made vector of
:data:`gpu.gpu_vectors.VECTORS` (issue 21 item 8).

``tests/data/gpu_verdicts.json`` holds the verdicts; ``tests/gpu/test_gpu_survivors.py``
re-judges the vectors (built in code from the real guest captures, no I/O) and wants the
same verdicts, word for word: what lets mutation testing (benchmarks/mutation.py modules
``gpu.checks``, ``gpu.classify``) notice a changed reason, remedy, expected/found text or
evidence key, not just a flipped status.

Regenerate after an intended change, then review the diff of the JSON:

    .venv/bin/python tests/gpu/gpu_verdicts.py

Every vector states by hand the statuses (and words) it is about; the generator refuses to
write a corpus that contradicts them (``gpu_vectors.mismatch``), so the file is never a
blind recording.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
CORPUS = HERE.parent / "data" / "gpu_verdicts.json"

from gpu.gpu_vectors import VECTORS, Vector, mismatch  # noqa: E402
from kgc.layers.gpu.checks import CHECKS, inputs  # noqa: E402

FIELDS = ("status", "reason", "remediation", "expected", "found", "evidence")


def digest(evidence: Any) -> str:
    return hashlib.sha256(json.dumps(evidence, sort_keys=True, default=str)
                          .encode()).hexdigest()[:16]


def verdicts(v: Vector) -> dict[str, dict[str, Any]]:
    """``<check> <subject>`` -> what the evaluator decided on vector ``v``."""
    out = {}
    for ci in inputs(v.run):
        if ci.check.id not in v.checks:
            continue
        full = ci.check.judge(ci.evidence, v.profile, "corpus").to_dict()
        row = {k: full.get(k) for k in FIELDS}
        row["evidence"] = digest(row["evidence"])
        out[f"{ci.check.id} {ci.subject}"] = json.loads(json.dumps(row, sort_keys=True,
                                                                   default=str))
    return out


def build() -> dict[str, Any]:
    names = [v.name for v in VECTORS]
    if len(set(names)) != len(names):
        raise SystemExit("two vectors share a name: "
                         + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    problems = [f"{v.name}: {p}" for v in VECTORS for p in mismatch(CHECKS, v)]
    if problems:
        raise SystemExit("the verdicts contradict the hand-written vectors:\n  "
                         + "\n  ".join(problems))
    return {"format": "kgc-gpu-verdicts/1",
            "vectors": {v.name: {"expect": dict(v.expect), "verdicts": verdicts(v)}
                        for v in VECTORS}}


if __name__ == "__main__":
    doc = build()
    CORPUS.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    n = sum(len(x["verdicts"]) for x in doc["vectors"].values())
    print(f"{CORPUS}: {len(doc['vectors'])} vectors, {n} verdicts")
