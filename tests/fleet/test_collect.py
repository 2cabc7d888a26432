"""The collector's pure parts: which nodes a DaemonSet must cover, each node's pod judged
from its state and log, and N nodes merged into one verdict — a crashed, pending, missing or
silent node is an ``error`` naming the reason on every node-layer check, so the merged run
is never certified and ``kgc gate`` blocks on it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from kgc.cli import evaluate_bundles
from kgc.core import report
from kgc.fleet import collect as fc
from kgc.fleet import protocol
from kgc.gate.gate import load_verdict

RUNNING = "Running"


def node_verdict(node: str, bundle: str = "good") -> str:
    """A real kgc-verdict/1 of one node (the lab VM's recorded evidence, judged)."""
    results = evaluate_bundles([str(REPO / "fixtures" / "bundles" / f"{bundle}.json")], "lab",
                               ["iommu", "vfio", "persistence"])
    for r in results:
        r["target"] = node
    status, why = report.overall_and_reason(results)
    run = {"profile": "lab", "profile_source": "lab", "targets": [node],
           "layers": ["iommu", "vfio", "persistence"],
           "layers_judged": ["iommu", "vfio", "persistence"],
           "started_at": "2025-01-01T00:00:00Z", "environment": {f"{node}.kernel": "6.1"}}
    return json.dumps({"schema": report.SCHEMA, "run": run, "overall": status,
                       "overall_reason": why, "incomplete": False,
                       "counts": report.counts(results), "results": results}, indent=1)


def log_of(node: str, verdict: str) -> str:
    return "\n".join([f"{protocol.NODE} {node}", f"{protocol.MODE} live",
                      f"{protocol.MOUNT} /host ro,relatime", "....ss.. [100%]",
                      f"{protocol.EXIT} 0", protocol.BEGIN, verdict, protocol.END])


def pod(node: str, **kw: Any) -> fc.PodState:
    return fc.PodState(name=f"kgc-node-{node}", node=node, phase=kw.pop("phase", RUNNING), **kw)


def test_expected_nodes_follow_the_selector_and_the_taints() -> None:
    nodes = [fc.NodeInfo("a", {"kgc.io/certify": "true"}),
             fc.NodeInfo("b", {"kgc.io/certify": "true"},
                         ({"key": "nvidia.com/gpu", "effect": "NoSchedule"},)),
             fc.NodeInfo("c", {"kgc.io/certify": "true"},
                         ({"key": "dedicated", "value": "x", "effect": "NoExecute"},)),
             fc.NodeInfo("d", {}),
             fc.NodeInfo("e", {"kgc.io/certify": "true"},
                         ({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                          {"key": "soft", "effect": "PreferNoSchedule"}))]
    tol = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert fc.expected_nodes(nodes, {"kgc.io/certify": "true"}, tol) == ["a", "b", "e"]
    assert fc.expected_nodes(nodes, None, [{"operator": "Exists"}]) == list("abcde")


def test_each_pod_state_gives_its_reason() -> None:
    v = node_verdict("a")
    assert fc.judge_node("a", pod("a"), log_of("a", v)).judged
    cases = {
        "no kgc node-run pod on node a": fc.judge_node("a", None, None),
        "CrashLoopBackOff": fc.judge_node("a", pod("a", waiting="CrashLoopBackOff: back-off",
                                                     restarts=4), "Traceback ..."),
        "Unschedulable": fc.judge_node("a", pod("a", phase="Pending",
                                               unschedulable="Unschedulable: 0/3 nodes"), ""),
        "have not finished": fc.judge_node("a", pod("a"), f"{protocol.NODE} a\n.....\n"),
        "log could not be read": fc.judge_node("a", pod("a"), None),
        "profile 'x' not found": fc.judge_node("a", pod("a"),
                                               f"{protocol.ERROR} profile 'x' not found"),
        "unreadable": fc.judge_node("a", pod("a"), log_of("a", "{broken")),
        "not a kgc verdict": fc.judge_node("a", pod("a"), log_of("a", '{"schema": "x"}')),
        "incomplete": fc.judge_node("a", pod("a"), log_of(
            "a", v.replace('"incomplete": false', '"incomplete": true'))),
        "cut off": fc.judge_node("a", pod("a"), log_of("a", v).rsplit(protocol.END, 1)[0]),
    }
    for needle, o in cases.items():
        assert not o.judged and needle in o.problem, (needle, o.problem)


def merged(tmp_path: Path, outcomes: list[fc.NodeOutcome]) -> dict[str, Any]:
    checks, order = fc.node_checks()
    results, run = fc.merge(outcomes, checks, namespace="kgc-system", daemonset="kgc-node",
                            layer_order=order)
    path = fc.write_report(tmp_path, results, run)
    load_verdict(path)  # what kgc gate reads: a valid kgc-verdict/1
    return dict(json.loads(path.read_text()))


def test_n_good_nodes_merge_into_one_certified_report(tmp_path: Path) -> None:
    outs = [fc.judge_node(n, pod(n), log_of(n, node_verdict(n))) for n in ("a", "b", "c")]
    doc = merged(tmp_path, outs)
    assert doc["overall"] == "pass", doc["overall_reason"]
    assert {r["target"] for r in doc["results"]} == {"a", "b", "c"}
    assert doc["run"]["targets"] == ["a", "b", "c"] and doc["run"]["profile"] == "lab"
    assert doc["run"]["layers"] == ["iommu", "vfio", "persistence"]
    assert doc["run"]["fleet"]["nodes_judged"] == 3
    assert doc["run"]["environment"]["b.kernel"] == "6.1"
    per_node = len(json.loads(node_verdict("a"))["results"])
    assert len(list((tmp_path / "allure-results").glob("*-result.json"))) == 3 * per_node


def test_a_crashed_and_a_missing_node_are_errors_and_the_fleet_is_not_certified(
        tmp_path: Path) -> None:
    outs = [fc.judge_node("a", pod("a"), log_of("a", node_verdict("a"))),
            fc.judge_node("b", pod("b", waiting="CrashLoopBackOff: back-off 5m", restarts=6,
                                   last_terminated="Error (exit 2): kgc: profile 'x' not found"),
                          "kgc: profile 'x' not found"),
            fc.judge_node("c", None, None)]
    doc = merged(tmp_path, outs)
    assert doc["overall"] == "fail"
    for node, needle in (("b", "CrashLoopBackOff"), ("c", "no kgc node-run pod")):
        rows = [r for r in doc["results"] if r["target"] == node]
        checks = {r["check"] for r in rows}
        assert rows and all(r["status"] == "error" and needle in r["reason"] for r in rows)
        assert {"iommu.enabled", "vfio.driver", "persistence.coverage"} <= checks
        assert not any(c.startswith("runtime.") for c in checks)  # not selected by the run
        assert all(r["category"] == "environment" for r in rows)
    assert doc["run"]["fleet"]["nodes"]["b"]["problem"].startswith("pod kgc-node-b")
    gate = subprocess.run([sys.executable, "-m", "kgc.cli", "gate", "--json", "--profile", "lab",
                           str(tmp_path / "verdict.json")],
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    blocking = {(f["target"], f["check"]) for f in json.loads(gate.stdout)["blocking"]}
    assert {("b", "iommu.enabled"), ("c", "iommu.enabled")} <= blocking
    # node a's own judged checks pass: only what it left out (runtime, nri...) blocks there
    assert not any(t == "a" and c.split(".")[0] in ("iommu", "vfio", "persistence")
                   for t, c in blocking if c)


def test_no_judged_node_still_errors_every_node_layer_check(tmp_path: Path) -> None:
    doc = merged(tmp_path, [fc.judge_node("a", None, None)])
    assert doc["overall"] == "fail"
    layers = {r["layer"] for r in doc["results"]}
    assert layers == {"iommu", "vfio", "persistence", "reboot", "runtime", "nri"}


def test_collect_refuses_bad_input_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    for args in (["--kubeconfig", str(tmp_path / "nope")], ["--wait", "-1"]):
        p = subprocess.run([sys.executable, "-m", "kgc.cli", "fleet", "collect",
                            "--report-dir", str(out), *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert not out.exists()


@pytest.mark.parametrize("state,still", [
    ("pod x Running", True), ("pod x Pending, waiting ContainerCreating", True),
    ("pod x Running, waiting CrashLoopBackOff: back-off", False),
    ("pod x Pending, waiting ImagePullBackOff: nope", False),
])
def test_the_wait_gives_up_on_pods_that_cannot_finish(state: str, still: bool) -> None:
    assert fc._may_still_finish(fc.NodeOutcome("x", pod="x", problem="p", state=state)) is still
