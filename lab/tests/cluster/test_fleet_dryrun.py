"""The fleet's manifests pass a server-side dry-run (``dryRun=All``, strict field
validation) on the lab's real kube-apiserver: every object of deploy/fleet/*.yaml and
deploy/rbac/*.yaml, and the Sonobuoy plugin's pod spec wrapped as the DaemonSet Sonobuoy
makes of it (the plugin file itself is not a Kubernetes object). Lives beside the other
cluster-lab tests to share their one lab per session."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
import yaml
from kubernetes import dynamic
from kubernetes.client.rest import ApiException

from cluster.kubehelp import LabInfo
from conftest import REPO
from kgc.fleet import manifests as fm

pytestmark = [pytest.mark.lab]

FILES = sorted([*(REPO / "deploy" / "fleet").glob("*.yaml"),
                *(REPO / "deploy" / "rbac").glob("*.yaml")])


def _dry_run(dyn: dynamic.DynamicClient, obj: dict[str, Any]) -> Any:
    res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
    ns = obj["metadata"].get("namespace") if res.namespaced else None
    return res.create(body=obj, namespace=ns, dry_run="All",
                      query_params=[("fieldValidation", "Strict")])


def test_every_fleet_and_rbac_object_passes_a_server_side_dry_run(lab_cluster: LabInfo) -> None:
    dyn = dynamic.DynamicClient(lab_cluster.kube.api)
    objs = [d for f in FILES for d in yaml.safe_load_all(f.read_text()) if d]
    objs.append(fm.sonobuoy_as_daemonset(
        yaml.safe_load((REPO / "deploy/sonobuoy/kgc-node-plugin.yaml").read_text())))
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "ServiceAccount", "DaemonSet", "Role", "ClusterRole"} <= kinds
    # Judged under private names, so the dry-run cannot clash with objects another test (or a
    # user) really applied to this cluster (kgc-system, the kgc-certify ClusterRole ...): the
    # namespaced objects go into a namespace of this test, cluster-scoped ones get a suffix.
    tag = uuid.uuid4().hex[:8]
    ns = f"kgc-dryrun-{tag}"
    core = lab_cluster.kube.core
    core.create_namespace({"metadata": {"name": ns, "labels": {"kgc.io/test": "dryrun"}}})
    try:
        refused = {}
        judged = []
        for o in objs:
            o = copy.deepcopy(o)
            res = dyn.resources.get(api_version=o["apiVersion"], kind=o["kind"])
            if res.namespaced:
                o["metadata"]["namespace"] = ns
            else:
                o["metadata"]["name"] += f"-dryrun-{tag}"
            try:
                out = _dry_run(dyn, o)
            except ApiException as exc:
                refused[f"{o['kind']}/{o['metadata']['name']}"] = exc.body
                continue
            judged.append((res, o))
            assert out.metadata.name == o["metadata"]["name"]
            if o["kind"] == "DaemonSet":  # the server kept the read-only settings
                mounts = out.spec.template.spec.containers[0].volumeMounts
                host = [m for m in mounts if m.name.startswith("host-")]
                assert host and all(m.readOnly for m in host)
                assert all(m.recursiveReadOnly == "Enabled" for m in host
                           if not m.mountPath.startswith("/host/proc/"))
        assert not refused, refused
        assert len(judged) == len(objs)
        for res, o in judged:  # a dry run leaves nothing behind
            with pytest.raises(ApiException) as err:
                res.get(name=o["metadata"]["name"],
                        namespace=o["metadata"].get("namespace") if res.namespaced else None)
            assert err.value.status == 404
    finally:
        core.delete_namespace(ns)


def test_a_broken_daemonset_is_refused_by_the_dry_run(lab_cluster: LabInfo) -> None:
    """The dry-run judges: a writable recursive-read-only mount is refused."""
    dyn = dynamic.DynamicClient(lab_cluster.kube.api)
    ds = fm.fleet_daemonset(ns="default")
    ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["readOnly"] = False
    with pytest.raises(ApiException) as err:
        _dry_run(dyn, ds)
    assert err.value.status == 422 and "recursiveReadOnly" in err.value.body
