"""The deploy/ files are the builders' output (one source), and say what the fleet
promises: read-only host mounts, no token, no host PID/network, every object labelled
kgc.io/..., the Sonobuoy worker protocol's settings."""

from __future__ import annotations

import subprocess
import sys

import yaml

from conftest import REPO
from kgc.fleet import manifests as fm


def kgc_out(*args: str) -> str:
    p = subprocess.run([sys.executable, "-m", "kgc.cli", "fleet", "manifests", *args],
                       capture_output=True, text=True, timeout=120, check=True)
    return p.stdout


def test_the_deploy_files_are_the_builders_output() -> None:
    assert (REPO / "deploy/fleet/daemonset.yaml").read_text() == kgc_out()
    assert (REPO / "deploy/fleet/collector-rbac.yaml").read_text() == kgc_out("--rbac")
    assert (REPO / "deploy/sonobuoy/kgc-node-plugin.yaml").read_text() == kgc_out("--sonobuoy")


def test_every_object_is_labelled_and_the_pod_is_read_only() -> None:
    docs = list(yaml.safe_load_all((REPO / "deploy/fleet/daemonset.yaml").read_text()))
    docs += list(yaml.safe_load_all((REPO / "deploy/fleet/collector-rbac.yaml").read_text()))
    docs = [d for d in docs if d]
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "DaemonSet", "Role",
                                         "ClusterRole"]
    for d in docs:
        assert d["metadata"]["labels"]["kgc.io/part-of"] == "kata-gpu-conformance"
    sa = docs[1]
    assert sa["automountServiceAccountToken"] is False
    spec = docs[2]["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    assert not {"hostPID", "hostNetwork", "hostIPC", "runtimeClassName"} & set(spec)
    (c,) = spec["containers"]
    host = [m for m in c["volumeMounts"] if m["name"] == "host"]
    assert host == [{"name": "host", "mountPath": "/host", "readOnly": True,
                     "recursiveReadOnly": "Enabled"}]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["SYS_CHROOT", "DAC_READ_SEARCH"]}
    assert c["args"][:3] == ["node-run", "--host-root", "/host"]
    assert {"name": "KGC_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}
            } in c["env"]
    rules = [r for d in docs[3:] for r in d["rules"]]
    assert {v for r in rules for v in r["verbs"]} == {"get", "list"}


def test_the_sonobuoy_plugin_follows_the_worker_protocol() -> None:
    doc = yaml.safe_load((REPO / "deploy/sonobuoy/kgc-node-plugin.yaml").read_text())
    assert doc["sonobuoy-config"] == {**doc["sonobuoy-config"], "driver": "DaemonSet",
                                      "plugin-name": "kgc-node", "result-format": "junit"}
    spec = doc["spec"]
    assert {"name": "results", "mountPath": "/tmp/sonobuoy/results"} in spec["volumeMounts"]
    assert {"name": "SONOBUOY_RESULTS_DIR", "value": "/tmp/sonobuoy/results"} in spec["env"]
    assert spec["args"][spec["args"].index("--mode") + 1] == "sonobuoy"
    assert doc["podSpec"]["containers"] == []  # Sonobuoy adds its worker
    ds = fm.sonobuoy_as_daemonset(doc)
    vols = {v["name"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert {m["name"] for m in spec["volumeMounts"]} <= vols


def test_manifests_refuse_bad_input_in_one_line() -> None:
    p = subprocess.run([sys.executable, "-m", "kgc.cli", "fleet", "manifests",
                        "--node-selector", "novalue"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 2 and p.stdout == "" and len(p.stderr.splitlines()) == 1
