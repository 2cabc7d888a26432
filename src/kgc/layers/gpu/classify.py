"""Why a GPU pod did not run: named from its status, container states and events.

Pure. :func:`classify` reads one :class:`GpuPodEvidence` (plus the cluster evidence, to tell
"no device plugin" from "all GPUs in use") and returns a :class:`Cause`: a stable id, a
one-line summary naming the concrete thing, the remediation that fits it, and the text it
was recognised from. A cause it cannot name is an ``error`` with the pod's events attached —
never a bare timeout: a Warning event no pattern names is quoted in that error.

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
  out`` (kata-containers#10628, #10470);
- Kata's agent, shim, device manager, QEMU and the guest's NVIDIA driver: the table
  :data:`KATA`, each entry citing the source that prints its text (agent, virtcontainers,
  pkg/device, QEMU hw/vfio and hw/mem, the open nvidia.ko) and the captured cases in
  fixtures/gpu/kata-events/events.yaml.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
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
# the timestamp plain `dmesg` puts before each kernel-log line (the collector's dmesg_pci
# keeps it): "[    3.402117] "
_STAMP = r"(?:\[\s{0,12}\d{1,10}\.\d{1,9}\]\s*)?"
_RC_MISSING = re.compile(r'RuntimeClass "?([^"\s]{1,253})"? not found')
_HANDLER = re.compile(r'no runtime for "([^"]{1,253})" is configured')
_NOT_VIABLE = re.compile(r"(?:vfio )?(?:([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]): )?"
                         r"group (\d{1,6}) is not viable")
_BAR = re.compile(r"BAR ?(\d)\b[^\n]{0,80}?no space|no space for \[mem")
_DMA = re.compile(r"vfio_(?:container_)?dma_map\([^)]{0,200}\)[^\n]{0,40}|IOMMU_IOAS_MAP failed"
                  r"[^\n]{0,40}|VFIO_MAP_DMA failed[^\n]{0,20}")
_TIMEOUT = re.compile(r"CreateContainerRequest timed out|DeadlineExceeded|context deadline "
                      r"exceeded|Timeout reached")
# Kata's DRA cold-plug symptom (kata-containers#13322, PR #13323): deterministic, so the
# waiter stops on it (kgc.layers.gpu.plan.settled) instead of waiting out the start budget
DRA_COLDPLUG = re.compile(r"(?:device (?P<dev>/dev/vfio/[A-Za-z0-9/]{1,40}) )?is a known CDI "
                          r"device type but failed to match any sibling by path or BDF|failed "
                          r"to match any sibling by path or BDF")
# the DRA scheduler plugin's reason when no node's devices satisfy the pod's claims (kube-
# scheduler pkg/scheduler/framework/plugins/dynamicresources: "cannot allocate all claims";
# the lab's 1.37 scheduler printed "0/3 nodes are available: 1 cannot allocate all claims, 2
# node(s) didn't match Pod's node affinity/selector.")
DRA_UNALLOCATABLE = re.compile(r"\bcannot allocate all claims\b")
_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_\-]{1,253})")
_NOT_FOUND_EXEC = re.compile(r'exec: "?([^":\s]{1,200})"?: executable file not found|'
                             r"(?:^|[\s:])([\w./-]{1,200}): (?:command )?not found|"
                             # the Kata agent (src/agent/rustjail/src/container.rs):
                             # anyhow!("the file {} was not found", args[0])
                             r"the file ([^\s:]{1,200}) was not found")
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
    g = pod.guest
    if g is not None and g.dmesg:  # partial guest output: its NVRM lines name driver failures
        yield "guest dmesg", _bounded("\n".join(g.dmesg))


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
    for _origin, text in _texts(pod):  # runc's exec error, or the Kata agent's
        m = _NOT_FOUND_EXEC.search(text)
        if m and "nvidia-smi" in _missing_file(m):
            return _fail("smi-missing", f"nvidia-smi is not found in {pod.ref}: {m.group(0)}",
                         fix, text)
    return None


def _missing_file(m: re.Match[str]) -> str:
    """The file a :data:`_NOT_FOUND_EXEC` match names (runc, shell or Kata agent wording)."""
    return m.group(1) or m.group(2) or m.group(3) or ""


# --------------------------------------------------------------------------- Kata / NVIDIA
# The failures the Kata shim (Go runtime: virtcontainers, its QEMU driver, the device manager),
# the Kata agent (Rust), QEMU and the guest's NVIDIA driver report. Each text below is the one
# those components print (the source named next to it); tests/gpu/test_kata_events.py judges
# the captured texts in fixtures/gpu/kata-events/events.yaml against this table.
_Render = Callable[[re.Match[str], str], str]


@dataclass(frozen=True)
class _Known:
    id: str
    pattern: re.Pattern[str]
    summary: _Render  # (match, node) -> the one line naming the concrete thing
    fix: _Render  # (match, node) -> the remediation that fits that thing


def _g(m: re.Match[str], name: str, default: str = "") -> str:
    return m.groupdict().get(name) or default


def _memory_fix(m: re.Match[str], node: str) -> str:
    text = m.group(0)
    if "memory slots" in text:
        return ("QEMU's vhost backends have no memory slot left for another DIMM: lower "
                "memory_slots in the [hypervisor.qemu] section of the handler's Kata "
                "configuration, or set enable_virtio_mem = true so memory grows without DIMMs.")
    if "Cannot allocate memory" in text:
        return (f"The host could not reserve the VM's memory on {node}: Kata's own hint is "
                "`sysctl -w vm.overcommit_memory=1` (persist it in /etc/sysctl.d); otherwise "
                "free memory there or request less (cluster.gpu.memory).")
    return ("The pod's memory does not fit the VM's hot-plug window (maxmem): raise "
            "default_maxmemory in the [hypervisor.qemu] section of the handler's Kata "
            "configuration (0 = the host's memory) or lower cluster.gpu.memory, the pod's "
            "memory limit that Kata hot-plugs.")


_KATA_FIX_CONFIG = ("the Kata configuration the handler reads (containerd's "
                    "runtimes.<handler>.options.ConfigPath, e.g. /opt/kata/share/defaults/"
                    "kata-containers/configuration-qemu-nvidia-gpu.toml; a file edited elsewhere "
                    "is not read)")

# Kata's DRA cold-plug gap (kata-containers#13322; fix PR #13323, open): the remediation
_DRA_FIX = ("Kata on {node} does not yet cold-plug devices allocated by DRA "
            "(kata-containers#13322: its shim reads only the device-plugin devices of the "
            "kubelet's PodResources): request the GPU "
            "through the device-plugin path instead (the NVIDIA sandbox device plugin's "
            "nvidia.com/pgpu; platform.gpu.request.mode: device-plugin) until the node's Kata "
            "carries the fix of kata-containers PR #13323 (PodResources DynamicResources).")

# the hot-plug symptom of the same gap: the agent's CDI wait (below) under a DRA request
_DRA_HOTPLUG = _Known(
    "kata-dra-hotplug",
    re.compile(r"failed to inject devices after CDI timeout of (?P<s>\d{1,6}) seconds"),
    lambda m, n: (f"the DRA-allocated GPU reached the Kata guest on {n} too late or never: "
                  f"the agent waited {_g(m, 's')} s for its CDI spec (Kata's DRA cold-plug "
                  "gap, kata-containers#13322: the device is hot-plugged after the guest's "
                  "PCI scan)"),
    lambda m, n: _DRA_FIX.format(node=n),
)

KATA: tuple[_Known, ...] = (
    # shim, device manager: src/runtime/pkg/device/drivers/vfio.go (kata-containers#9014)
    _Known(
        "vfio-port-unset",
        re.compile(r"cold_plug_vfio=? or hot_plug_vfio=? port is not set for device "
                   r"(?P<bdf>[0-9a-fA-F:.]{1,20})"),
        lambda m, n: (f"the Kata shim on {n} has no PCIe port to plug the GPU "
                      f"{_g(m, 'bdf')} on: neither cold_plug_vfio nor hot_plug_vfio is set"),
        lambda m, n: ("Set cold_plug_vfio = \"root-port\" (what Kata's NVIDIA configs use) with "
                      "pcie_root_port >= the number of GPUs per pod in the [hypervisor.qemu] "
                      f"section of {_KATA_FIX_CONFIG}; see runtime.kata-vfio."),
    ),
    # QEMU hw/vfio: "failed to open /dev/vfio/%d" with errno (glibc strerror, capitalised;
    # kubevirt#6771); a Go component (the Kata shim, a device plugin) says the same through
    # os.PathError: "open /dev/vfio/45: permission denied" (Go's syscall errno table is
    # lower case: EACCES "permission denied", EPERM "operation not permitted")
    _Known(
        "vfio-permission",
        re.compile(r"(?:failed to open|open|opening) (?P<node>/dev/vfio/(?:\d{1,6}|vfio))"
                   r"[^\n]{0,40}?: (?:[Pp]ermission denied|[Oo]peration not permitted)"),
        lambda m, n: (f"the hypervisor on {n} may not open {_g(m, 'node')}: "
                      f"\"{m.group(0)[:200]}\""),
        lambda m, n: (f"QEMU must be able to read and write {_g(m, 'node')} on {n}: check "
                      "`ls -l /dev/vfio` (root:root 0600 needs a hypervisor running as root: "
                      "rootless = false in the Kata configuration; or a udev rule "
                      "SUBSYSTEM==\"vfio\", GROUP=\"kvm\", MODE=\"0660\"), and SELinux/AppArmor "
                      "denials for it (ausearch -m avc -ts recent; disable_selinux in the Kata "
                      "configuration)."),
    ),
    # QEMU hw/vfio (EBUSY opening the group), cloud-hypervisor "Resource busy (os error 16)"
    # (kubeswift-io/kubeswift#602), QEMU "not already in use" (DualCoder/vgpu_unlock#95)
    _Known(
        "vfio-busy",
        re.compile(r"(?P<node>/dev/vfio/\d{1,6})[^\n]{0,40}?(?:Device or resource busy|"
                   r"Resource busy)|group (?P<group>\d{1,6}) are bound to vfio-<bus> or "
                   r"pci-stub and not already in use"),
        lambda m, n: (f"the GPU's VFIO group on {n} is held by another process "
                      f"({_g(m, 'node') or 'group ' + _g(m, 'group')} busy): an orphaned "
                      "sandbox still holds it"),
        lambda m, n: (f"Find the holder on {n}: `fuser -v "
                      f"{_g(m, 'node') or '/dev/vfio/' + _g(m, 'group')}` (or lsof); a QEMU "
                      "whose -name sandbox-<id> matches no pod in `crictl pods` is a leftover "
                      "of a deleted pod: `crictl stopp/rmp <id>`, or stop that QEMU process; "
                      "then the device plugin can hand the GPU out again."),
    ),
    # QEMU accel/kvm: "Could not access KVM kernel module", "failed to initialize kvm/KVM"
    # (kata-containers/runtime#1079); KVM_CREATE_VM EBUSY (clearcontainers/runtime#822)
    _Known(
        "kvm-unavailable",
        re.compile(r"Could not access KVM kernel module[^\n\"]{0,80}|failed to initialize "
                   r"(?:kvm|KVM)[^\n\"]{0,60}|ioctl\(KVM_CREATE_VM\) failed[^\n\"]{0,60}"),
        lambda m, n: f"QEMU on {n} cannot use KVM: \"{m.group(0)[:200]}\"",
        lambda m, n: (f"Give {n} a usable /dev/kvm: enable VT-x/AMD-V in the firmware and load "
                      "kvm_intel or kvm_amd; a cloud VM node needs nested virtualization "
                      "(kvm_intel nested=1 on its host, or a bare-metal instance) — GPU "
                      "passthrough also needs the host's IOMMU; `kata-runtime check` on the "
                      "node names what is missing. Another hypervisor holding VT-x "
                      "(KVM_CREATE_VM busy) must be stopped."),
    ),
    # /dev/vhost-vsock missing (kata-containers#3459, #1327; runtime-rs virtio_vsock.rs:
    # "failed to open /dev/vhost-vsock, try to run modprobe vhost_vsock."; kata-ctl utils.rs)
    _Known(
        "vhost-vsock-missing",
        re.compile(r"open /dev/vhost-vsock: no such (?:device|file or directory)|"
                   r"failed to open /dev/vhost-vsock|doesn't support vsock|"
                   r"does not support vhost-vsock"),
        lambda m, n: f"{n} has no vhost-vsock device for the agent channel: \"{m.group(0)}\"",
        lambda m, n: (f"Load the module on {n}: `modprobe vhost_vsock` and persist it "
                      "(echo vhost_vsock > /etc/modules-load.d/kata.conf); if modprobe says "
                      "\"Device or resource busy\" the node is a VMware guest whose "
                      "vmw_vsock_vmci_transport holds vsock: `modprobe -r "
                      "vmw_vsock_vmci_transport` first."),
    ),
    # QEMU hw/vfio group viability (kata-containers#4211; kubevirt#6718)
    _Known(
        "vfio-group-not-viable", _NOT_VIABLE,
        lambda m, n: (f"the sandbox on {n} failed: IOMMU group {m.group(2)}"
                      f"{' (' + m.group(1) + ')' if m.group(1) else ''} is not viable"),
        lambda m, n: (f"Bind every device of IOMMU group {m.group(2)} on {n} to vfio-pci (or "
                      "leave it driverless), not only the GPU: ls /sys/kernel/iommu_groups/"
                      f"{m.group(2)}/devices; driverctl set-override <BDF> vfio-pci. "
                      "See vfio.group-viable."),
    ),
    # guest kernel BAR assignment (kata-containers#4211, #835)
    _Known(
        "bar-no-space", _BAR,
        lambda m, n: f"the guest on {n} could not place the GPU's BARs: \"{m.group(0)}\"",
        lambda m, n: ("Give the guest a 64-bit MMIO window large enough for the GPU: Kata's "
                      "NVIDIA configs plug the GPU on a PCIe root port (cold_plug_vfio="
                      "\"root-port\", pcie_root_port >= 1, see runtime.kata-vfio) and boot the "
                      "guest with pci=realloc; hot-plugging onto a bridge cannot fit a large "
                      "BAR."),
    ),
    # ENOMEM pinning guest RAM: the locked-memory limit. QEMU "VFIO_MAP_DMA failed: Cannot
    # allocate memory" / vfio_dma_map(...) = -12; host kernel vfio_pin_pages_remote
    # "RLIMIT_MEMLOCK (N) exceeded" (cloud-hypervisor#165, intel/gvt-linux#78)
    _Known(
        "vfio-dma-memlock",
        re.compile(r"VFIO_MAP_DMA(?: failed)?: (?:Cannot allocate memory|-12)|"
                   r"vfio_(?:container_)?dma_map\([^)]{0,200}\) ?= ?-12[^\n]{0,30}|"
                   r"RLIMIT_MEMLOCK \(\d{1,20}\) exceeded"),
        lambda m, n: (f"the kernel on {n} refused to pin the VM's memory for the GPU "
                      f"(locked-memory limit): \"{m.group(0)[:200]}\""),
        lambda m, n: ("Raise the locked-memory limit the Kata shim and QEMU inherit from "
                      f"containerd on {n}: a systemd drop-in for containerd.service with "
                      "[Service] LimitMEMLOCK=infinity, then `systemctl daemon-reload && "
                      "systemctl restart containerd` (check: grep 'locked memory' "
                      "/proc/$(pidof containerd)/limits)."),
    ),
    # ENOSPC from vfio_iommu_type1: the IOMMU's mapping count, dma_entry_limit (default 65535;
    # CVE-2019-3882). QEMU "VFIO_MAP_DMA failed: No space left on device" and its warning
    # "possibly running out of DMA mappings" (kata-containers#11721, NVIDIA/nvtrust#46)
    _Known(
        "vfio-dma-entry-limit",
        re.compile(r"VFIO_MAP_DMA(?: failed)?: (?:No space left on device|-28)|"
                   r"vfio_(?:container_)?dma_map\([^)]{0,200}\) ?= ?-28[^\n]{0,30}|"
                   r"possibly running out of DMA mappings[^\n\"]{0,80}"),
        lambda m, n: (f"the host IOMMU on {n} ran out of DMA mapping entries for the VM "
                      f"(vfio_iommu_type1 dma_entry_limit): \"{m.group(0)[:200]}\""),
        lambda m, n: ("Not a memlock problem: raise vfio_iommu_type1's dma_entry_limit on "
                      f"{n} (echo 'options vfio_iommu_type1 dma_entry_limit=1048576' > "
                      "/etc/modprobe.d/vfio.conf, reload the module or reboot; "
                      "/sys/module/vfio_iommu_type1/parameters/dma_entry_limit shows it), or "
                      "back guest memory with hugepages (enable_hugepages = true in the Kata "
                      "configuration) so far fewer entries are needed."),
    ),
    # EFAULT / EINVAL / iommufd: an address the IOMMU cannot map (kata-containers#12549,
    # #9553: "vfio_dma_map(...) = -14 (Bad address)")
    _Known(
        "vfio-dma-map", _DMA,
        lambda m, n: (f"QEMU on {n} could not DMA-map memory for the GPU: "
                      f"\"{m.group(0)[:200]}\""),
        lambda m, n: ("The IOMMU refused an address (Bad address / Invalid argument), not a "
                      "limit: check that the host IOMMU's address width covers the VM's memory "
                      "and 64-bit MMIO window (lower default_memory / cluster.gpu.memory to "
                      "test), and on an iommufd host use a QEMU that maps BARs through dma-buf; "
                      "\"PCI BAR?\" warnings alone are harmless."),
    ),
    # memory hot-plug: QEMU hw/mem/memory-device.c ("not enough space, currently 0x.. in use
    # of total space for memory devices 0x..", "a used vhost backend has no free memory slots
    # left"), wrapped by virtcontainers/qemu.go "Add %dMB %s fail" (kata-containers#11071);
    # agent rpc.rs "hotplug memory error"; Kata 1.x "Unable to hotplug N MiB memory"
    # (kata-containers/runtime#1228); guest ACPI "add_memory failed" (kata-containers/agent#805)
    _Known(
        "memory-hotplug",
        re.compile(r"Add \d{1,9}MB [\w-]{1,40} fail[^\n\"]{0,200}|not enough space, currently "
                   r"0x[0-9a-fA-F]{1,16} in use of total space for memory devices "
                   r"0x[0-9a-fA-F]{1,16}|a used vhost backend has (?:no|not enough) free memory "
                   r"slots left|hotplug memory error[^\n\"]{0,80}|Unable to hotplug \d{1,9} MiB "
                   r"memory[^\n\"]{0,120}|add_memory failed"),
        lambda m, n: (f"Kata could not hot-plug the pod's memory into the VM on {n}: "
                      f"\"{m.group(0)[:240]}\""),
        lambda m, n: _memory_fix(m, n),
    ),
    # the VMM died for memory: QEMU "unable to map backing store for guest RAM" (kata-
    # containers#12369), the kernel OOM killer / kubelet's SystemOOM naming QEMU
    # (kata-containers#7470)
    _Known(
        "vmm-oom",
        re.compile(r"unable to map backing store for guest RAM[^\n\"]{0,40}|"
                   r"victim process: qemu[\w.-]{0,40}|Killed process \d{1,10} \(qemu[^)]{0,40}\)"),
        lambda m, n: (f"the VMM (QEMU) on {n} ran out of host memory: \"{m.group(0)}\" — the "
                      "VM died, not the collector"),
        lambda m, n: (f"{n} cannot hold the GPU VM's memory: the pod's memory limit plus Kata's "
                      "default_memory must fit the node, and the RuntimeClass needs "
                      "overhead.podFixed so the scheduler and kubelet count the VM (see "
                      "gpu.runtimeclass-overhead); lower cluster.gpu.memory or free memory "
                      "there (journalctl -k | grep -i 'killed process' names the victims)."),
    ),
    # the guest's open kernel driver rejects a GPU without GSP (NVIDIA open-gpu-kernel-modules
    # nv.c; seen in negativo17/nvidia-driver#158, NVIDIA/open-gpu-kernel-modules#696)
    _Known(
        "gpu-unsupported-open-driver",
        # the message spans kernel-log lines: each may carry dmesg's "[    3.400000] " stamp
        re.compile(r"(?:NVIDIA GPU (?P<bdf>[0-9a-fA-F:.]{7,16}) \(PCI ID: (?P<id>[0-9a-fA-F:]"
                   r"{9})\)\s*" + _STAMP + r"(?:NVRM:\s*)?)?installed in this system is not "
                   r"supported by open\s*" + _STAMP + r"(?:NVRM:\s*)?nvidia\.ko"),
        lambda m, n: ("the guest's open NVIDIA kernel driver does not support the GPU "
                      + "".join(f"{b} " for b in (_g(m, "bdf"),) if b)
                      + f"({_g(m, 'id', 'no GSP')}) passed through on {n}"),
        lambda m, n: ("The open kernel modules need a GPU with a GSP (Turing or newer); this "
                      "GPU needs the proprietary nvidia.ko: build the Kata guest image with the "
                      "proprietary kernel module, or pass through a supported GPU (set "
                      "platform.gpu.resources / node_selector to those nodes)."),
    ),
    # Kata's DRA cold-plug gap, cold-plug symptom: the shim's cold plug reads only the
    # device-plugin devices of the kubelet's PodResources (getDeviceSpec() in
    # src/runtime/pkg/containerd-shim-v2/device_cold_plug.go), so the VM boots without the
    # DRA device and container creation fails: "device /dev/vfio/devices/vfioN is a known CDI
    # device type but failed to match any sibling by path or BDF" (kata-containers#13322,
    # the text quoted in fix PR #13323)
    _Known(
        "kata-dra-coldplug",
        DRA_COLDPLUG,
        lambda m, n: (f"the Kata shim on {n} did not cold-plug the DRA-allocated device "
                      f"{_g(m, 'dev', '(a VFIO device)')}: the VM booted without it ("
                      "Kata's DRA cold-plug gap, kata-containers#13322)"),
        lambda m, n: (_DRA_FIX.format(node=n)),
    ),
    # the agent's CDI wait: src/agent/src/device/mod.rs "failed to inject devices after CDI
    # timeout of {} seconds" (kata-containers#10891, PR #10878 added agent.cdi_timeout)
    _Known(
        "cdi-timeout",
        re.compile(r"failed to inject devices after CDI timeout of (?P<s>\d{1,6}) seconds"),
        lambda m, n: (f"the Kata agent in the guest on {n} waited {_g(m, 's')} s for the GPU's "
                      "CDI spec and none appeared"),
        lambda m, n: ("Inside the guest the NVIDIA stack writes the CDI spec once the driver "
                      "has loaded the GPU; when it is only slow (many GPUs), raise the agent's "
                      "wait with kernel_params = \"... agent.cdi_timeout=600\" in the Kata "
                      "configuration (and create_container_timeout above it); when it never "
                      "comes, the guest's driver failed: read the guest console in the Kata "
                      "shim log (journalctl -t kata | grep -E 'NVRM|nvrc') on " + n + "."),
    ),
    # CDI names no spec defines: containerd/Kata "unresolvable CDI devices" (kata-containers
    # #12549, #10888), agent "CDI device(s) .. do not exist" (src/agent/src/device/mod.rs)
    _Known(
        "cdi-unresolvable",
        re.compile(r"unresolvable CDI devices? ?(?P<dev>[^\s:\"'\\]{0,200})|CDI device\(s\) "
                   r"\[?\"?(?P<dev2>[^\s\"\]]{1,200})\"?\]? do not exist"),
        lambda m, n: (f"the runtime on {n} could not resolve the CDI device "
                      f"{_g(m, 'dev') or _g(m, 'dev2') or '(unnamed)'}"),
        lambda m, n: (f"No CDI spec on {n} (or inside the guest) defines "
                      f"{_g(m, 'dev') or _g(m, 'dev2') or 'the device'}: regenerate the specs "
                      "(nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml; for VFIO "
                      "passthrough the sandbox device plugin writes them), check the kind "
                      "(nvidia.com/pgpu vs nvidia.com/gpu, kata-containers#11624) and "
                      "containerd's enable_cdi=true."),
    ),
    # the VMM or agent went away: virtcontainers/qemu.go "qemu is not running", monitor.go
    # "failed to ping hypervisor process", kata_agent.go "Dead agent", ttrpc "ttrpc: closed"
    # (containerd-shim-v2/wait.go), qemu.go "Failed to connect to QEMU instance (timeout %ds)",
    # govmm "Unable to launch ...: signal: killed"
    # (kata-containers/runtime#388)
    _Known(
        "vmm-died",
        re.compile(r"qemu is not running|failed to ping hypervisor process|Dead agent|"
                   r"Failed to connect to QEMU instance[^\n\"]{0,60}|"
                   r"ttrpc: closed|QEMU exited with an error|Unable to launch [^\n:]{1,200}: "
                   r"signal: killed"),
        lambda m, n: (f"the Kata VM on {n} died (\"{m.group(0)}\"): the VMM went away, not the "
                      "collector"),
        lambda m, n: (f"Find why QEMU exited on {n}: the kernel OOM killer (journalctl -k | grep "
                      "-i 'killed process'), a guest panic (the guest console in the Kata shim "
                      "log, journalctl -t kata), or a restart of containerd; if memory, give the "
                      "RuntimeClass overhead.podFixed and lower cluster.gpu.memory."),
    ),
    # the agent never answered: client.go "timed out connecting to vsock %d:%d", kata_agent.go
    # "Failed to Check if grpc server is working" (kata-containers#2499, #4211); runtime-rs
    # agent/src/sock/vsock.rs "vsock: failed to connect to {:?} within {:?} (attempts=..)" and
    # hybrid_vsock.rs "hybrid vsock: failed to connect to {:?}"
    _Known(
        "agent-unreachable",
        re.compile(r"timed out connecting to vsock[^\n\"]{0,40}|Failed to Check if grpc "
                   r"server is working[^\n\"]{0,80}|(?:hybrid )?vsock: failed to connect to "
                   r"[^\n\"]{0,160}", re.I),
        lambda m, n: (f"the Kata agent in the VM on {n} never answered over vsock: "
                      f"\"{m.group(0)[:200]}\""),
        lambda m, n: (f"The guest did not boot far enough to answer: check that {n} has usable "
                      "KVM (a VM node needs nested virtualization; ls -l /dev/kvm) and "
                      "vhost-vsock (`modprobe vhost_vsock`), run `kata-runtime check` there, "
                      "and read the guest console in the Kata shim log (journalctl -t kata); "
                      "raise dial_timeout in [agent.kata] only if the guest is merely slow."),
    ),
)


def _kata(pod: GpuPodEvidence) -> Cause | None:
    """The first Kata/QEMU/NVIDIA failure any of the pod's texts names (table order: the
    root cause before its consequences, e.g. an unsupported GPU before the CDI timeout)."""
    node = _where(pod)
    for k in KATA:
        hit = _first(pod, k.pattern)
        if hit is not None:
            if k.id == "cdi-timeout" and pod.request_mode != "device-plugin":
                k = _DRA_HOTPLUG
            return _fail(k.id, k.summary(hit[0], node), k.fix(hit[0], node), hit[1])
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
    if msg and DRA_UNALLOCATABLE.search(msg) and pod.request_mode != "device-plugin":
        pub = dra_publishers(cluster)
        supply = (f"no node publishes a {pub[0]} device (see gpu.dra-slices)" if pub and
                  not pub[1] else f"nodes publishing {pub[0]} devices: {', '.join(pub[1])}"
                  if pub else "what the nodes publish was not recorded")
        return _fail(
            "dra-unallocatable",
            f"{pod.ref} could not be scheduled: the scheduler found no device for its DRA "
            f"claim on {_where(pod)} ({supply}): \"{msg[:300]}\"",
            "Make the node's DRA driver publish its GPUs (kubectl get resourceslices "
            "--field-selector spec.nodeName=<node>; its kubelet-plugin pod's log), check that "
            "the DeviceClass' selectors (and platform.gpu.request.selector) match what the "
            "slices publish, and that no other claim holds the devices (kubectl get "
            "resourceclaims -A).",
            msg,
        )
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
    # a wait of unknown length (neither recorded: a hand-made bundle) is not called "0 s"
    waited = pod.waited_s or pod.budget_s
    budget = f" within {waited:.0f} s" if waited else ""
    return _fail(
        "never-scheduled",
        f"{pod.ref} was not scheduled{budget} and no FailedScheduling event explains it",
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
    cause = _kata(pod)
    if cause is not None:
        return cause
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
            # a sandbox failure no pattern names: quoted, and an error (kgc cannot say why)
            return Cause(
                "sandbox-failed", Status.ERROR,
                f"the runtime could not create the pod sandbox on {node} and kgc does not "
                f"recognise why: \"{_bounded(e.message)[:400]}\"",
                f"Read the Kata shim log on {node} (journalctl -t kata or containerd's log) "
                "around the event time; `kata-runtime check` verifies the node can run VMs; "
                "please report the message so kgc can name it.",
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
        if m and (m.group(1) or m.group(3) or "").endswith("sh"):
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


def _unrecognised(pod: GpuPodEvidence) -> Cause | None:
    """Warning events no pattern named, quoted: an ``error``, never dropped and never a
    timeout story. Scheduling warnings of a pod that was scheduled after all are history."""
    quoted = [e.describe() for e in pod.events if e.type != "Normal"
              and not (pod.scheduled and e.reason == "FailedScheduling")]
    if not quoted:
        return None
    shown = "; ".join(f"\"{_bounded(q)[:400]}\"" for q in quoted[-3:])
    more = f" (and {len(quoted) - 3} earlier)" if len(quoted) > 3 else ""
    return Cause(
        "unknown", Status.ERROR,
        f"{pod.ref} did not run on {_where(pod)} (phase {pod.phase or 'unknown'}); kgc does not "
        f"recognise its warning event(s): {shown}{more}",
        "Read the quoted events (all are attached) and the Kata shim log on the node "
        "(journalctl -t kata); please report the message so kgc can name it.",
        quoted[-1],
    )


def dra_publishers(cluster: ClusterGpuEvidence | None) -> tuple[str, list[str]] | None:
    """(the driver, the nodes with a ResourceSlice device of it) from the preflight's DRA
    evidence; None when the slices were not read."""
    d = cluster.dra if cluster is not None else None
    if d is None or d.slices is None:
        return None
    driver = d.driver or "the profile's driver"
    return driver, sorted({s.node for s in d.slices
                           if s.node and s.device_count and (d.driver is None
                                                            or s.driver == d.driver)})


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
    cause = _unrecognised(pod)
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
