"""Parts of the cluster lab that need no binaries: manifests from the profile, kwok stage
selection, CRI log framing, the metric endpoint, PKI. Run everywhere (no `lab` marker)."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from kgc.kube import wait_for
from kgc_lab import cluster as labc
from kgc_lab.cluster import pki as cluster_pki
from kgc_lab.cluster.shape import ClusterLabProfile, LabClusterProfile


def test_nodes_carry_gpu_capacity_under_profile_resource_names() -> None:
    cl = LabClusterProfile(lab=ClusterLabProfile(gpu_nodes=3, gpus_per_node=8, cpu_nodes=2))
    nodes = labc.node_manifests(cl)
    gpu = [n for n in nodes if n["metadata"]["labels"]["kgc.io/gpu"] == "true"]
    cpu = [n for n in nodes if n["metadata"]["labels"]["kgc.io/gpu"] == "false"]
    assert len(gpu) == 3 and len(cpu) == 2
    names = [r for n in gpu for r in n["status"]["capacity"] if r.startswith("nvidia.com/")]
    assert set(names) == set(cl.lab.gpu_resources)
    for n in gpu:
        cap, alloc = n["status"]["capacity"], n["status"]["allocatable"]
        assert cap == alloc and any(cap.get(r) == "8" for r in cl.lab.gpu_resources)
    for n in nodes:
        assert n["metadata"]["annotations"][labc.KWOK_ANNOTATION] == "fake"
    assert not any(r.startswith("nvidia.com/") for n in cpu for r in n["status"]["capacity"])


def test_runtime_classes_and_stage_delays_follow_the_profile() -> None:
    cl = LabClusterProfile(
        lab=ClusterLabProfile(kata_runtime_classes=("kata-qemu-nvidia-gpu",),
                              kata_sandbox_delay_ms=4500, runc_sandbox_delay_ms=100,
                              kata_overhead_memory="10240Mi", kata_overhead_cpu="1"),
    )
    rcs = {r["metadata"]["name"]: r for r in labc.runtime_class_manifests(cl)}
    assert rcs["kata-qemu-nvidia-gpu"]["overhead"]["podFixed"] == {"cpu": "1", "memory": "10240Mi"}
    assert "overhead" not in rcs["runc"]
    stages = {s["metadata"]["name"]: s["spec"] for s in labc.kwok_stages(cl)}
    kata = stages["kgc-pod-sandbox-kata"]
    other = stages["kgc-pod-sandbox-other"]
    assert kata["delay"]["durationMilliseconds"] == 4500
    assert other["delay"]["durationMilliseconds"] == 100
    rc_expr = [e for e in kata["selector"]["matchExpressions"]
               if e["key"] == ".spec.runtimeClassName"]
    assert rc_expr == [{"key": ".spec.runtimeClassName", "operator": "In",
                        "values": ["kata-qemu-nvidia-gpu"]}]
    other_expr = [e for e in other["selector"]["matchExpressions"]
                  if e["key"] == ".spec.runtimeClassName"]
    assert other_expr[0]["operator"] == "NotIn"


def test_cri_log_frames_every_line() -> None:
    out = labc.cri_log("a\nb c\n\nd", when=0)
    lines = out.splitlines()
    assert lines == [
        "1970-01-01T00:00:00.000000000Z stdout F a",
        "1970-01-01T00:00:00.000000000Z stdout F b c",
        "1970-01-01T00:00:00.000000000Z stdout F ",
        "1970-01-01T00:00:00.000000000Z stdout F d",
    ]


def test_metric_server_get_and_set(tmp_path: Path) -> None:
    port_file = tmp_path / "port"
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "kgc_lab.cluster.metric_server", f"--port-file={port_file}",
         "--value=2"]
    )
    try:
        wait_for("metric server port file", port_file.exists, 20)
        url = f"http://127.0.0.1:{int(port_file.read_text())}/metric"
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310
            assert json.loads(r.read())["value"] == 2
        req = urllib.request.Request(url, data=b'{"value": 7.5}', method="PUT")  # noqa: S310
        with urllib.request.urlopen(req, timeout=5) as r:  # noqa: S310
            assert json.loads(r.read())["value"] == 7.5
        with urllib.request.urlopen(url, timeout=5) as r:  # noqa: S310
            assert json.loads(r.read())["value"] == 7.5
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_pki_chains_and_names(tmp_path: Path) -> None:
    pki = cluster_pki.generate(tmp_path / "pki")
    ca = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    api = x509.load_pem_x509_certificate(pki.apiserver.cert.read_bytes())
    api.verify_directly_issued_by(ca)
    sans = api.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    admin = x509.load_pem_x509_certificate(pki.client("admin").cert.read_bytes())
    def attr(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
        return [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]

    assert attr(admin, NameOID.COMMON_NAME) == ["kgc-admin"]
    assert attr(admin, NameOID.ORGANIZATION_NAME) == ["system:masters"]
    kcm = x509.load_pem_x509_certificate(pki.client("controller-manager").cert.read_bytes())
    assert attr(kcm, NameOID.COMMON_NAME) == ["system:kube-controller-manager"]
    assert attr(kcm, NameOID.ORGANIZATION_NAME) == []
    # A TLS client context accepts the generated client pair.
    ctx = ssl.create_default_context(cafile=str(pki.ca.cert))
    ctx.load_cert_chain(str(pki.client("admin").cert), str(pki.client("admin").key))
    assert (pki.keda_dir / "tls.crt").exists() and (pki.keda_dir / "ca.crt").exists()
    assert oct(pki.ca.key.stat().st_mode & 0o777) == "0o600"
