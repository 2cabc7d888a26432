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
    host = [m for m in c["volumeMounts"] if m["mountPath"].startswith("/host")]
    writable = {"/host/tmp"}  # the scratch emptyDir lsinitramfs unpacks into
    assert all(m["readOnly"] for m in host if m["mountPath"] not in writable), host
    vols = {v["name"]: v for v in spec["volumes"]}
    for m in host:
        hp = vols[m["name"]].get("hostPath")
        if hp and hp["type"] == "Directory":
            assert m["recursiveReadOnly"] == "Enabled", m
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


PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))
# what a fleet pod must never see (the issue's list): none of these is at or under a mount
SECRET_PATHS = ("/", "/var", "/var/lib/kubelet", "/var/lib/kubelet/pods", "/var/lib/containerd",
                "/var/lib/etcd", "/root", "/home", "/srv", "/mnt", "/tmp", "/proc")


def _host_view(ds: dict) -> tuple[dict[str, str], list[str]]:
    """(host path -> hostPath type, paths under /host covered by a mask) of a DaemonSet."""
    spec = ds["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    mounted, masked = {}, []
    for m in spec["containers"][0]["volumeMounts"]:
        v = vols[m["name"]]
        if not m["mountPath"].startswith("/host/"):
            continue
        under = m["mountPath"][len("/host"):]
        if "hostPath" in v and v["hostPath"]["path"] == under:
            mounted[under] = v["hostPath"]["type"]
        elif under != "/tmp":
            masked.append(under)
    return mounted, masked


def test_the_pod_mounts_only_the_host_paths_the_node_layers_read() -> None:
    """Derived again from what the collector reads: every path of every shipped profile's
    node query (and every path its commands name) is under a mounted host path or listed as
    not mounted with its reason; nothing the pod must not see is mounted; every hostPath
    names its type, so a path the node lacks is never created on it."""
    import re

    from kgc.core.engine import host_query
    from kgc.core.layer import Scope
    from kgc.core.profile import load_profile
    from kgc.core.registry import load_layers

    ds = fm.fleet_daemonset()
    mounted, masked = _host_view(ds)
    assert set(mounted) == {h.path for h in fm.HOST_PATHS}
    assert all(t in ("Directory", "File", "CharDevice") for t in mounted.values())
    for bad in SECRET_PATHS:  # no mount is the path or a directory above it
        assert not any(fm._under(bad, m) for m in mounted), bad
    assert {"/etc/kubernetes", "/etc/ssh", "/etc/shadow", "/dev/shm"} <= set(masked)
    node = {n: lay for n, lay in load_layers().items() if lay.scope is Scope.NODE}
    for prof in PROFILES:
        q = host_query(node, load_profile(prof))
        assert fm.uncovered([*q.files, *q.links, *q.dirs, *q.stats]) == [], prof
        named = {m for _, cmd in q.commands for m in re.findall(
            r'(?:\$R|[\s"\'])(/(?:proc|sys|etc|boot|lib|usr|var|dev|run|opt|efi)[\w.*/-]*)', cmd)}
        assert named and fm.uncovered(named) == [], (prof, fm.uncovered(named))
    # the mounts are what the list says, parents before the masks over them
    paths = [m["mountPath"] for m in ds["spec"]["template"]["spec"]["containers"][0]
             ["volumeMounts"]]
    assert paths.index("/host/etc") < paths.index("/host/etc/kubernetes")


def test_a_query_path_outside_the_mounts_is_named() -> None:
    assert fm.uncovered(["/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
                         "/etc/kubernetes/pki/ca.key", "/etc/modprobe.d/*.conf",
                         "/efi/loader/entries/*.conf"]) == [
        "/etc/kubernetes/pki/ca.key", "/var/lib/rancher/k3s/agent/etc/containerd/config.toml"]
    assert "/lib64/ld-linux-x86-64.so.2" in fm.uncovered(["/lib64/ld-linux-x86-64.so.2"],
                                                         lib64=False)


def test_the_image_is_referenced_by_digest() -> None:
    docs = [d for d in yaml.safe_load_all((REPO / "deploy/fleet/daemonset.yaml").read_text())
            if d]
    image = docs[2]["spec"]["template"]["spec"]["containers"][0]["image"]
    assert fm.pinned_image(image) == image and "@sha256:" in image
    plugin = yaml.safe_load((REPO / "deploy/sonobuoy/kgc-node-plugin.yaml").read_text())
    assert "@sha256:" in plugin["spec"]["image"]
    for bad in ("localhost/kata-gpu-conformance:0.1.0", "kgc", "kgc@sha256:abc",
                "kgc:1@sha256:" + "A" * 64, ""):
        try:
            fm.fleet_daemonset(bad)
        except fm.ManifestError as exc:
            assert "not pinned by digest" in str(exc)
        else:
            raise AssertionError(f"{bad!r} accepted")
    good = "registry.example/kgc:0.1.0@sha256:" + "a" * 64
    assert fm.fleet_daemonset(good)["spec"]["template"]["spec"]["containers"][0]["image"] == good


def test_a_tag_only_image_or_an_uncovered_profile_is_refused_in_one_line(tmp_path) -> None:
    prof = tmp_path / "k3s.yaml"
    text = (REPO / "profiles" / "lab.yaml").read_text()
    prof.write_text(text.replace("runtime:", "runtime:\n  containerd_config: "
                                 "/var/lib/rancher/k3s/agent/etc/containerd/config.toml", 1)
                    if "runtime:" in text else text + "\nruntime:\n  containerd_config: "
                    "/var/lib/rancher/k3s/agent/etc/containerd/config.toml\n")
    for args, needle in ((["--image", "localhost/kata-gpu-conformance:0.1.0"], "digest"),
                         (["--profile", str(prof)], "/var/lib/rancher"),
                         (["--mask", "/root"], "--mask")):
        p = subprocess.run([sys.executable, "-m", "kgc.cli", "fleet", "manifests", *args],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stdout == "", (args, p.stdout[:300], p.stderr)
        assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr, p.stderr
