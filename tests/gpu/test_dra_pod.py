"""The DRA GPU pod (issue 20 step 3): manifests per request mode, the claim evidence's
record round trip, and Kata's DRA cold-plug gap named by the classifier.

Kata texts: kata-containers PR #13323 (fixes #13322), fixtures/gpu/dra-pod/kata-events.yaml.
Field names of the template: k8s.io/api resource/v1 types.go (DeviceRequest.exactly,
ExactDeviceRequest deviceClassName/allocationMode/count/selectors[].cel.expression).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu.synth import REPO, h200_profile, pod
from kgc.layers.gpu.classify import classify
from kgc.layers.gpu.evidence import (
    ClaimEvidence,
    ClaimResult,
    ContainerState,
    GpuPodEvidence,
    PodCondition,
    PodEvent,
)
from kgc.layers.gpu.plan import PodPlan, claim_template_manifest, dra_pod_manifest, gpu_pod_manifest

FIXTURE = REPO / "fixtures" / "gpu" / "dra-pod" / "kata-events.yaml"
CASES = list(yaml.safe_load(Path(FIXTURE).read_text())["cases"])
LABELS = {"kgc.io/run": "r1"}
P = PodPlan("kgc-gpu-gpu-a-0", "gpu-a", "nvidia.com/gpu", 1)


def _gp(mode: str, selector: str | None = None) -> Any:
    gp = h200_profile()
    req = gp.request.model_copy(update={"mode": mode, "selector": selector})
    return gp.model_copy(update={"request": req})


@pytest.mark.parametrize("mode", ["device-plugin", "dra-extended"])
def test_extended_modes_keep_todays_manifest(mode: str) -> None:
    gp = _gp(mode)
    kw: dict[str, Any] = dict(namespace="ns", configmap="cm", labels=LABELS)
    assert dra_pod_manifest(P, gp, **kw) == gpu_pod_manifest(P, gp, **kw)


def test_claim_mode_references_a_v1_template() -> None:
    gp = _gp("claim", 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H200")')
    t = claim_template_manifest(P, gp, namespace="ns", labels=LABELS)
    assert t["apiVersion"] == "resource.k8s.io/v1" and t["kind"] == "ResourceClaimTemplate"
    assert t["metadata"]["labels"]["kgc.io/run"] == "r1"
    (req,) = t["spec"]["spec"]["devices"]["requests"]
    assert set(req) == {"name", "exactly"}
    ex = req["exactly"]
    assert ex["deviceClassName"] == "gpu.nvidia.com" and ex["count"] == 1
    assert ex["allocationMode"] == "ExactCount"
    assert ex["selectors"] == [{"cel": {"expression": gp.request.selector}}]
    m = dra_pod_manifest(P, gp, namespace="ns", configmap="cm", labels=LABELS)
    c = m["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in c["limits"] and "nvidia.com/gpu" not in c["requests"]
    assert c["claims"] == [{"name": "gpu", "request": req["name"]}]
    assert m["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": t["metadata"]["name"]}]


def test_claim_without_selector_has_no_selectors() -> None:
    t = claim_template_manifest(P, _gp("claim"), namespace="ns", labels=LABELS)
    assert "selectors" not in t["spec"]["spec"]["devices"]["requests"][0]["exactly"]


def test_claim_evidence_round_trips_and_old_bundles_load() -> None:
    c = ClaimEvidence(name="kgc-gpu-gpu-a-0-gpu-x1", allocated=True, node="gpu-a",
                      results=(ClaimResult("gpu", "gpu.nvidia.com", "gpu-a", "gpu-0"),),
                      reserved_for=("kgc-gpu-gpu-a-0",),
                      device_attributes={"gpu-0": {"uuid": "GPU-1", "pciBusID": "0000:41:00.0"}})
    p = pod(None, request_mode="claim", claims=(c,))
    assert GpuPodEvidence.from_dict(p.to_dict()) == p
    old = pod(None).to_dict()
    assert "request_mode" not in old and "claims" not in old
    assert GpuPodEvidence.from_dict(old).request_mode == "device-plugin"


def _kata_pod(case: dict[str, Any]) -> GpuPodEvidence:
    events = (PodEvent("Normal", "Scheduled", "Successfully assigned kgc-run1/kgc-gpu-0 to "
                       "gpu-a", 1, "default-scheduler"),
              *(PodEvent(e[0], e[1], e[2], 1, "kubelet") for e in case["events"]))
    return pod(None, phase="Pending", timed_out=True, waited_s=1200.0,
               conditions=(PodCondition("PodScheduled", "True"),), events=events,
               containers=(ContainerState("collector", "waiting", "ContainerCreating"),),
               request_mode=case["request_mode"])


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_kata_dra_gap_is_named_never_a_timeout(case: dict[str, Any]) -> None:
    assert "github.com/" in case["source"] or "kata-containers#" in case["source"]
    cause = classify(_kata_pod(case))
    assert cause.id == case["expect"]["cause"], cause
    text = cause.summary + " " + cause.remediation
    for w in case["expect"]["words"]:
        assert w in text, (w, text)
