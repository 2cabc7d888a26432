"""Why a GPU pod did not run: named from its status, container states and events.

Pure. :func:`classify` reads one :class:`GpuPodEvidence` (plus the cluster evidence, to tell
"no device plugin" from "all GPUs in use") and returns a :class:`Cause`: a stable id, a
one-line summary naming the concrete thing, the remediation that fits it, and the text it
was recognised from. A cause it cannot name is an ``error`` with the pod's events attached —
never a bare timeout.

The texts matched are the ones the components print (cited so they can be re-checked):

- kube-scheduler, FailedScheduling: ``0/3 nodes are available: 3 Insufficient
  nvidia.com/gpu. preemption: ...`` (NVIDIA/k8s-device-plugin#430, #119);
- RuntimeClass admission: ``pod rejected: RuntimeClass "x" not found``
  (kubernetes plugin/pkg/admission/runtimeclass/admission.go);
- kubelet device manager: ``Allocate failed due to %v, which is unexpected``, status reason
  ``UnexpectedAdmissionError`` (pkg/kubelet/cm/topologymanager);
- kubelet, FailedCreatePodSandBox: ``Failed to create pod sandbox: %v``
  (pkg/kubelet/kuberuntime/kuberuntime_manager.go);
- containerd CRI: ``failed to get sandbox runtime: no runtime for "x" is configured``
  (internal/cri/server/podsandbox: sandboxRuntime);
- Kata/QEMU: ``failed to hotplug VFIO device`` ... ``QMP command failed: vfio 0000:1b:00.0:
  group 41 is not viable`` (kata-containers#4211); ``vfio_container_dma_map(...) = -14 (Bad
  address)`` / ``IOMMU_IOAS_MAP failed: Bad address, PCI BAR?`` (kata-containers#12549);
  guest ``pci 0000:01:01.0: BAR 1: no space for [mem size 0x10000000 64bit pref]``
  (kata-containers#4211, #835); ``CDI device injection failed: unresolvable CDI devices
  nvidia.com/pgpu=vfio1`` (kata-containers#12549, #10891); ``CreateContainerRequest timed
  out`` / ``timed out connecting to vsock`` (kata-containers#10628, #10470).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from kgc.core.model import Status
from kgc.layers.gpu.evidence import ClusterGpuEvidence, GpuPodEvidence

PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
WAITING_FOR_START = ("ContainerCreating", "PodInitializing")
MAX_TEXT = 4096  # bound on a text the patterns scan (events are bounded already)


@dataclass(frozen=True)
class Cause:
    id: str  # stable: no-device-plugin, insufficient-resource, runtimeclass-missing, ...
    status: Status  # FAIL for a named cause, ERROR for an unknown one
    summary: str
    remediation: str
    matched: str | None = None  # the status/event text it was recognised from

    def to_dict(self) -> dict[str, str | None]:
        return {"id": self.id, "status": str(self.status), "summary": self.summary,
                "matched": self.matched}


def _fail(id_: str, summary: str, fix: str, matched: str | None = None) -> Cause:
    return Cause(id_, Status.FAIL, summary, fix, matched)


# --------------------------------------------------------------------------- patterns
_RC_MISSING = re.compile(r'RuntimeClass "?([^"\s]{1,253})"? not found')
_HANDLER = re.compile(r'no runtime for "([^"]{1,253})" is configured')
_NOT_VIABLE = re.compile(r"(?:vfio )?(?:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): )?"
                         r"group (\d{1,6}) is not viable")
_BAR = re.compile(r"BAR ?(\d)\b[^\n]{0,80}?no space|no space for \[mem")
_DMA = re.compile(r"vfio_(?:container_)?dma_map\([^)]{0,200}\)[^\n]{0,40}|IOMMU_IOAS_MAP failed"
                  r"[^\n]{0,40}|VFIO_MAP_DMA failed[^\n]{0,20}")
_CDI = re.compile(r"unresolvable CDI devices? ?([^\s:\"'\\]{0,200})")
_TIMEOUT = re.compile(r"CreateContainerRequest timed out|timed out connecting to vsock|"
                      r"DeadlineExceeded|context deadline exceeded|Timeout reached")
_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_\-]{1,253})")
_NOT_FOUND_EXEC = re.compile(r'exec: "?([^":\s]{1,200})"?: executable file not found|'
                             r"(?:^|[\s:])([\w./-]{1,200}): (?:command )?not found")
_PULL_DETAIL = (
    (re.compile(r"not found|manifest unknown|NotFound", re.I), "the image or tag does not exist"),
    (re.compile(r"unauthorized|authentication required|denied|forbidden", re.I),
     "the registry refused the credentials"),
    (re.compile(r"no such host|i/o timeout|connection refused|dial tcp|TLS handshake", re.I),
     "the registry is not reachable from the node"),
    (re.compile(r"InvalidImageName|invalid reference format", re.I), "the image name is invalid"),
)


def _bounded(text: str | None) -> str:
    return (text or "")[:MAX_TEXT]


def _texts(pod: GpuPodEvidence) -> Iterator[tuple[str, str]]:
    """(origin, text) of every failure message, most recent event first."""
    if pod.message:
        yield "status", _bounded(pod.message)
    for c in pod.containers:
        if c.message:
            yield f"container {c.name}", _bounded(c.message)
    for cond in pod.conditions:
        if cond.status != "True" and cond.message:
            yield f"condition {cond.type}", _bounded(cond.message)
    for e in reversed(pod.events):
        if e.type != "Normal" and e.message:
            yield f"event {e.reason}", _bounded(e.message)


def _first(pod: GpuPodEvidence, pattern: re.Pattern[str]) -> tuple[re.Match[str], str] | None:
    for _origin, text in _texts(pod):
        m = pattern.search(text)
        if m:
            return m, text
    return None


def _where(pod: GpuPodEvidence) -> str:
    return pod.node or pod.target_node or "its node"


def _advertisers(cluster: ClusterGpuEvidence | None, resource: str) -> list[str] | None:
    if cluster is None or cluster.nodes is None:
        return None
    return [n.name for n in cluster.nodes if (n.count(resource, "capacity") or 0) > 0]


def pod_ran(pod: GpuPodEvidence) -> bool:
    """The pod ran to completion and its collector output was read in full."""
    return (pod.create_error is None and pod.phase == "Succeeded" and pod.guest is not None
            and pod.guest.complete)


def smi_missing(pod: GpuPodEvidence) -> Cause | None:
    """nvidia-smi absent from the container: the collector saw exit 127, or the container
    itself was nvidia-smi and could not start (``executable file not found``)."""
    fix = (
        f"nvidia-smi is not in the container of {pod.image or 'the image'}: use an image that "
        "ships it (nvcr.io/nvidia/cuda:*-base-*) or let the NVIDIA container toolkit inside "
        "the guest inject the driver utilities (env NVIDIA_DRIVER_CAPABILITIES=compute,utility); "
        "set cluster.gpu.image accordingly."
    )
    g = pod.guest
    if g is not None and g.smi_rc == 127:
        return _fail("smi-missing", f"nvidia-smi is not found in the container of {pod.ref} "
                     f"(exit 127: {g.smi_error or 'not found'})", fix, g.smi_error)
    for c in pod.containers:
        m = _NOT_FOUND_EXEC.search(_bounded(c.message))
        if m and "nvidia-smi" in (m.group(1) or m.group(2) or ""):
            return _fail("smi-missing", f"nvidia-smi is not found in {pod.ref}: {m.group(0)}",
                         fix, c.message)
    return None


# --------------------------------------------------------------------------- stages
def _admission(pod: GpuPodEvidence) -> Cause | None:
    err = pod.create_error
    if err is None:
        return None
    m = _RC_MISSING.search(_bounded(err))
    if m:
        return _fail(
            "runtimeclass-missing",
            f"the API refused the pod: RuntimeClass {m.group(1)!r} does not exist",
            f"Create the RuntimeClass {m.group(1)} (kata-deploy installs the Kata classes, e.g. "
            "kata-qemu-nvidia-gpu with the handler of the same name), or set "
            "platform.kata.runtime_class to one `kubectl get runtimeclass` lists.",
            err,
        )
    if "violates PodSecurity" in err:
        return _fail(
            "pod-security", f"the API refused the pod: {err[:300]}",
            "The run's namespace enforces a Pod Security level the GPU pod does not meet; "
            "label the run namespace (kubectl label ns <ns> "
            "pod-security.kubernetes.io/enforce=privileged) or relax the admission policy "
            "for the kgc run namespaces.",
            err,
        )
    if "exceeded quota" in err:
        return _fail("quota", f"the API refused the pod: {err[:300]}",
                     "A ResourceQuota in the run namespace is too small for the GPU pod; raise "
                     "it or exempt the kgc run namespaces.", err)
    return Cause("create-refused", Status.ERROR, f"the API refused the pod: {err[:300]}",
                 "Read the API's message; the pod spec kgc created is attached as evidence.", err)


def _scheduling(pod: GpuPodEvidence, cluster: ClusterGpuEvidence | None) -> Cause:
    hit = _first(pod, _INSUFFICIENT)
    if hit is not None and (hit[0].group(1).rstrip(".") == pod.resource
                            or hit[0].group(1).startswith("nvidia.com/")):
        res = hit[0].group(1).rstrip(".")
        adv = _advertisers(cluster, res)
        if adv == []:
            return _fail(
                "no-device-plugin",
                f"{pod.ref} is Pending: no node advertises {res} (\"{hit[0].group(0)}\"): no "
                "device plugin exposes the GPUs",
                f"Deploy the device plugin for passthrough GPUs so that GPU nodes advertise {res} "
                "(NVIDIA GPU Operator with sandboxWorkloads.enabled=true runs the sandbox device "
                "plugin; or set platform.gpu.resources to the name the nodes do advertise: "
                "kubectl get nodes -o jsonpath='{.items[*].status.allocatable}').",
                hit[1],
            )
        where = f" (advertised by {', '.join(adv)})" if adv else ""
        return _fail(
            "insufficient-resource",
            f"{pod.ref} is Pending: no node has {pod.count} free {res}{where}: "
            f"\"{hit[1][:300]}\"",
            f"Free GPUs on the target nodes (other pods hold {res}), lower cluster.gpu.count or "
            "cluster.gpu.pods_per_node, or check that the device plugin reports every GPU "
            "healthy (allocatable below capacity means unhealthy devices).",
            hit[1],
        )
    msg = None
    for e in reversed(pod.events):
        if e.reason == "FailedScheduling" and e.message:
            msg = e.message
            break
    cond = pod.condition("PodScheduled")
    if msg is None and cond is not None and cond.status == "False" and cond.message:
        msg = cond.message
    if msg:
        return _fail(
            "unschedulable",
            f"{pod.ref} could not be scheduled: {msg[:400]}",
            "Fix the constraint the scheduler names: GPU-node taints need tolerations in the "
            "GPU pod (kgc adds none unless the profile asks), the RuntimeClass' "
            "scheduling.nodeSelector must match the GPU nodes, and cluster.gpu.node_selector "
            "must select nodes that exist.",
            msg,
        )
    budget = f"{pod.waited_s or pod.budget_s or 0:.0f} s"
    return _fail(
        "never-scheduled",
        f"{pod.ref} was not scheduled within {budget} and no FailedScheduling event explains it",
        "Check that kube-scheduler runs and is healthy (kubectl -n kube-system get pods; its "
        "log), that no scheduling gate holds the pod, or raise cluster.gpu.schedule_timeout_s.",
        None,
    )


def _runtime(pod: GpuPodEvidence) -> Cause | None:
    node = _where(pod)
    hit = _first(pod, _HANDLER)
    if hit:
        h = hit[0].group(1)
        return _fail(
            "handler-missing",
            f"containerd on {node} has no runtime handler {h!r} for RuntimeClass "
            f"{pod.runtime_class}: \"{hit[0].group(0)}\"",
            f"Add the Kata handler {h} to containerd on {node} (containerd 2.x: "
            f"[plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.{h}] with "
            "runtime_type = \"io.containerd.kata.v2\"; 1.7: under "
            "plugins.\"io.containerd.grpc.v1.cri\") and restart containerd; "
            "see runtime.kata-handler.",
            hit[1],
        )
    hit = _first(pod, _NOT_VIABLE)
    if hit:
        bdf, group = hit[0].group(1), hit[0].group(2)
        dev = f" ({bdf})" if bdf else ""
        return _fail(
            "vfio-group-not-viable",
            f"the sandbox on {node} failed: IOMMU group {group}{dev} is not viable",
            f"Bind every device of IOMMU group {group} on {node} to vfio-pci (or leave it "
            "driverless), not only the GPU: ls /sys/kernel/iommu_groups/"
            f"{group}/devices; driverctl set-override <BDF> vfio-pci. See vfio.group-viable.",
            hit[1],
        )
    hit = _first(pod, _BAR)
    if hit:
        return _fail(
            "bar-no-space",
            f"the guest on {node} could not place the GPU's BARs: \"{hit[0].group(0)}\"",
            "Give the guest a 64-bit MMIO window large enough for the GPU: Kata's NVIDIA configs "
            "plug the GPU on a PCIe root port (cold_plug_vfio=\"root-port\", pcie_root_port >= 1, "
            "see runtime.kata-vfio) and boot the guest with pci=realloc; hot-plugging onto a "
            "bridge cannot fit a large BAR.",
            hit[1],
        )
    hit = _first(pod, _DMA)
    if hit:
        return _fail(
            "vfio-dma-map",
            f"QEMU on {node} could not DMA-map memory for the GPU: \"{hit[0].group(0)[:200]}\"",
            "Raise the locked-memory limit of containerd and the Kata shim (systemd "
            "LimitMEMLOCK=infinity), and check that the host IOMMU's address width covers the "
            "VM's 64-bit MMIO window (an iommufd host needs a QEMU that maps BARs through "
            "dma-buf; \"PCI BAR?\" warnings alone are harmless).",
            hit[1],
        )
    hit = _first(pod, _CDI)
    if hit:
        dev = hit[0].group(1) or "(unnamed)"
        return _fail(
            "cdi-unresolvable",
            f"the runtime on {node} could not resolve the CDI device {dev}",
            f"No CDI spec on {node} (or inside the guest) defines {dev}: regenerate the specs "
            "(nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml; for VFIO passthrough "
            "the sandbox device plugin writes them), and check containerd's enable_cdi=true.",
            hit[1],
        )
    for e in reversed(pod.events):
        if e.reason == "FailedCreatePodSandBox" or (e.type == "Warning"
                                                    and e.reason in ("Failed", "FailedCreate")):
            text = _bounded(e.message)
            if _TIMEOUT.search(text):
                return _fail(
                    "create-timeout",
                    f"creating the sandbox/container on {node} timed out: \"{text[:300]}\"",
                    "Large-memory GPU VMs start slowly: raise Kata's create_container_timeout "
                    "(the NVIDIA configs use 1200 s) and the kubelet's --runtime-request-timeout, "
                    "or request less memory (cluster.gpu.memory); the Kata shim log "
                    "(journalctl -t kata) shows where the guest stopped.",
                    e.message,
                )
    for e in reversed(pod.events):
        if e.reason == "FailedCreatePodSandBox":
            return _fail(
                "sandbox-failed",
                f"the runtime could not create the pod sandbox on {node}: "
                f"\"{_bounded(e.message)[:400]}\"",
                f"Read the Kata shim log on {node} (journalctl -t kata or containerd's log) "
                "around the event time; `kata-runtime check` verifies the node can run VMs.",
                e.message,
            )
    return None


def _image(pod: GpuPodEvidence) -> Cause | None:
    text = None
    for c in pod.containers:
        if c.state == "waiting" and c.reason in PULL_REASONS:
            text = c.message or c.reason
            break
    for e in reversed(pod.events):
        if e.message and ("Failed to pull image" in e.message or e.reason == "ErrImagePull"):
            text = e.message
            break
    if text is None:
        return None
    detail = next((d for rx, d in _PULL_DETAIL if rx.search(_bounded(text))), "pull failed")
    return _fail(
        "image-pull",
        f"{_where(pod)} could not pull {pod.image}: {detail} (\"{_bounded(text)[:300]}\")",
        f"Use an image the GPU nodes can pull (cluster.gpu.image, now {pod.image}): fix the "
        "name/tag, add an imagePullSecret to the run's ServiceAccount, or mirror it to a "
        "registry the nodes reach.",
        text,
    )


def _containers(pod: GpuPodEvidence) -> Cause | None:
    for c in pod.containers:
        m = _NOT_FOUND_EXEC.search(_bounded(c.message))
        if m and (m.group(1) or "").endswith("sh"):
            return _fail("no-shell", f"{pod.image} has no shell: {m.group(0)}",
                         "The collector needs /bin/sh in the image; set cluster.gpu.image to an "
                         "image with a shell.", c.message)
    for c in pod.containers:
        if c.reason == "OOMKilled" or c.last_reason == "OOMKilled":
            return _fail(
                "oom-killed", f"{pod.ref}: container {c.name} was OOM-killed",
                "The container ran out of memory: raise cluster.gpu.memory (the pod's memory "
                "limit, which also sizes the Kata VM).", c.message)
    for c in pod.containers:
        if (c.state == "terminated" and c.exit_code not in (0, None)) or c.reason in (
            "CrashLoopBackOff", "CreateContainerError", "RunContainerError",
            "CreateContainerConfigError",
        ):
            return Cause(
                "container-failed", Status.ERROR,
                f"{pod.ref}: the collector container failed ({c.describe()})",
                "The collector itself failed in a way kgc does not recognise; its state, "
                "message and the pod's events are attached.", c.message)
    return None


def classify(pod: GpuPodEvidence, cluster: ClusterGpuEvidence | None = None) -> Cause:
    """Name why ``pod`` did not run (call it when :func:`pod_ran` is false)."""
    cause = _admission(pod)
    if cause is not None:
        return cause
    if pod.reason == "UnexpectedAdmissionError" or "Allocate failed" in (pod.message or ""):
        return _fail(
            "device-allocation",
            f"the kubelet on {_where(pod)} could not allocate {pod.resource}: "
            f"{_bounded(pod.message)[:300]}",
            f"The device plugin's Allocate call failed on {_where(pod)}: read the device "
            "plugin pod's log there and restart it; kubelet's log shows the RPC error.",
            pod.message,
        )
    if (pod.reason or "").startswith("OutOf"):
        return _fail(
            "insufficient-resource",
            f"the kubelet on {_where(pod)} rejected {pod.ref}: {pod.reason}: "
            f"{_bounded(pod.message)[:300]}",
            f"The node had no free {pod.resource} when the pod arrived: free GPUs there, or "
            "lower cluster.gpu.count / pods_per_node.",
            pod.message,
        )
    if not pod.scheduled:
        return _scheduling(pod, cluster)
    for stage in (_runtime, _image):
        cause = stage(pod)
        if cause is not None:
            return cause
    cause = smi_missing(pod) or _containers(pod)
    if cause is not None:
        return cause
    waiting = [c for c in pod.containers if c.state == "waiting"]
    if pod.timed_out and pod.phase == "Pending" and (
        not waiting or all(c.reason in WAITING_FOR_START for c in waiting)
    ):
        return _fail(
            "start-timeout",
            f"{pod.ref} was scheduled to {_where(pod)} but did not start within "
            f"{pod.waited_s or pod.budget_s or 0:.0f} s and no event names a failure",
            "GPU VMs with large memory take minutes to start: raise cluster.gpu.start_timeout_s "
            "(Kata's NVIDIA configs allow 1200 s), and read the Kata shim log on the node.",
            None,
        )
    if pod.timed_out and pod.phase == "Running":
        return _fail(
            "collector-hung",
            f"{pod.ref} is still Running after {pod.waited_s or pod.budget_s or 0:.0f} s: the "
            "collector did not finish (nvidia-smi or the driver hangs in the guest?)",
            "Run `nvidia-smi` in a pod on that node by hand; a hang usually means the GPU did not "
            "initialise in the guest (guest dmesg: NVRM lines); raise "
            "cluster.gpu.collector_timeout_s only if it is merely slow.",
            None,
        )
    if pod.phase == "Succeeded":
        why = pod.log_error or ("; ".join(pod.guest.problems) if pod.guest else "no log")
        return Cause("no-output", Status.ERROR,
                     f"{pod.ref} succeeded but its collector output is unusable: {why}",
                     "The pod's log could not be read in full; rerun, and check the log size "
                     "limits of the kubelet (containerLogMaxSize).", pod.log_error)
    return Cause(
        "unknown", Status.ERROR,
        f"{pod.ref} did not run (phase {pod.phase or 'unknown'}) and kgc does not recognise why; "
        "its events and container states are attached",
        "Read the attached events and container states (kubectl describe pod); please report "
        "the message so kgc can name it.",
        None,
    )
