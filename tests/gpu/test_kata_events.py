"""Kata's, QEMU's and NVIDIA's own failure texts, judged: event list -> cause -> verdict.

Every case in fixtures/gpu/kata-events/events.yaml names where its text comes from (an issue
thread that pasted it, or the Kata/QEMU/NVIDIA source whose format string prints it) and how it
was transcribed. Each becomes one scheduled GPU pod that did not run; the cause
:func:`kgc.layers.gpu.classify.classify` names, the verdict of ``gpu.pod-runs`` and the words
of its remediation are checked — including the words that must NOT appear, where two causes
look alike but need different fixes (memlock vs the IOMMU's dma_entry_limit; a vsock dial
timeout vs a slow container start; QEMU dying vs the collector failing).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu.synth import REPO, h200_guest, h200_profile, pod, run
from kgc.core.model import Status
from kgc.layers.gpu.checks import CHECKS, PodSubject
from kgc.layers.gpu.classify import KATA, classify
from kgc.layers.gpu.evidence import ContainerState, GpuPodEvidence, PodCondition, PodEvent

FIXTURE = REPO / "fixtures" / "gpu" / "kata-events" / "events.yaml"
TRANSCRIPTIONS = {"verbatim", "inner", "format"}


def _cases() -> list[dict[str, Any]]:
    return list(yaml.safe_load(Path(FIXTURE).read_text())["cases"])


CASES = _cases()


def build(case: dict[str, Any]) -> GpuPodEvidence:
    """The pod the case describes: scheduled, then stopped by the recorded failure."""
    containers = tuple(ContainerState(c[0], c[1], c[2], c[3], c[4] if len(c) > 4 else None)
                       for c in case.get("containers") or ())
    events = (PodEvent("Normal", "Scheduled", "Successfully assigned kgc-run1/kgc-gpu-0 to "
                       "gpu-a", 1, "default-scheduler"),
              *(PodEvent(e[0], e[1], e[2], 1, "kubelet") for e in case.get("events") or ()))
    guest = None
    if case.get("guest_dmesg"):  # the collector's partial output: it never finished
        guest = dataclasses.replace(h200_guest(), dmesg=tuple(case["guest_dmesg"]),
                                    smi=None, complete=False)
    phase = case.get("phase", "Pending")
    return pod(guest, phase=phase, timed_out=phase == "Pending", waited_s=1200.0,
               conditions=(PodCondition("PodScheduled", "True"),), events=events,
               containers=containers or (ContainerState("collector", "waiting",
                                                        "ContainerCreating"),))


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_each_case_names_its_source(case: dict[str, Any]) -> None:
    assert case["transcription"] in TRANSCRIPTIONS
    assert "github.com/" in case["source"] or "src/" in case["source"] \
        or "QEMU" in case["source"] or "ttrpc" in case["source"], case["source"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kata_texts_get_their_own_cause_and_fix(case: dict[str, Any]) -> None:
    p = build(case)
    exp = case["expect"]
    c = classify(p)
    assert c.id == exp["cause"], (c.id, c.summary)
    assert str(c.status) == exp["status"]
    text = c.summary + " | " + c.remediation
    for w in exp.get("words", ()):
        assert w in text, (w, text)
    for w in exp.get("not_words", ()):
        assert w not in text, (w, text)
    v = CHECKS.get("gpu.pod-runs").judge(PodSubject(p, run(p)), h200_profile(), "cluster")
    assert str(v.status) == exp["status"] and v.evidence["cause"]["id"] == exp["cause"]
    # every event is kept with the verdict, whatever was matched
    assert v.evidence["events"] == [e.describe() for e in p.events]
    assert "no event names a failure" not in v.reason


def test_every_kata_pattern_is_exercised_by_a_fixture() -> None:
    named = {c["expect"]["cause"] for c in CASES}
    # the older causes keep their cases in tests/gpu/test_classify.py (kata-containers#4211,
    # #835, #12549 texts)
    covered_elsewhere = {"vfio-group-not-viable", "bar-no-space", "cdi-unresolvable",
                         "kata-dra-coldplug"}  # DRA: tests/gpu/test_dra_pod.py
    missing = {k.id for k in KATA} - named - covered_elsewhere
    assert not missing, missing


def test_an_unrecognised_warning_is_quoted_in_an_error_never_a_timeout() -> None:
    case = next(c for c in CASES if c["id"] == "unrecognised-kata-warning")
    p = build(case)
    c = classify(p)
    assert c.status is Status.ERROR
    assert "group 1 used in multiple address spaces" in c.summary
    assert c.matched and "multiple address spaces" in c.matched


def test_several_unrecognised_warnings_are_all_kept() -> None:
    base = build(next(c for c in CASES if c["id"] == "unrecognised-kata-warning"))
    extra = tuple(PodEvent("Warning", f"Odd{i}", f"odd message {i}") for i in range(5))
    p = dataclasses.replace(base, events=base.events + extra)
    c = classify(p)
    # six warnings: the last three quoted, the count of the others said, all attached
    assert c.id == "unknown" and c.status is Status.ERROR
    assert "odd message 4" in c.summary and "(and 3 earlier)" in c.summary
    v = CHECKS.get("gpu.pod-runs").judge(PodSubject(p, run(p)), h200_profile(), "cluster")
    assert len(v.evidence["events"]) == len(p.events)


def test_a_scheduling_warning_before_the_schedule_is_history_not_a_cause() -> None:
    p = build({"events": [["Warning", "FailedScheduling", "0/2 nodes are available: 2 "
                           "Insufficient nvidia.com/pgpu."]]})
    assert classify(p).id == "start-timeout"


def test_the_root_cause_wins_over_its_consequence() -> None:
    """An unsupported GPU makes the agent's CDI wait time out: the GPU is named, not the wait."""
    gpu = next(c for c in CASES if c["id"] == "gpu-unsupported-open-driver")
    cdi = next(c for c in CASES if c["id"] == "cdi-timeout")
    p = build({**gpu, "events": cdi["events"]})
    assert classify(p).id == "gpu-unsupported-open-driver"


@pytest.mark.parametrize("text", [
    # QEMU's wording (glibc strerror), the fixture's case
    "vfio 0000:41:00.0: failed to open /dev/vfio/45: Permission denied",
    # a Go component's os.PathError: Go's errno strings are lower case
    # (go/src/syscall/zerrors_linux_amd64.go: EACCES "permission denied",
    # EPERM "operation not permitted")
    "failed to create shim task: open /dev/vfio/45: permission denied: unknown",
    "open /dev/vfio/vfio: operation not permitted",
])
def test_a_vfio_device_node_refusal_is_named_in_either_wording(text: str) -> None:
    base = build(next(c for c in CASES if c["id"] == "vfio-permission"))
    p = dataclasses.replace(base, events=(PodEvent("Warning", "FailedCreatePodSandBox", text),))
    c = classify(p)
    assert c.id == "vfio-permission", (c.id, c.summary)
    assert "/dev/vfio/" in c.summary
