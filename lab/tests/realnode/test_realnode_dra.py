"""Dynamic Resource Allocation on the real node (issue 20 step 5): the real scheduler
allocates a claim against the ResourceSlice the node's DRA kubelet plugin published, the
real kubelet has the plugin prepare it, real containerd applies the plugin's CDI spec to a
runc container, and the kubelet unprepares it when the pod is gone.

The plugin (``kgc-dra-plugin``, driver ``dra.kgc.io``, ``lab/cluster/go/dra``) is built from
``k8s.io/dynamic-resource-allocation`` v0.37.2; its devices are stand-ins (nothing backs
them), everything else on the path is the real component. The product's DRA collector
(``kgc.layers.gpu.collect.preflight`` -> ``kgc.layers.gpu.dra.evidence_from_api``) and its
claim reader (``kgc.layers.gpu.dra_pod.claim_from_api``) then judge the live objects."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.core.model import Status
from kgc.core.profile import GpuRequestPlatform, profiles_dir
from kgc.layers.gpu import CHECKS, collect, dra
from kgc.layers.gpu.dra_pod import claim_from_api
from kgc.layers.gpu.profile import GpuProfile
from kgc_lab.cluster import realnode, realnode_dra
from kgc_lab.cluster.realnode_dra import DEVICE_CLASS, DRIVER, STAND_IN_DEVICES
from kgc_lab.node.kube_image import BUSYBOX_IMAGE
from realnode.conftest import RealLab

pytestmark = [pytest.mark.lab, pytest.mark.slow]

POD_TIMEOUT_S = 420  # pod create -> Running on a TCG node, on a loaded 2-core host
UNPREPARE_TIMEOUT_S = 240


def _dra_pod(name: str, template: str, labels: dict[str, str]) -> dict[str, Any]:
    script = ('env | grep "^KGC_DRA_" | sort; '
              f'for f in {realnode_dra.CONTAINER_DIR}/*.json; do echo "file $f $(cat $f)"; done; '
              "exec sleep 3600")
    pod = kube.builders.pod(
        name, [kube.builders.container("bb", BUSYBOX_IMAGE, command=["/bin/sh", "-c", script],
                                       image_pull_policy="IfNotPresent")],
        labels=labels, runtime_class="runc", termination_grace_period_s=1,
        **realnode.placement())
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return pod


def _profile(node: str) -> GpuProfile:
    """The gpu layer aimed at the real node's DRA driver (claim mode). The node is picked
    by ``kubernetes.io/hostname``: the gpu evidence keeps only GPU and placement labels,
    so a selector on ``kgc.io/real-node`` would match no node."""
    return GpuProfile(request=GpuRequestPlatform(
        mode="claim", device_class=DEVICE_CLASS, driver=DRIVER,
        devices_per_node=STAND_IN_DEVICES), node_selector={"kubernetes.io/hostname": node})


def test_the_node_plugin_published_its_resourceslice_and_kgc_reads_it(
        real_lab: RealLab) -> None:
    k, node = real_lab.kube, real_lab.node_name
    slices = realnode_dra.node_slices(k, node)
    assert len(slices) == 1, slices
    s = slices[0]
    spec = s["spec"]
    assert spec["driver"] == DRIVER and spec["nodeName"] == node
    assert spec["pool"]["name"] == node and spec["pool"]["resourceSliceCount"] == 1
    # published by the plugin on the node (its client's field manager), owned by the Node
    managers = {m["manager"] for m in s["metadata"]["managedFields"]}
    assert managers == {"kgc-dra-plugin"}, managers
    node_uid = k.core.read_node(node).metadata.uid
    assert [(o["kind"], o["name"], o["uid"]) for o in s["metadata"]["ownerReferences"]] == \
        [("Node", node, node_uid)]
    api_devices = {d["name"]: d for d in spec["devices"]}
    assert sorted(api_devices) == [f"gpu-{i}" for i in range(STAND_IN_DEVICES)]
    assert real_lab.ssh(f"systemctl is-active {realnode_dra.UNIT}").split() == ["active"]

    # the premise of "advertised both ways" passing: no test left a stand-in GPU behind
    # (test_real_node's gpu run patches one in and takes it back with drop_stand_in_gpu)
    alloc = k.core.read_node(node).status.allocatable or {}
    assert realnode.STAND_IN_GPU not in alloc, f"a stand-in GPU was left on {node}: {alloc}"

    # the product's collector, live: discovery, DeviceClasses, the driver's slices
    gp = _profile(node)
    ev = collect.preflight(k, gp)
    d = ev.dra
    assert d is not None and d.served and not d.errors, d
    dc = d.device_class(DEVICE_CLASS)
    assert dc is not None and dc.selectors == (f'device.driver == "{DRIVER}"',)
    assert dc.extended_resource_name is None
    mine = dra.slices_of(d, DRIVER)
    assert [(x.name, x.node, x.pool, x.device_count, x.problems) for x in mine] == \
        [(s["metadata"]["name"], node, node, STAND_IN_DEVICES, ())]
    for dev in mine[0].devices:
        raw = api_devices[dev.name or ""]
        attrs = raw["attributes"]
        assert dev.pci_bus_id(DRIVER) == attrs["resource.kubernetes.io/pciBusID"]["string"]
        assert dev.attribute("productName", DRIVER) == attrs["productName"]["string"]
        assert dev.attribute("uuid", DRIVER) == attrs["uuid"]["string"]
        assert dev.attribute("standIn", DRIVER) == "true"  # the plugin says what it is
        assert dev.memory(DRIVER) == raw["capacity"]["memory"]["value"] == "143771Mi"
    assert dra.node_gpus(d, node, DRIVER).keys() == {
        a["attributes"]["resource.kubernetes.io/pciBusID"]["string"]
        for a in api_devices.values()}
    # the DRA preflight checks judge the real node's slice
    for check in (*dra.DRA_CHECKS, "gpu.nodes-advertise"):
        o = CHECKS.get(check).evaluate(ev, gp)
        assert o.status is Status.PASS, (check, o)
    o = CHECKS.get("gpu.dra-slices").evaluate(ev, gp)
    assert f"{node}={STAND_IN_DEVICES}" in o.reason, o.reason


def test_the_real_node_prepares_a_dra_claim_through_its_kubelet(real_lab: RealLab) -> None:
    k, node = real_lab.kube, real_lab.node_name
    res = client.ResourceV1Api(k.api)
    slices = realnode_dra.node_slices(k, node)
    with kube.Run.for_profile(k, real_lab.cluster) as run:
        ns = run.namespace
        run.create(realnode_dra.claim_template_manifest("kgc-dra", ns))
        run.create(_dra_pod("dra", "kgc-dra", run.labels))
        t0 = time.monotonic()
        pod = kube.wait_for_pod(k, ns, "dra", kube.pod_ready(), POD_TIMEOUT_S)
        print(f"DRA pod create -> Running on the TCG node: {time.monotonic() - t0:.1f} s")
        assert pod.spec.node_name == node
        statuses = pod.status.resource_claim_statuses or []
        assert [st.name for st in statuses] == ["gpu"], statuses
        claim_name = statuses[0].resource_claim_name
        claim = k.api.sanitize_for_serialization(
            res.read_namespaced_resource_claim(claim_name, ns))
        uid = claim["metadata"]["uid"]

        # the real scheduler allocated a device of the plugin's pool on this node
        results = realnode_dra.allocation(claim)
        assert len(results) == 1, claim["status"]
        r = results[0]
        assert (r["request"], r["driver"], r["pool"]) == ("gpu", DRIVER, node), r
        dev = r["device"]
        assert dev in {f"gpu-{i}" for i in range(STAND_IN_DEVICES)}
        assert [x["name"] for x in claim["status"]["reservedFor"]] == ["dra"]
        # ... and the product's claim reader says the same, with the slice's attributes
        ce = claim_from_api(claim, slices)
        assert ce.error is None and ce.allocated and ce.node == node, ce
        assert [(x.request, x.driver, x.pool, x.device) for x in ce.results] == \
            [("gpu", DRIVER, node, dev)]
        want = {d["name"]: d for d in slices[0]["spec"]["devices"]}[dev]["attributes"]
        assert ce.device_attributes[dev]["uuid"] == want["uuid"]["string"]
        assert ce.device_attributes[dev]["resource.kubernetes.io/pciBusID"] == \
            want["resource.kubernetes.io/pciBusID"]["string"]

        # the kubelet had the plugin prepare it: its CDI spec, applied by containerd
        spec = json.loads(real_lab.ssh(f"cat {realnode_dra.cdi_spec_path(uid)}"))
        assert spec["kind"] == realnode_dra.CDI_KIND
        assert [d["name"] for d in spec["devices"]] == [f"{uid}-{dev}"]
        log = k.core.read_namespaced_pod_log("dra", ns, container="bb")
        lines = log.splitlines()
        assert f"{realnode_dra.env_name(dev)}={node}/{dev} claim={ns}/{claim_name} uid={uid}" \
            in lines, log
        assert f"KGC_DRA_CLAIM_UID={uid}" in lines, log
        files = [ln.split(" ", 2) for ln in lines if ln.startswith("file ")]
        assert [f[1] for f in files] == [f"{realnode_dra.CONTAINER_DIR}/{dev}.json"], log
        seen = json.loads(files[0][2])
        assert (seen["driver"], seen["pool"], seen["device"], seen["claim"]["uid"],
                seen["uuid"]) == (DRIVER, node, dev, uid, want["uuid"]["string"]), seen

        # the pod gone, the kubelet unprepares the claim: the plugin removes its spec
        t1 = time.monotonic()
        k.core.delete_namespaced_pod("dra", ns, grace_period_seconds=0)
        path = realnode_dra.cdi_spec_path(uid)

        def unprepared() -> Any:
            out = real_lab.ssh(f"test -e {path} && echo present || echo gone; "
                               f"ls {realnode_dra.STATE_DIR}")
            return out.split()[0] == "gone" and uid not in out or kube.NotYet(out)

        kube.wait_for(f"{path} removed on unprepare", unprepared, UNPREPARE_TIMEOUT_S, 2)
        print(f"DRA pod delete -> claim unprepared: {time.monotonic() - t1:.1f} s")
        journal = realnode_dra.plugin_journal(realnode.guest_ssh(real_lab.node), lines=200)
        assert any('"prepared"' in ln and uid in ln for ln in journal.splitlines()), journal
        assert any("unprepared" in ln and uid in ln for ln in journal.splitlines()), journal

        def claim_gone() -> Any:  # the generated claim goes with its pod
            try:
                res.read_namespaced_resource_claim(claim_name, ns)
            except ApiException as exc:
                if exc.status == 404:
                    return True
                raise
            return kube.NotYet(f"claim {claim_name} still there")

        kube.wait_for("the generated claim deleted", claim_gone, 120, 1)


def _claim_profile(path: Path, node: str) -> Path:
    """The lab profile with the gpu layer in claim mode on the real node's DRA driver: runc
    (the node has no Kata), the lab's busybox image (no registry)."""
    doc = yaml.safe_load((profiles_dir() / "lab.yaml").read_text())
    doc["name"] = "lab-real-node-dra"
    doc["platform"] = {**doc["platform"], "kata": {"runtime_class": "runc"}, "gpu": {
        "resources": ["nvidia.com/gpu"],
        "request": {"mode": "claim", "device_class": DEVICE_CLASS, "driver": DRIVER,
                    "devices_per_node": STAND_IN_DEVICES}}}
    doc["cluster"]["keda"]["baseline_runtime_class"] = None
    doc["cluster"]["gpu"].update({
        "require_overhead": False, "image": BUSYBOX_IMAGE,
        "count": 1, "pods_per_node": 1, "max_nodes": 1, "cpu": "100m", "memory": "64Mi",
        # kubernetes.io/hostname: a label the gpu evidence keeps (see _profile)
        "node_selector": {"kubernetes.io/hostname": node},
        "schedule_timeout_s": 300, "start_timeout_s": POD_TIMEOUT_S,
        "collector_timeout_s": 120})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_gpu_layer_in_claim_mode_judges_a_claim_the_real_kubelet_prepared(
        real_lab: RealLab, tmp_path: Path) -> None:
    """The product's whole live run in claim mode (``platform.gpu.request.mode: claim``):
    it creates its ResourceClaimTemplate in the run namespace, its pod lands on the real
    node, the real scheduler allocates and the real kubelet prepares the claim.
    ``gpu.dra-allocation`` passes unmarked (its pod and claim are the real node's); so does
    the DRA preflight's ``gpu.dra-slices`` (under DRA a node verdict rests on the nodes that
    publish devices: the real node only, not the cluster's kwok GPU nodes);
    ``gpu.in-vm`` fails for the true reason (runc, no VM), and ``gpu.dra-device-match`` says
    the sandbox is not a VM instead of blaming Kata's cold-plug gap."""
    k, node = real_lab.kube, real_lab.node_name
    # the run's pods tolerate the GPU taints only: the real-node taint is lifted meanwhile
    k.core.patch_node(node, {"spec": {"taints": None}})
    try:
        res = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "gpu",
             "--kubeconfig", str(real_lab.kubeconfig), "--profile",
             str(_claim_profile(tmp_path / "profile.yaml", node))],
            cwd=tmp_path, capture_output=True, text=True, timeout=1500, check=False)
    finally:
        k.core.patch_node(node, {"spec": {"taints": [realnode.REAL_NODE_TAINT]}})
    doc = json.loads((tmp_path / "reports" / "verdict.json").read_text())
    by = {r["check"]: r for r in doc["results"]}
    print({c: (v["status"], v["reason"][:160]) for c, v in sorted(by.items())})
    for c in (*dra.DRA_CHECKS, "gpu.nodes-advertise", "gpu.pod-runs", "gpu.dra-allocation"):
        assert c in by, res.stdout[-3000:]
        assert by[c]["status"] == "pass", by[c]
    v = by["gpu.dra-allocation"]
    assert f"allocated {DRIVER}/{node}/gpu-" in v["reason"] and f"on {node}" in v["reason"], v
    assert v["simulated"] is False, v  # the pod and its claim are the real node's
    assert by["gpu.dra-slices"]["simulated"] is False, by["gpu.dra-slices"]
    match = by["gpu.dra-device-match"]
    assert match["status"] == "fail" and "not a VM" in match["reason"], match
    assert "13322" not in match["reason"], match
    assert by["gpu.in-vm"]["status"] == "fail", by["gpu.in-vm"]
    assert res.returncode == 1  # not certified: a GPU pod outside a VM
