"""What mutation testing of the gpu layer's own evaluators and its pod-failure classifier
found untested (issue 21 item 8; benchmarks/mutation.py modules ``gpu.checks``,
``gpu.classify``).

The mutants that survived the older tests changed what a user reads, not the status: the
reason naming the pod, node or device, the remediation, ``expected``/``found`` and the
evidence kept. So every check of ``kgc.layers.gpu.checks`` is judged on the hand-made vectors
of :mod:`gpu.gpu_vectors` -- the real H200 and CPU-only guest captures in synthetic cluster
surroundings, and pods stopped by the texts kube-scheduler, the kubelet, containerd, Kata,
QEMU and the NVIDIA driver print -- and must say exactly what ``tests/data/gpu_verdicts.json``
recorded (regenerate with ``.venv/bin/python tests/gpu/gpu_verdicts.py`` and review the
diff). The tests below it state single behaviours by hand.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpu.gpu_vectors import OWN, VECTORS, Vector, h200_guest, mismatch
from gpu.gpu_verdicts import CORPUS, verdicts
from gpu.synth import pod
from kgc.core.model import Status
from kgc.layers.gpu.checks import CHECKS, PodSubject
from kgc.layers.gpu.classify import classify
from kgc.layers.gpu.evidence import ContainerState, PodEvent

DOC = json.loads(CORPUS.read_text())


def test_the_corpus_covers_every_vector_and_check() -> None:
    assert DOC["format"] == "kgc-gpu-verdicts/1"
    assert sorted(DOC["vectors"]) == sorted(v.name for v in VECTORS)
    seen: dict[str, set[str]] = {}
    for x in DOC["vectors"].values():
        for key, row in x["verdicts"].items():
            seen.setdefault(key.split(" ")[0], set()).add(row["status"])
    assert sorted(seen) == sorted(OWN)
    # each check passes somewhere and gives a non-pass somewhere: no branch family unpinned
    assert {c: s for c, s in seen.items() if "pass" not in s or s == {"pass"}} == {}


@pytest.mark.parametrize("v", VECTORS, ids=[v.name for v in VECTORS])
def test_vector_gives_the_recorded_verdicts(v: Vector) -> None:
    want = DOC["vectors"][v.name]
    assert mismatch(CHECKS, v) == []
    got = verdicts(v)
    assert sorted(got) == sorted(want["verdicts"])
    for key, row in want["verdicts"].items():
        assert got[key] == row, f"{v.name}: {key}"


# =========================================================================== by hand
UNSUPPORTED = ("NVRM: The NVIDIA GPU 0000:00:06.0 (PCI ID: 10de:1db4)",
               "NVRM: installed in this system is not supported by open",
               "NVRM: nvidia.ko because it does not include the required GPU",
               "NVRM: System Processor (GSP).")


@pytest.mark.parametrize("stamps", [False, True], ids=["bare", "dmesg-timestamps"])
def test_an_unsupported_gpu_is_named_from_the_guests_dmesg_as_the_collector_records_it(
        stamps: bool) -> None:
    """The collector keeps plain ``dmesg`` output, each line stamped ``[    3.402117] ``:
    the open driver's three-line refusal is still read across the stamps (before the fix
    only unstamped lines were, and the pod was an unrecognised container failure)."""
    lines = tuple(f"[    3.40{i}117] {ln}" if stamps else ln for i, ln in enumerate(UNSUPPORTED))
    g = dataclasses.replace(h200_guest(), smi=None, complete=False, dmesg=lines)
    p = pod(g, phase="Failed", containers=(ContainerState("collector", "terminated", "Error",
                                                          None, 1),))
    c = classify(p)
    assert c.id == "gpu-unsupported-open-driver" and c.status is Status.FAIL
    assert c.summary == ("the guest's open NVIDIA kernel driver does not support the GPU "
                         "0000:00:06.0 (10de:1db4) passed through on gpu-a")
    assert "proprietary nvidia.ko" in c.remediation


def test_two_health_failures_give_each_remedy_once() -> None:
    """An uncorrectable ECC error during the pod and a failed row remapping: the reset comes
    first and the RMA step once (the ECC remedy already ends with it; before, the RMA
    sentence was printed twice)."""
    v = next(x for x in VECTORS if x.name == "health-two-failures")
    got = CHECKS.get("gpu.health").judge(PodSubject(v.run.pods[0], v.run), v.profile, "t")
    assert got.status is Status.FAIL
    assert got.remediation.count("follow NVIDIA's RMA process") == 1
    assert got.remediation.startswith("Reset the GPU before it is handed to a VM")


def test_an_unallocatable_claim_without_cluster_evidence_says_it_was_not_recorded() -> None:
    """classify() without the cluster (its default) still names the DRA cause."""
    p = pod(None, node=None, phase="Pending", request_mode="claim", containers=(),
            conditions=(), timed_out=True, events=(PodEvent(
                "Warning", "FailedScheduling", "0/3 nodes are available: 3 cannot allocate "
                "all claims.", 1, "default-scheduler"),))
    c = classify(p)
    assert c.id == "dra-unallocatable"
    assert "(what the nodes publish was not recorded)" in c.summary


def test_an_unsupported_gpu_without_its_address_line_is_still_named_cleanly() -> None:
    """The refusal's first line (the GPU's address and PCI id) can fall outside the lines the
    collector keeps: the summary then names no address (before: 'the GPU  (no GSP)')."""
    g = dataclasses.replace(h200_guest(), smi=None, complete=False, dmesg=UNSUPPORTED[1:])
    p = pod(g, phase="Failed", containers=(ContainerState("collector", "terminated", "Error",
                                                          None, 1),))
    assert classify(p).summary == ("the guest's open NVIDIA kernel driver does not support the "
                                   "GPU (no GSP) passed through on gpu-a")


def test_product_names_compare_without_the_separators_around_them() -> None:
    """GFD's label and nvidia-smi's name meet in one spelling: lower case, runs of other
    characters as one dash, none at either end (a name printed with a trailing space or
    a label with a leading separator still agrees)."""
    from kgc.layers.gpu.checks import normalize_product

    assert normalize_product(" NVIDIA H200 ") == "nvidia-h200"
    assert normalize_product("-NVIDIA-H100-80GB-HBM3-SHARED") == "nvidia-h100-80gb-hbm3"
    assert normalize_product("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == "nvidia-a100-sxm4-40gb"
