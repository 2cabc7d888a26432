"""``kgc fleet collect``'s merge, pinned field by field (issue 21: the mutation figure of
fleet.merge). The other fleet tests prove behaviour on real node verdicts; these state the
whole output of :func:`kgc.fleet.collect.merge` and :func:`_node_error` for small made-up
fleets, so a changed word, key, order or count in what the gate and the HTML read fails here.
"""

from __future__ import annotations

from typing import Any

from kgc import __version__
from kgc.fleet import collect as fc
from kgc.fleet import protocol

CHECKS = [("iommu.enabled", "iommu", "IOMMU on", "blocker"),
          ("vfio.driver", "vfio", "bound to vfio-pci", "blocker"),
          ("runtime.config", "runtime", "containerd config", "major")]
ORDER = ["iommu", "vfio", "runtime"]


def row(node: str, check: str, status: str = "pass") -> dict[str, Any]:
    layer = check.split(".")[0]
    title, sev = {c[0]: (c[2], c[3]) for c in CHECKS}[check]
    return {"check": check, "layer": layer, "title": title, "severity": sev,
            "target": node, "status": status, "reason": f"{check} on {node}"}


def verdict(node: str, checks: list[str], **run: Any) -> dict[str, Any]:
    return {"overall": "pass", "results": [row(node, c) for c in checks],
            "run": {"profile": "lab", "profile_source": "built-in lab",
                    "layers": ["iommu", "vfio"], **run}}


def test_node_error_names_the_node_the_problem_and_the_pod_to_read() -> None:
    o = fc.NodeOutcome("n1", pod="kgc-node-n1", problem="pod kgc-node-n1 Failed",
                       state="Failed")
    assert fc._node_error("n1", o, CHECKS[0], "kgc-system") == {
        "check": "iommu.enabled", "layer": "iommu", "title": "IOMMU on",
        "severity": "blocker", "target": "n1", "status": "error",
        "reason": "node n1 was not judged: pod kgc-node-n1 Failed",
        "remediation": "Find out why the node's kgc pod gave no verdict (kubectl -n "
                       "kgc-system logs kgc-node-n1; kubectl -n kgc-system describe pod), "
                       "fix it, and collect again.",
        "expected": None, "found": None, "origin": "live", "simulated": False,
        "simulated_why": "", "category": "environment",
        "evidence": {"pod": "kgc-node-n1", "pod_state": "Failed",
                     "problem": "pod kgc-node-n1 Failed"}}


def test_node_error_without_a_pod_lists_the_daemonset_and_keeps_a_given_reason() -> None:
    o = fc.NodeOutcome("n2")
    e = fc._node_error("n2", o, CHECKS[1], "ns1", reason="node n2: vfio.driver is absent")
    assert e["reason"] == "node n2: vfio.driver is absent"
    assert e["remediation"] == (
        "Find out why the node's kgc pod gave no verdict (kubectl -n ns1 get daemonset,pods "
        "-o wide; kubectl -n ns1 describe pod), fix it, and collect again.")
    assert e["evidence"] == {"pod": "", "pod_state": "", "problem":
                             "node n2: vfio.driver is absent"}
    assert (e["check"], e["layer"], e["title"], e["severity"], e["target"]) == (
        "vfio.driver", "vfio", "bound to vfio-pci", "blocker", "n2")


def fleet() -> list[fc.NodeOutcome]:
    printed = protocol.HostRun(done=True, exit_code=1, node="a-printed", mode="live",
                               host={"boot_id": "boot-a"},
                               mounts={"/host": "ro,relatime", "/host/var/lib/kgc/report": "rw",
                                       "/host/tmp": "rw", "/host/etc": "rw", "/proc": "rw"})
    a = fc.NodeOutcome("a", pod="kgc-node-a", state="Succeeded", run=printed, verdict=verdict(
        "a", ["iommu.enabled", "vfio.driver"], started_at="2025-01-02T00:00:00Z",
        environment={"a.kernel": "6.1", "a:boot": "x", "b.kernel": "forged by a", "z": "1"},
        ssh="strict", only_a=1, duration_s=3.0))
    b = fc.NodeOutcome("b", pod="kgc-node-b", state="Succeeded", verdict=verdict(
        "b", ["iommu.enabled"], started_at="2025-01-01T00:00:00Z",
        environment={"b.kernel": "6.12"}, ssh="strict", duration_s=9.0))
    # c printed a verdict but was found wanting (e.g. another node's): never merged as judged
    c = fc.NodeOutcome("c", pod="kgc-node-c", problem="pod kgc-node-c CrashLoopBackOff",
                       state="Running", verdict=verdict("c", ["iommu.enabled"]))
    return [c, a, b]  # merge orders by node name


def test_merge_states_every_result_in_node_order() -> None:
    results, _ = fc.merge(fleet(), CHECKS, namespace="kgc-system", daemonset="kgc-node",
                          layer_order=ORDER)
    got = [(r["target"], r["check"], r["status"], r["reason"]) for r in results]
    assert got == [
        ("a", "iommu.enabled", "pass", "iommu.enabled on a"),
        ("a", "vfio.driver", "pass", "vfio.driver on a"),
        ("b", "iommu.enabled", "pass", "iommu.enabled on b"),
        ("b", "vfio.driver", "error",
         "node b: vfio.driver is absent from its verdict, while a judged it (deselected on "
         "this node, or its run stopped early)"),
        # runtime: not among the layers the judged nodes ran, so no error for it on c
        ("c", "iommu.enabled", "error", "node c was not judged: pod kgc-node-c "
                                        "CrashLoopBackOff"),
        ("c", "vfio.driver", "error", "node c was not judged: pod kgc-node-c CrashLoopBackOff"),
    ]
    assert results[3]["title"] == "bound to vfio-pci" and results[3]["severity"] == "blocker"
    assert results[3]["evidence"]["pod"] == "kgc-node-b"
    for r in results[3:]:  # the namespace of the run's pods, in each error's remedy
        assert "kubectl -n kgc-system logs kgc-node-" in r["remediation"], r["remediation"]


def test_merge_states_the_fleet_run() -> None:
    _, run = fc.merge(fleet(), CHECKS, namespace="kgc-system", daemonset="kgc-node",
                      layer_order=ORDER)
    assert run.pop("finished_at").endswith("Z")
    nodes = run["fleet"].pop("nodes")
    assert run == {
        "ssh": "strict",
        "kind": "fleet",
        "started_at": "2025-01-01T00:00:00Z",
        "kgc_version": __version__,
        "profile": "lab",
        "profile_source": "built-in lab",
        "targets": ["a", "b", "c"],
        "layers": ["iommu", "vfio"],
        "layers_judged": ["iommu", "vfio"],
        "scope": "for iommu, vfio only (not judged: runtime)",
        "command": ["kgc", "fleet", "collect", "--namespace", "kgc-system", "--name",
                    "kgc-node"],
        # each node's own environment entries only: a's "b.kernel" is not b's
        "environment": {"kgc": __version__, "a.kernel": "6.1", "a:boot": "x",
                        "b.kernel": "6.12"},
        "fleet": {"namespace": "kgc-system", "daemonset": "kgc-node", "nodes_judged": 2,
                  "nodes_expected": 3, "disagree": ["only_a"]},
    }
    assert nodes["c"] == {"pod": "kgc-node-c", "judged": False, "state": "Running",
                          "problem": "pod kgc-node-c CrashLoopBackOff"}
    # what a's pod printed about itself, and the host mounts it had writable (its report
    # directory and scratch excepted)
    assert {k: nodes["a"][k] for k in ("mode", "exit_code", "host", "printed_node",
                                        "writable_host_mounts")} == {
        "mode": "live", "exit_code": 1, "host": {"boot_id": "boot-a"},
        "printed_node": "a-printed", "writable_host_mounts": ["/host/etc"]}
    assert "mode" not in nodes["b"]  # b's pod log was not parsed into a HostRun here
    assert nodes["a"]["judged"] is True and nodes["a"]["overall"] == "pass"
    assert nodes["a"]["state"] == "Succeeded" and nodes["a"]["pod"] == "kgc-node-a"
    assert "environment" not in nodes["a"]["run"] and nodes["a"]["run"]["duration_s"] == 3.0
    assert nodes["b"]["run"]["started_at"] == "2025-01-01T00:00:00Z"
    assert list(nodes) == ["a", "b", "c"]


def test_merge_without_a_judged_node_errors_every_check_and_names_no_profile() -> None:
    results, run = fc.merge([fc.NodeOutcome("x", problem="no kgc node-run pod")], CHECKS,
                            namespace="n", daemonset="d", layer_order=ORDER)
    assert [(r["target"], r["check"], r["status"]) for r in results] == [
        ("x", c[0], "error") for c in CHECKS]
    assert run["profile"] == "" and run["profile_source"] == ""
    assert run["layers"] == ORDER and run["layers_judged"] == ORDER
    assert run["scope"] == "for every layer"
    assert run["fleet"]["nodes_judged"] == 0 and run["fleet"]["disagree"] == []


def test_merge_without_a_layer_order_sorts_the_layers_by_name() -> None:
    _, run = fc.merge([fc.NodeOutcome("x", problem="p")], CHECKS, namespace="n",
                      daemonset="d")
    assert run["layers"] == ["iommu", "runtime", "vfio"]
    assert run["scope"] == "for every layer"  # the order is the checks' layers, not titles


def test_a_row_without_title_or_severity_gives_empty_ones_to_the_node_that_lacks_it() -> None:
    bare = {k: v for k, v in row("a", "vfio.driver").items() if k not in ("title", "severity")}
    a = fc.NodeOutcome("a", verdict={**verdict("a", ["iommu.enabled"]),
                                     "results": [row("a", "iommu.enabled"), bare]})
    b = fc.NodeOutcome("b", verdict=verdict("b", ["iommu.enabled"]))
    results, _ = fc.merge([a, b], CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    miss = [r for r in results if r["target"] == "b" and r["status"] == "error"]
    assert [(r["check"], r["title"], r["severity"]) for r in miss] == [("vfio.driver", "", "")]


def test_a_layer_with_only_skips_is_not_judged() -> None:
    a = fc.NodeOutcome("a", verdict={**verdict("a", []), "results": [
        row("a", "iommu.enabled"), row("a", "vfio.driver", "skip")]})
    _, run = fc.merge([a], CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    assert run["layers"] == ["iommu", "vfio"] and run["layers_judged"] == ["iommu"]
    assert run["scope"] == "for iommu only (not judged: vfio, runtime)"


def test_a_run_without_layers_wants_every_check() -> None:
    a = fc.NodeOutcome("a", verdict={**verdict("a", ["iommu.enabled"]),
                                     "run": {"profile": "lab"}})
    results, run = fc.merge([a, fc.NodeOutcome("b", problem="p")], CHECKS, namespace="n",
                            daemonset="d", layer_order=ORDER)
    assert [r["check"] for r in results if r["target"] == "b"] == [c[0] for c in CHECKS]
    assert run["layers"] == ["iommu", "vfio", "runtime"]


def test_many_judges_are_cut_to_three_names() -> None:
    three = [fc.NodeOutcome(n, verdict=verdict(n, ["iommu.enabled", "vfio.driver"]))
             for n in ("a", "b", "c")]
    results, _ = fc.merge([*three, fc.NodeOutcome("e", verdict=verdict("e", ["iommu.enabled"]))],
                          CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    assert [r["reason"] for r in results if r["status"] == "error"] == [
        "node e: vfio.driver is absent from its verdict, while a, b, c judged it "
        "(deselected on this node, or its run stopped early)"]
    outs = [fc.NodeOutcome(n, verdict=verdict(n, ["iommu.enabled", "vfio.driver"]))
            for n in ("a", "b", "c", "d")]
    outs.append(fc.NodeOutcome("e", verdict=verdict("e", ["iommu.enabled"])))
    results, _ = fc.merge(outs, CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    miss = [r for r in results if r["target"] == "e" and r["status"] == "error"]
    assert [r["reason"] for r in miss] == [
        "node e: vfio.driver is absent from its verdict, while a, b, c ... judged it "
        "(deselected on this node, or its run stopped early)"]


# -- a sample (100, seed `s27`, stop 27) of judge_node, merge and their helpers ------------------
def test_a_pod_whose_pytest_did_not_finish_is_named_with_the_exit_status() -> None:
    from .test_collect import info, log_of, node_verdict, pod

    v = node_verdict("a")
    for line, why in ((f"{protocol.EXIT} 2", "2 (interrupted)"),
                      (f"{protocol.EXIT} 7", "7 (not 0 or 1)")):
        o = fc.judge_node("a", pod("a"), log_of("a", v, exit_line=line), info("a"))
        assert o.problem == f"pod kgc-node-a on node a: pytest exited {why}: the run did not finish"
    o = fc.judge_node("a", pod("a"), log_of("a", v, printed_node="b"), info("a"))
    assert o.problem == ("pod kgc-node-a on node a printed KGC-NODE b: its verdict is not this "
                         "node's (KGC_NODE_NAME must come from the downward API, "
                         "spec.nodeName)")
    # an exit status without a verdict after it
    cut = log_of("a", v).split(protocol.BEGIN, 1)[0]
    o = fc.judge_node("a", pod("a"), cut, info("a"))
    assert not o.judged
    assert o.problem == f"{o.state}; pytest exited 0 but no verdict followed"
    # the verdict's own error is prefixed with where it came from
    o = fc.judge_node("a", pod("a"), log_of("a", '{"schema": "x"}'), info("a"))
    assert o.problem.startswith("verdict of pod kgc-node-a: not a kgc verdict"), o.problem


def test_the_selection_is_not_merged_when_a_node_recorded_none() -> None:
    sel = {"markers": "host", "keywords": "", "targets": {"a": "node"},
           "layers_not_selected": [], "checks_not_run": {}}
    assert fc._merge_selection([sel, None], ["a", "b"]) is None
    a = fc.NodeOutcome("a", verdict=verdict("a", ["iommu.enabled"], selection=sel))
    b = fc.NodeOutcome("b", verdict=verdict("b", ["iommu.enabled"], selection=None))
    _, run = fc.merge([a, b], CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    assert "selection" not in run and run["fleet"]["disagree"] == ["selection"]


def test_run_fields_equal_up_to_key_order_are_one() -> None:
    a = fc.NodeOutcome("a", verdict=verdict("a", ["iommu.enabled"], ssh={"x": 1, "y": 2}))
    b = fc.NodeOutcome("b", verdict=verdict("b", ["iommu.enabled"], ssh={"y": 2, "x": 1}))
    _, run = fc.merge([a, b], CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    assert run["ssh"] == {"x": 1, "y": 2} and run["fleet"]["disagree"] == []


def test_a_layer_outside_the_order_comes_after_the_ordered_ones() -> None:
    a = fc.NodeOutcome("a", verdict=verdict("a", ["iommu.enabled"], layers=["nri", "iommu"]))
    _, run = fc.merge([a], CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    assert run["layers"] == ["iommu", "nri"]


def test_the_fleet_run_times_are_utc(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import re
    import time
    from datetime import UTC, datetime

    monkeypatch.setenv("TZ", "Asia/Kolkata")  # +05:30: a local time would be 5.5 h off
    time.tzset()
    try:
        _, run = fc.merge([fc.NodeOutcome("x", problem="p")], CHECKS, namespace="n",
                          daemonset="d", layer_order=ORDER)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    now = datetime.now(UTC)
    for k in ("started_at", "finished_at"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run[k]), run[k]
        t = datetime.strptime(run[k], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        assert abs((now - t).total_seconds()) < 120, (k, run[k])


# -- a second sample (100, seed `wt3-unseen-a`) -------------------------------------------------
def test_why_a_valid_verdict_is_not_this_nodes_in_words() -> None:
    import json

    from .test_collect import boot_id, info, log_of, node_verdict, pod, with_results

    v = node_verdict("a")
    who = "pod kgc-node-a on node a"
    no_mode = "\n".join(ln for ln in log_of("a", v).splitlines()
                        if not ln.startswith(protocol.MODE))
    o = fc.judge_node("a", pod("a"), no_mode, info("a"))
    assert o.problem == (f"{who} saw no running kernel under its host mount (KGC-MODE "
                         "missing): it judged files, not the running node")
    rows = [dict(r, target=t) for r, t in zip(json.loads(v)["results"][:2], ("c", "b"),
                                               strict=True)]
    o = fc.judge_node("a", pod("a"), log_of("a", with_results(v, rows, targets=["a"])),
                      info("a"))
    assert o.problem == f"{who} printed a verdict that judges 'b', 'c': not node a"
    o = fc.judge_node("a", pod("a"), log_of("a", v, boot="x-1"), info("a"))
    assert o.problem == (f"{who} read a kernel with boot id x-1, but node a's kubelet reports "
                         f"boot id {boot_id('a')}: the verdict is not from this node's running "
                         "kernel (a pod under Kata? the node rebooted since?)")


def test_a_pod_that_is_not_running_and_printed_nothing_never_started() -> None:
    from .test_collect import pod

    p = pod("a", phase="Pending")
    o = fc.judge_node("a", p, "pulling image ...")
    assert o.problem == "pod kgc-node-a Pending; the node-run never started"
    o = fc.judge_node("a", p, f"{protocol.NODE} a\n")
    assert o.problem == "pod kgc-node-a Pending; no verdict in its log"


def test_nodes_judged_against_different_profiles_name_both() -> None:
    a = fc.NodeOutcome("a", verdict=verdict("a", ["iommu.enabled"]))
    b = fc.NodeOutcome("b", verdict={**verdict("b", ["iommu.enabled"]),
                                     "run": {"profile": "strict", "profile_source": "file x",
                                             "layers": ["iommu"]}})
    _, run = fc.merge([a, b], CHECKS, namespace="n", daemonset="d", layer_order=ORDER)
    assert run["profile"] == "lab, strict"
    assert run["profile_source"] == "built-in lab, file x"
