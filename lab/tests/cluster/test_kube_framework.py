"""kgc.kube against the real cluster lab: a run's namespace and labelled objects (also
cluster-scoped ones) are gone after the run — also after SIGTERM and after a run that was
killed outright (cleanup by label); the pod watcher's phases come in the kubelet's order
with the API's own stamps beside them; the event watcher hears both event APIs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cluster.kubehelp import LabInfo, gpu_pod
from kgc import kube
from kgc.kube import builders

pytestmark = [pytest.mark.lab, pytest.mark.cluster]


def _labelled(k: kube.Kube, selector: str) -> dict[str, list[str]]:
    """What still exists (and is not being deleted) under ``selector``."""
    live = {
        "namespace": [n.metadata.name for n in k.core.list_namespace(label_selector=selector).items
                      if n.metadata.deletion_timestamp is None],
        "runtimeclass": [r.metadata.name for r in
                         k.node.list_runtime_class(label_selector=selector).items],
        "clusterrole": [r.metadata.name for r in
                        k.rbac.list_cluster_role(label_selector=selector).items],
    }
    return {kind: names for kind, names in live.items() if names}


def test_connect_names_the_lab_without_credentials(lab_cluster: LabInfo) -> None:
    k = kube.connect(lab_cluster.kubeconfig)
    assert k.server_version() == "v1.37.2"
    assert (k.context, k.cluster_name) == ("kgc-lab", "kgc-lab")
    assert k.server == lab_cluster.server and k.server.startswith("https://127.0.0.1:")


def test_run_labels_everything_and_takes_it_all_down(lab_cluster: LabInfo) -> None:
    k, cl = lab_cluster.kube, lab_cluster.cluster
    with kube.Run.for_profile(k, cl, teardown_wait_s=60) as run:
        ns = k.core.read_namespace(run.namespace)
        assert ns.metadata.labels[cl.label] == run.run_id
        assert run.namespace.startswith(cl.namespace_prefix)
        run.create(builders.config_map("collector", {"collect.sh": "echo hi\n"}))
        run.create({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                    "metadata": {"name": f"kgc-test-{run.run_id}"},
                    "handler": "kata"})
        run.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": f"kgc-test-{run.run_id}"}, "rules": []})
        gpu = {cl.lab.gpu_resources[0]: 1}
        pod = run.create(builders.pod(
            "gpu", [builders.container("cuda", "registry.invalid/kgc/cuda:lab", requests=gpu,
                                       limits=gpu,
                                       mounts=[builders.volume_mount("collector", "/kgc")])],
            runtime_class=cl.lab.runtime_class,
            volumes=[builders.config_map_volume("collector", "collector")]))
        assert pod["metadata"]["labels"][cl.label] == run.run_id
        cm = k.core.read_namespaced_config_map("collector", run.namespace)
        assert cm.metadata.labels == run.labels
        assert _labelled(k, run.selector) == {
            "namespace": [run.namespace], "runtimeclass": [f"kgc-test-{run.run_id}"],
            "clusterrole": [f"kgc-test-{run.run_id}"]}
        assert run.created == ["namespace/" + run.namespace,
                               f"configmap/{run.namespace}/collector",
                               f"runtimeclass/kgc-test-{run.run_id}",
                               f"clusterrole/kgc-test-{run.run_id}",
                               f"pod/{run.namespace}/gpu"]
    assert sorted(run.removed) == sorted([f"namespace/{run.namespace}",
                                          f"runtimeclass/kgc-test-{run.run_id}",
                                          f"clusterrole/kgc-test-{run.run_id}"])
    assert not [n for n in k.core.list_namespace().items if n.metadata.name == run.namespace]
    assert _labelled(k, run.selector) == {}


def test_run_tears_down_on_an_exception(lab_cluster: LabInfo) -> None:
    k = lab_cluster.kube
    with pytest.raises(RuntimeError, match="boom"), kube.Run(k) as run:
        run.create(builders.config_map("x", {"a": "b"}))
        raise RuntimeError("boom")
    assert _labelled(k, run.selector) == {}


def test_cleanup_removes_what_a_killed_run_left(lab_cluster: LabInfo) -> None:
    """A run that never reached its teardown (SIGKILL) is found by its label."""
    k = lab_cluster.kube
    left = kube.Run(k, label_key="kgc.io/selftest-run")
    left.setup()  # no context manager: nobody will tear this down
    left.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": f"kgc-{left.run_id}"}, "value": 1000})
    with pytest.raises(ValueError):
        kube.cleanup(k, "kgc.io/selftest-run")  # neither a run id nor all_runs
    removed = kube.cleanup(k, "kgc.io/selftest-run", all_runs=True, wait_s=60)
    assert sorted(removed) == [f"namespace/{left.namespace}",
                               f"priorityclass/kgc-{left.run_id}"]
    assert kube.cleanup(k, "kgc.io/selftest-run", all_runs=True) == []


def test_sigterm_tears_the_run_down_before_exiting(lab_cluster: LabInfo, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import sys, time
        from kgc import kube
        k = kube.connect({str(lab_cluster.kubeconfig)!r})
        with kube.Run(k, label_key="kgc.io/sigterm-test") as run:
            run.create({{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                        "metadata": {{"name": "kgc-" + run.run_id}}, "handler": "x"}})
            print(run.run_id, flush=True)
            time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        run_id = proc.stdout.readline().strip()
        assert run_id, "the run did not start"
        k = lab_cluster.kube
        assert _labelled(k, f"kgc.io/sigterm-test={run_id}")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _labelled(k, f"kgc.io/sigterm-test={run_id}") == {}


def test_pod_watcher_sees_the_phases_in_kubelet_order(
    lab_cluster: LabInfo, run: kube.Run, request: pytest.FixtureRequest
) -> None:
    k, cl = lab_cluster.kube, lab_cluster.cluster
    with kube.PodWatcher(k, run.namespace) as pods, kube.EventWatcher(k, run.namespace) as evs:
        run.create(gpu_pod("gpu", cl.lab.gpu_resources[0], cl.lab.runtime_class))
        kube.wait_for_pod(k, run.namespace, "gpu", kube.pod_ready(), 60)
        tl = pods.wait("the watch to see gpu Ready",
                       lambda tls: tls.get("gpu") if tls.get("gpu") and tls["gpu"].ready
                       else None, 30)
        evs.wait("SandboxReady from both event APIs",
                 lambda es: {e.source for e in es if e.reason == "SandboxReady"}
                 == set(kube.EventWatcher.SOURCES), 30)
    assert pods.error is None and evs.error is None
    order = ["created", "scheduled", "sandbox_ready", "initialized", "running:cuda",
             "containers_ready", "ready"]
    assert [p for p in order if p not in tl.seen] == [], tl.seen
    monos = [tl.seen[p].mono for p in order]
    assert monos == sorted(monos), tl.to_dict()
    # the simulated sandbox takes the profile's Kata delay; the client saw it on receipt
    sandbox_s = tl.seen["sandbox_ready"].mono - tl.seen["scheduled"].mono
    assert sandbox_s >= 0.8 * cl.lab.kata_sandbox_delay_ms / 1000, sandbox_s
    request.node.user_properties.append(("watch_sandbox_s", round(sandbox_s, 3)))
    # API stamps (1 s resolution) sit beside the receipt times, never after them
    for phase in ("created", "scheduled", "sandbox_ready", "ready"):
        assert tl.api[phase] <= tl.seen[phase].wall + 1.0, (phase, tl.api, tl.to_dict())
    sandbox_ev = [e for e in evs.events if e.reason == "SandboxReady" and e.name == "gpu"]
    assert {e.source for e in sandbox_ev} == {"core/v1", "events.k8s.io/v1"}
    assert all(e.kind == "Pod" and e.received.wall >= tl.api["created"] for e in sandbox_ev)


def test_waiting_for_ready_on_an_unschedulable_pod_says_why(
    lab_cluster: LabInfo, run: kube.Run
) -> None:
    k, cl = lab_cluster.kube, lab_cluster.cluster
    run.create(builders.pod("greedy", [builders.container(
        "c", "registry.invalid/x", requests={cl.lab.gpu_resources[0]: 1000},
        limits={cl.lab.gpu_resources[0]: 1000})], runtime_class=cl.lab.runtime_class))
    with pytest.raises(kube.WaitTimeout) as err:
        kube.wait_for_pod(k, run.namespace, "greedy", kube.pod_ready(), 5)
    msg = str(err.value)
    assert msg.startswith(f"timed out after 5 s waiting for pod {run.namespace}/greedy Ready")
    assert "PodScheduled=False Unschedulable" in msg and f"Insufficient {cl.lab.gpu_resources[0]}" \
        in msg, msg
