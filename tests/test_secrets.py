"""No planted secret reaches any output: registry credentials in containerd's config, a
password in a target, a token in a header — grep every file a run and a snapshot write,
and the console."""

from __future__ import annotations

import base64
import binascii
import http.server
import json
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import KgcMain

SECRETS = ("PLANTED-REGISTRY-PASSWORD", "PLANTED-AUTH-B64", "PLANTED-IDENTITY-TOKEN",
           "PLANTED-HEADER-TOKEN", "PLANTED-SSH-PASSWORD")

CONFIG = """version = 2
[plugins."io.containerd.nri.v1.nri"]
  disable = false
# runc listed too: a kata-only runtimes table is undecidable offline without the version
# (containerd 1.7 refuses the CRI plugin on it; issue 18), and this test is about redaction
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata-qemu-nvidia-gpu]
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


def _pytest(pytester: pytest.Pytester, capfd: pytest.CaptureFixture[str], cwd: Path,
            *args: str) -> tuple[int, str]:
    """pytest ARGS in this process from CWD: its exit code and its console — what it wrote
    through sys.stdout/stderr (pytester's capture) and to the file descriptors (capfd)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        capfd.readouterr()
        r = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
        fd = capfd.readouterr()
    return int(r.ret), "\n".join(r.outlines + r.errlines) + fd.out + fd.err


def test_no_planted_secret_reaches_verdicts_junit_allure_bundles_or_console(
        tmp_path: Path, kgc_main: KgcMain, pytester: pytest.Pytester,
        capfd: pytest.CaptureFixture[str]) -> None:
    """The suite run, the snapshot and the evaluation happen in this process (pytester,
    kgc_main): their console is everything they wrote, at the Python and at the
    file-descriptor level."""
    node = _tree(tmp_path / "node")
    work = tmp_path / "work"
    work.mkdir()
    rc, run = _pytest(pytester, capfd, work, "-m", "runtime", "--kgc-root", str(node), "-rA")
    assert rc in (0, 1), run[-3000:]
    assert (work / "reports" / "verdict.json").is_file()
    snap = kgc_main("snapshot", "--root", str(node), "-o", str(work / "node.json"), cwd=work)
    assert snap.returncode == 0, snap.stderr
    ev = kgc_main("evaluate", str(work / "node.json"), "--json", cwd=work)
    # a password in a target is refused outright (never handed to sshpass -p): a bad-input
    # exit while pytest configures, which only a real process reports as its exit status 2
    live = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "iommu", "--hosts",
         "ssh://root:PLANTED-SSH-PASSWORD@127.0.0.1:1", "--report-dir", str(work / "ssh")],
        cwd=work, capture_output=True, text=True, timeout=300, check=False)
    assert live.returncode == 2 and "carries a password" in live.stdout + live.stderr
    console = run + snap.stdout + snap.stderr + ev.stdout + ev.stderr + live.stdout \
        + live.stderr
    assert not _grep_all([work], console)
    # the redaction kept what the checks judge and the non-secret configuration
    verdicts = {r["check"]: r for r in json.loads(ev.stdout)["results"]}
    assert verdicts["runtime.kata-handler"]["status"] == "pass", verdicts["runtime.kata-handler"]
    assert "registry.example.com" in (work / "node.json").read_text()


# -- the Kubernetes client's logs: an exec credential plugin's stderr, urllib3's paths --------
EXEC_SECRETS = ("PLANTED-EXEC-STDERR", "PLANTED-EXEC-TOKEN")
CREDENTIAL = json.dumps({"apiVersion": "client.authentication.k8s.io/v1",
                         "kind": "ExecCredential", "status": {"token": "PLANTED-EXEC-TOKEN"}})


def _exec_kubeconfig(d: Path, server: str, exit_code: int) -> Path:
    """A kubeconfig whose user is an exec credential plugin: a script that prints a secret to
    stderr (as a failing OIDC/cloud plugin does) and a valid ExecCredential to stdout."""
    plugin = d / "cred-plugin"
    plugin.write_text(
        "#!/bin/sh\n"
        "echo 'refresh failed: refresh_token=PLANTED-EXEC-STDERR-1 "
        "client secret PLANTED-EXEC-STDERR-2' >&2\n"
        f"printf '%s\\n' '{CREDENTIAL}'\n"
        f"exit {exit_code}\n")
    plugin.chmod(0o755)
    kc = d / "kubeconfig"
    kc.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        "contexts: [{name: lab, context: {cluster: exec-lab, user: plugin}}]\n"
        f"clusters: [{{name: exec-lab, cluster: {{server: '{server}'}}}}]\n"
        "users: [{name: plugin, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
        f"command: {plugin}, interactiveMode: Never}}}}}}]\n")
    return kc


class _Refuses(http.server.BaseHTTPRequestHandler):
    """An API server that answers /version (the probe every command makes first: a refusal
    there is bad credentials, exit 2 with nothing written, which would leave this test
    nothing to grep) and refuses every other request (401 Status), and remembers the
    tokens."""

    tokens: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        _Refuses.tokens.append(self.headers.get("Authorization", ""))
        version = self.path.split("?")[0].rstrip("/") == "/version"
        body = json.dumps({"major": "1", "minor": "34", "gitVersion": "v1.34.0",
                           "gitCommit": "0" * 40, "gitTreeState": "clean",
                           "buildDate": "2025-08-27T00:00:00Z", "goVersion": "go1.24.6",
                           "compiler": "gc", "platform": "linux/amd64"} if version else
                          {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "message": "Unauthorized", "reason": "Unauthorized",
                           "code": 401}).encode()
        self.send_response(200 if version else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    def log_message(self, *a: object) -> None:
        pass


@pytest.fixture
def refusing_server() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _decoded(data: str) -> str:
    """``data`` plus what its base64 runs decode to (the Allure HTML embeds its data so)."""
    out = [data]
    for blob in re.findall(r"[A-Za-z0-9+/]{24,}={0,2}", data):
        try:
            out.append(base64.b64decode(blob + "=" * (-len(blob) % 4)).decode(errors="replace"))
        except (binascii.Error, ValueError):
            continue
    return "\n".join(out)


def _exec_leaks(where: Path, console: str) -> list[str]:
    hits = [f"console: {s}" for s in EXEC_SECRETS if s in console]
    for f in where.rglob("*"):
        if f.is_file() and f.name not in ("cred-plugin", "kubeconfig"):
            text = _decoded(f.read_bytes().decode(errors="replace"))
            hits += [f"{f}: {s}" for s in EXEC_SECRETS if s in text]
    return hits


@pytest.mark.slow  # two pytest runs, kgc snapshot and kgc report: 1-2 min on 2 loaded cores
@pytest.mark.lab  # renders the HTML report: Allure 3 (node_modules), the lab tier
@pytest.mark.parametrize("plugin_exit", [1, 0], ids=["plugin-fails", "plugin-succeeds"])
def test_no_exec_plugin_secret_reaches_console_verdicts_junit_allure_or_html(
        tmp_path: Path, refusing_server: str, plugin_exit: int) -> None:
    """A failing plugin's stderr is what the client logs (``exec: process returned 1. ...``);
    a working one's token goes to the API server (which refuses it) and must not be logged
    either, at DEBUG too (urllib3's request lines)."""
    _Refuses.tokens.clear()
    kc = _exec_kubeconfig(tmp_path, refusing_server, plugin_exit)
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "cluster",
         "--kubeconfig", str(kc), "-rA", "--log-level=DEBUG"],
        cwd=work, capture_output=True, text=True, timeout=600, check=False)
    assert run.returncode in (0, 1), run.stdout[-3000:] + run.stderr[-3000:]
    rdir = work / "reports"
    assert (rdir / "verdict.json").is_file() and (rdir / "junit.xml").is_file()
    attachments = list((rdir / "allure-results").glob("*-attachment.txt"))
    assert attachments, "no captured log: the test would prove nothing"
    logs = "".join(a.read_text() for a in attachments)
    if plugin_exit:
        assert "exec: process returned 1" in logs  # the record stays, its stderr does not
        assert "stderr is withheld" in logs
    else:
        assert "Bearer PLANTED-EXEC-TOKEN" in _Refuses.tokens  # the token was really used
    snap = subprocess.run(
        [sys.executable, "-m", "kgc.cli", "snapshot", "--kubeconfig", str(kc), "-o",
         str(work / "cluster.json")],
        cwd=work, capture_output=True, text=True, timeout=600, check=False)
    html = subprocess.run(
        [sys.executable, "-m", "kgc.cli", "report", "--results", str(rdir / "allure-results"),
         "--out", str(rdir / "html")],
        cwd=work, capture_output=True, text=True, timeout=600, check=False)
    assert html.returncode == 0, html.stderr[-2000:]  # the HTML is grepped too
    console = run.stdout + run.stderr + snap.stdout + snap.stderr + html.stdout + html.stderr
    assert not _exec_leaks(work, console)
    # attachments hold captured output: private, like verdict.json and bundles
    for f in [rdir / "allure-results", *(rdir / "allure-results").iterdir(), rdir / "junit.xml"]:
        mode = stat.S_IMODE(f.stat().st_mode)
        assert mode & 0o077 == 0, f"{f}: {oct(mode)}"


@pytest.mark.parametrize("text,kept", [
    ("Authorization: Bearer PLANTED-HDR.abc", "Authorization: ***"),
    ("headers={'authorization': 'Basic PLANTED-B64=='}", "authorization"),
    ("sending Bearer PLANTED-TOKEN-1234 upstream", "Bearer ***"),
    ("refresh_token=PLANTED-RT&x=1", "refresh_token=***"),
    ('{"client-secret": "PLANTED-CS", "id-token": "PLANTED-IT"}', '"client-secret": "***"'),
    ("password: PLANTED-PW", "password: ***"),
    ("proxy https://u:PLANTED-PW@proxy:3128/", "https://u:***@proxy:3128/"),
    ("-----BEGIN RSA PRIVATE KEY-----\nPLANTED-KEY\n-----END RSA PRIVATE KEY-----",
     "(private key withheld)"),
])
def test_known_secret_shapes_are_redacted_in_any_record(text: str, kept: str) -> None:
    from kgc.core.logfilter import redact_text

    out = redact_text(text)
    assert "PLANTED" not in out and kept in out, out


def test_the_cli_path_redacts_client_records_without_pytest_handlers(tmp_path: Path) -> None:
    """What `kgc` installs (logger filters, no pytest): a real urllib3 retry record keeps the
    path but not its query; the kubeconfig loader's exec failure loses the plugin's stderr;
    an unrelated record is left as it was."""
    import io
    import logging

    import urllib3
    import yaml
    from kubernetes.client import Configuration
    from kubernetes.config.kube_config import KubeConfigLoader

    from kgc.core import logfilter

    logfilter.install()
    logfilter.install()  # idempotent
    assert sum(isinstance(f, logfilter.SecretFilter)
               for f in logging.getLogger("urllib3.connectionpool").filters) == 1
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)  # a plain handler: only the logger filters apply
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        pool = urllib3.PoolManager(retries=urllib3.Retry(total=1, backoff_factor=0))
        with pytest.raises(urllib3.exceptions.HTTPError):
            pool.request("GET", "http://127.0.0.1:1/api/v1/pods?labelSelector=PLANTED-Q")
        # the kubeconfig loader runs a failing plugin (it logs through logging.error)
        kc = _exec_kubeconfig(tmp_path, "http://127.0.0.1:1", 1)
        with kc.open() as f:
            doc = yaml.safe_load(f)
        KubeConfigLoader(config_dict=doc).load_and_set(Configuration())
        logging.getLogger("kgc.example").warning("plain record about /x?y=1")
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
    out = buf.getvalue()
    assert "PLANTED" not in out, out
    assert "/api/v1/pods?***" in out and "exec: process returned 1 (" in out, out
    assert "plain record about /x?y=1" in out, out
