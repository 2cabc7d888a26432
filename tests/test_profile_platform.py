"""Every platform fact once: each built-in profile runs every layer on the same Kata
RuntimeClass and GPU resource names (``platform`` in the profile).

The pods each layer would create are built offline from the profile (the gpu layer's plan,
the sizing layer's shape matrix, the keda layer's measured workload), so the test reads what
a live run sends to the API server, not what a section says. Before ``platform`` existed the
generic profile's sizing GPU shape ran under ``kata`` while the gpu layer used
``kata-qemu-nvidia-gpu``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgc.core.profile import Profile, ProfileError, load_profile

REPO = Path(__file__).resolve().parents[1]
PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))


def _gpu_node(name: str, resource: str) -> Any:
    from kgc.layers.gpu.evidence import NodeInfo

    cap = {"cpu": "64", "memory": "512Gi", "pods": "110", resource: "4"}
    return NodeInfo(name, "6.8.0", {"nvidia.com/gpu.present": "true"}, cap, dict(cap), True)


def _pods_per_layer(prof: Profile, resource: str) -> dict[str, list[dict[str, Any]]]:
    """layer -> the pod specs it would create on a cluster whose GPU nodes advertise
    ``resource`` (the keda workload with a GPU request, as a GPU platform would set it)."""
    from kgc.layers.gpu import plan as gpu_plan
    from kgc.layers.gpu.checks import settings
    from kgc.layers.gpu.evidence import ClusterGpuEvidence
    from kgc.layers.keda.checks import keda_profile
    from kgc.layers.keda.collect import runtime_classes, workload_manifest
    from kgc.layers.sizing.collect import plan as sizing_plan
    from kgc.layers.sizing.collect import sizing_profile
    from kgc.layers.sizing.evidence import ClusterObjects

    gp = settings(prof)
    cluster = ClusterGpuEvidence(runtime_classes=(), nodes=(_gpu_node("gpu-a", resource),))
    plans, _ = gpu_plan.plan(cluster, gp)
    gpu = [gpu_plan.gpu_pod_manifest(p, gp, namespace="ns", configmap="cm", labels={})["spec"]
           for p in plans]
    node = {"metadata": {"name": "gpu-a"},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", resource: "4"}}}
    sp = sizing_profile(prof)
    # the cluster has every RuntimeClass a layer names (which one each uses is the question)
    names = {gp.runtime_class, sp.runtime_class, getattr(sp, "gpu_runtime_class", None)}
    names |= {s.runtime_class for s in sp.shapes}
    rcs = tuple({"metadata": {"name": n}, "handler": n} for n in sorted(names - {None}))
    splans, _ = sizing_plan(ClusterObjects(nodes=(node,), runtime_classes=rcs), sp,
                            prof.cluster, namespace="ns", labels={})
    sizing = [p.manifest["spec"] for p in splans if not p.not_applicable]
    kp = keda_profile(prof)
    kp = kp.model_copy(update={"gpu": kp.gpu.model_copy(update={"per_pod": 1})})
    keda = [workload_manifest("kata", kp)["spec"]["template"]["spec"]]
    assert runtime_classes(kp)["kata"] == keda[0]["runtimeClassName"]
    return {"gpu": gpu, "sizing": sizing, "keda": keda}


def _gpu_requests(spec: dict[str, Any]) -> set[str]:
    out: set[str] = set()
    for c in spec.get("containers", []) + spec.get("initContainers", []):
        res = c.get("resources") or {}
        for part in ("limits", "requests"):
            out |= {k for k in (res.get(part) or {}) if "/" in k}
    return out


@pytest.mark.parametrize("name", PROFILES)
def test_every_layer_runs_on_the_platforms_runtimeclass_and_resource(name: str) -> None:
    prof = load_profile(REPO / "profiles" / f"{name}.yaml")
    platform = getattr(prof, "platform", None)
    classes: dict[str, set[str]] = {}
    for resource in ("nvidia.com/pgpu", "nvidia.com/gpu"):
        for layer, specs in _pods_per_layer(prof, resource).items():
            assert specs, f"{name}: the {layer} layer would create no pod"
            for spec in specs:
                classes.setdefault(layer, set()).add(spec.get("runtimeClassName"))
                if platform is not None:
                    assert _gpu_requests(spec) <= set(platform.gpu.resources), (name, layer)
    # one class for every layer's Kata pods (the sizing GPU shape included)
    assert len(set().union(*classes.values())) == 1, f"{name}: {classes}"
    assert platform is not None, f"{name}: the profile has no platform section"
    assert set().union(*classes.values()) == {platform.kata.runtime_class}
    # the node's runtime layer looks for the handler the gpu layer expects the class to name
    assert prof.runtime.kata_handler == platform.kata.expected_handler
    assert prof.cluster.gpu.expected_handler == platform.kata.expected_handler
    assert prof.cluster.gpu.resources == platform.gpu.resources
    assert prof.cluster.sizing.gpu_resources == platform.gpu.resources


def test_generic_profile_runs_kata_deploys_nvidia_gpu_class() -> None:
    """kata-deploy's RuntimeClass for NVIDIA GPU passthrough is ``kata-qemu-nvidia-gpu``,
    its containerd runtime (the handler) named alike."""
    kata = load_profile("generic-nvidia-passthrough").platform.kata
    assert (kata.runtime_class, kata.expected_handler) == ("kata-qemu-nvidia-gpu",) * 2


MOVED = [
    ("runtime:\n  kata_handler: kata\n", "runtime.kata_handler", "platform.kata.handler"),
    ("runtime:\n  runtime_class: kata\n", "runtime.runtime_class",
     "platform.kata.runtime_class"),
    ("cluster:\n  namespace_prefix: x-\n", "cluster.namespace_prefix",
     "platform.namespace_prefix"),
    ("cluster:\n  label: x.io/run\n", "cluster.label", "platform.run_label"),
    ("cluster:\n  gpu:\n    runtime_class: k\n", "cluster.gpu.runtime_class",
     "platform.kata.runtime_class"),
    ("cluster:\n  gpu:\n    handler: k\n", "cluster.gpu.handler", "platform.kata.handler"),
    ("cluster:\n  gpu:\n    resources: [a.b/c]\n", "cluster.gpu.resources",
     "platform.gpu.resources"),
    ("cluster:\n  gpu:\n    device_plugin_selector: app=x\n",
     "cluster.gpu.device_plugin_selector", "platform.gpu.device_plugin.selector"),
    ("cluster:\n  gpu:\n    device_plugin_namespace: x\n",
     "cluster.gpu.device_plugin_namespace", "platform.gpu.device_plugin.namespace"),
    ("cluster:\n  sizing:\n    runtime_class: kata\n", "cluster.sizing.runtime_class",
     "platform.kata.runtime_class"),
    ("cluster:\n  sizing:\n    gpu_runtime_class: kata\n", "cluster.sizing.gpu_runtime_class",
     "platform.kata.runtime_class"),
    ("cluster:\n  sizing:\n    gpu_resources: [a.b/c]\n", "cluster.sizing.gpu_resources",
     "platform.gpu.resources"),
    ("cluster:\n  keda:\n    runtime_class: kata\n", "cluster.keda.runtime_class",
     "platform.kata.runtime_class"),
    ("cluster:\n  keda:\n    gpu: {resource: a.b/c}\n", "cluster.keda.gpu.resource",
     "platform.gpu.resources"),
]


@pytest.mark.parametrize(("body", "old", "new"), MOVED, ids=[m[1] for m in MOVED])
def test_a_former_per_layer_key_is_refused_naming_its_platform_key(
        tmp_path: Path, body: str, old: str, new: str) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("name: t\n" + body)
    with pytest.raises(ProfileError) as exc:
        load_profile(p)
    lines = str(exc.value).splitlines()
    assert lines[0] == "invalid profile" and len(lines) == 2, lines
    assert lines[1].strip().startswith(f"{p}: {old}: moved to {new} "), lines


def test_the_platform_is_read_by_every_section(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("name: t\nplatform:\n  kata: {runtime_class: kata-clh, handler: kata-clh-h}\n"
                 "  gpu: {resources: [nvidia.com/GH100], device_plugin: {selector: app=dp}}\n"
                 "  namespace_prefix: cert-\n  run_label: example.com/run\n"
                 "cluster:\n  keda: {baseline_runtime_class: runc}\n")
    prof = load_profile(p)
    gpu, sizing, keda = prof.cluster.gpu, prof.cluster.sizing, prof.cluster.keda
    assert (gpu.runtime_class, gpu.expected_handler, gpu.resources) == (
        "kata-clh", "kata-clh-h", ("nvidia.com/GH100",))
    assert gpu.device_plugin_selector == "app=dp" and gpu.device_plugin_namespace is None
    assert (sizing.runtime_class, sizing.gpu_resources) == ("kata-clh", ("nvidia.com/GH100",))
    assert (keda.runtime_class, keda.gpu_resource) == ("kata-clh", "nvidia.com/GH100")
    assert prof.runtime.kata_handler == "kata-clh-h"
    assert (prof.cluster.namespace_prefix, prof.cluster.label) == ("cert-", "example.com/run")


def test_keda_baseline_must_differ_from_the_platforms_class(tmp_path: Path) -> None:
    """The layer's own class (the baseline) is checked against the platform's."""
    p = tmp_path / "p.yaml"
    p.write_text("name: t\nplatform:\n  kata: {runtime_class: runc}\n")
    with pytest.raises(ProfileError, match=r"cluster.keda: baseline_runtime_class equals "
                                           r"runtime_class \('runc'\)"):
        load_profile(p)


def test_one_accessor_one_fallback() -> None:
    """Every layer's section comes from one accessor with one fallback: a profile without
    the section gives the section's defaults on the profile's platform."""
    from types import SimpleNamespace

    from kgc.core.profile import PlatformProfile, layer_section
    from kgc.layers.gpu.checks import settings
    from kgc.layers.gpu.profile import GpuProfile
    from kgc.layers.keda.checks import keda_profile
    from kgc.layers.keda.profile import KedaProfile
    from kgc.layers.sizing.profile import SizingProfile, sizing_profile

    plat = PlatformProfile.model_validate({"kata": {"runtime_class": "kata-x"}})
    bare = SimpleNamespace(platform=plat, cluster=None)
    for get, model in ((settings, GpuProfile), (sizing_profile, SizingProfile),
                       (keda_profile, KedaProfile)):
        sec = get(bare)
        assert isinstance(sec, model) and sec.runtime_class == "kata-x"
        assert get(sec) is sec
        assert get(object()).runtime_class == PlatformProfile().kata.runtime_class
    prof = load_profile("lab")
    assert layer_section(prof, "keda", KedaProfile) is prof.cluster.keda


def test_a_dumped_profile_loads_again() -> None:
    """The sections' views of the platform are not dumped (they are not keys), so a dumped
    profile validates again to the same profile."""
    for name in PROFILES:
        prof = load_profile(REPO / "profiles" / f"{name}.yaml")
        doc = prof.model_dump(mode="json", by_alias=True, exclude={"source"})
        again = Profile.model_validate(doc)
        assert again.cluster == prof.cluster and again.runtime == prof.runtime


def test_profile_check_refuses_a_former_key_with_exit_2(tmp_path: Path) -> None:
    import subprocess
    import sys

    p = tmp_path / "old.yaml"
    p.write_text("name: old\ncluster:\n  sizing:\n    gpu_runtime_class: kata-qemu-nvidia-gpu\n")
    out = subprocess.run([sys.executable, "-m", "kgc.cli", "profile", "check", str(p)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 2, out
    assert (f"{p}: cluster.sizing.gpu_runtime_class: moved to platform.kata.runtime_class"
            in out.stdout + out.stderr)


def test_gpu_request_and_binding_are_platform_facts_the_gpu_section_sees() -> None:
    """How pods request GPUs and how nodes bind them is declared once (``platform.gpu``)
    and the gpu section reads it; the defaults are today's device-plugin + boot rules."""
    from kgc.layers.gpu.profile import GpuProfile

    default = Profile.model_validate({"name": "d"})
    assert default.platform.gpu.request.mode == "device-plugin"
    assert not default.platform.gpu.request.dra and default.platform.gpu.binding == "boot"
    prof = Profile.model_validate({"name": "x", "platform": {"gpu": {
        "binding": "dra",
        "request": {"mode": "claim", "device_class": "vfio.gpu.nvidia.com",
                    "selector": 'device.attributes["gpu.nvidia.com"].type == "vfio"'}}}})
    gp = prof.cluster.gpu
    assert isinstance(gp, GpuProfile)
    assert gp.request.mode == "claim" and gp.request.dra
    assert gp.request.device_class == "vfio.gpu.nvidia.com" and gp.binding == "dra"
    doc = prof.model_dump(mode="json", by_alias=True, exclude={"source"})
    assert "request" not in doc["cluster"]["gpu"]
    assert Profile.model_validate(doc).cluster.gpu.request == gp.request


@pytest.mark.parametrize("request_, why", [
    ({"mode": "extended"}, "mode"),
    ({"selector": "true"}, "needs mode: claim"),
    ({"mode": "claim", "device_class": "GPU_Class"}, "DNS subdomain"),
    ({"mode": "claim", "devices_per_node": 0}, "devices_per_node"),
])
def test_a_bad_gpu_request_is_refused_naming_the_field(request_: dict, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        Profile.model_validate({"name": "x", "platform": {"gpu": {"request": request_}}})
