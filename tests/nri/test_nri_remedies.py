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


def test_missing_socket_blamed_on_the_failed_cri_plugin() -> None:
    """Issue 18.1: with CRI refused (containerd 1.7.24's own words, fixtures/containerd/
    1.7.24/kata-only) the socket never appears; "not restarted" would send the user astray."""
    ev = _missing_socket(True)
    err = ("containerd's CRI plugin io.containerd.grpc.v1.cri failed to load: invalid plugin "
           "config: no corresponding runtime configured in `containerd.runtimes` for "
           '`containerd` `default_runtime_name = "runc" (ctr plugins ls -d)')
    ev.runtime_context.update(cri_loaded=False, cri_failure=err,
                              cri_fix="list runc again next to the other runtimes")
    v = CHECKS.get("nri.events").judge(ev, PROFILE, "t")
    assert v.status is Status.FAIL
    assert err in v.reason and "not restarted" not in v.reason, v.reason
    assert "runc" in v.remediation, v.remediation


def test_the_enable_remedy_edits_the_existing_table() -> None:
    ev = _missing_socket(False)
    ev.runtime_context["nri_fix"] = ('set `disable = false` in the existing table '
                                     '[plugins."io.containerd.nri.v1.nri"] in /etc/c.toml')
    v = CHECKS.get("nri.events").judge(ev, PROFILE, "t")
    assert "existing table" in v.remediation and "add" not in v.remediation.lower()


def test_cri_not_served_is_named_from_the_cri_status() -> None:
    """Without the runtime layer's evidence, the CRI Status answer of the real containerd
    1.7.24 whose CRI plugin refused its config (fixtures/containerd/1.7.24/kata-only; the
    text is what kgc.cri.client got from that binary) names the cause."""
    ev = _missing_socket(None)
    ev.runtime_context = {}
    ev.cri_status = {"error": "CRI Status on /run/containerd/containerd.sock failed: "
                              "StatusCode.UNIMPLEMENTED: unknown service runtime.v1.RuntimeService"}
    v = CHECKS.get("nri.events").judge(ev, PROFILE, "t")
    assert v.status is Status.FAIL
    assert "does not serve CRI" in v.reason and "ctr plugins ls -d" in v.remediation, v


def test_cri_status_round_trips_through_a_bundle() -> None:
    ev = _missing_socket(True)
    ev.cri_status = {"conditions": [{"type": "RuntimeReady", "status": True, "reason": "",
                                     "message": ""}]}
    assert NriEvidence.from_dict(ev.to_dict()).cri_status == ev.cri_status
