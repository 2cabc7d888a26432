"""The README's "Run it on a cluster" block, verbatim, from an empty directory, against the
cluster lab's real kube-apiserver (issue 19.4): the admin's kubeconfig is the current
context ($KUBECONFIG), `kgc rbac certify | kubectl apply -f -` applies the role the wheel
ships, `kgc kubeconfig --service-account kgc-system/kgc-certify -o FILE` makes the
account's kubeconfig (mode 0600, a TokenRequest token), and every later line runs as that
account. No line may crash (exit 2 bad input, 3 internal error, a traceback); the
certification itself fails here (kwok nodes, no node layers), which is exit 1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from cluster.kubehelp import LabInfo

REPO = Path(__file__).resolve().parents[3]


def _block() -> list[str]:
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- cluster-run:start -->\n(.*?)<!-- cluster-run:end -->", text, re.S)
    assert m, "README lost its cluster-run block"
    return [ln.strip() for ln in m.group(1).splitlines() if ln.strip()]


def test_readme_cluster_block_runs_verbatim(lab_cluster: LabInfo, tmp_path: Path) -> None:
    work = tmp_path / "empty"
    work.mkdir()
    bindir = Path(sys.executable).parent  # kgc, pytest and kubectl (the test extra)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "KGC_"))}
    env.update(KUBECONFIG=str(lab_cluster.kubeconfig), PATH=f"{bindir}:{env['PATH']}")
    for line in _block():
        r = subprocess.run(line, shell=True, executable="/bin/bash", cwd=work, env=env,
                           capture_output=True, text=True, timeout=900, check=False)
        out = r.stdout + r.stderr
        assert r.returncode in (0, 1), (line, r.returncode, out[-3000:])
        assert "Traceback" not in out, (line, out[-3000:])
        if line.startswith(("kgc rbac", "kgc kubeconfig", "kgc snapshot")):
            assert r.returncode == 0, (line, out[-3000:])
    kc = work / "kgc-certify.kubeconfig"
    assert kc.stat().st_mode & 0o777 == 0o600
    doc = yaml.safe_load(kc.read_text())
    assert [u["name"] for u in doc["users"]] == ["kgc-system/kgc-certify"]
    assert len(doc["clusters"]) == 1 and doc["clusters"][0]["cluster"]["server"]
    # the runs were the account's: the verdicts name the cluster of the SA's kubeconfig
    verdict = json.loads((work / "verdict.json").read_text())
    assert verdict["results"] and {r["layer"] for r in verdict["results"]} <= {
        "gpu", "sizing", "keda"}
    assert (work / "reports" / "verdict.json").is_file()  # pytest -m gpu's
