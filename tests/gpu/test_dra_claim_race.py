"""The gpu layer reads a DRA pod's ResourceClaim while the claim exists, and a later read
that finds it released does not erase what was observed.

Kubernetes semantics the scripts below replay (no cluster, no lab):

- the scheduler's DRA plugin writes ``status.allocation`` and ``status.reservedFor`` in
  PreBind, before it binds the pod (``spec.nodeName``);
- once the pod is done, kube-controller-manager's ResourceClaim controller removes it from
  ``reservedFor``, clears the allocation and deletes a claim generated for the pod from a
  ResourceClaimTemplate (pkg/controller/resourceclaim/controller.go, syncClaim);
- the collector judges the pod states its watch loop happens to see: under load a state
  it reacts to ("Running") may already be gone when its GET reaches the API server.

The lab reproduced it (dra-good, 0.5 s injected before each claim GET): the read at
"running" answered 404, replaced the allocated read made when the claim was first named,
and gpu.dra-allocation / gpu.dra-device-match were ``error`` ("could not be read: 404 Not
Found") instead of ``pass``.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from gpu.synth import REPO, cases, h200_profile
from kgc.core.model import Status
from kgc.kube import PodOutcome
from kgc.layers.gpu import LAYER, GpuRunEvidence, judge_run
from kgc.layers.gpu import collect as gather_mod
from kgc.layers.gpu.evidence import ClaimEvidence
from kgc.layers.gpu.plan import PodPlan

CLAIM = json.loads((REPO / "fixtures/gpu/dra-pod/claim-allocated.json").read_text())["claim"]
SLICES = json.loads((REPO / "fixtures/gpu/dra-pod/slice.json").read_text())["slices"]
LOG = (REPO / "fixtures/guest/h200-firecracker.raw.txt").read_text()
NAME = "kgc-gpu-0"  # the pod CLAIM is reserved for
CLAIM_NAME = CLAIM["metadata"]["name"]


def _gp() -> Any:
    gp = h200_profile()
    return gp.model_copy(update={"request": gp.request.model_copy(update={"mode": "claim"})})


def _pod(phase: str, node: str | None, named: bool = True) -> dict[str, Any]:
    st: dict[str, Any] = {"phase": phase}
    if named:
        st["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": CLAIM_NAME}]
    if phase == "Succeeded":
        st["containerStatuses"] = [{"name": "collector", "state": {"terminated": {
            "exitCode": 0, "reason": "Completed"}}}]
    return {"metadata": {"name": NAME, "namespace": "kgc-run1", "uid": "u-1"},
            "spec": {"nodeName": node, "runtimeClassName": "kata-qemu-nvidia-gpu",
                     "containers": [{"name": "collector", "image": "img"}]},
            "status": st}


def unallocated() -> dict[str, Any]:
    c = copy.deepcopy(CLAIM)
    c["status"] = {}
    return c


def released() -> dict[str, Any]:
    """The controller's first step after the pod is done: unreserved, deallocated."""
    c = unallocated()
    c["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:09Z"
    return c


GONE = None  # the claim was deleted: the GET answers 404


class _Resp:
    def __init__(self, doc: Any) -> None:
        self.data = json.dumps(doc).encode()


class _Kube:
    """Claims and slices as the API server has them at the moment of each call."""

    api = None

    def __init__(self, slice_errors: int = 0) -> None:
        self.claim: dict[str, Any] | None = GONE
        self.calls: list[str] = []
        self.slice_errors = slice_errors  # this many slice lists are refused first

    def call(self, verb: str, resource: str, fn: Any, *args: Any, **kw: Any) -> Any:
        self.calls.append(resource)
        if "resourceslices" in resource and self.slice_errors:
            self.slice_errors -= 1
            raise ApiException(status=500, reason="Internal Server Error")
        if "resourceslices" in resource:
            node = kw["field_selector"].removeprefix("spec.nodeName=")
            return _Resp({"items": [s for s in SLICES if s["spec"].get("nodeName") == node]})
        if self.claim is GONE or args[0] != CLAIM_NAME:
            raise ApiException(status=404, reason="Not Found")
        return _Resp(self.claim)


class _Run:
    namespace = "kgc-run1"
    labels = {"kgc.io/run": "r1"}

    def create(self, obj: Any) -> None:
        pass


# one step: what the API server holds when the watch loop looks at the pod, and the pod
# state the loop sees (None: the loop saw nothing new this time)
Step = tuple[dict[str, Any] | None, dict[str, Any] | None]


def _collect(monkeypatch: pytest.MonkeyPatch, steps: list[Step],
             end: dict[str, Any] | None = GONE, slice_errors: int = 0) -> tuple[Any, _Kube]:
    """run_plan for one pod whose watch loop sees ``steps``; ``end`` is the claim when the
    pod has finished (by then the controller has usually deleted it)."""
    k = _Kube(slice_errors)

    @contextmanager
    def for_profile(*a: Any, **kw: Any) -> Iterator[_Run]:
        yield _Run()

    def run_pods(run: Any, manifests: list[Mapping[str, Any]], *, settled: Callable[..., Any],
                 **kw: Any) -> list[PodOutcome]:
        for claim, pod in steps:
            k.claim = claim
            if pod is not None:
                assert settled(pod, []) is None
        k.claim = end
        return [PodOutcome(NAME, pod=_pod("Succeeded", "gpu-a"), log=LOG,
                           settled="the pod succeeded")]

    monkeypatch.setattr(gather_mod, "CLAIM_READ_WORKERS", 0)  # each read where it is asked
    monkeypatch.setattr(gather_mod.kube.Run, "for_profile", for_profile)
    monkeypatch.setattr(gather_mod.kube, "run_pods", run_pods)
    cl = cases()["h200-good"].cluster
    pods = gather_mod.run_plan(k, object(), _gp(), cl,  # type: ignore[arg-type]
                               [PodPlan(NAME, "gpu-a", "nvidia.com/pgpu", 1)])
    return GpuRunEvidence(cl, tuple(pods)), k


def _verdicts(run: GpuRunEvidence) -> dict[str, Any]:
    return {c: judge_run(LAYER.checks.get(c), run, _gp())
            for c in ("gpu.dra-allocation", "gpu.dra-device-match")}


def test_a_read_that_finds_the_claim_deleted_keeps_the_allocation_seen_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the lab's sequence: first named (already allocated: the scheduler was quicker than
    # the loop), the loop then sees "Running" but its GET comes after the pod finished
    run, k = _collect(monkeypatch, [(CLAIM, _pod("Pending", None)),
                                    (GONE, _pod("Running", "gpu-a"))])
    v = _verdicts(run)
    assert v["gpu.dra-allocation"].status is Status.PASS, v["gpu.dra-allocation"].reason
    # the slice attributes come from the allocation's node, even before the pod's was known
    assert v["gpu.dra-device-match"].status is Status.PASS, v["gpu.dra-device-match"].reason
    # all there is to see was seen: the loop reads no more (one GET per pod, not three)
    assert k.calls.count("resourceclaims.resource.k8s.io") == 1


@pytest.mark.parametrize("late", ["gone", "released"])
def test_a_later_read_that_finds_the_claim_released_does_not_erase_the_allocation(
        monkeypatch: pytest.MonkeyPatch, late: str) -> None:
    # bound and allocated, but the slices could not be listed: read again at "Running",
    # by when the claim is released or gone; the allocation seen stands, the attributes
    # are missing
    run, k = _collect(monkeypatch, [(CLAIM, _pod("Pending", "gpu-a")),
                                    (released() if late == "released" else GONE,
                                     _pod("Running", "gpu-a"))], slice_errors=1)
    v = _verdicts(run)
    assert k.calls.count("resourceclaims.resource.k8s.io") == 2
    assert v["gpu.dra-allocation"].status is Status.PASS, v["gpu.dra-allocation"].reason
    assert v["gpu.dra-device-match"].status is Status.SKIP
    assert "were not recorded" in v["gpu.dra-device-match"].reason


def test_the_pod_s_binding_is_a_moment_its_claim_is_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # named before the scheduler allocated; bound (nodeName: allocated and reserved in
    # PreBind); "Running" seen only after the controller deleted the claim
    run, k = _collect(monkeypatch, [(unallocated(), _pod("Pending", None)),
                                    (CLAIM, _pod("Pending", "gpu-a")),
                                    (GONE, _pod("Running", "gpu-a"))])
    v = _verdicts(run)
    assert v["gpu.dra-allocation"].status is Status.PASS, v["gpu.dra-allocation"].reason
    assert v["gpu.dra-device-match"].status is Status.PASS, v["gpu.dra-device-match"].reason
    # read when named and when bound (then all was seen), the node's slices listed once
    assert k.calls.count("resourceclaims.resource.k8s.io") == 2
    assert k.calls.count("resourceslices.resource.k8s.io") == 1


def test_a_claim_never_seen_allocated_is_never_a_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    # named unallocated, and gone by the next read: no evidence of the allocation at all
    run, _ = _collect(monkeypatch, [(unallocated(), _pod("Pending", None)),
                                    (GONE, _pod("Running", "gpu-a"))])
    v = _verdicts(run)
    assert v["gpu.dra-allocation"].status is Status.ERROR
    assert "404" in v["gpu.dra-allocation"].reason
    assert v["gpu.dra-device-match"].status is Status.ERROR


def test_a_claim_that_stays_unallocated_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = _collect(monkeypatch, [(unallocated(), _pod("Pending", None)),
                                    (unallocated(), _pod("Pending", None))], end=unallocated())
    v = _verdicts(run)
    assert v["gpu.dra-allocation"].status is Status.FAIL
    assert "is not allocated" in v["gpu.dra-allocation"].reason


def test_a_pod_whose_claim_was_never_read_is_read_once_at_the_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the loop saw nothing before the pod finished: one read at the end (an honest error
    # once the claim is gone; a pass only while the claim still shows the allocation)
    run, k = _collect(monkeypatch, [], end=CLAIM)
    assert _verdicts(run)["gpu.dra-allocation"].status is Status.PASS
    assert k.calls.count("resourceclaims.resource.k8s.io") == 1
    run, _ = _collect(monkeypatch, [])
    assert _verdicts(run)["gpu.dra-allocation"].status is Status.ERROR


def test_readings_merge_claim_by_claim() -> None:
    ok = ClaimEvidence(name="a", allocated=True, node="gpu-a", reserved_for=(NAME,),
                       results=())
    gone = ClaimEvidence(name="a", error="could not be read: 404 Not Found")
    other = ClaimEvidence(name="b", allocated=False)
    d = {"request_mode": "claim", "extended_claim": None, "extended_mappings": ()}
    merged = gather_mod.merge_readings({**d, "claims": (ok,)}, {**d, "claims": (gone, other)},
                                       NAME)
    assert merged["claims"] == (ok, other)
    # a reading of the same rank: the later one stands (it may add the slice attributes)
    later = ClaimEvidence(name="a", allocated=True, node="gpu-a", reserved_for=(NAME,),
                          device_attributes={"gpu-0": {"uuid": "GPU-x"}})
    assert gather_mod.merge_readings({**d, "claims": (ok,)}, {**d, "claims": (later,)},
                                     NAME)["claims"] == (later,)
    assert gather_mod.merge_readings(None, {**d, "claims": (gone,)}, NAME)["claims"] == (gone,)


class _SlowKube(_Kube):
    """A claim GET for pod A's claim hangs until released: the API under load."""

    def __init__(self) -> None:
        super().__init__()
        self.claim = CLAIM
        self.release = threading.Event()
        self.b_read = threading.Event()

    def call(self, verb: str, resource: str, fn: Any, *args: Any, **kw: Any) -> Any:
        if "resourceclaims" in resource and args[0] == "a-claim":
            assert self.release.wait(10)
            return _Resp({**CLAIM, "metadata": {"name": "a-claim"}})
        out = super().call(verb, resource, fn, *args, **kw)
        if "resourceclaims" in resource:
            self.b_read.set()
        return out


def test_one_pod_s_slow_read_does_not_hold_up_another_s_nor_the_loop() -> None:
    # the loop calls saw() under its watch lock for every pod in turn: a read that hangs
    # must not delay the next pod's read until after that pod finished
    k = _SlowKube()
    reader = gather_mod.ClaimReader(k, "kgc-run1", _gp(), workers=2)  # type: ignore[arg-type]
    a = _pod("Pending", "gpu-a")
    a = {**a, "metadata": {**a["metadata"], "name": "a"},
         "status": {**a["status"], "resourceClaimStatuses": [
             {"name": "gpu", "resourceClaimName": "a-claim"}]}}
    reader.saw(a, settled=False)  # returns at once though the read hangs
    reader.saw(_pod("Pending", "gpu-a"), settled=False)
    assert k.b_read.wait(10), "pod B's read waited behind pod A's"
    k.release.set()
    seen = reader.finish()
    assert set(seen) == {"a", NAME}
    assert all(c.allocated for d in seen.values() for c in d["claims"])
