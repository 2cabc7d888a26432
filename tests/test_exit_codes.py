"""The README's exit-code table, condition by condition, through every command that can meet
it (issue 19.2, 18.5): real processes (the exit status, stderr and what was written are only
a process's), from an empty directory, against loopback servers started here.

- bad input (a scheme kgc has no transport for, a missing ``chroot://`` directory, a
  kubeconfig that is missing or not one, an unknown context, refused credentials, an
  unwritable output): exit 2, at most one
  line on stderr, nothing written;
- a valid target that does not answer (a closed port for ssh, a closed port for the API
  server): exit 1, every check of it one ``error`` sharing one reason, whose fix for ssh is
  a command that runs; ``kgc snapshot`` records the failure and ``kgc evaluate`` of that
  bundle gives the very same errors.

Every command names its interpreter ``{py}``, the ``py`` fixture: here the checkout's venv
(the product tier, no network); tests/test_wheel.py imports this module's tests and gives
``py`` the python of a fresh venv with only the built wheel installed (the lab tier), so
the same contract is checked on what a user installs.

The 401 answer is kube-apiserver's for a bearer token it cannot authenticate
(k8s.io/apiserver/pkg/endpoints/handlers/responsewriters.Unauthorized -> a ``Status`` with
``reason: Unauthorized``, ``code: 401``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

PY = "{py}"  # the interpreter: the ``py`` fixture
PYTEST = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--pyargs",
          "kgc.conformance"]
KGC = [PY, "-m", "kgc.cli"]

# kube-apiserver's /version (k8s.io/apimachinery/pkg/version.Info: every field set)
VERSION = {"major": "1", "minor": "34", "gitVersion": "v1.34.0", "gitCommit": "0" * 40,
           "gitTreeState": "clean", "buildDate": "2025-08-27T00:00:00Z",
           "goVersion": "go1.24.6", "compiler": "gc", "platform": "linux/amd64"}


def _server(code: int) -> Iterator[str]:
    """An API server answering ``code`` to everything but a 200 /version (code 200: /version
    only is answered, everything else 403)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _answer(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            version = self.path.split("?")[0].rstrip("/") == "/version"
            status = code if code != 200 else (200 if version else 403)
            body = VERSION if status == 200 else {
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                "reason": "Unauthorized" if status == 401 else "Forbidden",
                "message": "Unauthorized" if status == 401 else "forbidden"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
        "contexts": [{"name": "ctx", "context": {"cluster": "lab", "user": "u"}}],
        "clusters": [{"name": "lab", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "not-a-valid-token"}}]}))
    return path


@pytest.fixture(scope="module")
def py() -> str:
    """The python whose kgc is under test (tests/test_wheel.py overrides it: the wheel's)."""
    return sys.executable


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    d = tmp_path_factory.mktemp("inputs")
    (d / "not-a-kubeconfig").write_text("just: [text\n")
    (d / "a-file").write_text("a regular file: nothing can be written under it\n")
    gen401, gen200 = _server(401), _server(200)
    url401, url200 = next(gen401), next(gen200)
    yield {"dir": d, "refused": kubeconfig(d / "kc-401", url401),
           "answers": kubeconfig(d / "kc-200", url200),
           "down": kubeconfig(d / "kc-down", f"http://127.0.0.1:{closed_port()}"),
           "invalid": d / "not-a-kubeconfig", "file": d / "a-file"}
    for g in (gen401, gen200):
        g.close()


def run(argv: list[str], cwd: Path, py: str, columns: int | None = None
        ) -> subprocess.CompletedProcess[str]:
    argv = [a.replace(PY, py) for a in argv]
    cwd.mkdir(parents=True, exist_ok=True)
    home = cwd.parent / "home"  # the user's files (known_hosts ...) are not the run's output
    home.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home)}
    if columns:
        env["COLUMNS"] = str(columns)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


# -- exit 2: bad input, one line, nothing written --------------------------------------------
NODE_COMMANDS = {
    "pytest": [*PYTEST, "-m", "host"],
    "kgc certify": [*KGC, "certify", "-p", "no:randomly", "-m", "host"],
    "kgc snapshot": [*KGC, "snapshot", "-o", "bundle.json"],
}
CLUSTER_COMMANDS = {
    "pytest": [*PYTEST, "-m", "cluster"],
    "kgc certify": [*KGC, "certify", "-p", "no:randomly", "-m", "cluster"],
    "kgc snapshot": [*KGC, "snapshot", "-o", "bundle.json"],
    "kgc cleanup": [*KGC, "cleanup", "--all", "--wait", "0"],
    "kgc fleet collect": [*KGC, "fleet", "collect"],
    "kgc kubeconfig": [*KGC, "kubeconfig", "--service-account", "kgc-system/kgc-certify",
                       "-o", "sa.kubeconfig"],
}
BAD_INPUT: list[tuple[str, str, list[str], str]] = [
    *[("unknown scheme", c, [*argv, "--hosts", "sshh://root@gpu-a"],
       "valid schemes: local://, ssh://") for c, argv in NODE_COMMANDS.items()],
    *[("missing chroot directory", c, [*argv, "--hosts", "chroot:///no/such/tree"],
       "no directory '/no/such/tree'") for c, argv in NODE_COMMANDS.items()],
    *[("invalid kubeconfig", c, [*argv, "--kubeconfig", "{invalid}"], "not valid YAML")
      for c, argv in CLUSTER_COMMANDS.items()],
    *[("missing kubeconfig", c, [*argv, "--kubeconfig", "{dir}/no-such-kubeconfig"],
       "no such file") for c, argv in CLUSTER_COMMANDS.items()],
    *[("unknown context", c, [*argv, "--kubeconfig", "{answers}", "--context", "nope"],
       "context 'nope' not found") for c, argv in CLUSTER_COMMANDS.items()],
    *[("refused credentials", c, [*argv, "--kubeconfig", "{refused}"],
       "rejected the credentials of context 'ctx' (401 Unauthorized)")
      for c, argv in CLUSTER_COMMANDS.items()],
    ("unwritable --report-dir", "pytest",
     [*PYTEST, "-m", "iommu", "--root", "{dir}", "--report-dir", "{file}/reports"],
     "--report-dir"),
    ("unwritable --report-dir", "kgc certify",
     [*KGC, "certify", "-m", "iommu", "--root", "{dir}", "--report-dir", "{file}/reports"],
     "--report-dir"),
    ("unwritable --report-dir", "kgc fleet collect",
     [*KGC, "fleet", "collect", "--kubeconfig", "{answers}", "--report-dir", "{file}/r"],
     "--report-dir"),
    ("unwritable -o", "kgc snapshot",
     [*KGC, "snapshot", "--root", "{dir}", "-o", "{file}/bundle.json"], "-o"),
]


@pytest.mark.parametrize("condition,command,argv,says", BAD_INPUT,
                         ids=[f"{c}-{cmd}" for c, cmd, _, _ in BAD_INPUT])
def test_bad_input_is_one_line_exit_2_and_nothing_written(
        condition: str, command: str, argv: list[str], says: str, inputs: dict[str, Path],
        tmp_path: Path, py: str) -> None:
    cwd = tmp_path / "run"
    proc = run([a.format(py=PY, **inputs) for a in argv], cwd, py)
    why = f"{condition} / {command}: rc {proc.returncode}\n{proc.stdout[-1500:]}{proc.stderr}"
    assert proc.returncode == 2, why
    kgc_lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "kgc" in ln]
    assert len(kgc_lines) == 1 and says in kgc_lines[0], why
    assert "Traceback" not in proc.stderr, why
    assert not list(cwd.iterdir()), f"{why}\nwritten: {list(cwd.iterdir())}"


# -- exit 1: a valid target that does not answer ---------------------------------------------
def _one_reason(results: list[dict[str, Any]], scope_layers: set[str]) -> str:
    judged = [r for r in results if r["layer"] in scope_layers and r["status"] != "skip"]
    assert judged and {r["status"] for r in judged} == {"error"}, judged[:2]
    reasons = {r["reason"] for r in judged}
    assert len(reasons) == 1, reasons
    return reasons.pop()


NODE_LAYERS = {"iommu", "vfio", "persistence", "runtime"}
CLUSTER_LAYERS = {"gpu", "sizing", "keda"}


def test_an_unreachable_ssh_node_is_probed_once_and_every_path_says_the_same(
        tmp_path: Path, py: str) -> None:
    port = closed_port()
    spec = f"ssh://root@127.0.0.1:{port}"
    live = run([*PYTEST, "-m", "host", "--hosts", spec], tmp_path / "live", py, columns=120)
    assert live.returncode == 1, live.stdout[-2000:] + live.stderr[-1000:]
    results = json.loads((tmp_path / "live" / "reports" / "verdict.json").read_text())["results"]
    reason = _one_reason(results, NODE_LAYERS)
    # the console: the broken target is one row of the verdict table (its nri and reboot
    # checks skip for their flags, as on any node) and one entry of "what to fix", and
    # the overall line is the last
    lines = live.stdout.rstrip("\n").splitlines()
    assert lines[-1].startswith("overall: FAIL "), lines[-5:]
    kgc = lines[next(i for i, ln in enumerate(lines) if "kata-gpu-conformance verdicts" in ln):]
    rows = [i for i, ln in enumerate(kgc) if ln.startswith("    ERROR ")]
    assert len(rows) == 1, kgc[:40]
    assert kgc[rows[0]].startswith(
        "    ERROR 29 checks (iommu, vfio, persistence, runtime): evidence could not"), kgc[:5]
    row = [kgc[rows[0]]]
    for ln in kgc[rows[0] + 1:]:
        if not ln.startswith(" " * 10):
            break
        row.append(ln)
    assert " ".join(" ".join(row).split()).endswith(" ".join(reason.split())), row
    head = next(i for i, ln in enumerate(kgc) if "what to fix: 29 could not decide" in ln)
    entry = kgc[head + 1:next(i for i, ln in enumerate(kgc) if i > head and
                              (ln.startswith("==") or ln.startswith("report:")))]
    while entry and not entry[-1]:
        entry.pop()
    assert len(entry) <= 5 and entry[0].startswith("[ERROR] 29 checks of "), entry
    assert len(row) + len(entry) <= 5, (row, entry)  # was 29 rows + a 5-line entry
    rems = {r["remediation"] for r in results if r["status"] == "error"}
    assert len(rems) == 1 and f"`ssh -p {port} root@127.0.0.1 true`" in rems.pop()
    snap = run([*KGC, "snapshot", "--hosts", spec, "-o", "b.json"], tmp_path / "snap", py)
    assert snap.returncode == 1 and "fix: " in snap.stderr, snap.stderr
    doc = json.loads((tmp_path / "snap" / "b.json").read_text())
    assert doc["complete"] is False and "host" not in doc  # never a bundle claiming complete
    off = run([*KGC, "evaluate", "--json", str(tmp_path / "snap" / "b.json")], tmp_path / "ev",
              py)
    assert off.returncode == 1, off.stderr
    offline = json.loads(off.stdout)["results"]
    assert _one_reason(offline, NODE_LAYERS) == reason
    assert ({(r["check"], r["status"]) for r in offline}
            == {(r["check"], r["status"]) for r in results if r["layer"] in NODE_LAYERS
                | {"nri", "reboot"}})


def test_an_unreachable_api_server_is_exit_1_everywhere_with_one_reason(
        inputs: dict[str, Path], tmp_path: Path, py: str) -> None:
    kc = str(inputs["down"])
    live = run([*PYTEST, "-m", "cluster", "--kubeconfig", kc], tmp_path / "live", py)
    assert live.returncode == 1, live.stdout[-2000:] + live.stderr[-1000:]
    results = json.loads((tmp_path / "live" / "reports" / "verdict.json").read_text())["results"]
    reason = _one_reason(results, CLUSTER_LAYERS)
    assert "cannot reach the API server" in reason and " at 0x" not in reason
    snap = run([*KGC, "snapshot", "--kubeconfig", kc, "-o", "b.json"], tmp_path / "snap", py)
    assert snap.returncode == 1, snap.stderr
    off = run([*KGC, "evaluate", "--json", str(tmp_path / "snap" / "b.json")], tmp_path / "ev",
              py)
    offline = json.loads(off.stdout)["results"]
    assert off.returncode == 1 and _one_reason(offline, CLUSTER_LAYERS) == reason
    for name, argv in {"kgc cleanup": [*KGC, "cleanup", "--all", "--kubeconfig", kc],
                       "kgc fleet collect": [*KGC, "fleet", "collect", "--kubeconfig", kc],
                       "kgc kubeconfig": [*CLUSTER_COMMANDS["kgc kubeconfig"],
                                          "--kubeconfig", kc]}.items():
        proc = run(argv, tmp_path / name.replace(" ", "-"), py)
        assert proc.returncode == 1, f"{name}: {proc.returncode} {proc.stderr}"
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(lines) == 2 and "cannot reach the API server" in lines[0], proc.stderr
        assert lines[1].startswith("  fix: "), proc.stderr
        assert not list((tmp_path / name.replace(" ", "-")).iterdir())


@pytest.mark.parametrize("argv,says", [([*PYTEST, "--help"], "--profile=NAME|PATH"),
                                       ([*PYTEST, "--markers"], "@pytest.mark.iommu"),
                                       ([*KGC, "certify", "--help"], "--profile=NAME|PATH")],
                         ids=["pytest --help", "pytest --markers", "kgc certify --help"])
def test_help_writes_nothing(argv: list[str], says: str, tmp_path: Path, py: str) -> None:
    """Asking for help is not a run: it wrote an empty reports/allure-results/ where it
    was asked."""
    cwd = tmp_path / "run"
    proc = run(argv, cwd, py)
    assert proc.returncode == 0 and says in proc.stdout, proc.stdout[-2000:] + proc.stderr
    assert not list(cwd.iterdir()), list(cwd.rglob("*"))
