"""The real node's parts that need no VM: which verdicts stay marked simulated (the
engine's per-subject rule), node origins (parsers total, replay-safe), the guest's relay to
the API server, the kubelet's configuration and credentials."""

from __future__ import annotations

import dataclasses
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import NameOID
from hypothesis import given, settings
from hypothesis import strategies as st

from kgc.core.engine import Context
from kgc.core.layer import Layer, Scope
from kgc.core.model import EvidenceError, Registry, Status, passed
from kgc.core.profile import load_profile
from kgc.kube.origin import NodeOrigin, stand_in_reason, stand_ins
from kgc_lab.cluster import pki as cluster_pki
from kgc_lab.cluster import realnode
from kgc_lab.node import relay

KWOK_NODE = {"metadata": {"name": "kgc-gpu-0", "annotations": {"kwok.x-k8s.io/node": "fake"}},
             "status": {"nodeInfo": {"kubeletVersion": "kwok-v0.8.0"}}}
REAL_NODE = {"metadata": {"name": "kgc-node-0", "annotations": {}},
             "status": {"nodeInfo": {"kubeletVersion": "v1.37.2"}}}


# --------------------------------------------------------------------------- simulated


class _Ev:
    """Cluster evidence that knows the nodes its pods ran on."""

    def __init__(self, pods: dict[str, dict[str, Any] | None]) -> None:
        self.origins = {p: NodeOrigin.of("n", n) if n is not None else None
                        for p, n in pods.items()}

    def stand_ins(self) -> list[str] | None:
        return stand_ins(self.origins.items())


class _Cluster:
    name = "lab"
    scope = Scope.CLUSTER
    origin = "live"


def _judge(evidence: Any, simulated_profile: bool = True) -> Any:
    reg = Registry()

    @reg.check("demo.pods", title="demo", remediation="fix demo")
    def pods(ev: Any, prof: Any) -> Any:
        return passed("pods ran")

    lay = Layer("demo", Scope.CLUSTER, "demo", reg, gather=lambda ctx: evidence,
                record=lambda ev: {}, replay=lambda d: evidence)
    prof = load_profile("lab")
    if not simulated_profile:
        prof = prof.model_copy(update={"cluster": prof.cluster.model_copy(
            update={"simulated": False})})
    return Context(_Cluster(), prof, {"demo": lay}).judge("demo.pods")  # type: ignore[arg-type]


def test_a_verdict_resting_only_on_the_real_node_is_not_marked_simulated() -> None:
    v = _judge(_Ev({"gpu-0": REAL_NODE, "gpu-1": REAL_NODE}))
    assert v.status is Status.PASS and not v.simulated and "[simulated" not in v.reason


def test_one_kwok_pod_marks_the_verdict_and_is_named() -> None:
    v = _judge(_Ev({"gpu-0": REAL_NODE, "gpu-1": KWOK_NODE}))
    assert v.simulated and "pod gpu-1 on n: kwok node" in v.simulated_why
    assert "gpu-0" not in v.simulated_why


@pytest.mark.parametrize("evidence", [
    object(),  # evidence that cannot tell
    _Ev({}),  # no pod to tell by
    _Ev({"gpu-0": None}),  # a pod that never got a node
])
def test_without_a_per_pod_answer_the_lab_marks_every_cluster_verdict(evidence: Any) -> None:
    v = _judge(evidence)
    assert v.simulated, v


def test_a_cluster_not_declared_simulated_is_marked_from_its_evidence() -> None:
    # whoever runs the suite: the stand-in is in the record, not in the profile
    v = _judge(_Ev({"gpu-1": KWOK_NODE}), simulated_profile=False)
    assert v.simulated and "pod gpu-1 on n: kwok node" in v.simulated_why
    # what the record cannot tell stays unmarked on a profile of a real cluster
    assert not _judge(object(), simulated_profile=False).simulated


def test_a_node_seen_without_kubelet_version_is_a_stand_in() -> None:
    assert stand_in_reason(REAL_NODE) is None
    assert stand_in_reason(KWOK_NODE) == "kwok node (kwok.x-k8s.io/node=fake)"
    assert stand_in_reason({"metadata": {}, "status": {}}) == "no kubelet version reported"
    assert stand_in_reason(None) == "node not seen"


def test_node_origins_round_trip_and_reject_malformed_input() -> None:
    o = NodeOrigin.of("kgc-node-0", REAL_NODE)
    assert NodeOrigin.from_dict(o.to_dict()) == o and not o.stand_in and o.kubelet == "v1.37.2"
    for bad in (None, [], {"node": 1, "stand_in": False}, {"node": "n", "stand_in": "no"},
                {"node": "n", "stand_in": True, "why": None}):
        with pytest.raises(EvidenceError):
            NodeOrigin.from_dict(bad)


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8),
                                                                          c, max_size=3),
                     max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_origin_parsers_are_total(data: Any) -> None:
    assert stand_in_reason(data) is None or isinstance(stand_in_reason(data), str)
    NodeOrigin.of("n", data if isinstance(data, dict) else None)
    try:
        NodeOrigin.from_dict(data)
    except EvidenceError:
        pass


# --------------------------------------------------------------------------- relay


def test_the_relay_copies_both_ways_and_closes_when_both_sides_are_done() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]
    got: list[bytes] = []

    def upstream() -> None:
        conn, _ = srv.accept()
        with conn:
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
            got.append(data)
            conn.sendall(b"pong:" + data[-4:])

    t = threading.Thread(target=upstream)
    t.start()
    guest, qemu_end = socket.socketpair()
    r = threading.Thread(target=relay.relay, args=(qemu_end, port))
    r.start()
    payload = b"x" * 300_000 + b"ping"
    guest.sendall(payload)
    guest.shutdown(socket.SHUT_WR)
    answer = b""
    guest.settimeout(30)
    while chunk := guest.recv(65536):
        answer += chunk
    r.join(30)
    t.join(30)
    srv.close()
    assert got == [payload] and answer == b"pong:ping" and not r.is_alive()


def test_the_relay_gives_up_quietly_when_nothing_listens() -> None:
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    guest, qemu_end = socket.socketpair()
    assert relay.relay(qemu_end, port) == 1
    assert relay.main(["not-a-port"]) == 2


# --------------------------------------------------------------------------- kubelet config


def test_the_kubelet_talks_to_the_forward_and_authenticates_with_the_lab_ca() -> None:
    cfg = realnode.kubelet_config(41234)
    assert cfg["port"] == 41234 and cfg["readOnlyPort"] == 0
    assert cfg["authentication"]["anonymous"] == {"enabled": False}
    assert cfg["authorization"] == {"mode": "Webhook"}
    assert cfg["cgroupDriver"] == "systemd" and cfg["failSwapOn"] and cfg["failCgroupV1"]
    assert cfg["registerWithTaints"] == [realnode.REAL_NODE_TAINT]
    kc = realnode.kubelet_kubeconfig("kgc-node-0")
    cluster = kc["clusters"][0]["cluster"]
    assert cluster["server"] == "https://10.0.2.100:6443"
    assert cluster["tls-server-name"] == "localhost"
    args = realnode.kubelet_args("kgc-node-0")
    assert "--cloud-provider=external" in args and "--hostname-override=kgc-node-0" in args
    p = realnode.placement()
    assert p["node_selector"] == {"kgc.io/real-node": "true"}
    assert p["tolerations"][0]["key"] == realnode.REAL_NODE_TAINT["key"]


def test_node_credentials_carry_the_node_identity(tmp_path: Path) -> None:
    pki = cluster_pki.generate(tmp_path / "pki")
    creds = realnode.issue_credentials(pki, "kgc-node-0")
    client = x509.load_pem_x509_certificate((creds / "kubelet-client.crt").read_bytes())
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == \
        "system:node:kgc-node-0"
    assert client.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == \
        "system:nodes"
    serving = x509.load_pem_x509_certificate((creds / "kubelet.crt").read_bytes())
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {str(i) for i in sans.get_values_for_type(x509.IPAddress)} == \
        {"127.0.0.1", "10.0.2.15"}
    ca = x509.load_pem_x509_certificate(pki.ca.cert.read_bytes())
    assert client.issuer == ca.subject and serving.issuer == ca.subject
    files = realnode.node_files(pki, creds, "kgc-node-0", 41234)
    assert yaml.safe_load(files["etc/kubernetes/kubelet.yaml"])["port"] == 41234
    assert files["etc/hostname"] == b"kgc-node-0\n"
    assert (creds / "kubelet-client.key").stat().st_mode & 0o777 == 0o600


def test_each_lab_run_directory_gets_its_own_node_vm(tmp_path: Path) -> None:
    a = realnode.vm_name(tmp_path / "a", "kgc-node-0")
    assert a == realnode.vm_name(tmp_path / "a", "kgc-node-0")
    assert a != realnode.vm_name(tmp_path / "b", "kgc-node-0")
    assert len(a) <= 16  # QEMU's -name and the ssh ControlPath stay short


# --------------------------------------------------------------------------- gpu evidence


def test_gpu_evidence_names_the_pods_that_ran_on_stand_ins() -> None:
    from kgc.layers.gpu.evidence import (
        ClusterGpuEvidence,
        GpuPodEvidence,
        GpuRunEvidence,
        node_from_api,
    )

    real = node_from_api(REAL_NODE)
    kwok = node_from_api(KWOK_NODE)
    assert real.stand_in is False and kwok.stand_in is True
    assert "kwok" in kwok.stand_in_why

    def pod(name: str, node: str | None) -> GpuPodEvidence:
        return GpuPodEvidence(name, "ns", node, node, "6.1.0", {}, "runc", "img",
                              "nvidia.com/gpu", 1)

    def run(*pods: GpuPodEvidence, nodes: tuple[Any, ...] = (real, kwok)) -> GpuRunEvidence:
        return GpuRunEvidence(ClusterGpuEvidence((), nodes), pods)

    assert run(pod("a", "kgc-node-0")).stand_ins() == []
    assert run(pod("a", "kgc-node-0"), pod("b", "kgc-gpu-0")).stand_ins() == [
        "pod ns/b on kgc-gpu-0: kwok node (kwok.x-k8s.io/node=fake)"]
    assert run().stand_ins() is None  # no pod: nothing to tell by
    legacy = dataclasses.replace(real, stand_in=None)  # a bundle recorded before origins
    assert run(pod("a", "kgc-node-0"), nodes=(legacy,)).stand_ins() is None
    # recorded and replayed: the origin survives, older records stay byte-identical
    r = run(pod("a", "kgc-node-0"), pod("b", "kgc-gpu-0"))
    assert GpuRunEvidence.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert "stand_in" not in legacy.to_dict()


# --------------------------------------------------------------------------- DRA plugin


def test_the_dra_plugin_gets_its_node_and_the_lab_the_device_class(tmp_path: Path) -> None:
    from kgc_lab.cluster import realnode_dra
    from kgc_lab.node.kube_image import CONTAINERD_CONFIG, NODE_FILES

    pki = cluster_pki.generate(tmp_path / "pki")
    creds = realnode.issue_credentials(pki, "kgc-node-0")
    env = realnode.node_files(pki, creds, "kgc-node-0", 41234)["etc/kubernetes/kgc-dra.env"]
    assert env.startswith(b"DRA_ARGS=--node-name=kgc-node-0 ")
    assert b"--kubeconfig=/etc/kubernetes/kubelet.kubeconfig" in env  # the node's identity
    assert b"--driver=dra.kgc.io" in env and b"--cdi-dir=/var/run/cdi" in env
    unit = NODE_FILES["/etc/systemd/system/kgc-dra-plugin.service"]
    assert "EnvironmentFile=/etc/kubernetes/kgc-dra.env" in unit
    assert "enable_cdi = true" in CONTAINERD_CONFIG and '"/var/run/cdi"' in CONTAINERD_CONFIG
    dc = realnode_dra.device_class_manifest()
    assert dc["spec"]["selectors"] == [{"cel": {"expression": 'device.driver == "dra.kgc.io"'}}]
    t = realnode_dra.claim_template_manifest("t", "ns")
    assert t["spec"]["spec"]["devices"]["requests"] == [
        {"name": "gpu", "exactly": {"deviceClassName": "dra.kgc.io", "count": 1}}]
    assert realnode_dra.env_name("gpu-1") == "KGC_DRA_GPU_1"
    assert realnode_dra.cdi_spec_path("u") == "/var/run/cdi/kgc.io-dra_u.json"
    claim = {"status": {"allocation": {"devices": {"results": [{"device": "gpu-0"}]}}}}
    assert realnode_dra.allocation(claim) == [{"device": "gpu-0"}]
    assert realnode_dra.allocation({}) == []
