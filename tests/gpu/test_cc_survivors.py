"""What mutation testing of the confidential-GPU checks found untested (issue 21;
benchmarks/mutation.py module ``gpu.cc``).

Each test states what a user reads: why a check skipped (the command, the flag, the profile
key), the evidence an error keeps, which spellings of nvidia-smi's ready state fail. The
guest is tests/gpu/cc_synth.py's ``cc-good`` (the real H200 capture with CC records
transcribed from Kata's tests and NVIDIA's docs: simulated), read once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpu.cc_synth import guest
from gpu.synth import h200_profile, pod, run
from kgc.core.model import Status, Verdict
from kgc.evidence.guest import GuestEvidence
from kgc.layers.gpu.checks import CHECKS, PodSubject
from kgc.layers.gpu.profile import GpuProfile

CC_IDS = ("gpu.cc-tee", "gpu.cc-mode", "gpu.cc-ready", "gpu.cc-attestation")
GOOD = guest("cc-good")


def prof(**cc: Any) -> GpuProfile:
    return h200_profile(cc={"tee": "snp", **cc})


def judge(check: str, g: GuestEvidence | None, profile: GpuProfile | None = None) -> Verdict:
    r = run(pod(g))
    return CHECKS.get(check).judge(PodSubject(r.pods[0], r), profile or prof(), "cluster")


def with_cc(**kw: Any) -> GuestEvidence:
    assert GOOD.cc is not None
    return dataclasses.replace(GOOD, cc=dataclasses.replace(GOOD.cc, **kw))


@pytest.mark.parametrize("check", CC_IDS)
def test_cc_asked_but_no_pod_ran_says_no_pod_ran_not_that_cc_is_unset(check: str) -> None:
    r = run(notes=("no GPU node matched cluster.gpu.node_selector",))
    v = CHECKS.get(check).judge(PodSubject(None, r), prof(), "cluster")
    assert v.status is Status.SKIP
    assert "no GPU pod ran" in v.reason and "cluster.gpu.cc is not set" not in v.reason


@pytest.mark.parametrize("check", CC_IDS)
def test_cc_not_asked_and_no_pod_names_the_key_and_the_plan_notes(check: str) -> None:
    v = CHECKS.get(check).judge(PodSubject(None, run()), h200_profile(), "cluster")
    assert v.status is Status.SKIP
    assert v.reason.startswith("cluster.gpu.cc is not set: the profile does not ask for "
                               "confidential GPUs")
    assert v.reason.endswith("(and no GPU pod ran: none)")
    r = run(notes=("node gpu-b: cordoned",))
    v = CHECKS.get(check).judge(PodSubject(None, r), h200_profile(), "cluster")
    assert v.reason.endswith("(and no GPU pod ran: node gpu-b: cordoned)")


def test_unrecorded_nvidia_smi_outputs_name_their_conf_compute_flag() -> None:
    v = judge("gpu.cc-mode", with_cc(mode_output=None, mode_rc=None))
    assert v.status is Status.SKIP and "nvidia-smi conf-compute -f was not recorded" in v.reason
    v = judge("gpu.cc-ready", with_cc(ready_output=None, ready_rc=None))
    assert v.status is Status.SKIP and "nvidia-smi conf-compute -grs was not recorded" in v.reason


def test_no_nvidia_smi_says_what_cannot_be_read() -> None:
    v = judge("gpu.cc-mode", with_cc(mode_rc=127, mode_output="sh: nvidia-smi: not found"))
    assert v.status is Status.SKIP and "so its CC mode cannot be read" in v.reason
    v = judge("gpu.cc-ready", with_cc(ready_rc=127, ready_output="sh: nvidia-smi: not found"))
    assert v.status is Status.SKIP and "so the GPUs' ready state cannot be read" in v.reason


def test_an_unknown_state_is_an_error_that_keeps_the_output_and_exit_status() -> None:
    v = judge("gpu.cc-mode", with_cc(mode_rc=0, mode_output="CC status: MAYBE"))
    assert v.status is Status.ERROR
    assert v.evidence["conf_compute_f"] == "CC status: MAYBE" and v.evidence["rc"] == 0
    out = "Confidential Compute GPUs Ready state: pending"
    v = judge("gpu.cc-ready", with_cc(ready_rc=0, ready_output=out))
    assert v.status is Status.ERROR and "'pending'" in v.reason
    assert v.evidence["conf_compute_grs"] == out and v.evidence["rc"] == 0


@pytest.mark.parametrize("state", ["not-ready", "not_ready", "notready", "NOT_READY"])
def test_every_not_ready_spelling_fails_with_the_srs_remedy(state: str) -> None:
    out = f"Confidential Compute GPUs Ready state: {state}"
    v = judge("gpu.cc-ready", with_cc(ready_rc=0, ready_output=out))
    assert v.status is Status.FAIL, v.reason
    assert "nvrc.smi.srs=1" in (v.remediation or "")


def test_a_guest_showing_both_tees_is_an_error_that_keeps_what_it_showed() -> None:
    v = judge("gpu.cc-tee", with_cc(devices=("/dev/sev-guest", "/dev/tdx_guest")))
    assert v.status is Status.ERROR and "both SEV-SNP and TDX" in v.reason
    assert v.evidence["tee_devices"] == ["/dev/sev-guest", "/dev/tdx_guest"]


# --------------------------------------------------------------------------- seed fresh
URL = "http://127.0.0.1:8006/cdh/resource/default/gpu-key/key1"
ATTEST = prof(attestation_resource="default/gpu-key/key1")


def test_every_plan_note_is_named_when_no_pod_ran() -> None:
    r = run(notes=("node gpu-a: cordoned", "node gpu-b: no GPU"))
    v = CHECKS.get("gpu.cc-tee").judge(PodSubject(None, r), h200_profile(), "cluster")
    assert v.reason.endswith("(and no GPU pod ran: node gpu-a: cordoned; node gpu-b: no GPU)")


def test_an_old_collector_is_named_with_the_records_it_lacks() -> None:
    old = dataclasses.replace(GOOD, cc=None, collector="kgc-guest/3")
    v = judge("gpu.cc-mode", old)
    assert v.status is Status.SKIP
    assert v.reason == ("kgc-run1/kgc-gpu-0: its collector (kgc-guest/3) recorded no "
                        "confidential-computing evidence (cc_tee, cc_mode, cc_ready: "
                        "kgc-guest/4 and later)")


def test_an_unsupported_conf_compute_with_no_output_quotes_nothing() -> None:
    v = judge("gpu.cc-mode", with_cc(mode_rc=2, mode_output=None))
    assert v.status is Status.SKIP
    assert "not supported here (exit 2: ''; a driver without CC support?)" in v.reason


def test_output_without_the_status_line_names_the_line_it_lacks() -> None:
    v = judge("gpu.cc-mode", with_cc(mode_rc=0, mode_output="Usage: nvidia-smi conf-compute"))
    assert v.status is Status.ERROR
    assert "nvidia-smi conf-compute -f printed no 'CC status:' line" in v.reason


@pytest.mark.parametrize("http", [300, 302, 404])
def test_a_non_2xx_answer_fails_naming_the_status_and_the_body(http: int) -> None:
    out = f"url {URL}\nvia curl rc 0 http {http} bytes 5\nbody moved or denied"
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=out), ATTEST)
    assert v.status is Status.FAIL
    assert f"HTTP {http}: moved or denied (the KBS refused the resource" in v.reason


def test_a_wget_release_is_found_as_ok_with_its_length() -> None:
    out = f"url {URL}\nvia wget rc 0 bytes 12"
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=out), ATTEST)
    assert v.status is Status.PASS and v.found == "HTTP OK, 12 bytes"


def test_a_collector_that_fetched_nothing_says_why_and_keeps_the_url() -> None:
    v = judge("gpu.cc-attestation", with_cc(attest_output=None, attest_rc=None), ATTEST)
    assert v.status is Status.SKIP
    assert v.reason.endswith("fetched no CDH resource (the script was built without "
                             "cluster.gpu.cc's URL)")
    assert v.evidence["url"] == URL


@pytest.mark.parametrize(("tee", "names"), [
    ("snp", "(no /dev/sev-guest, no 'Memory Encryption Features active' kernel line"),
    ("tdx", "(no /dev/tdx_guest, no tdx_guest cpu flag, no 'Memory Encryption Features active' "
            "kernel line")])
def test_a_plain_guest_fails_naming_the_evidence_it_lacks(tee: str, names: str) -> None:
    plain = with_cc(devices=(), kernel_lines=(), tdx_flag=False)
    v = judge("gpu.cc-tee", plain, prof(tee=tee))
    assert v.status is Status.FAIL and names in v.reason
    assert v.found == "nothing"
    assert (v.remediation or "").endswith("check the Kata configuration's confidential_guest = "
                                          "true.")


def test_tee_errors_keep_the_guest_s_tee_evidence() -> None:
    v = judge("gpu.cc-tee", with_cc(log=None, tee_output="garbage"))
    assert GOOD.cc is not None
    assert v.status is Status.ERROR and v.evidence["tee_devices"] == list(GOOD.cc.devices)
    v = judge("gpu.cc-tee", with_cc(devices=(), kernel_lines=(), log="none"))
    assert v.status is Status.ERROR and v.reason.endswith("cannot tell its TEE")
    assert v.evidence["kernel_log"] == "none"


# --------------------------------------------------------------------------- seed check
def test_an_unsupported_conf_compute_quotes_what_nvidia_smi_said() -> None:
    v = judge("gpu.cc-mode", with_cc(mode_rc=2, mode_output="Invalid combination of input "
                                                            "arguments.\nsee --help"))
    assert v.status is Status.SKIP
    assert "(exit 2: 'Invalid combination of input arguments.'; a driver without CC " \
           "support?)" in v.reason


def test_ready_output_without_its_line_names_the_line_and_an_unknown_state_the_flag() -> None:
    v = judge("gpu.cc-ready", with_cc(ready_rc=0, ready_output="Usage: nvidia-smi"))
    assert v.status is Status.ERROR
    assert "printed no 'Confidential Compute GPUs Ready state:' line" in v.reason
    v = judge("gpu.cc-ready", with_cc(ready_rc=0, ready_output="Confidential Compute GPUs "
                                                              "Ready state: pending"))
    assert v.reason.endswith("unknown GPUs ready state 'pending' from nvidia-smi conf-compute "
                             "-grs")


def test_an_attestation_record_without_output_does_not_parse_and_quotes_nothing() -> None:
    v = judge("gpu.cc-attestation", with_cc(attest_rc=1, attest_output=None), ATTEST)
    assert v.status is Status.ERROR and v.reason.endswith("the cc_attest record does not "
                                                          "parse: ''")


def test_a_fetch_of_another_url_keeps_the_url_asked() -> None:
    out = "url http://127.0.0.1:8006/cdh/resource/x/y/z\nvia curl rc 0 http 200 bytes 3"
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=out), ATTEST)
    assert v.status is Status.ERROR and v.evidence["url"] == URL


def test_an_empty_wget_release_is_empty_not_an_unanswered_cdh() -> None:
    out = f"url {URL}\nvia wget rc 0 bytes 0"
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=out), ATTEST)
    assert v.status is Status.FAIL
    assert v.reason.endswith("was not released: the resource came back empty")


def test_an_unanswered_cdh_says_what_may_be_missing() -> None:
    out = f"url {URL}\ncurl: (7) Failed to connect\nvia curl rc 7 http 000"
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=out), ATTEST)
    assert v.status is Status.FAIL
    assert v.reason.endswith(": the CDH did not answer (no CDH in the guest, or it is not a "
                             "confidential guest?)")


def test_tee_errors_quote_the_record_and_say_the_tee_is_unknown() -> None:
    v = judge("gpu.cc-tee", with_cc(log=None, tee_output=None))
    assert v.status is Status.ERROR and v.reason.endswith("the cc_tee record does not parse: ''")
    v = judge("gpu.cc-tee", with_cc(devices=("/dev/sev-guest", "/dev/tdx_guest")))
    assert v.reason.endswith("cannot tell its TEE")


# --------------------------------------------------------------------------- seed final
def test_a_collector_of_unknown_version_is_called_old_and_the_pod_is_kept() -> None:
    v = judge("gpu.cc-tee", dataclasses.replace(GOOD, cc=None, collector=None))
    assert v.status is Status.SKIP
    assert "its collector (kgc-guest/3 or older) recorded no" in v.reason
    assert v.evidence["pod"] == "kgc-run1/kgc-gpu-0"


def test_skips_for_a_missing_command_keep_the_pod_s_evidence() -> None:
    v = judge("gpu.cc-mode", with_cc(mode_rc=127, mode_output="nvidia-smi: not found"))
    assert v.status is Status.SKIP and v.evidence["rc"] == 127
    v = judge("gpu.cc-attestation", with_cc(attest_rc=127, attest_output=f"url {URL}\n"),
              ATTEST)
    assert v.status is Status.SKIP and v.evidence["url"] == URL


def test_a_client_error_after_a_2xx_answer_names_the_client_and_its_error() -> None:
    out = f"url {URL}\ncurl: (23) Failure writing output\nvia curl rc 23 http 200 bytes 12"
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=out), ATTEST)
    assert v.status is Status.FAIL
    assert v.reason.endswith("was not released: curl exit 23: curl: (23) Failure writing output")


def test_a_plain_guest_expects_the_profile_s_tee_and_keeps_what_it_saw() -> None:
    v = judge("gpu.cc-tee", with_cc(devices=(), kernel_lines=(), tdx_flag=False))
    assert v.status is Status.FAIL and v.expected == "AMD SEV-SNP"
    assert v.evidence["tee_devices"] == [] and v.evidence["tdx_cpu_flag"] is False



# --------------------------------------------------------------------------- seed post
def test_a_client_error_without_detail_names_the_exit_status_alone() -> None:
    out = f"url {URL}\nvia curl rc 23 http 200 bytes 12"
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=out), ATTEST)
    assert v.status is Status.FAIL and v.reason.endswith("was not released: curl exit 23")


def test_an_unparsable_attestation_record_keeps_its_evidence() -> None:
    v = judge("gpu.cc-attestation", with_cc(attest_rc=0, attest_output=f"url {URL}\n???"),
              ATTEST)
    assert v.status is Status.ERROR and v.evidence["cc_attest"] == f"url {URL}\n???"
