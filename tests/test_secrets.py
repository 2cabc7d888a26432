"""No planted secret reaches any output: registry credentials in containerd's config, a
password in a target, a token in a header — grep every file a run and a snapshot write,
and the console."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SECRETS = ("PLANTED-REGISTRY-PASSWORD", "PLANTED-AUTH-B64", "PLANTED-IDENTITY-TOKEN",
           "PLANTED-HEADER-TOKEN", "PLANTED-SSH-PASSWORD")

CONFIG = """version = 2
[plugins."io.containerd.nri.v1.nri"]
  disable = false
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]
  runtime_type = "io.containerd.kata.v2"
[plugins."io.containerd.grpc.v1.cri".registry.configs."registry.example.com".auth]
  username = "robot"
  password = "PLANTED-REGISTRY-PASSWORD"
  auth = "PLANTED-AUTH-B64"
  identitytoken = "PLANTED-IDENTITY-TOKEN"
[plugins."io.containerd.grpc.v1.cri".registry.headers]
  Authorization = ["Bearer PLANTED-HEADER-TOKEN"]
"""


def _tree(root: Path) -> Path:
    f = root / "etc" / "containerd" / "config.toml"
    f.parent.mkdir(parents=True)
    f.write_text(CONFIG)
    return root


def _grep_all(where: list[Path], text: str) -> list[str]:
    hits = []
    for base in where:
        for f in ([base] if base.is_file() else base.rglob("*")):
            if f.is_file():
                data = f.read_bytes().decode(errors="replace")
                hits += [f"{f}: {s}" for s in SECRETS if s in data]
    hits += [f"console: {s}" for s in SECRETS if s in text]
    return hits


def test_no_planted_secret_reaches_verdicts_junit_allure_bundles_or_console(tmp_path) -> None:
    node = _tree(tmp_path / "node")
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "runtime",
         "--kgc-root", str(node), "-rA"],
        cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode in (0, 1), run.stdout[-3000:]
    assert (work / "reports" / "verdict.json").is_file()
    snap = subprocess.run(
        [sys.executable, "-m", "kgc.cli", "snapshot", "--root", str(node), "-o",
         str(work / "node.json")],
        cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert snap.returncode == 0, snap.stderr
    ev = subprocess.run([sys.executable, "-m", "kgc.cli", "evaluate", str(work / "node.json"),
                         "--json"], cwd=work, capture_output=True, text=True, timeout=300,
                        check=False)
    live = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "iommu", "--hosts",
         "ssh://root:PLANTED-SSH-PASSWORD@127.0.0.1:1", "--report-dir", str(work / "ssh")],
        cwd=work, capture_output=True, text=True, timeout=300, check=False)
    console = run.stdout + run.stderr + snap.stdout + snap.stderr + ev.stdout + ev.stderr \
        + live.stdout + live.stderr
    assert not _grep_all([work], console)
    # the redaction kept what the checks judge and the non-secret configuration
    verdicts = {r["check"]: r for r in json.loads(ev.stdout)["results"]}
    assert verdicts["runtime.kata-handler"]["status"] == "pass", verdicts["runtime.kata-handler"]
    assert "registry.example.com" in (work / "node.json").read_text()
