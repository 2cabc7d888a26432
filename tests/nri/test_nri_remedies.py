"""nri.* remedies fit the evidence (issue 9): when containerd's config has NRI enabled and
only the socket is missing, the remedy is to start/restart containerd -- never "Enable NRI"."""

from __future__ import annotations

from kgc.core.model import Status
from kgc.core.profile import load_profile
from kgc.layers.nri.checks import CHECKS
from kgc.layers.nri.collect import NriEvidence

PROFILE = load_profile()


def _missing_socket(enabled: bool | None) -> NriEvidence:
    return NriEvidence(
        socket_path="/var/run/nri/nri.sock", socket_exists=False,
        connect_error="cannot connect to /var/run/nri/nri.sock: [Errno 2] No such file",
        runtime_context={"enabled": enabled, "why": "disable = false (config)",
                         "disable_connections": False, "socket_path": "/var/run/nri/nri.sock"},
        pod={"image": "kgc.local/nri-probe:1"})


def test_nri_enabled_but_socket_missing_says_start_containerd() -> None:
    for cid in ("nri.events", "nri.handshake", "nri.adjustment"):
        v = CHECKS.get(cid).judge(_missing_socket(True), PROFILE, "t")
        assert v.status is Status.FAIL, (cid, v.reason)
        assert "Enable NRI" not in v.remediation and "disable = false" not in v.remediation, (
            cid, v.remediation)
        assert "containerd" in v.remediation and "start" in v.remediation.lower()
        assert "NRI is enabled" in v.reason and "does not exist" in v.reason, v.reason


def test_nri_disabled_keeps_the_enable_remedy() -> None:
    v = CHECKS.get("nri.events").judge(_missing_socket(False), PROFILE, "t")
    assert v.status is Status.FAIL
    assert "disable = false" in v.remediation
