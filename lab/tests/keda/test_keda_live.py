"""The KEDA layer against the real cluster lab (real kube-apiserver, controller-manager,
scheduler, KEDA operator and metrics adapter; kwok pods whose sandbox delay per runtime
class comes from the lab profile). Every test drives the layer's live driver as a user
would, and checks what is left behind.

Bad input is proven with real stalled runs: a trigger that never fires (an endpoint that
takes the run's value but always answers 0), a scale-down that never completes (an
endpoint that never forgets the highest value), a deploy-mode endpoint whose pod cannot
answer (kwok pods never run), a missing RuntimeClass, and SIGTERM in the middle of a run.
(Pods that never schedule: the ``keda-unschedulable`` scenario.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from kgc import kube
from kgc.core.bundle import load_bundle, write_bundle
from kgc.core.engine import Context
from kgc.core.profile import Profile, load_profile
from kgc.core.registry import load_layers
from kgc.core.target import ClusterTarget
from kgc_lab import cluster as labc
from kgc_lab.cluster.scenarios_keda import _merge

REPO = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.lab, pytest.mark.cluster, pytest.mark.slow]

KGC = [sys.executable, "-m", "kgc.cli"]
LABEL = "kgc.io/run"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if labc.binaries().missing(keda=True):
        pytest.fail("cluster lab binaries not built — run scripts/bootstrap.d/30-cluster.sh")
    run_dir = tmp_path_factory.mktemp("keda-lab")
    lab = labc.Lab(run_dir, die_with_parent=True)
    try:
        state = lab.up()
    except labc.LabError as exc:
        pytest.fail(f"kgc lab cluster up failed: {exc}", pytrace=False)
    try:
        yield {**state, "run_dir": run_dir, "kube": kube.connect(state["kubeconfig"])}
    finally:
        rep = labc.down(run_dir)
        assert not rep["left"] and not rep["listening"], rep


def profile_with(lab: dict[str, Any], tmp: Path, keda: dict[str, Any],
                 platform: dict[str, Any] | None = None) -> tuple[Profile, Path]:
    """The profile the lab wrote (profiles/lab.yaml with its endpoint and HPA sync period)
    with ``keda`` merged into its keda section and ``platform`` into the platform section."""
    raw = _merge(yaml.safe_load(Path(lab["profile"]).read_text()),
                 {"cluster": {"keda": keda}, "platform": platform or {}})
    path = tmp / "profile.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_profile(path), path


def nothing_left(k: kube.Kube, timeout_s: float = 90) -> None:
    """Every namespace a run made is gone (watched, bounded), and no ScaledObject is left."""
    kube.watch_until("run namespaces deleted", k.core.list_namespace,
                     lambda objs: not objs or kube.NotYet(sorted(objs)), timeout_s,
                     label_selector=LABEL)
    left = k.custom.list_cluster_custom_object("keda.sh", "v1alpha1", "scaledobjects")
    assert not left["items"], left["items"]


def judge(prof: Profile, kubeconfig: str) -> tuple[dict[str, Any], Any]:
    ctx = Context(ClusterTarget(kubeconfig), prof)
    verdicts = {v.check: v for v in ctx.judge_all(["keda"])}
    return verdicts, ctx.evidence("keda")


# --------------------------------------------------------------------------- good runs


def test_the_readme_commands_certify_the_lab_and_write_the_artefacts(
        lab: dict[str, Any], tmp_path: Path) -> None:
    """The README's keda-run block, verbatim but for the kubeconfig and the profile, from
    an empty directory: live run, snapshot, evaluate, replay."""
    readme = (REPO / "README.md").read_text()
    m = re.search(r"<!-- keda-run:start -->\n(.*?)<!-- keda-run:end -->", readme, re.S)
    assert m, "README lost its keda-run block"
    lines = [ln.strip() for ln in m.group(1).splitlines() if ln.strip()]
    assert [ln.split()[:2] for ln in lines] == [["pytest", "-m"], ["kgc", "snapshot"],
                                               ["kgc", "evaluate"], ["pytest", "-m"]]
    prof = lab["profile"]  # what the lab wrote: profiles/lab.yaml + its endpoint, sync period
    outs = []
    for line in lines:
        cmd = (line.replace("~/.kube/config", lab["kubeconfig"])
               .replace("my-platform.yaml", prof).replace(" [--context C]", ""))
        argv = cmd.split()
        argv = ([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *argv[1:]]
                if argv[0] == "pytest" else [*KGC, *argv[1:]])
        out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600,
                             check=False)
        assert out.returncode == 0, (line, out.stdout[-3000:], out.stderr[-2000:])
        outs.append(out)
    rdir = tmp_path / "reports"
    doc = json.loads((rdir / "verdict.json").read_text())  # the replay's, the last line's
    got = {r["check"]: r["status"] for r in doc["results"]}
    assert len(got) == 9 and doc["overall"] == "pass", got
    assert all(s == "pass" for c, s in got.items() if c != "keda.watch-precision"), got
    assert all(r["simulated"] for r in doc["results"])
    assert {r["origin"] for r in doc["results"]} == {"bundle"}
    # kgc evaluate and pytest --snapshot judge the bundle the same way
    # (kgc snapshot records every cluster layer; pytest -m keda judges the keda ones)
    ev_lines = [ln for ln in outs[2].stdout.splitlines() if ln.strip().startswith(
        ("PASS", "WARN", "FAIL", "SKIP", "ERROR")) and ln.split()[1].startswith("keda.")]
    py_lines = [ln for ln in outs[3].stdout.splitlines() if ln.strip().startswith(
        ("PASS", "WARN", "FAIL", "SKIP", "ERROR"))]
    assert ev_lines and ev_lines == py_lines
    # the artefacts lie next to verdict.json; the console shows the per-phase table
    csv = (rdir / "keda-timestamps.csv").read_text()
    assert csv.startswith("role,runtime_class,repetition") and ",sandbox_ready," in csv
    assert 'data-phase="sandbox"' in (rdir / "keda-timeline.svg").read_text()
    for out in (outs[0], outs[3]):
        assert "keda on kgc-lab: keda-phases.txt" in out.stdout
        assert "(seconds; percentiles by nearest rank)" in out.stdout
    assert (tmp_path / "cluster.json").stat().st_mode & 0o077 == 0  # bundles are private
    nothing_left(lab["kube"])


def test_a_recorded_run_replays_to_identical_verdicts(lab: dict[str, Any],
                                                      tmp_path: Path) -> None:
    prof = load_profile(lab["profile"])
    ctx = Context(ClusterTarget(lab["kubeconfig"]), prof)
    live = [v.to_dict() for v in ctx.judge_all(["keda"])]
    bundle = tmp_path / "cluster.json"
    t = ctx.target
    write_bundle(bundle, scope=t.scope, target=t.name, host=None, parts=ctx.record(["keda"]))
    replay = Context(load_bundle(bundle, load_layers()), prof)
    again = [v.to_dict() for v in replay.judge_all(["keda"])]
    strip = [{k: v for k, v in d.items() if k != "origin"} for d in live]
    assert [{k: v for k, v in d.items() if k != "origin"} for d in again] == strip
    assert {d["origin"] for d in again} == {"bundle"}
    # and kgc evaluate judges the bundle the same way
    out = subprocess.run([*KGC, "evaluate", str(bundle), "--profile", lab["profile"], "--json",
                          "--layers", "keda"], capture_output=True, text=True, timeout=120,
                         check=False)
    ev_results = json.loads(out.stdout)["results"]
    assert [(r["check"], r["status"], r["reason"]) for r in ev_results] == \
        [(d["check"], d["status"], d["reason"]) for d in again]
    # the timing is real: the measured sandbox difference is the configured one (+-20 %)
    ev = ctx.evidence("keda")
    from kgc_lab.cluster.scenarios_keda import sandbox_timing

    timing = sandbox_timing(ev, prof)
    assert timing["within"], timing
    nothing_left(lab["kube"])


def test_the_kubernetes_workload_trigger_needs_no_endpoint(lab: dict[str, Any],
                                                           tmp_path: Path) -> None:
    """``trigger: kubernetes-workload``: the value is the number of marker pods the run
    creates in its namespace (KEDA counts them); the measured pods never include them."""
    prof, _ = profile_with(lab, tmp_path, {"trigger": "kubernetes-workload", "repetitions": 2,
                                           "replicas": 2})
    v, ev = judge(prof, lab["kubeconfig"])
    bad = {c: (str(x.status), x.reason) for c, x in v.items()
           if str(x.status) not in ("pass", "warn")}
    assert not bad, bad
    assert ev.kata.config.trigger_kind == "kubernetes-workload"
    pods = [p.name for run in ev.runs() for r in run.repetitions for p in r.pods]
    assert len(pods) == 2 * 2 * 2 and not any("marker" in n for n in pods)
    nothing_left(lab["kube"])


# --------------------------------------------------------------------------- bad input


class _Endpoint:
    """A loopback metrics endpoint the KEDA operator (a lab process) can reach. ``mode``:
    ``dead`` -- takes every PUT, always answers 0 (the trigger never fires); ``one`` --
    answers 1 while the value set is above 0 (KEDA activates, the Deployment never scales
    past 1);
    ``sticky`` -- answers the highest value ever set (the trigger can never be lowered)."""

    def __init__(self, mode: str) -> None:
        self.mode, self.values = mode, [0.0]
        ep = self

        class H(BaseHTTPRequestHandler):
            def _send(self, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                value = {"dead": 0, "one": 1 if ep.values[-1] > 0 else 0}.get(
                    ep.mode, max(ep.values))
                self._send({"value": value})

            def do_PUT(self) -> None:  # noqa: N802
                v = float(json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                          ["value"])
                ep.values.append(v)
                self._send({"value": v})

            def log_message(self, *a: Any) -> None:
                return

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/metric"

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


@pytest.fixture
def endpoint() -> Iterator[Callable[[str], _Endpoint]]:
    made: list[_Endpoint] = []

    def make(mode: str) -> _Endpoint:
        made.append(_Endpoint(mode))
        return made[-1]

    yield make
    for e in made:
        e.close()


def test_a_trigger_that_never_fires_is_a_bounded_decision_stall(
        lab: dict[str, Any], tmp_path: Path, endpoint: Callable[[str], _Endpoint]) -> None:
    ep = endpoint("dead")
    prof, _ = profile_with(lab, tmp_path, {
        "repetitions": 3, "endpoint": {"mode": "url", "url": ep.url},
        "timeouts": {"activation_s": 8, "ready_s": 10, "scale_down_s": 20}})
    t0 = time.monotonic()
    v, ev = judge(prof, lab["kubeconfig"])
    took = time.monotonic() - t0
    assert took < 90, took  # activation_s + setup, not ready_s x repetitions
    up = v["keda.scale-up-completes"]
    assert str(up.status) == "fail", up.reason
    assert "stalled in decision" in up.reason and "never became active" in up.reason
    assert "KEDA never scaled the Deployment" in up.remediation
    assert len(ev.kata.repetitions) == 1  # a stalled repetition ends the run
    (stall,) = ev.kata.repetitions[0].stalls
    assert stall.phase == "decision" and stall.timeout_s == 8 and stall.pod is None
    e2e = v["keda.e2e-p95"]  # every pod censored: slower than any budget
    assert str(e2e.status) == "fail" and "never became Ready" in e2e.reason, e2e.reason
    assert str(v["keda.scale-down-completes"].status) == "pass"  # nothing to scale down
    # zeroed at setup, raised once, lowered, reset for whoever comes next
    assert ep.values[1:] == [0.0, 3.0, 0.0, 0.0], ep.values
    nothing_left(lab["kube"])


def test_a_deployment_that_never_scales_to_k_is_a_decision_stall_naming_the_replicas(
        lab: dict[str, Any], tmp_path: Path, endpoint: Callable[[str], _Endpoint]) -> None:
    ep = endpoint("one")
    prof, _ = profile_with(lab, tmp_path, {
        "repetitions": 2, "endpoint": {"mode": "url", "url": ep.url},
        "timeouts": {"activation_s": 10, "ready_s": 15, "scale_down_s": 30}})
    v, ev = judge(prof, lab["kubeconfig"])
    up = v["keda.scale-up-completes"]
    assert str(up.status) == "fail", up.reason
    assert "4 of 6 pods never became Ready within the 15 s wait" in up.reason
    assert "stalled in decision (4)" in up.reason and "(never created)" in up.reason
    assert "desired replicas reached 1 of 3" in up.reason
    rep = ev.kata.repetitions[0]
    assert len(ev.kata.repetitions) == 1 and len(rep.pods) == 1
    assert "ready" in rep.pods[0].observed  # the one pod KEDA asked for came up
    assert [s.phase for s in rep.stalls] == ["decision"]
    nothing_left(lab["kube"])


def test_a_scale_down_that_never_completes_is_a_bounded_scale_down_stall(
        lab: dict[str, Any], tmp_path: Path, endpoint: Callable[[str], _Endpoint]) -> None:
    ep = endpoint("sticky")
    prof, _ = profile_with(lab, tmp_path, {
        "repetitions": 2, "replicas": 2, "endpoint": {"mode": "url", "url": ep.url},
        "timeouts": {"scale_down_s": 12}})
    v, ev = judge(prof, lab["kubeconfig"])
    down = v["keda.scale-down-completes"]
    assert str(down.status) == "fail", down.reason
    assert "never completed within the 12 s wait" in down.reason and "pod(s) left" in down.reason
    assert "cooldownPeriod 3 s" in down.reason
    assert str(v["keda.scale-up-completes"].status) == "pass"
    assert len(ev.kata.repetitions) == 1
    assert [s.phase for s in ev.kata.repetitions[0].stalls] == ["scale-down"]
    nothing_left(lab["kube"])  # the run's teardown removes the pods KEDA kept


def test_a_deployed_endpoint_that_cannot_answer_is_a_trigger_error(
        lab: dict[str, Any], tmp_path: Path) -> None:
    """Deploy mode on the lab: the endpoint Deployment, Service and ConfigMap are made and
    its (kwok) pod turns Ready, but nothing listens behind it: the run cannot raise its
    trigger, within the endpoint wait, and says so."""
    prof, _ = profile_with(lab, tmp_path, {"endpoint": {"mode": "deploy", "url": None},
                                           "timeouts": {"endpoint_s": 8}})
    t0 = time.monotonic()
    v, ev = judge(prof, lab["kubeconfig"])
    assert time.monotonic() - t0 < 90
    up = v["keda.scale-up-completes"]
    assert str(up.status) == "error", up.reason
    assert "could not raise its metrics-api trigger" in up.reason
    assert "the trigger endpoint never answered" in up.reason and "proxy" in up.reason
    assert "metrics endpoint pod started" in up.remediation
    nothing_left(lab["kube"])


def test_a_missing_runtime_class_fails_the_preflight_and_creates_nothing(
        lab: dict[str, Any], tmp_path: Path) -> None:
    # a RuntimeClass the lab does not install (it has kata and kata-qemu-nvidia-gpu)
    prof, _ = profile_with(lab, tmp_path, {},
                           {"kata": {"runtime_class": "kata-qemu-nvidia-gpu-snp"}})
    k = lab["kube"]
    before = {n.metadata.name for n in k.core.list_namespace().items}
    v, ev = judge(prof, lab["kubeconfig"])
    pf = v["keda.preflight"]
    assert str(pf.status) == "fail"
    assert "RuntimeClass kata-qemu-nvidia-gpu-snp missing" in pf.reason
    assert "Create the missing RuntimeClass" in pf.remediation
    assert ev.status == "preflight-failed"
    assert str(v["keda.e2e-p95"].status) == "skip"
    assert {n.metadata.name for n in k.core.list_namespace().items} == before


def test_sigterm_in_the_middle_of_a_run_tears_everything_down(
        lab: dict[str, Any], tmp_path: Path) -> None:
    _, path = profile_with(lab, tmp_path, {"repetitions": 20})
    k = lab["kube"]
    p = subprocess.Popen([*KGC, "snapshot", "--kubeconfig", lab["kubeconfig"], "--profile",
                          str(path), "-o", str(tmp_path / "b.json")],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        # wait (watch, bounded) until the run's Deployments exist and a pod was created
        kube.watch_until("a measured pod of the run", k.core.list_pod_for_all_namespaces,
                         lambda objs: bool(objs) or kube.NotYet("none"), 120,
                         label_selector="kgc.io/keda-role")
        p.send_signal(signal.SIGTERM)
        rc = p.wait(60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert rc == 143, (rc, p.stdout.read() if p.stdout else "")
    assert not (tmp_path / "b.json").exists()
    nothing_left(k)
    metric = json.loads(__import__("urllib.request").request.urlopen(
        lab["metric_url"], timeout=5).read())
    assert metric["value"] == 0  # the shared lab endpoint was reset
