"""The lab's responder for simulated collector pods: what a kwok pod "printed" and how it
ended.

A pod of the cluster layers that runs an in-guest collector carries the label
``kgc.io/collector=<kind>`` (``gpu``, ``sizing``). kwok runs such a pod to ``Running`` like
any other; nothing runs in it. The responder (started by ``kgc lab cluster up`` as the
process ``python -m kgc_lab.cluster.simulate``) watches these pods and, once one is
Running, asks the chooser registered for its kind what the pod's log is (pods on a node a
real kubelet runs — the lab's real node, ``kgc_lab.cluster.realnode`` — are left alone):

    register_chooser("gpu", chooser)      # chooser(pod: dict) -> SimOutput | None

    @dataclass SimOutput: text (the log: recorded real evidence from fixtures/, never
                          invented), exit_code (0: Succeeded, else Failed), note (what was
                          served and anything the lab changed in it)

For an answer it (1) writes the text as a CRI log and creates the kwok ``Logs`` object for
the pod, so ``kubectl logs`` returns the text byte for byte; (2) records a ``Normal
SimulatedOutput`` Event on the pod carrying the note, so the evidence of a run says what
the lab served; (3) annotates the pod ``kgc.io/sim-exit-code``, on which the lab's kwok
stages (``kgc_lab.cluster.manifests.kwok_stages``) end it: ``Succeeded`` with exit 0, else
``Failed`` with that exit code. ``None`` from a chooser leaves the pod running. A chooser
that fails leaves the pod running too, with a ``Warning SimulationFailed`` Event naming
why (never a made-up output).

Choosers are registered by the modules in ``CHOOSER_MODULES`` when they are imported
(``sim_gpu`` registers ``gpu``; ``sim_sizing`` registers ``sizing``). A chooser may read the
node the pod landed on through :func:`lab_node`, its peers through :func:`lab_pods`, anything
else through :func:`lab_client`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.kube.origin import stand_in_reason
from kgc.kube.watch import Stamp, Watcher
from kgc_lab.cluster.evidence import cri_log

COLLECTOR_LABEL = "kgc.io/collector"
EXIT_ANNOTATION = "kgc.io/sim-exit-code"
NOTE_ANNOTATION = "kgc.io/simulated"
REPORTER = "kgc-lab-simulator"
CHOOSER_MODULES = ("kgc_lab.cluster.sim_gpu", "kgc_lab.cluster.sim_sizing")
MAX_NOTE = 1000


@dataclass(frozen=True)
class SimOutput:
    text: str
    exit_code: int = 0
    note: str = ""


Chooser = Callable[[dict[str, Any]], SimOutput | None]
_CHOOSERS: dict[str, Chooser] = {}


def register_chooser(kind: str, chooser: Chooser) -> None:
    """Answer for pods labelled ``kgc.io/collector=<kind>`` (one chooser per kind; the last
    registration wins, so a test may replace one)."""
    if not kind or "/" in kind:
        raise ValueError(f"bad collector kind {kind!r}")
    _CHOOSERS[kind] = chooser


def choosers() -> dict[str, Chooser]:
    return dict(_CHOOSERS)


def load_choosers() -> list[str]:
    """Import the chooser modules that exist in this build; the kinds now registered."""
    for mod in CHOOSER_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    return sorted(_CHOOSERS)


def fixtures_dir() -> Path:
    """The repository's recorded evidence (``KGC_FIXTURES`` overrides)."""
    env = os.environ.get("KGC_FIXTURES")
    return Path(env) if env else Path(__file__).resolve().parents[3] / "fixtures"


def _d(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


_ACTIVE: Responder | None = None


def lab_node(name: str | None) -> dict[str, Any] | None:
    """The node ``name`` as the API serves it now (for choosers), or None."""
    r = _ACTIVE
    if r is None or not name:
        return None
    return r.node(name)


def lab_client() -> kube.Kube | None:
    """The responder's (admin) client, for choosers that read other objects (the DRA
    claims a pod was allocated), or None when no responder runs."""
    r = _ACTIVE
    return None if r is None else r.kube


def lab_pods(namespace: str, kind: str, node: str | None = None) -> list[dict[str, Any]]:
    """The collector pods of ``kind`` in ``namespace`` (on ``node``) as the API serves them
    now (for choosers), or [] when no responder runs."""
    r = _ACTIVE
    if r is None:
        return []
    return r.pods(namespace, kind, node)


class Responder(Watcher):
    """Watches collector pods on all namespaces and answers each Running one once."""

    def __init__(self, k: kube.Kube, run_dir: Path,
                 say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True)
                 ) -> None:
        super().__init__()
        self.kube = k
        self.out_dir = Path(run_dir) / "evidence"
        self.say = say
        self.answered: dict[str, str] = {}  # pod uid -> what was done
        self.follow("kgc-sim-pods", k.core.list_pod_for_all_namespaces, (),
                    {"label_selector": COLLECTOR_LABEL}, self._observe)

    def start(self) -> Responder:
        global _ACTIVE
        self.out_dir.mkdir(parents=True, exist_ok=True)
        _ACTIVE = self
        super().start()
        return self

    def stop(self) -> None:
        global _ACTIVE
        super().stop()
        if _ACTIVE is self:
            _ACTIVE = None

    def node(self, name: str) -> dict[str, Any] | None:
        try:
            resp: Any = self.kube.core.read_node(name, _preload_content=False)
        except ApiException:
            return None
        return _d(json.loads(resp.data))

    def pods(self, namespace: str, kind: str, node: str | None = None) -> list[dict[str, Any]]:
        kw: dict[str, Any] = {"label_selector": f"{COLLECTOR_LABEL}={kind}"}
        if node:
            kw["field_selector"] = f"spec.nodeName={node}"
        try:
            resp: Any = self.kube.core.list_namespaced_pod(namespace, _preload_content=False,
                                                          **kw)
        except ApiException:
            return []
        return [_d(p) for p in json.loads(resp.data).get("items") or []]

    # ---- the pods
    def _observe(self, kind: str, pod: Any, stamp: Stamp) -> None:
        pod = _d(pod)
        md, st = _d(pod.get("metadata")), _d(pod.get("status"))
        uid = str(md.get("uid") or "")
        if (kind == "DELETED" or not uid or uid in self.answered or md.get("deletionTimestamp")
                or EXIT_ANNOTATION in _d(md.get("annotations")) or st.get("phase") != "Running"):
            return
        self.answered[uid] = "pending"
        node = str(_d(pod.get("spec")).get("nodeName") or "")
        if stand_in_reason(self.node(node)) is None:
            # a real kubelet runs this pod (the lab's real node): its log is its own
            self.answered[uid] = f"on real node {node}: not simulated"
            return
        try:
            self.answered[uid] = self.answer(pod)
        except Exception as exc:  # noqa: BLE001 - reported on the pod, never a made-up output
            why = f"{type(exc).__name__}: {exc}"
            self.answered[uid] = f"failed: {why}"
            self.say(f"kgc lab simulator: {md.get('namespace')}/{md.get('name')}: {why}")
            self._event(pod, "Warning", "SimulationFailed",
                        f"the kgc lab could not simulate this pod's output: {why}")

    def answer(self, pod: dict[str, Any]) -> str:
        md = _d(pod.get("metadata"))
        ns, name = str(md.get("namespace")), str(md.get("name"))
        kind = str(_d(md.get("labels")).get(COLLECTOR_LABEL) or "")
        chooser = _CHOOSERS.get(kind)
        if chooser is None:
            return f"no chooser for kind {kind!r}: left running"
        out = chooser(pod)
        if out is None:
            return f"chooser {kind!r} chose nothing: left running"
        if not isinstance(out, SimOutput):
            raise TypeError(f"chooser {kind!r} returned {type(out).__name__}, not SimOutput")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"{ns}_{name}_{md.get('uid')}.log"
        path.write_text(cri_log(out.text))
        containers = [str(_d(c).get("name")) for c in _d(pod.get("spec")).get("containers") or []]
        labels = {k: v for k, v in _d(md.get("labels")).items() if k != COLLECTOR_LABEL}
        logs = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
            "metadata": {"name": name, "namespace": ns, "labels": labels,
                         "annotations": {NOTE_ANNOTATION: "recorded evidence"}},
            "spec": {"logs": [{"logsFile": str(path), "follow": False,
                               "containers": containers}]},
        }
        try:
            kube.create_object(self.kube, logs)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.kube.custom.patch_namespaced_custom_object(
                "kwok.x-k8s.io", "v1alpha1", ns, "logs", name, {"spec": logs["spec"]})
        note = (out.note or f"the kgc lab served this pod's log ({kind})")[:MAX_NOTE]
        self._event(pod, "Normal", "SimulatedOutput", note)
        self.kube.core.patch_namespaced_pod(
            name, ns, {"metadata": {"annotations": {
                EXIT_ANNOTATION: str(int(out.exit_code)), NOTE_ANNOTATION: note[:250]}}},
            _preload_content=False)
        return f"served {len(out.text)} characters, exit {out.exit_code}"

    def _event(self, pod: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        md = _d(pod.get("metadata"))
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        body: Any = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{md.get('name')}.", "namespace": md.get("namespace")},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": md.get("name"),
                               "namespace": md.get("namespace"), "uid": md.get("uid")},
            "type": type_, "reason": reason, "message": message[:MAX_NOTE],
            "source": {"component": REPORTER}, "reportingComponent": REPORTER,
            "reportingInstance": REPORTER, "firstTimestamp": now, "lastTimestamp": now,
            "count": 1,
        }
        try:
            self.kube.core.create_namespaced_event(str(md.get("namespace")), body,
                                                   _preload_content=False)
        except ApiException as exc:
            self.say(f"kgc lab simulator: event on {md.get('name')} not recorded: {exc.status}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgc_lab.cluster.simulate",
                                 description="the cluster lab's simulated collector pods")
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--ready-file", type=Path, default=None,
                    help="written once the pods are watched")
    a = ap.parse_args(argv)
    kinds = load_choosers()
    stop = threading.Event()

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    r = Responder(kube.connect(a.kubeconfig), a.run_dir).start()
    print(f"kgc lab simulator: answering collector pods of kind {', '.join(kinds) or '(none)'}",
          file=sys.stderr, flush=True)
    if a.ready_file is not None:
        a.ready_file.write_text(json.dumps({"pid": os.getpid(), "kinds": kinds}))
    try:
        while not stop.is_set():
            if r.error is not None:
                print(f"kgc lab simulator: the pod watch failed: {r.error}", file=sys.stderr)
                return 1
            stop.wait(1.0)  # the service's own idle loop: woken by SIGTERM, checks the watch
    finally:
        r.stop()
    return 0


if __name__ == "__main__":
    # run as the imported module, not as __main__: the chooser modules register in (and
    # lab_node() reads) kgc_lab.cluster.simulate's own globals
    from kgc_lab.cluster import simulate as _simulate

    raise SystemExit(_simulate.main())
