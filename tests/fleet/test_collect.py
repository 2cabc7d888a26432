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
from kgc.core.profile import load_profile
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
    layers = ["iommu", "vfio", "persistence"]
    run = {"profile": "lab", "profile_source": "lab", "targets": [node],
           "layers": layers, "layers_judged": layers,
           "started_at": "2025-01-01T00:00:00Z", "environment": {f"{node}.kernel": "6.1"},
           # what the plugin records (kgc.core.report.run_identity): the gate reads these
           **report.run_identity(load_profile("lab"), {node: "node"}, layers, results,
                                 markers="host")}
    return json.dumps({"schema": report.SCHEMA, "run": run, "overall": status,
                       "overall_reason": why, "incomplete": False,
                       "counts": report.counts(results), "results": results}, indent=1)


def boot_id(node: str) -> str:
    return f"{abs(hash(node)) % 10**8:08d}-0000-4000-8000-000000000000"


def log_of(node: str, verdict: str, *, printed_node: str | None = None,
           boot: str | None = None, exit_line: str | None = f"{protocol.EXIT} 0") -> str:
    return "\n".join([f"{protocol.NODE} {printed_node or node}",
                      f"{protocol.HOST} boot_id={boot or boot_id(node)} machine_id=m-{node} "
                      f"hostname={node}",
                      f"{protocol.MODE} live",
                      f"{protocol.MOUNT} /host ro,relatime", "....ss.. [100%]",
                      *([exit_line] if exit_line else []), protocol.BEGIN, verdict,
                      protocol.END])


def info(node: str, boot: str | None = None) -> fc.NodeInfo:
    """The Node object as the kubelet reports it (status.nodeInfo.bootID, machineID)."""
    return fc.NodeInfo(node, {"kgc.io/certify": "true"}, boot_id=boot or boot_id(node),
                       machine_id=f"m-{node}")


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


# -- every node is accounted for by its identity (issue 21, item 2) ---------------------------
def with_results(verdict: str, rows: list[dict[str, Any]] | None = None,
                 **run: Any) -> str:
    doc = json.loads(verdict)
    if rows is not None:
        doc["results"] = rows
        doc["counts"] = report.counts(rows)
        doc["overall"], doc["overall_reason"] = report.overall_and_reason(rows)
    doc["run"].update(run)
    return json.dumps(doc)


def test_a_verdict_with_no_results_is_not_a_judged_node() -> None:
    """`pytest -m host -k <typo>` writes results: [] and exit 0: nothing was judged."""
    o = fc.judge_node("a", pod("a"), log_of("a", with_results(node_verdict("a"), [])),
                      info("a"))
    assert not o.judged and "no results" in o.problem, o.problem


def test_a_verdict_naming_another_node_is_not_this_nodes() -> None:
    o = fc.judge_node("a", pod("a"), log_of("a", node_verdict("b")), info("a"))
    assert not o.judged and "'b'" in o.problem and "node a" in o.problem, o.problem
    # its run.targets say a, its results judge b
    o = fc.judge_node("a", pod("a"), log_of("a", with_results(node_verdict("b"),
                                                                targets=["a"])), info("a"))
    assert not o.judged and "judges 'b'" in o.problem, o.problem
    # the results name the node, but the run's targets do not
    o = fc.judge_node("a", pod("a"), log_of("a", with_results(node_verdict("a"),
                                                                targets=["a", "b"])), info("a"))
    assert not o.judged and "run.targets" in o.problem, o.problem
    # the pod printed another node's name than the API placed it on
    o = fc.judge_node("a", pod("a"), log_of("a", node_verdict("a"), printed_node="b"), info("a"))
    assert not o.judged and "KGC-NODE b" in o.problem, o.problem
    o = fc.judge_node("a", pod("a"), "\n".join(log_of("a", node_verdict("a")).splitlines()[1:]),
                      info("a"))
    assert not o.judged and "no node name" in o.problem, o.problem


def test_the_host_must_be_the_node_the_kubelet_reports() -> None:
    """The pod read a kernel whose boot id is not the one the node's kubelet reports (a pod
    under Kata, a stale log, a verdict pasted from another host): not this node's verdict."""
    o = fc.judge_node("a", pod("a"), log_of("a", node_verdict("a"), boot="x-1"), info("a"))
    assert not o.judged and "boot id x-1" in o.problem and boot_id("a") in o.problem
    no_host = "\n".join(ln for ln in log_of("a", node_verdict("a")).splitlines()
                        if not ln.startswith(protocol.HOST))
    o = fc.judge_node("a", pod("a"), no_host, info("a"))
    assert not o.judged and "printed no host boot id" in o.problem, o.problem
    assert fc.judge_node("a", pod("a"), log_of("a", node_verdict("a")), info("a")).judged


def test_an_unfinished_run_is_not_judged() -> None:
    v = node_verdict("a")
    for exit_line, needle in ((None, "no exit status"), (f"{protocol.EXIT} 2", "exited 2"),
                              (f"{protocol.EXIT} 5", "exited 5")):
        o = fc.judge_node("a", pod("a"), log_of("a", v, exit_line=exit_line), info("a"))
        assert not o.judged and needle in o.problem, (needle, o.problem)
    # a pod that saw no running kernel under its mounts judged files, not the node
    offline = log_of("a", v).replace(f"{protocol.MODE} live", f"{protocol.MODE} offline")
    o = fc.judge_node("a", pod("a"), offline, info("a"))
    assert not o.judged and "no running kernel" in o.problem, o.problem


def test_one_host_answering_for_two_nodes_is_an_error_on_both(tmp_path: Path) -> None:
    outs = [fc.judge_node("a", pod("a"), log_of("a", node_verdict("a"))),
            fc.judge_node("b", pod("b"), log_of("b", node_verdict("b"), boot=boot_id("a"))),
            fc.judge_node("c", pod("c"), log_of("c", node_verdict("c")))]
    fc.check_distinct_hosts(outs)
    assert [o.judged for o in outs] == [False, False, True]
    assert all("the same host" in o.problem for o in outs[:2])


def test_a_node_whose_verdict_lacks_checks_others_judged_is_an_error_there(
        tmp_path: Path) -> None:
    a = json.loads(node_verdict("a"))["results"]
    outs = [fc.judge_node("a", pod("a"), log_of("a", node_verdict("a"))),
            fc.judge_node("b", pod("b"), log_of("b", with_results(
                node_verdict("b"), [dict(r, target="b") for r in a
                                    if r["check"] != "vfio.host-kept"])))]
    doc = merged(tmp_path, outs)
    rows = {(r["target"], r["check"]): r for r in doc["results"]}
    assert rows[("b", "vfio.host-kept")]["status"] == "error"
    assert "absent from its verdict" in rows[("b", "vfio.host-kept")]["reason"]
    assert doc["overall"] == "fail"


def test_one_judged_node_of_three_never_gates_green(tmp_path: Path) -> None:
    """The reproduction: a good verdict on a, `results: []` on b, node a's verdict printed by
    c's pod. Every node-layer check of b and c is an error naming why; the gate blocks."""
    outs = [fc.judge_node("a", pod("a"), log_of("a", node_verdict("a")), info("a")),
            fc.judge_node("b", pod("b"), log_of("b", with_results(node_verdict("b"), [])),
                          info("b")),
            fc.judge_node("c", pod("c"), log_of("c", node_verdict("a")), info("c"))]
    doc = merged(tmp_path, outs)
    assert doc["overall"] == "fail" and doc["run"]["targets"] == ["a", "b", "c"]
    assert doc["run"]["fleet"]["nodes_judged"] == 1
    for node, needle in (("b", "no results"), ("c", "'a'")):
        rows = [r for r in doc["results"] if r["target"] == node]
        assert {r["layer"] for r in rows} == {"iommu", "vfio", "persistence"}
        assert rows and all(r["status"] == "error" and needle in r["reason"] for r in rows)
    gate = subprocess.run([sys.executable, "-m", "kgc.cli", "gate", "--json", "--profile", "lab",
                           str(tmp_path / "verdict.json")],
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 1, gate.stdout + gate.stderr


def test_the_merged_run_copies_the_fields_the_nodes_agree_on(tmp_path: Path) -> None:
    """Fields the node runs carry and the fleet does not compute are copied when every
    judged node has the same value, else named in run.fleet.disagree; the gate's selection
    (kgc.core.report.run_identity) is merged: one -m/-k, every fleet node a node target,
    each node's checks not run; a profile digest the nodes disagree on becomes "" (refused
    by the gate)."""
    def sel(n: str) -> dict[str, Any]:
        return {"markers": "host", "keywords": "", "targets": {n: "node"},
                "layers_not_selected": ["gpu", "sizing"],
                "checks_not_run": {n: ["reboot.returned"]} if n == "b" else {}}

    outs = [fc.judge_node(n, pod(n), log_of(n, with_results(
        node_verdict(n), selection=sel(n), profile_digest=d, ssh_host_keys="strict",
        duration_s=len(n) * 3.5)))
        for n, d in (("a", "sha256:1"), ("b", "sha256:1"), ("c", "sha256:1"))]
    doc = merged(tmp_path, [*outs, fc.judge_node("d", None, None)])
    assert doc["run"]["profile_digest"] == "sha256:1" and doc["run"]["ssh_host_keys"] == "strict"
    assert doc["run"]["selection"] == {
        "markers": "host", "keywords": "", "layers_not_selected": ["gpu", "sizing"],
        "targets": {"a": "node", "b": "node", "c": "node", "d": "node"},
        "checks_not_run": {"b": ["reboot.returned"]}}
    assert doc["run"]["fleet"]["disagree"] == [] and "duration_s" not in doc["run"]
    assert doc["run"]["fleet"]["nodes"]["b"]["run"]["duration_s"] == 3.5
    # one node judged with another profile, one with another -k
    outs = [fc.judge_node(n, pod(n), log_of(n, with_results(
        node_verdict(n), selection={**sel(n), "keywords": k}, profile_digest=d)))
        for n, d, k in (("a", "sha256:1", ""), ("b", "sha256:2", "not vfio"))]
    doc = merged(tmp_path, outs)
    assert doc["run"]["profile_digest"] == ""
    assert "selection" not in doc["run"]
    assert doc["run"]["fleet"]["disagree"] == ["profile_digest", "selection"]
    assert doc["run"]["fleet"]["nodes"]["b"]["run"]["profile_digest"] == "sha256:2"


# -- the live path: what the cluster says -> outcomes ----------------------------------------
class FakeKube:
    """Just enough of kgc.kube.Kube for gather(): typed objects from the kubernetes client's
    models, calls passed through."""

    def __init__(self, nodes: list[Any], pods: list[Any], logs: dict[str, str],
                 ds: Any) -> None:
        from kubernetes import client

        self.api = client.ApiClient()
        self._nodes, self._pods, self._logs, self._ds = nodes, pods, logs, ds
        self.apps = self
        self.core = self

    def call(self, verb: str, what: str, fn: Any, *args: Any, **kw: Any) -> Any:
        return fn(*args, **kw)

    def read_namespaced_daemon_set(self, name: str, ns: str) -> Any:
        return self._ds

    def list_node(self) -> Any:
        from kubernetes import client

        return client.V1NodeList(items=self._nodes)

    def list_namespaced_pod(self, ns: str, label_selector: str = "") -> Any:
        from kubernetes import client

        assert label_selector == "kgc.io/fleet=kgc-node"
        return client.V1PodList(items=self._pods)

    def read_namespaced_pod_log(self, name: str, ns: str, **kw: Any) -> str:
        return self._logs[name]


def fake_cluster(names: tuple[str, ...], with_pod: tuple[str, ...]) -> FakeKube:
    from kubernetes import client as c

    ds = c.V1DaemonSet(metadata=c.V1ObjectMeta(name="kgc-node"), spec=c.V1DaemonSetSpec(
        selector=c.V1LabelSelector(match_labels={"kgc.io/fleet": "kgc-node"}),
        template=c.V1PodTemplateSpec(spec=c.V1PodSpec(
            containers=[], node_selector={"kgc.io/certify": "true"},
            tolerations=[c.V1Toleration(key="nvidia.com/gpu", operator="Exists",
                                        effect="NoSchedule")]))))
    nodes = [c.V1Node(metadata=c.V1ObjectMeta(name=n, labels={"kgc.io/certify": "true"}),
                      spec=c.V1NodeSpec(),
                      status=c.V1NodeStatus(node_info=c.V1NodeSystemInfo(
                          boot_id=boot_id(n), machine_id=f"m-{n}", architecture="amd64",
                          container_runtime_version="", kernel_version="",
                          kube_proxy_version="", kubelet_version="", operating_system="linux",
                          os_image="", system_uuid="")))
             for n in names]
    nodes.append(c.V1Node(metadata=c.V1ObjectMeta(name="not-selected"), spec=c.V1NodeSpec()))
    pods = [c.V1Pod(metadata=c.V1ObjectMeta(name=f"kgc-node-{n}"),
                    spec=c.V1PodSpec(node_name=n, containers=[]),
                    status=c.V1PodStatus(phase="Running"))
            for n in with_pod]
    logs = {f"kgc-node-{n}": log_of(n, node_verdict(n)) for n in with_pod}
    return FakeKube(nodes, pods, logs, ds)


def test_expected_nodes_without_a_pod_are_errors_on_the_live_path(tmp_path: Path) -> None:
    """The DaemonSet should reach a, b and c; only a has a pod: b and c are errors in the
    merged verdict, listed in run.targets, and the fleet is not certified."""
    k = fake_cluster(("a", "b", "c"), with_pod=("a",))
    g = fc.gather(k, "kgc-system", "kgc-node")
    assert g.expected == ["a", "b", "c"] and set(g.pods) == {"a"}
    assert g.nodes["a"].boot_id == boot_id("a")
    outs = fc.collect(k, "kgc-system", "kgc-node")
    assert [(o.node, o.judged) for o in outs] == [("a", True), ("b", False), ("c", False)]
    assert all("no kgc node-run pod on node" in o.problem for o in outs[1:])
    doc = merged(tmp_path, outs)
    assert doc["run"]["targets"] == ["a", "b", "c"] and doc["overall"] == "fail"
    assert {r["status"] for r in doc["results"] if r["target"] in ("b", "c")} == {"error"}


def test_a_live_pod_whose_host_is_not_its_node_is_an_error() -> None:
    k = fake_cluster(("a", "b"), with_pod=("a", "b"))
    k._logs["kgc-node-b"] = log_of("b", node_verdict("b"), boot=boot_id("a"))
    outs = fc.collect(k, "kgc-system", "kgc-node")
    assert [o.judged for o in outs] == [True, False]
    assert "boot id" in outs[1].problem, outs[1].problem


def test_a_fleet_of_good_nodes_gates_green_with_the_nodes_digest_and_selection(
        tmp_path: Path) -> None:
    """The positive side of the gate's new refusals: node verdicts as the plugin writes them
    (profile digest + selection) merge into a verdict the gate accepts — the merge keeps the
    digest and the selection, so a fleet is not refused as 'written before kgc recorded …'.
    Gated under the lab profile with a node-files policy (policy is not in the digest)."""
    import yaml

    outs = [fc.judge_node(n, pod(n), log_of(n, node_verdict(n)), info(n)) for n in "abc"]
    doc = merged(tmp_path, outs)
    assert doc["overall"] == "pass", doc["overall_reason"]
    assert doc["run"]["profile_digest"] == report.profile_digest(load_profile("lab"))
    assert doc["run"]["selection"]["targets"] == {"a": "node", "b": "node", "c": "node"}
    base = yaml.safe_load((REPO / "profiles" / "lab.yaml").read_text())
    base["policy"] = {"require_layers": ["iommu", "vfio", "persistence"]}
    prof = tmp_path / "lab-node-files.yaml"
    prof.write_text(yaml.safe_dump(base, sort_keys=False))
    gate = subprocess.run([sys.executable, "-m", "kgc.cli", "gate", "--json", "--profile",
                           str(prof), str(tmp_path / "verdict.json")],
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 0, gate.stdout + gate.stderr
    # and one node's verdict dropped from the merge (its pod printed nothing) is red again
    outs[2] = fc.judge_node("c", pod("c"), "", info("c"))
    merged(tmp_path, outs)
    gate = subprocess.run([sys.executable, "-m", "kgc.cli", "gate", "--json", "--profile",
                           str(prof), str(tmp_path / "verdict.json")],
                          capture_output=True, text=True, timeout=120)
    assert gate.returncode == 1, gate.stdout + gate.stderr
