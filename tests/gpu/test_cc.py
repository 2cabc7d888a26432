"""Confidential GPUs: the ``cluster.gpu.cc`` profile, the collector's CC records
(``kgc-guest/4``), their parsers and the gpu.cc-* checks.

The formats come from kata-containers ``tests/integration/kubernetes/confidential_common.sh``
(SNP: ``dmesg | grep "Memory Encryption Features active:.*SEV-SNP"``; TDX: the CPU's
``TDX_GUEST`` flag), ``k8s-confidential-attestation.bats`` /
``runtimeclass_workloads/pod-attestable-gpu.yaml.in`` (``nvidia-smi conf-compute -grs``, the
CDH at ``http://127.0.0.1:8006/cdh/resource/<repo>/<type>/<tag>``) and NVIDIA
cloud-native-docs ``gpu-operator/confidential-containers.rst`` ("CC status: ON",
"Confidential Compute GPUs Ready state: ready"). The fixtures (fixtures/gpu/cc/) are the REAL
H200 capture plus TRANSCRIBED CC records; their verdicts are marked simulated. The real
capture itself predates the CC records: judged with CC asked, every gpu.cc-* skips naming its
collector (a real capture with CC records is pending a GPU guest).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from gpu.cc_synth import CC_FIX, NAMES, guest, outputs, records
from gpu.synth import h200_guest, h200_profile, pod, run
from kgc.core.model import Status, Verdict
from kgc.evidence.guest import (
    GuestCc,
    GuestEvidence,
    cc_attest_result,
    cc_mode_state,
    cc_ready_state,
    parse_guest_output,
)
from kgc.guest import build_script, cc_attest_command
from kgc.layers.gpu.checks import CHECKS, PodSubject
from kgc.layers.gpu.profile import GpuCcProfile, GpuProfile

CC_IDS = ("gpu.cc-tee", "gpu.cc-mode", "gpu.cc-ready", "gpu.cc-attestation")
URL = "http://127.0.0.1:8006/cdh/resource/default/gpu-key/key1"


def prof(**cc: Any) -> GpuProfile:
    return h200_profile(cc={"tee": "snp", **cc})


def judge(check: str, g: GuestEvidence | None, profile: GpuProfile | None = None) -> Verdict:
    r = run(pod(g))
    return CHECKS.get(check).judge(PodSubject(r.pods[0], r), profile or prof(), "cluster")


def with_cc(g: GuestEvidence, **kw: Any) -> GuestEvidence:
    assert g.cc is not None
    return dataclasses.replace(g, cc=dataclasses.replace(g.cc, **kw))


GOOD = guest("cc-good")


# --------------------------------------------------------------------------- profile
def test_profile_cc_is_off_by_default_and_validated() -> None:
    assert GpuProfile().cc is None
    p = GpuProfile(cc={"tee": "tdx", "attestation_resource": "default/gpu-key/key1"})
    assert p.cc is not None and p.cc.attestation_url == URL
    assert GpuCcProfile(tee="snp").attestation_url is None
    assert GpuCcProfile(tee="snp", cdh_url="http://127.0.0.1:8006/cdh/resource/").cdh_url \
        == "http://127.0.0.1:8006/cdh/resource"


@pytest.mark.parametrize("bad", [
    {"tee": "sev"}, {"tee": None}, {}, {"tee": "snp", "extra": 1},
    {"tee": "snp", "attestation_resource": "a/b"},
    {"tee": "snp", "attestation_resource": "a/../b"},
    {"tee": "snp", "attestation_resource": "a/b/c'; rm -rf /"},
    {"tee": "snp", "attestation_resource": "a/b/c?x=1"},
    {"tee": "snp", "cdh_url": "http://kbs.example.com/cdh/resource"},
    {"tee": "snp", "cdh_url": "https://127.0.0.1:8006/x"},
    {"tee": "snp", "cdh_url": "http://127.0.0.1:8006/$(id)"},
])
def test_profile_cc_refuses_bad_values(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        GpuProfile(cc=bad)


def test_the_attest_command_refuses_unsafe_urls() -> None:
    for url in ("http://127.0.0.1/a'b", "http://x/$(id)", "ftp://x/a", "http://x/a b",
                "http://x/../a"):
        with pytest.raises(ValueError):
            cc_attest_command(url)
    assert "cc_attest" not in build_script()  # no resource: no fetch
    assert "cc_attest" in build_script(cdh_url=URL)


# --------------------------------------------------------------------------- parsers
@pytest.mark.parametrize(("text", "want"), [
    ("CC status: ON\n", "ON"), ("CC status: OFF", "OFF"), ("  CC status:   DevTools \n",
                                                             "DEVTOOLS"),
    ("", None), ("CC status:", None), ("CC status: ON\nCC status: OFF\n", None),
    ("Invalid combination of input arguments.", None), (None, None),
])
def test_cc_mode_state(text: str | None, want: str | None) -> None:
    assert cc_mode_state(text) == want


@pytest.mark.parametrize(("text", "want"), [
    ("Confidential Compute GPUs Ready state: ready\n", "ready"),
    ("Confidential Compute GPUs Ready state: not-ready", "not-ready"),
    ("Confidential Compute GPUs Ready state:", None), ("ready", None), (None, None),
])
def test_cc_ready_state(text: str | None, want: str | None) -> None:
    assert cc_ready_state(text) == want


def test_cc_attest_result_shapes() -> None:
    ok = cc_attest_result(f"url {URL}\nvia curl rc 0 http 200 bytes 12\n")
    assert ok is not None and ok.released and ok.length == 12
    refused = cc_attest_result(f"url {URL}\nvia curl rc 0 http 401\nbody Unauthorized\n")
    assert refused is not None and not refused.released and refused.body == "Unauthorized"
    wget = cc_attest_result("url x\nwget: server returned error: HTTP/1.1 500\n"
                            "via wget rc 1 bytes 0\n")
    assert wget is not None and not wget.released and "HTTP/1.1 500" in wget.detail
    assert cc_attest_result("via curl rc 0 http 200 bytes 0").released is False  # type: ignore[union-attr]
    assert cc_attest_result("garbage") is None
    assert cc_attest_result("via curl rc 0 http 200 bytes 1\nvia wget rc 0 bytes 1") is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_cc_parsers_never_crash_and_never_pass_garbage(text: str) -> None:
    mode, ready, att = cc_mode_state(text), cc_ready_state(text), cc_attest_result(text)
    if mode == "ON":
        assert "CC status:" in text
    if ready == "ready":
        assert "Ready state:" in text
    if att is not None and att.released:
        assert "via " in text and " bytes " in text


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), st.text(max_size=200), st.text(max_size=200),
       st.text(max_size=200), st.sampled_from([0, 1, 2, 127]))
def test_checks_on_arbitrary_cc_records_never_crash_and_pass_only_on_their_line(
        tee: str, mode: str, ready: str, attest: str, rc: int) -> None:
    raw = _raw_with({"cc_tee": (0, tee), "cc_mode": (rc, mode), "cc_ready": (rc, ready),
                     "cc_attest": (rc, attest)})
    g = parse_guest_output(raw)
    for check in CC_IDS:
        v = judge(check, dataclasses.replace(GOOD, cc=g.cc),
                  prof(attestation_resource="default/gpu-key/key1"))
        assert v.status in (Status.PASS, Status.FAIL, Status.SKIP, Status.ERROR)
        if v.status is Status.PASS:
            want = {"gpu.cc-tee": "Memory Encryption", "gpu.cc-mode": "CC status:",
                    "gpu.cc-ready": "Ready state:", "gpu.cc-attestation": "via "}[check]
            seen = {"gpu.cc-tee": tee, "gpu.cc-mode": mode, "gpu.cc-ready": ready,
                    "gpu.cc-attestation": attest}[check]
            assert want in seen or (check == "gpu.cc-tee" and "present /dev/" in seen)


def _raw_with(cmds: dict[str, tuple[int, str]]) -> str:
    b = "@@KGC-0123456789abcdef@@"
    out = [f"{b} V 3", f"{b} FE", f"{b} LS /", f"{b} R 0"]
    for name, (rc, text) in {"collector": (0, "kgc-guest/4"), **cmds}.items():
        safe = "\n".join(ln for ln in text.splitlines() if not ln.startswith("@@KGC-"))
        out += [f"{b} C {name}", safe, f"{b} R {rc}"]
    return "\n".join([*out, f"{b} END"]) + "\n"


# --------------------------------------------------------------------------- the collector
@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
def test_collector_records_cc_evidence_and_never_the_secret(tmp_path: Path) -> None:
    """The script on this machine, with a stand-in curl answering the CDH: the status and
    the length are recorded, never the resource's content."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "curl").write_text("#!/bin/sh\nprintf 'TOPSECRETKEY\\n200'\n")
    (bin_ / "curl").chmod(0o755)
    root = tmp_path / "root"
    (root / "dev").mkdir(parents=True)
    (root / "dev" / "sev-guest").write_text("")
    r = subprocess.run([shutil.which("sh") or "sh", "-c", build_script(cdh_url=URL)],
                       capture_output=True, text=True, timeout=120, check=False,
                       env={"PATH": str(bin_), "KGC_ROOT": str(root)})
    assert "TOPSECRETKEY" not in r.stdout
    g = parse_guest_output(r.stdout)
    assert g.collector == "kgc-guest/4" and g.cc is not None
    assert g.cc.devices == ("/dev/sev-guest",) and g.cc.log == "none"
    assert g.cc.mode_rc == 127 and g.cc.ready_rc == 127  # no nvidia-smi on that PATH
    res = cc_attest_result(g.cc.attest_output)
    assert res is not None and res.released and res.length == len("TOPSECRETKEY")


def test_old_captures_load_unchanged_without_cc() -> None:
    g = h200_guest()  # the real kgc-guest/3 capture
    assert g.cc is None and "cc" not in g.to_dict()
    assert GuestEvidence.from_dict(g.to_dict()) == g
    assert GuestEvidence.from_dict(GOOD.to_dict()) == GOOD
    with pytest.raises(Exception, match="guest.cc.tdx_flag"):
        GuestEvidence.from_dict({**GOOD.to_dict(), "cc": {**GOOD.to_dict()["cc"],
                                                          "tdx_flag": "yes"}})


# --------------------------------------------------------------------------- fixtures
@pytest.mark.parametrize("name", NAMES)
def test_fixture_verdicts(name: str) -> None:
    doc = records(name)
    assert doc["transcribed"] is True and doc["source"] and doc["simulated"]
    p = h200_profile(cc=doc["profile"])
    for check, want in doc["expected"].items():
        assert judge(check, guest(name), p).status.value == want, check


def test_fixture_files_are_what_the_generator_writes() -> None:
    for path, text in outputs().items():
        assert path.read_text() == text, f"{path.name}: run tests/gpu/cc_synth.py"
    assert sorted(p.name for p in CC_FIX.glob("*.bundle.json")) == sorted(
        f"{n}.bundle.json" for n in NAMES)


def test_fixture_bundles_mark_cc_verdicts_simulated() -> None:
    from kgc.cli import evaluate_bundles

    rows = evaluate_bundles([str(CC_FIX / "cc-good.bundle.json")],
                            str(CC_FIX / "cc-good.profile.yaml"))
    cc = [r for r in rows if r["check"] in CC_IDS]
    assert len(cc) == 4 and all(r["simulated"] for r in cc)
    assert all(r["status"] == "pass" for r in cc)


def test_real_capture_with_cc_asked_skips_naming_its_collector() -> None:
    """The real H200 microVM capture (kgc-guest/3) has no CC records: a skip, never a pass.
    A real negative (CC off on that H200) is pending a GPU guest to capture it on."""
    for check in CC_IDS:
        v = judge(check, h200_guest(), prof(attestation_resource="a/b/c"))
        assert v.status is Status.SKIP and "kgc-guest/3" in v.reason, check


# --------------------------------------------------------------------------- each check
@pytest.mark.parametrize("check", CC_IDS)
def test_every_cc_check_skips_when_cc_is_not_asked(check: str) -> None:
    v = judge(check, GOOD, h200_profile())
    assert v.status is Status.SKIP and "cluster.gpu.cc" in v.reason


@pytest.mark.parametrize("check", CC_IDS)
def test_every_cc_check_skips_without_a_guest(check: str) -> None:
    r = run(pod(None, phase="Pending", containers=()))
    v = CHECKS.get(check).judge(PodSubject(r.pods[0], r), prof(), "cluster")
    assert v.status is Status.SKIP


def test_cc_tee_paths() -> None:
    assert judge("gpu.cc-tee", GOOD).status is Status.PASS
    tdx = guest("cc-good-tdx")
    assert judge("gpu.cc-tee", tdx, prof(tee="tdx")).status is Status.PASS
    v = judge("gpu.cc-tee", tdx)
    assert v.status is Status.FAIL and "Intel TDX" in v.reason and "SEV-SNP" in v.reason
    v = judge("gpu.cc-tee", GOOD, prof(tee="tdx"))
    assert v.status is Status.FAIL and "AMD SEV-SNP guest" in v.reason
    # only the kernel line, or only the device, is enough
    assert judge("gpu.cc-tee", with_cc(GOOD, devices=())).status is Status.PASS
    assert judge("gpu.cc-tee", with_cc(GOOD, kernel_lines=())).status is Status.PASS
    plain = with_cc(GOOD, devices=(), kernel_lines=())
    v = judge("gpu.cc-tee", plain)
    assert v.status is Status.FAIL and "not a confidential VM" in v.reason
    v = judge("gpu.cc-tee", with_cc(plain, log="none"))
    assert v.status is Status.ERROR and "not readable" in v.reason
    v = judge("gpu.cc-tee", with_cc(GOOD, devices=("/dev/sev-guest", "/dev/tdx_guest")))
    assert v.status is Status.ERROR and "both" in v.reason
    v = judge("gpu.cc-tee", with_cc(GOOD, log=None, tee_output="weird\x00stuff"))
    assert v.status is Status.ERROR and "kgc-gpu-0" in v.reason and "weird" in v.reason


@pytest.mark.parametrize(("rc", "out", "status", "words"), [
    (0, "CC status: ON", Status.PASS, "ON"),
    (0, "CC status: OFF", Status.FAIL, "OFF"),
    (0, "CC status: DEVTOOLS", Status.FAIL, "DevTools"),
    (0, "CC status: MAYBE", Status.ERROR, "MAYBE"),
    (0, "something else", Status.ERROR, "something else"),
    (127, "nvidia-smi: not found", Status.SKIP, "not in the guest image"),
    (2, "Invalid combination of input arguments.", Status.SKIP, "not supported"),
])
def test_cc_mode_paths(rc: int, out: str, status: Status, words: str) -> None:
    v = judge("gpu.cc-mode", with_cc(GOOD, mode_rc=rc, mode_output=out))
    assert v.status is status and words in v.reason
    if status is Status.FAIL:
        assert "nvidia.com/cc.mode=on" in (v.remediation or "")
    if status is Status.ERROR:
        assert "kgc-run1/kgc-gpu-0" in v.reason


def test_cc_mode_not_recorded_is_a_skip() -> None:
    assert judge("gpu.cc-mode", with_cc(GOOD, mode_output=None, mode_rc=None)).status is Status.SKIP


@pytest.mark.parametrize(("rc", "out", "status"), [
    (0, "Confidential Compute GPUs Ready state: ready", Status.PASS),
    (0, "Confidential Compute GPUs Ready state: not-ready", Status.FAIL),
    (0, "Confidential Compute GPUs Ready state: ?", Status.ERROR),
    (0, "", Status.ERROR),
    (127, "nvidia-smi: not found", Status.SKIP),
    (2, "Invalid combination of input arguments.", Status.SKIP),
])
def test_cc_ready_paths(rc: int, out: str, status: Status) -> None:
    v = judge("gpu.cc-ready", with_cc(GOOD, ready_rc=rc, ready_output=out))
    assert v.status is status
    if status is Status.FAIL:
        assert "nvrc.smi.srs=1" in (v.remediation or "")
    unrecorded = with_cc(GOOD, ready_output=None, ready_rc=None)
    assert judge("gpu.cc-ready", unrecorded).status is Status.SKIP


@pytest.mark.parametrize(("rc", "out", "status", "words"), [
    (0, f"url {URL}\nvia curl rc 0 http 200 bytes 12", Status.PASS, "released"),
    (0, f"url {URL}\nvia wget rc 0 bytes 12", Status.PASS, "released"),
    (0, f"url {URL}\nvia curl rc 0 http 401\nbody policy denied", Status.FAIL, "HTTP 401"),
    (0, f"url {URL}\ncurl: (7) Failed to connect to 127.0.0.1 port 8006\nvia curl rc 7 "
        "http 000", Status.FAIL, "did not answer"),
    (0, f"url {URL}\nwget: server returned error: HTTP/1.1 500 Internal Server Error\n"
        "via wget rc 1 bytes 0", Status.FAIL, "HTTP/1.1 500"),
    (0, f"url {URL}\nvia curl rc 0 http 200 bytes 0", Status.FAIL, "empty"),
    (127, f"url {URL}\ncurl, wget: not found", Status.SKIP, "neither curl nor wget"),
    (0, f"url {URL}\n???", Status.ERROR, "does not parse"),
    (0, "url http://127.0.0.1:8006/cdh/resource/x/y/z\nvia curl rc 0 http 200 bytes 3",
     Status.ERROR, "the profile names"),
])
def test_cc_attestation_paths(rc: int, out: str, status: Status, words: str) -> None:
    p = prof(attestation_resource="default/gpu-key/key1")
    v = judge("gpu.cc-attestation", with_cc(GOOD, attest_rc=rc, attest_output=out), p)
    assert v.status is status and words in v.reason, v.reason


def test_cc_attestation_skips_without_a_resource_or_a_fetch() -> None:
    v = judge("gpu.cc-attestation", GOOD)  # the profile names no resource
    assert v.status is Status.SKIP and "attestation_resource" in v.reason
    v = judge("gpu.cc-attestation", with_cc(GOOD, attest_output=None, attest_rc=None),
              prof(attestation_resource="default/gpu-key/key1"))
    assert v.status is Status.SKIP and "fetched no CDH resource" in v.reason


def test_guest_cc_record_is_json_round_trippable() -> None:
    assert GOOD.cc is not None
    d = json.loads(json.dumps(GOOD.cc.to_dict()))
    assert GuestCc.from_dict(d) == GOOD.cc


def test_huge_cc_outputs_are_bounded() -> None:
    big = "x" * 100_000
    raw = _raw_with({"cc_tee": (0, "kmsg Memory Encryption Features active: SEV-SNP\n" * 5000),
                     "cc_mode": (0, big), "cc_ready": (0, big), "cc_attest": (0, big)})
    g = parse_guest_output(raw)
    assert g.cc is not None and len(g.cc.kernel_lines) == 4
    assert all(len(t or "") < 1100 for t in (g.cc.mode_output, g.cc.ready_output,
                                            g.cc.attest_output))
    v = judge("gpu.cc-mode", dataclasses.replace(GOOD, cc=g.cc))
    assert v.status is Status.ERROR and "kgc-gpu-0" in v.reason


def test_the_cli_builds_the_fetch_only_for_a_safe_url() -> None:
    from kgc.guest import main

    with pytest.raises(SystemExit):
        main(["--script", "--cdh-url", "http://127.0.0.1:8006/x'; id"])


def test_the_gpu_pods_collector_fetches_the_profiles_attestation_resource() -> None:
    """The ConfigMap the gpu layer's pods run carries the CDH URL of ``cluster.gpu.cc``
    (without it ``gpu.cc-attestation`` could only ever skip), and none without CC."""
    from kgc.layers.gpu.plan import SCRIPT_KEY, collector_configmap
    from kgc.layers.gpu.profile import GpuProfile

    gp = GpuProfile.model_validate({"cc": {"tee": "snp",
                                           "attestation_resource": "default/gpu/key"}})
    assert gp.cc is not None and gp.cc.attestation_url
    with_cc = collector_configmap("c", "ns", {}, cdh_url=gp.cc.attestation_url)
    assert gp.cc.attestation_url in with_cc["data"][SCRIPT_KEY]
    plain = collector_configmap("c", "ns", {})
    assert "cdh/resource" not in plain["data"][SCRIPT_KEY]
