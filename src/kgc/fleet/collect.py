"""``kgc fleet collect``: every node-run pod's verdict, read from its log, merged into one
report — and every node the DaemonSet should cover accounted for.

Pure parts (unit-tested without a cluster): :class:`PodState` (what the API says about one
pod), :func:`judge_node` (its log and state -> a :class:`NodeOutcome`: judged, or the
reason it was not), :func:`expected_nodes` (which nodes the DaemonSet must cover: its
nodeSelector and tolerations against the nodes' labels and taints), :func:`merge` (the
outcomes -> results and run metadata of one kgc-verdict/1). A node whose pod is missing,
pending, crashed, still running or printed no valid verdict gets an ``error`` for every
check of the node layers, naming the reason: never dropped, never a pass.

A verdict counts for a node only when it is that node's, by identity: the pod that printed
it runs on the node (``spec.nodeName``), printed that name (``KGC-NODE``, from the downward
API), read a kernel whose boot id is the one the node's kubelet reports
(``status.nodeInfo.bootID``; ``KGC-HOST``), finished (an exit status of 0 or 1 before the
block, not marked incomplete), judged something (``results: []`` is what a ``-k`` that
matches nothing writes) and names only this node in its results and ``run.targets``; and no
other node's pod read the same kernel. A judged node whose verdict lacks a check that
another node judged gets an ``error`` for that check.

:func:`gather` reads the cluster (DaemonSet, nodes, pods, logs); :func:`collect` waits,
bounded, until every node printed its verdict, then merges; :func:`write_report` writes
``verdict.json`` (``kgc gate`` reads it) and ``allure-results/`` (``kgc report`` builds the
HTML from it).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgc import __version__
from kgc.core import report
from kgc.core.layer import Scope
from kgc.core.registry import catalogue, load_layers
from kgc.fleet import protocol
from kgc.fleet.manifests import FLEET_LABEL, HOST_ROOT, HOST_SCRATCH, REPORT_DIR
from kgc.gate.gate import VerdictError, parse_verdict

# taints the DaemonSet controller tolerates on its own (it adds these tolerations)
DAEMONSET_TOLERATED = frozenset({
    "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable",
    "node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/pid-pressure", "node.kubernetes.io/unschedulable",
    "node.kubernetes.io/network-unavailable",
})
CheckInfo = tuple[str, str, str, str]  # id, layer, title, severity


@dataclass(frozen=True)
class PodState:
    """What the API says about one node-run pod (plain data, from :func:`pod_state`)."""

    name: str
    node: str
    phase: str = ""
    restarts: int = 0
    waiting: str = ""  # reason: message
    terminated: str = ""  # reason (exit N): message
    last_terminated: str = ""
    unschedulable: str = ""

    def describe(self) -> str:
        parts = [f"pod {self.name} {self.phase or 'unknown phase'}"]
        if self.unschedulable:
            parts.append(f"not scheduled: {self.unschedulable}")
        if self.waiting:
            parts.append(f"waiting {self.waiting}")
        if self.terminated:
            parts.append(f"terminated {self.terminated}")
        if self.restarts:
            parts.append(f"{self.restarts} restart(s)"
                         + (f", last: {self.last_terminated}" if self.last_terminated else ""))
        return ", ".join(parts)


@dataclass
class NodeOutcome:
    node: str
    pod: str = ""
    problem: str = ""  # empty: judged
    run: protocol.HostRun | None = None
    verdict: dict[str, Any] | None = None
    state: str = ""

    @property
    def judged(self) -> bool:
        return not self.problem and self.verdict is not None


@dataclass(frozen=True)
class NodeInfo:
    """What the API says about one node: its scheduling facts and what its kubelet reports
    about the host (``status.nodeInfo``: the kernel's boot id, ``/etc/machine-id``)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    boot_id: str = ""
    machine_id: str = ""


# -- pure -----------------------------------------------------------------------------------
def _tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, str]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if op == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if op == "Equal" and t.get("key") == taint.get("key") and \
                (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def expected_nodes(nodes: Iterable[NodeInfo], node_selector: Mapping[str, str] | None,
                   tolerations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The nodes a DaemonSet with this nodeSelector and these tolerations runs a pod on
    (NoSchedule/NoExecute taints must be tolerated; PreferNoSchedule does not keep it off)."""
    out = []
    for n in nodes:
        if any(n.labels.get(k) != v for k, v in (node_selector or {}).items()):
            continue
        hard = [t for t in n.taints if t.get("effect") in ("NoSchedule", "NoExecute")
                and t.get("key") not in DAEMONSET_TOLERATED]
        if all(_tolerates(tolerations, t) for t in hard):
            out.append(n.name)
    return sorted(out)


def _valid_verdict(text: str, where: str) -> tuple[dict[str, Any] | None, str]:
    try:
        doc = parse_verdict(text.encode("utf-8", "replace"), where)
    except VerdictError as exc:
        return None, str(exc)
    if doc.incomplete:
        return None, f"{where}: the node's run did not finish (verdict marked incomplete)"
    return json.loads(text), ""


# pytest's exit statuses that mean the run did not finish judging (OK and TESTS_FAILED are
# kgc's 0 certified / 1 not certified)
_PYTEST_EXIT = {2: "interrupted", 3: "internal error", 4: "usage error",
                5: "no tests collected"}


def judge_node(node: str, pod: PodState | None, log: str | None,
               info: NodeInfo | None = None) -> NodeOutcome:
    """One node: its pod's state and log -> judged (with its verdict) or the reason not.
    ``info`` (the Node object) lets the host's identity be checked against the kubelet's."""
    if pod is None:
        return NodeOutcome(node, problem=f"no kgc node-run pod on node {node} (the DaemonSet "
                           "did not place one: nodeSelector, taints, or the pod was deleted)")
    out = NodeOutcome(node, pod=pod.name, state=pod.describe())
    parsed = protocol.parse_node_log(log or "")
    out.run = parsed
    if parsed.done and parsed.verdict is not None:
        doc, err = _valid_verdict(parsed.verdict_text, f"verdict of pod {pod.name}")
        if doc is not None:
            err = _not_this_nodes(node, pod.name, parsed, doc, info)
        if not err:
            out.verdict = doc
            return out
        out.problem = err
        return out
    if parsed.errors:
        out.problem = f"{pod.name}: {parsed.errors[-1]}"
    elif parsed.done:
        out.problem = f"{pod.name}: {parsed.verdict_error}"
    elif log is None:
        out.problem = f"{out.state}; its log could not be read"
    elif parsed.verdict_error:
        out.problem = f"{out.state}; {parsed.verdict_error}"
    elif parsed.exit_code is not None:
        out.problem = f"{out.state}; pytest exited {parsed.exit_code} but no verdict followed"
    elif pod.phase == "Running" and not pod.waiting and not pod.terminated:
        out.problem = f"{out.state}; the node layers have not finished (no verdict printed yet)"
    else:
        out.problem = out.state + ("; no verdict in its log" if parsed.node else
                                   "; the node-run never started")
    return out


def _not_this_nodes(node: str, pod: str, run: protocol.HostRun, doc: Mapping[str, Any],
                    info: NodeInfo | None) -> str:
    """Why a valid verdict printed by ``pod`` (on ``node``) does not judge ``node``; '' when
    it does."""
    who = f"pod {pod} on node {node}"
    if not run.node:
        return f"{who} printed no node name (no {protocol.NODE} line): not a kgc node-run log"
    if run.node != node:
        return (f"{who} printed {protocol.NODE} {run.node}: its verdict is not this node's "
                "(KGC_NODE_NAME must come from the downward API, spec.nodeName)")
    if run.mode != "live":
        return (f"{who} saw no running kernel under its host mount ({protocol.MODE} "
                f"{run.mode or 'missing'}): it judged files, not the running node")
    if run.exit_code is None:
        return f"{who} printed no exit status ({protocol.EXIT}) before its verdict: unfinished"
    if run.exit_code not in (0, 1):
        return (f"{who}: pytest exited {run.exit_code} "
                f"({_PYTEST_EXIT.get(run.exit_code, 'not 0 or 1')}): the run did not finish")
    rows = [r for r in doc.get("results", []) if isinstance(r, Mapping)]
    if not rows:
        return (f"{who} printed a verdict with no results: nothing was judged (a -m/-k "
                "selection that matches no check?)")
    others = sorted({str(r.get("target")) for r in rows} - {node})
    if others:
        return (f"{who} printed a verdict that judges {', '.join(map(repr, others))}: "
                f"not node {node}")
    targets = doc.get("run", {}).get("targets")
    if targets != [node]:
        return f"{who} printed a verdict whose run.targets is {targets!r}, not [{node!r}]"
    if info is not None and info.boot_id:
        seen = run.host.get("boot_id", "")
        if not seen:
            return (f"{who} printed no host boot id ({protocol.HOST}): which kernel it read "
                    f"cannot be told; node {node}'s kubelet reports boot id {info.boot_id}")
        if seen != info.boot_id:
            return (f"{who} read a kernel with boot id {seen}, but node {node}'s kubelet "
                    f"reports boot id {info.boot_id}: the verdict is not from this node's "
                    "running kernel (a pod under Kata? the node rebooted since?)")
    return ""


def check_distinct_hosts(outcomes: Sequence[NodeOutcome]) -> None:
    """Judged nodes whose pods read the same kernel (one boot id): none of their verdicts
    can be told apart, so each becomes an error naming the others."""
    by_boot: dict[str, list[NodeOutcome]] = {}
    for o in outcomes:
        boot = o.run.host.get("boot_id", "") if o.run is not None else ""
        if o.judged and boot:
            by_boot.setdefault(boot, []).append(o)
    for boot, same in by_boot.items():
        if len(same) > 1:
            names = ", ".join(sorted(o.node for o in same))
            for o in same:
                o.problem = (f"the same host (boot id {boot}) answered for nodes {names}: "
                             "their verdicts cannot be told apart")
                o.verdict = None


def _node_error(node: str, o: NodeOutcome, check: CheckInfo, ns: str,
                reason: str = "") -> dict[str, Any]:
    cid, layer, title, sev = check
    look = (f"kubectl -n {ns} logs {o.pod}" if o.pod
            else f"kubectl -n {ns} get daemonset,pods -o wide")
    return {
        "check": cid, "layer": layer, "title": title, "severity": sev, "target": node,
        "status": "error",
        "reason": reason or f"node {node} was not judged: {o.problem}",
        "remediation": f"Find out why the node's kgc pod gave no verdict ({look}; "
                       f"kubectl -n {ns} describe pod), fix it, and collect again.",
        "expected": None, "found": None, "origin": "live", "simulated": False,
        "simulated_why": "", "category": "environment",
        "evidence": {"pod": o.pod, "pod_state": o.state, "problem": o.problem or reason},
    }


# run fields the merged verdict computes itself; every other field of the node runs (the
# gate's selection, the profile's digest ...) is copied when all judged nodes agree on it
_MERGED_RUN = frozenset({"kind", "started_at", "finished_at", "kgc_version", "profile",
                         "profile_source", "targets", "layers", "layers_judged", "scope",
                         "command", "environment", "fleet"})
# differ from node to node by nature: kept per node (run.fleet.nodes[n].run) only
_PER_NODE_RUN = frozenset({"duration_s", "pytest_exit"})


def _merge_selection(sels: Sequence[Any], nodes: Sequence[str]) -> dict[str, Any] | None:
    """The node runs' ``run.selection`` (kgc.core.report.run_identity) as one: the same -m
    and -k on every node (else None: not one selection), every node of the fleet as a node
    target, the union of the layers any node left out and of each node's checks not run.
    None when a node recorded none (the gate refuses such a verdict)."""
    if not sels or not all(isinstance(x, Mapping) for x in sels):
        return None
    for key in ("markers", "keywords"):
        if len({json.dumps(x.get(key)) for x in sels}) != 1:
            return None
    targets: dict[str, Any] = {}
    not_run: dict[str, Any] = {}
    left: list[Any] = []
    for x in sels:
        targets.update(x.get("targets") or {})
        for t, checks in (x.get("checks_not_run") or {}).items():
            not_run[t] = sorted({*not_run.get(t, []), *checks})
        left += [n for n in x.get("layers_not_selected") or [] if n not in left]
    targets.update({n: "node" for n in nodes})
    return {**sels[0], "targets": dict(sorted(targets.items())), "layers_not_selected": left,
            "checks_not_run": dict(sorted(not_run.items()))}


def _same_run_fields(runs: Sequence[Mapping[str, Any]],
                     nodes: Sequence[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """(fields every run carries with one value, fields the runs disagree on). The
    selection is merged (:func:`_merge_selection`); a profile digest the nodes disagree on
    becomes ``""``, which the gate refuses."""
    keys = {k for r in runs for k in r} - _MERGED_RUN - _PER_NODE_RUN
    agreed: dict[str, Any] = {}
    disagree = []
    for k in sorted(keys):
        vals = {json.dumps(r.get(k, None), sort_keys=True, default=str) for r in runs}
        if k == "selection":
            sel = _merge_selection([r.get(k) for r in runs], nodes)
            if sel is not None:
                agreed[k] = sel
                continue
        elif len(vals) == 1 and all(k in r for r in runs):
            agreed[k] = runs[0][k]
            continue
        disagree.append(k)
        if k == "profile_digest":
            agreed[k] = ""
    return agreed, disagree


def merge(outcomes: Sequence[NodeOutcome], checks: Sequence[CheckInfo], *,
          namespace: str, daemonset: str,
          layer_order: Sequence[str] = ()) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every node's results, and an ``error`` per node-layer check for every node that was
    not judged (and per check a judged node lacks that another judged); with the run
    metadata of the merged verdict, whose ``targets`` are every node of ``outcomes``."""
    check_distinct_hosts(outcomes)
    judged = [o for o in outcomes if o.judged]
    runs = [o.verdict.get("run", {}) for o in judged if o.verdict]
    selected = {x for r in runs for x in r.get("layers", [])}
    order = list(layer_order) or sorted({c[1] for c in checks})
    wanted = [c for c in checks if not selected or c[1] in selected]
    # every check some judged node has a result for, and who judged it
    seen: dict[str, tuple[CheckInfo, list[str]]] = {}
    for o in judged:
        for r in (o.verdict or {}).get("results", []):
            c = (str(r["check"]), str(r["layer"]), str(r.get("title") or ""),
                 str(r.get("severity") or ""))
            seen.setdefault(c[0], (c, []))[1].append(o.node)
    results: list[dict[str, Any]] = []
    fleet_nodes: dict[str, Any] = {}
    env: dict[str, str] = {}
    for o in sorted(outcomes, key=lambda x: x.node):
        info: dict[str, Any] = {"pod": o.pod, "judged": o.judged, "state": o.state}
        if o.run is not None:
            info.update(mode=o.run.mode, exit_code=o.run.exit_code, host=dict(o.run.host),
                        printed_node=o.run.node,
                        writable_host_mounts=o.run.writable_host_mounts(
                            HOST_ROOT, (HOST_ROOT + REPORT_DIR, HOST_SCRATCH)))
        if o.judged and o.verdict:
            rows = [dict(r) for r in o.verdict["results"]]
            results += rows
            have = {r["check"] for r in rows}
            for cid, (c, by) in sorted(seen.items()):
                if cid not in have:
                    results.append(_node_error(o.node, o, c, namespace, reason=(
                        f"node {o.node}: {cid} is absent from its verdict, while "
                        f"{', '.join(by[:3])}{' ...' if len(by) > 3 else ''} judged it "
                        "(deselected on this node, or its run stopped early)")))
            env.update({k: str(v) for k, v in (o.verdict["run"].get("environment") or {}).items()
                        if k.startswith(f"{o.node}.") or k.startswith(f"{o.node}:")})
            info["overall"] = o.verdict.get("overall")
            info["run"] = {k: v for k, v in o.verdict["run"].items() if k != "environment"}
        else:
            info["problem"] = o.problem
            results += [_node_error(o.node, o, c, namespace) for c in wanted]
        fleet_nodes[o.node] = info
    layers = sorted(selected or {c[1] for c in wanted}, key=_rank(order))
    judged_layers = sorted({r["layer"] for r in results if r["status"] != "skip"},
                           key=_rank(order))
    profiles = sorted({str(r.get("profile")) for r in runs if r.get("profile")})
    sources = sorted({str(r.get("profile_source")) for r in runs if r.get("profile_source")})
    starts = sorted(str(r["started_at"]) for r in runs if r.get("started_at"))
    agreed, disagree = _same_run_fields(runs, [o.node for o in outcomes])
    run = {
        **agreed,
        "kind": "fleet",
        "started_at": starts[0] if starts else time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                              time.gmtime()),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kgc_version": __version__,
        "profile": ", ".join(profiles),
        "profile_source": ", ".join(sources),
        "targets": sorted(o.node for o in outcomes),
        "layers": layers,
        "layers_judged": judged_layers,
        "scope": report.scope_note(layers, judged_layers, list(order)),
        "command": ["kgc", "fleet", "collect", "--namespace", namespace, "--name", daemonset],
        "environment": {"kgc": __version__, **env},
        "fleet": {"namespace": namespace, "daemonset": daemonset,
                  "nodes_judged": len(judged),
                  "nodes_expected": len(outcomes), "disagree": disagree,
                  "nodes": fleet_nodes},
    }
    return results, run


def _rank(order: Sequence[str]) -> Any:
    idx = {n: i for i, n in enumerate(order)}
    return lambda x: (idx.get(x, len(idx)), x)


def node_checks() -> tuple[list[CheckInfo], list[str]]:
    """The node layers' checks (the catalogue) and every layer in report order."""

    layers = load_layers()
    node = {n: lay for n, lay in layers.items() if lay.scope is Scope.NODE}
    return ([(c.id, c.layer, c.title, str(c.severity)) for c in catalogue(node)],
            list(layers))


# -- the cluster ----------------------------------------------------------------------------
def pod_state(pod: Any) -> PodState:
    st = pod.status
    cs = (st.container_statuses or [None])[0] if st else None
    waiting = terminated = last = ""
    if cs is not None and cs.state is not None:
        if cs.state.waiting:
            w = cs.state.waiting
            waiting = f"{w.reason or ''}: {w.message or ''}".strip(": ")
        if cs.state.terminated:
            t = cs.state.terminated
            terminated = (f"{t.reason or ''} (exit {t.exit_code})"
                          + (f": {' '.join(str(t.message).split())[:300]}" if t.message else ""))
    if cs is not None and cs.last_state is not None and cs.last_state.terminated:
        t = cs.last_state.terminated
        last = (f"{t.reason or ''} (exit {t.exit_code})"
                + (f": {' '.join(str(t.message).split())[:300]}" if t.message else ""))
    unsched = ""
    for c in (st.conditions or []) if st else []:
        if c.type == "PodScheduled" and c.status != "True":
            unsched = f"{c.reason or ''}: {c.message or ''}".strip(": ")
    return PodState(name=pod.metadata.name, node=pod.spec.node_name or "",
                    phase=(st.phase if st else "") or "",
                    restarts=int(cs.restart_count or 0) if cs is not None else 0,
                    waiting=waiting, terminated=terminated, last_terminated=last,
                    unschedulable=unsched)


@dataclass
class Gathered:
    expected: list[str]
    pods: dict[str, PodState]  # node -> its pod (the newest when there are several)
    logs: dict[str, str | None]  # pod name -> log (None: unreadable)
    unplaced: list[PodState]  # pods not (yet) on any node
    nodes: dict[str, NodeInfo] = field(default_factory=dict)  # every node the API listed


def node_info(k: Any, n: Any) -> NodeInfo:
    """A Node object -> NodeInfo (labels, taints, the kubelet's boot id and machine id)."""
    ni = n.status.node_info if n.status is not None else None
    return NodeInfo(n.metadata.name, dict(n.metadata.labels or {}),
                    tuple(k.api.sanitize_for_serialization(t)
                          for t in ((n.spec.taints if n.spec else None) or [])),
                    boot_id=str(getattr(ni, "boot_id", "") or ""),
                    machine_id=str(getattr(ni, "machine_id", "") or ""))


def gather(k: Any, namespace: str, name: str) -> Gathered:
    """Read the DaemonSet, the nodes, its pods and their logs (KubeError / ApiException)."""
    ds = k.call("get", f"daemonsets/{name}", k.apps.read_namespaced_daemon_set, name,
                namespace)
    tmpl = ds.spec.template.spec
    tol = [k.api.sanitize_for_serialization(t) for t in (tmpl.tolerations or [])]
    nodes = [node_info(k, n) for n in k.call("list", "nodes", k.core.list_node).items]
    expected = expected_nodes(nodes, tmpl.node_selector, tol)
    sel = ",".join(f"{a}={b}" for a, b in (ds.spec.selector.match_labels or
                                           {FLEET_LABEL: name}).items())
    pods = k.call("list", "pods", k.core.list_namespaced_pod, namespace,
                  label_selector=sel).items
    by_node: dict[str, PodState] = {}
    unplaced = []
    for p in sorted(pods, key=lambda p: p.metadata.creation_timestamp or 0):
        s = pod_state(p)
        if s.node:
            by_node[s.node] = s
        else:
            unplaced.append(s)
    logs: dict[str, str | None] = {}
    from kubernetes.client.rest import ApiException

    for s in by_node.values():
        try:
            logs[s.name] = k.call("get", "pods/log", k.core.read_namespaced_pod_log, s.name,
                                  namespace, _request_timeout=60)
        except ApiException:
            logs[s.name] = None
    return Gathered(expected, by_node, logs, unplaced, {n.name: n for n in nodes})


def outcomes_of(g: Gathered) -> list[NodeOutcome]:
    nodes = sorted(set(g.expected) | set(g.pods))
    out = [judge_node(n, g.pods.get(n), g.logs.get(g.pods[n].name) if n in g.pods else None,
                      g.nodes.get(n))
           for n in nodes]
    check_distinct_hosts(out)
    if g.unplaced:
        why = "; ".join(s.describe() for s in g.unplaced[:3])
        for o in out:
            if o.pod == "" and why:
                o.problem += f" (unplaced pods: {why})"
    return out


def collect(k: Any, namespace: str, name: str, wait_s: float = 0.0,
            interval_s: float = 5.0) -> list[NodeOutcome]:
    """Gather; with ``wait_s``, wait (bounded) until every expected node printed a verdict
    or its pod failed for good, and report what is there when the wait runs out."""
    # startup: kgc.kube loads the Kubernetes client (~1 s), which only cluster work needs
    from kgc.kube import NotYet, WaitTimeout, wait_for

    def settled() -> Any:
        outs = outcomes_of(gather(k, namespace, name))
        open_ = [o for o in outs if not o.judged and _may_still_finish(o)]
        return outs if outs and not open_ else NotYet([f"{o.node}: {o.problem}"
                                                       for o in open_] or "no node yet")

    if wait_s > 0:
        try:
            return list(wait_for(f"every {name} pod's verdict", settled, wait_s, interval_s))
        except WaitTimeout:
            pass
    return outcomes_of(gather(k, namespace, name))


def _may_still_finish(o: NodeOutcome) -> bool:
    """A pod still starting or still judging (not one that crashed or printed an error)."""
    if o.run is not None and (o.run.errors or o.run.done):
        return False
    bad = ("CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff", "InvalidImageName",
           "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
           "Error (exit", "Completed (exit")
    return not any(b in o.state for b in bad)


# -- outputs ----------------------------------------------------------------------------------
_ALLURE = {"pass": "passed", "warn": "passed", "fail": "failed", "error": "broken",
           "skip": "skipped"}


def allure_result(r: Mapping[str, Any], at_ms: int) -> dict[str, Any]:
    """One Allure result for one verdict (the labels the pytest plugin gives its results)."""
    hid = hashlib.md5(f"{r['target']}::{r['check']}".encode(), usedforsecurity=False).hexdigest()
    labels = [{"name": n, "value": v} for n, v in report.layer_labels(r["layer"])]
    labels += [{"name": "feature", "value": r["check"]},
               {"name": "story", "value": r.get("title") or r["check"]},
               {"name": "parentSuite", "value": r["target"]},
               {"name": "severity", "value": r["severity"]}, {"name": "tag", "value": r["status"]},
               {"name": "tag", "value": f"origin:{r.get('origin', 'live')}"},
               {"name": "tag", "value": "fleet"}]
    if r.get("category"):
        labels.append({"name": "kgc_category", "value": r["category"]})
    desc = (f"**{r.get('title', '')}**\n\nTarget: `{r['target']}`\n\nStatus: **{r['status']}** — "
            f"{r['reason']}" + (f"\n\nRemediation:\n\n```\n{r['remediation']}\n```"
                                if r.get("remediation") else ""))
    out: dict[str, Any] = {
        "uuid": str(uuid.uuid4()), "historyId": hid, "testCaseId": hid,
        "name": f"{r['check']} — {r.get('title', '')} [{r['target']}]",
        "fullName": f"kgc.fleet.{r['target']}.{r['check']}", "status": _ALLURE[r["status"]],
        "stage": "finished", "start": at_ms, "stop": at_ms, "labels": labels,
        "description": desc,
    }
    if r["status"] in ("fail", "error"):
        out["statusDetails"] = {"message": r["reason"]}
    return out


def write_report(report_dir: Path, results: list[dict[str, Any]],
                 run: Mapping[str, Any]) -> Path:
    """verdict.json and allure-results/ (one result per verdict) under ``report_dir``."""
    allure = report_dir / "allure-results"
    allure.mkdir(parents=True, exist_ok=True)
    for old in allure.glob("*-result.json"):
        old.unlink()
    now = int(time.time() * 1000)
    for r in results:
        doc = allure_result(r, now)
        (allure / f"{doc['uuid']}-result.json").write_text(json.dumps(doc))
    report.write_allure_environment(allure, run.get("environment") or {})
    report.write_allure_categories(allure)
    return report.write_verdict_json(report_dir / "verdict.json", results, run)
