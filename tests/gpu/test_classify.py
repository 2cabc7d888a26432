"""Why a GPU pod did not run: every cause named, from realistic texts.

Message texts are the components' own (see kgc.layers.gpu.classify for where each comes
from): kube-scheduler's FailedScheduling (NVIDIA/k8s-device-plugin#119, #430), the
RuntimeClass admission plugin (kubernetes plugin/pkg/admission/runtimeclass/admission.go),
the kubelet's FailedCreatePodSandBox wrapper (pkg/kubelet/kuberuntime/kuberuntime_manager.go)
and device-manager admission (UnexpectedAdmissionError), containerd's "no runtime for ...
is configured" (internal/cri), and Kata/QEMU messages from kata-containers#4211, #12549,
#10628, #10891, #835.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpu.synth import (
    SCHEDULED,
    cases,
    cluster,
    cpu_guest,
    h200_guest,
    h200_profile,
    node,
    pending,
    pod,
    run,
)
from kgc.core.model import Status
from kgc.layers.gpu.checks import CHECKS, PodSubject
from kgc.layers.gpu.classify import classify, pod_ran
from kgc.layers.gpu.evidence import ContainerState, PodCondition, PodEvent

SANDBOX = "Failed to create pod sandbox: rpc error: code = Unknown desc = "


def warn(reason: str, message: str, count: int = 1, source: str = "kubelet") -> PodEvent:
    return PodEvent("Warning", reason, message, count, source)


def unscheduled(*events: PodEvent, **kw: Any) -> Any:
    return pod(None, phase="Pending", node=None, timed_out=True, waited_s=300.0,
               containers=(), conditions=(PodCondition("PodScheduled", "False",
                                                       "Unschedulable"),),
               events=events, **kw)


CASES: list[tuple[str, Any, Any, str, tuple[str, ...]]] = [
    # id, pod, cluster (None: default), expected cause, words in summary/remediation
    ("runtimeclass-missing",
     pod(None, phase=None, node=None, conditions=(), containers=(), events=(),
         create_error='pods "kgc-gpu-0" is forbidden: pod rejected: RuntimeClass '
                      '"kata-qemu-nvidia-gpu" not found'),
     None, "runtimeclass-missing", ("'kata-qemu-nvidia-gpu' does not exist",
                                    "kubectl get runtimeclass")),
    ("pod-security",
     pod(None, phase=None, node=None, conditions=(), containers=(), events=(),
         create_error='pods "kgc-gpu-0" is forbidden: violates PodSecurity "restricted:latest":'
                      ' allowPrivilegeEscalation != false'),
     None, "pod-security", ("pod-security.kubernetes.io/enforce",)),
    ("no-device-plugin",
     unscheduled(warn("FailedScheduling", "0/2 nodes are available: 2 Insufficient "
                      "nvidia.com/pgpu. preemption: 0/2 nodes are available: 2 No preemption "
                      "victims found for incoming pod.", 4, "default-scheduler")),
     cluster(node("gpu-a", 0), plugin_nodes=()), "no-device-plugin",
     ("no node advertises nvidia.com/pgpu", "sandboxWorkloads")),
    ("insufficient-resource",
     unscheduled(warn("FailedScheduling", "0/2 nodes are available: 1 Insufficient "
                      "nvidia.com/pgpu, 1 node(s) were unschedulable.", 2,
                      "default-scheduler")),
     cluster(node("gpu-a", 1)), "insufficient-resource",
     ("advertised by gpu-a", "Free GPUs")),
    ("insufficient-without-cluster-evidence",
     unscheduled(warn("FailedScheduling", "0/1 nodes are available: 1 Insufficient "
                      "nvidia.com/pgpu.", 1, "default-scheduler")),
     "none", "insufficient-resource", ("no node has 1 free nvidia.com/pgpu",)),
    ("insufficient-from-condition-only",
     pod(None, phase="Pending", node=None, timed_out=True, containers=(), events=(),
         message=None, conditions=(PodCondition(
             "PodScheduled", "False", "Unschedulable",
             "0/3 nodes are available: 3 Insufficient nvidia.com/pgpu."),)),
     cluster(node("gpu-a", 0)), "no-device-plugin", ("no node advertises",)),
    ("unschedulable-taint",
     unscheduled(warn("FailedScheduling", "0/3 nodes are available: 3 node(s) had untolerated "
                      "taint {nvidia.com/gpu: present}. preemption: 0/3 nodes are available: "
                      "3 Preemption is not helpful for scheduling.", 1, "default-scheduler")),
     None, "unschedulable", ("untolerated taint", "tolerations")),
    ("unschedulable-from-condition-only",
     pod(None, phase="Pending", node=None, timed_out=True, containers=(), events=(),
         conditions=(PodCondition("PodScheduled", "False", "Unschedulable",
                                  "0/3 nodes are available: 3 node(s) didn't match Pod's node "
                                  "affinity/selector."),)),
     None, "unschedulable", ("didn't match Pod's node affinity",)),
    ("insufficient-cpu-is-not-a-gpu-shortage",
     unscheduled(warn("FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.", 1,
                      "default-scheduler")),
     None, "unschedulable", ("Insufficient cpu",)),
    ("insufficient-other-vendor-resource",
     unscheduled(warn("FailedScheduling", "0/1 nodes are available: 1 Insufficient "
                      "example.com/accel.", 1, "default-scheduler"),
                 resource="example.com/accel"),
     cluster(node("gpu-a", 1, resource="example.com/accel")), "insufficient-resource",
     ("1 free example.com/accel", "advertised by gpu-a")),
    ("never-scheduled",
     unscheduled(), None, "never-scheduled", ("not scheduled within 300 s", "kube-scheduler")),
    ("device-allocation",
     pod(None, phase="Failed", reason="UnexpectedAdmissionError",
         message="Pod was rejected: Allocate failed due to rpc error: code = Unknown desc = "
                 "failed to get VFIO device for 0000:41:00.0, which is unexpected",
         containers=(), events=()),
     None, "device-allocation", ("could not allocate nvidia.com/pgpu", "device plugin")),
    ("kubelet-out-of-resource",
     pod(None, phase="Failed", reason="OutOfnvidia.com/pgpu",
         message="Pod was rejected: Node didn't have enough resource: nvidia.com/pgpu, "
                 "requested: 1, used: 1, capacity: 1", containers=(), events=()),
     None, "insufficient-resource", ("OutOfnvidia.com/pgpu",)),
    ("handler-missing",
     pending(events=(warn("FailedCreatePodSandBox", SANDBOX + "failed to get sandbox runtime: "
                          'no runtime for "kata-qemu-nvidia-gpu" is configured', 12),)),
     None, "handler-missing", ("no runtime handler 'kata-qemu-nvidia-gpu'",
                               "io.containerd.kata.v2")),
    ("vfio-group-not-viable",
     pending(events=(warn("FailedCreatePodSandBox", SANDBOX + "failed to create containerd "
                          "task: failed to create shim task: failed to hotplug VFIO device: QMP "
                          "command failed: vfio 0000:1b:00.0: group 41 is not viable"),)),
     None, "vfio-group-not-viable", ("IOMMU group 41 (0000:1b:00.0) is not viable",
                                     "/sys/kernel/iommu_groups/41/devices")),
    ("bar-no-space",
     pending(events=(warn("Failed", "Error: failed to create containerd task: guest: "
                          "pci 0000:01:01.0: BAR 1: no space for [mem size 0x10000000 64bit "
                          "pref]"),)),
     None, "bar-no-space", ("BAR 1", "pcie_root_port")),
    ("vfio-dma-map",
     pending(events=(warn("FailedCreatePodSandBox", SANDBOX + "failed to create shim task: "
                          "qemu-system-x86_64: vfio_container_dma_map(0x55558771a400, "
                          "0xfa800000, 0x4000, 0x7788e9d2c000) = -14 (Bad address)"),)),
     # -14 (Bad address) is an address the IOMMU cannot map, not a limit: no memlock advice
     None, "vfio-dma-map", ("vfio_container_dma_map", "address width")),
    ("cdi-unresolvable",
     pending(events=(warn("FailedCreatePodSandBox", SANDBOX + 'failed to start sandbox '
                          '"269c0f81d5698d68": failed to create containerd task: failed to '
                          "create shim task: device cold plug failed: cold plug: CDI device "
                          "injection failed: CDI device injection failed: unresolvable CDI "
                          "devices nvidia.com/pgpu=vfio1"),)),
     None, "cdi-unresolvable", ("nvidia.com/pgpu=vfio1", "nvidia-ctk cdi generate")),
    ("create-timeout",
     pending(events=(warn("Failed", "Error: failed to create containerd task: failed to "
                          "create shim task: CreateContainerRequest timed out: context "
                          "deadline exceeded"),)),
     None, "create-timeout", ("timed out", "create_container_timeout")),
    # the agent never answered over vsock: a VM that did not boot (KVM, vhost-vsock), not a
    # slow container start (kata-containers#2499)
    ("agent-unreachable",
     pending(events=(warn("FailedCreatePodSandBox", SANDBOX + "failed to create containerd "
                          "task: failed to create shim task: Failed to Check if grpc server is "
                          "working: rpc error: code = DeadlineExceeded desc = timed out "
                          "connecting to vsock 1521785742:1024: unknown"),)),
     None, "agent-unreachable", ("timed out connecting to vsock", "nested virtualization",
                                 "vhost_vsock")),
    # a sandbox that timed out creating (kata-containers#10888: "failed to create shim task:
    # CreateContainerRequest timed out: context deadline exceeded")
    ("create-timeout-sandbox",
     pending(events=(warn("FailedCreatePodSandBox", SANDBOX + "failed to create containerd "
                          "task: failed to create shim task: CreateContainerRequest timed out: "
                          "context deadline exceeded: unknown"),)),
     None, "create-timeout", ("timed out", "create_container_timeout")),
    ("image-pull-not-found", cases()["image-pull"].pods[0], None, "image-pull",
     ("the image or tag does not exist", "cluster.gpu.image")),
    ("image-pull-unauthorized",
     pending(containers=(ContainerState("collector", "waiting", "ErrImagePull",
                                        "failed to pull and unpack image: failed to resolve "
                                        "reference: pull access denied, repository does not "
                                        "exist or may require authorization: "
                                        "authorization failed: no basic auth credentials"),)),
     None, "image-pull", ("refused the credentials",)),
    ("image-pull-unreachable",
     pending(containers=(ContainerState("collector", "waiting", "ImagePullBackOff",
                                        'Back-off pulling image "registry.internal/cuda:12"'),),
             events=(warn("Failed", 'Failed to pull image "registry.internal/cuda:12": '
                          "dial tcp: lookup registry.internal: no such host"),)),
     None, "image-pull", ("not reachable",)),
    ("smi-missing-in-guest", pod(cpu_guest()), None, "smi-missing",
     ("exit 127", "NVIDIA_DRIVER_CAPABILITIES")),
    ("smi-missing-exec",
     pod(None, phase="Failed", containers=(ContainerState(
         "collector", "terminated", "StartError",
         'failed to create containerd task: failed to create shim task: OCI runtime create '
         'failed: runc create failed: unable to start container process: exec: "nvidia-smi": '
         "executable file not found in $PATH: unknown", 128),)),
     None, "smi-missing", ("nvidia-smi",)),
    ("no-shell",
     pod(None, phase="Failed", containers=(ContainerState(
         "collector", "terminated", "StartError",
         'exec: "sh": executable file not found in $PATH: unknown', 128),)),
     None, "no-shell", ("has no shell",)),
    ("oom-killed",
     pod(None, phase="Failed", containers=(ContainerState("collector", "terminated",
                                                          "OOMKilled", None, 137),)),
     None, "oom-killed", ("OOM-killed", "cluster.gpu.memory")),
    ("start-timeout", pending(), None, "start-timeout",
     ("did not start within 1200 s", "start_timeout_s")),
    ("collector-hung",
     pod(None, phase="Running", timed_out=True, waited_s=1200.0,
         containers=(ContainerState("collector", "running"),)),
     None, "collector-hung", ("still Running", "nvidia-smi")),
]


@pytest.mark.parametrize("pod_,cl,cause,words", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_every_failure_is_named_with_its_remediation(pod_: Any, cl: Any, cause: str,
                                                     words: tuple[str, ...]) -> None:
    c = classify(pod_, None if cl == "none" else (cl or cluster()))
    assert c.id == cause, (c.id, c.summary)
    assert c.status is Status.FAIL
    text = c.summary + " | " + c.remediation
    for w in words:
        assert w in text, (w, text)


# the CPU-only guest ran (it just has no GPU): gpu.pod-runs passes for it
NOT_RUN = [c for c in CASES if c[0] != "smi-missing-in-guest"]


@pytest.mark.parametrize("pod_,cl,cause,words", [c[1:] for c in NOT_RUN],
                         ids=[c[0] for c in NOT_RUN])
def test_pod_runs_fails_with_the_cause_and_attaches_the_events(pod_: Any, cl: Any, cause: str,
                                                               words: tuple[str, ...]) -> None:
    r = run(pod_, cl=None if cl in (None, "none") else cl)
    v = CHECKS.get("gpu.pod-runs").judge(PodSubject(pod_, r), h200_profile(), "cluster")
    assert v.status is Status.FAIL and v.found == cause
    assert v.evidence["cause"]["id"] == cause
    assert v.evidence["events"] == [e.describe() for e in pod_.events]
    assert v.remediation and v.remediation != CHECKS.get("gpu.pod-runs").remediation


SANDBOX_UNKNOWN = pending(events=(warn(
    "FailedCreatePodSandBox", SANDBOX + "failed to create containerd task: failed to create "
    "shim task: Could not create the sandbox resource controller cgroups: cgroup mountpoint "
    "does not exist"),))

UNKNOWN_EVENTS = (warn("FailedMount", 'MountVolume.SetUp failed for volume "collector" : '
                       'configmap "kgc-collector" not found', 5),)


@pytest.mark.parametrize("pod_,cause", [
    (pod(None, phase="Failed", conditions=SCHEDULED, events=UNKNOWN_EVENTS,
         containers=(ContainerState("collector", "waiting", "ContainerCreating"),)), "unknown"),
    (pod(None, phase="Failed", containers=(ContainerState("collector", "terminated", "Error",
                                                          "boom", 2),)), "container-failed"),
    (pod(None, phase="Succeeded", log_error="the log was rotated away"), "no-output"),
    (pod(None, phase=None, node=None, conditions=(), containers=(), events=(),
         create_error="Internal error occurred: failed calling webhook"), "create-refused"),
    # a sandbox failure no pattern names is quoted in an error, not a named FAIL
    (SANDBOX_UNKNOWN, "sandbox-failed"),
    # a container stuck in a waiting reason kgc does not know, with no event: not a timeout
    (pending(containers=(ContainerState("collector", "waiting", "Blocked"),)), "unknown"),
])
def test_unknown_causes_are_errors_with_the_events_attached(pod_: Any, cause: str) -> None:
    c = classify(pod_, cluster())
    assert c.id == cause and c.status is Status.ERROR
    r = run(pod_)
    v = CHECKS.get("gpu.pod-runs").judge(PodSubject(pod_, r), h200_profile(), "cluster")
    assert v.status is Status.ERROR
    assert v.evidence["events"] == [e.describe() for e in pod_.events]
    assert "timeout" not in v.reason.lower() or cause != "unknown"


def test_an_unknown_pending_pod_is_never_a_bare_timeout() -> None:
    p = pending(events=UNKNOWN_EVENTS, containers=(ContainerState("collector", "waiting",
                                                                  "Blocked"),))
    c = classify(p, cluster())
    assert c.id == "unknown" and c.status is Status.ERROR
    assert "FailedMount" in CHECKS.get("gpu.pod-runs").judge(
        PodSubject(p, run(p)), h200_profile(), "cluster").evidence["events"][0]


def test_scheduling_events_before_a_successful_schedule_do_not_mask_the_real_cause() -> None:
    p = pending(events=(
        warn("FailedScheduling", "0/2 nodes are available: 2 Insufficient nvidia.com/pgpu.",
             1, "default-scheduler"),
        PodEvent("Normal", "Scheduled", "Successfully assigned kgc-run1/kgc-gpu-0 to gpu-a"),
        warn("FailedCreatePodSandBox", SANDBOX + "QMP command failed: vfio 0000:41:00.0: "
             "group 45 is not viable"),
    ))
    assert classify(p, cluster()).id == "vfio-group-not-viable"


def test_the_most_recent_failure_wins() -> None:
    p = pending(events=(
        warn("FailedCreatePodSandBox", SANDBOX + "unresolvable CDI devices nvidia.com/pgpu=0"),
        warn("FailedCreatePodSandBox", SANDBOX + "QMP command failed: vfio 0000:41:00.0: "
             "group 45 is not viable"),
    ))
    # both are named; vfio viability is checked first as it is the root cause class
    assert classify(p).id == "vfio-group-not-viable"


def test_pod_ran_needs_success_and_a_complete_guest() -> None:
    assert pod_ran(pod(h200_guest()))
    assert not pod_ran(pod(h200_guest(), phase="Failed"))
    assert not pod_ran(pod(None))
    import dataclasses

    assert not pod_ran(pod(dataclasses.replace(h200_guest(), complete=False)))
    assert not pod_ran(pod(h200_guest(), create_error="x"))
    assert not pod_ran(pod(h200_guest(), node=node("gpu-a").name, phase="Running"))


def test_huge_messages_are_bounded() -> None:
    p = pending(events=(warn("FailedCreatePodSandBox", SANDBOX + "x" * 10**6
                             + " group 3 is not viable"),))
    # the pattern beyond the scan bound is not found: a generic sandbox failure, quickly
    c = classify(p)
    assert c.id == "sandbox-failed" and len(c.summary) < 1000


def test_an_unnamed_sandbox_failure_is_quoted_in_an_error() -> None:
    c = classify(SANDBOX_UNKNOWN)
    assert c.id == "sandbox-failed" and c.status is Status.ERROR
    assert "cgroup mountpoint does not exist" in c.summary and "journalctl -t kata" in c.remediation
