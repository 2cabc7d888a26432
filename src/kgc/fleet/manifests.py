"""Pure builders of the fleet's Kubernetes objects (plain dicts) and its Sonobuoy plugin.

``deploy/fleet/daemonset.yaml`` and ``deploy/sonobuoy/kgc-node-plugin.yaml`` are these
builders' output with the defaults (``kgc fleet manifests``); a self-test keeps them equal.

The pod, and why each setting:

* **only the host paths the node layers read**, each mounted at the same path under
  ``/host``, read-only (directories recursively read-only: ``recursiveReadOnly: Enabled``,
  Kubernetes >= 1.30 with a runtime that supports it — containerd >= 2.0, CRI-O >= 1.30; on
  an older one the pod does not start, and ``recursive_read_only="IfPossible"`` falls back,
  then the pod prints its mounts and ``kgc fleet collect`` names any writable one). The
  list is :data:`HOST_PATHS` (what reads each), derived from the layers' host query and the
  programs the collector runs under ``chroot /host`` (sh, awk, ls, stat, grep, modprobe,
  lsinitramfs, containerd from the node's /usr, /bin, /lib...); a self-test proves every path
  of every shipped profile's query is mounted or listed in :data:`NOT_MOUNTED` with the
  reason. Not mounted, so the pod cannot read them: ``/var`` (every pod's secret and token
  volumes under /var/lib/kubelet/pods, the kubelet's client key, containerd's images and
  snapshots, etcd's data, logs), ``/root``, ``/home``, ``/srv``, ``/mnt``, ``/media``,
  ``/tmp``, the host's process table (of ``/proc`` only the five files read), and inside the
  mounted trees :data:`MASKS` are covered by empty read-only mounts: ``/etc/kubernetes``
  (the PKI, kubeconfigs, cloud credentials), ``/etc/ssh`` (host keys), ``/etc/shadow``,
  ``/dev/shm``. Every host path has a hostPath ``type`` (Directory, File, CharDevice): a
  path the node lacks stops the pod (named by ``kgc fleet collect``) instead of being
  created on the node — which is also why optional paths are reached through a parent
  every node has (``/etc``, ``/opt``). The node's ``/run`` is mounted because the runtime
  layer stats containerd's and NRI's sockets there: a read-only mount does not stop a
  ``connect()`` to a unix socket, so the pod's root user could talk to those daemons — kgc
  only stats them; the pod has no token, no added privileges and runs a pinned image.
  No ``hostPID`` (no check reads the process table), no ``hostNetwork`` (the node's name
  comes from the downward API, ``spec.nodeName``);
* root (uid 0: the node's files are root's) with every capability dropped except
  ``SYS_CHROOT`` (the collector runs the node's own ``sh``/``containerd`` under
  ``chroot /host``) and ``DAC_READ_SEARCH`` (read files another owner keeps 0600); no
  privilege escalation, a read-only root filesystem, the runtime's default seccomp profile;
* writable only: an ``emptyDir`` for the report and one for ``/tmp``;
* no ServiceAccount token (``automountServiceAccountToken: false``): the pod never talks to
  the API server; the verdict leaves through its log;
* the image **by digest** (``name@sha256:<64 hex>``; a tag alone is refused): the nodes run
  exactly the image that was reviewed, not whatever the tag points at today;
* **not** under Kata: the pod must see the node, not a microVM (leave ``runtimeClassName``
  unset — the node's default runtime — or name the runc class);
* scheduling: ``nodeSelector`` ``kgc.io/certify=true`` (label the nodes to certify) and a
  toleration of the ``nvidia.com/gpu`` NoSchedule taint GPU nodes commonly carry; change
  both for your fleet (``kgc fleet manifests --node-selector ... --toleration ...``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kgc.core.engine import host_query
from kgc.core.layer import Scope
from kgc.core.profile import load_profile
from kgc.core.registry import load_layers

NAMESPACE = "kgc-system"
NAME = "kgc-node"
SERVICE_ACCOUNT = "kgc-node"
HOST_ROOT = "/host"
# the pod's scratch emptyDir mounted over the node's /tmp (lsinitramfs unpacks there)
HOST_SCRATCH = f"{HOST_ROOT}/tmp"
REPORT_DIR = "/var/lib/kgc/report"
# the image by digest (see deploy/image/Containerfile): replace with the digest your build
# or registry reports (`podman inspect --format '{{.Digest}}'`, `crane digest`)
IMAGE_REPO = "localhost/kata-gpu-conformance"
IMAGE = f"{IMAGE_REPO}@sha256:{'0' * 64}"
PROFILE = "generic-nvidia-passthrough"
# every object carries these; the DaemonSet's pods are selected by FLEET_LABEL=<name>
PART_OF = {"kgc.io/part-of": "kata-gpu-conformance"}
FLEET_LABEL = "kgc.io/fleet"
COMPONENT_LABEL = "kgc.io/component"
NODE_SELECTOR = {"kgc.io/certify": "true"}
TOLERATIONS: tuple[Mapping[str, Any], ...] = (
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
)
SONOBUOY_RESULTS = "/tmp/sonobuoy/results"
SONOBUOY_PLUGIN = "kgc-node"
NODE_NAME_ENV = {"name": "KGC_NODE_NAME",
                 "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


@dataclass(frozen=True)
class HostPath:
    """One host path the fleet pod mounts at the same path under ``/host``, read-only."""

    path: str
    type: str  # the hostPath type: the node must have it as such, nothing is created
    why: str

    @property
    def volume(self) -> str:
        return "host" + re.sub(r"[^a-z0-9]+", "-", self.path.lower()).rstrip("-")


# What the node layers read (kgc.core.engine.host_query of the node layers) and what the
# collector runs under chroot; tests/fleet/test_manifests.py derives it again and compares.
HOST_PATHS: tuple[HostPath, ...] = (
    HostPath("/usr", "Directory", "the programs the collector runs under chroot (sh, awk, ls, "
             "stat, grep, modprobe, lsinitramfs, containerd, the Kata shim) and their "
             "libraries; /usr/lib/modprobe.d, modules-load.d, udev rules, os-release, "
             "/usr/share/defaults/kata-containers, /usr/local/bin"),
    HostPath("/bin", "Directory", "sh and the tools (a link into /usr on merged-/usr nodes)"),
    HostPath("/sbin", "Directory", "modprobe, chroot's PATH (a link into /usr on merged-/usr)"),
    HostPath("/lib", "Directory", "libraries, /lib/modules (module index, vfio-pci.ko), "
             "/lib/modprobe.d, /lib/modules-load.d, /lib/udev/rules.d"),
    HostPath("/lib64", "Directory", "the x86-64 dynamic loader (/lib64/ld-linux-x86-64.so.2) "
             "every program needs; nodes without /lib64 (arm64 Debian/Ubuntu): --no-lib64"),
    HostPath("/etc", "Directory", "modprobe.d, modules-load.d, modules, initramfs-tools, "
             "dracut.conf(.d), default/grub(.d), kernel/cmdline, driverctl.d, udev rules, "
             "containerd and kata-containers configuration, os-release; passwd/group (stat's "
             "owner names), ld.so.cache, machine-id, hostname (the host's identity)"),
    HostPath("/opt", "Directory", "Kata's shim and configuration under /opt/kata"),
    HostPath("/boot", "Directory", "kernel config, initramfs (lsinitramfs), grub.cfg, boot "
             "loader entries (/boot/efi/loader/entries)"),
    HostPath("/sys", "Directory", "PCI devices, drivers, IOMMU groups and units, modules, "
             "DMI identity, ACPI table names"),
    HostPath("/dev", "Directory", "/dev/vfio (the VFIO group and iommufd nodes) and /dev/null "
             "for the collector's redirections; the device cgroup still keeps every other "
             "device closed"),
    HostPath("/run", "Directory", "the containerd and NRI sockets (stat only), "
             "/run/modprobe.d, /run/modules-load.d, /run/udev/rules.d"),
    HostPath("/var/run", "Directory", "the NRI socket at its default path /var/run/nri/nri.sock "
             "(a link to /run on every current distribution)"),
    HostPath("/proc/cmdline", "File", "the running kernel's command line"),
    HostPath("/proc/cpuinfo", "File", "the CPU vendor and virtualisation flags"),
    HostPath("/proc/interrupts", "File", "interrupt remapping (IR- vectors)"),
    HostPath("/proc/sys/kernel/osrelease", "File", "the running kernel (and: the root is live)"),
    HostPath("/proc/sys/kernel/random/boot_id", "File", "the running kernel's boot id (the "
             "node's identity kgc fleet collect checks against the kubelet's)"),
)
LIB64 = "/lib64"
# query paths the pod does not mount, and why (a self-test keeps every query path either
# under HOST_PATHS or here)
NOT_MOUNTED: Mapping[str, str] = {
    "/efi": "an ESP mounted at /efi is optional (a hostPath the node lacks would be created "
            "on it): its boot loader entries are not read; /boot/efi and /boot are",
    "/var/lib/dpkg": "the package database (under /var, not mounted): on a live node "
                     "containerd's version comes from `containerd --version`",
    "/var/lib/rpm": "the package database (under /var, not mounted), as /var/lib/dpkg",
    "/proc/config.gz": "optional (CONFIG_IKCONFIG_PROC): the kernel's configuration is read "
                       "from /boot/config-<release>",
    # the holder scan of binding: dra (kgc.evidence.holders): the pod has no hostPID and sees
    # no process table, so under dra vfio.rebindable is an error there ("no process table"),
    # never a pass; judge a DRA node's rebindability on the node (pytest -m host as root)
    "/proc/*/fd": "the host's process table (no hostPID): the DRA holder scan finds none and "
                  "says so (vfio.rebindable errs under binding: dra, never passes)",
    "/proc/*/comm": "the host's process table (no hostPID), as /proc/*/fd",
    "/proc/driver/nvidia": "the NVIDIA driver's per-GPU files (the minor numbers the DRA "
                           "holder scan maps nodes with): /proc is mounted file by file",
}
# covered inside the mounted trees by an empty read-only mount (directories) or /dev/null
# (files): what the layers never read and a pod must not see
MASKS: tuple[str, ...] = ("/etc/kubernetes", "/etc/ssh", "/dev/shm")
MASK_FILES: tuple[str, ...] = ("/etc/shadow",)
_DIGEST_RE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$")


class ManifestError(ValueError):
    """Bad input to a builder: one line."""


def pinned_image(image: str) -> str:
    """The image reference, which must name a digest (``repo@sha256:<64 hex>``)."""
    if not _DIGEST_RE.match(image or ""):
        raise ManifestError(
            f"image {image[:120]!r} is not pinned by digest: give NAME@sha256:<64 hex> (a tag "
            "can be moved to other content; `podman inspect --format '{{.Digest}}' IMAGE` "
            "or `crane digest IMAGE` prints the digest)")
    return image


def host_paths(lib64: bool = True) -> tuple[HostPath, ...]:
    return tuple(h for h in HOST_PATHS if lib64 or h.path != LIB64)


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def uncovered(paths: Iterable[str], lib64: bool = True,
              masks: Sequence[str] = MASKS) -> list[str]:
    """The query paths (globs) the fleet pod would not see: under no mounted host path, or
    under a mask, and not listed in :data:`NOT_MOUNTED`."""
    mounted = host_paths(lib64)
    out = []
    for p in paths:
        if any(_under(p, m) for m in NOT_MOUNTED):
            continue
        if not any(_under(p, h.path) for h in mounted) or \
                any(_under(p, m) for m in (*masks, *MASK_FILES)):
            out.append(p)
    return sorted(set(out))


def profile_query_paths(profile: str) -> list[str]:
    """Every path (glob) the node layers' query reads for ``profile`` (ProfileError when
    it does not load)."""

    node = {n: lay for n, lay in load_layers().items() if lay.scope is Scope.NODE}
    q = host_query(node, load_profile(profile))
    return [*q.files, *q.links, *q.dirs, *q.stats]


def labels(component: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {**PART_OF, COMPONENT_LABEL: component, **(extra or {})}


def namespace(name: str = NAMESPACE) -> dict[str, Any]:
    """The fleet's namespace. Its pods mount a hostPath, which only Pod Security's
    ``privileged`` level admits (``baseline`` forbids hostPath volumes)."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {
                **labels("fleet"),
                "pod-security.kubernetes.io/enforce": "privileged",
                "pod-security.kubernetes.io/warn": "baseline"}}}


def service_account(name: str = SERVICE_ACCOUNT, ns: str = NAMESPACE) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": ns, "labels": labels("fleet")},
            "automountServiceAccountToken": False}


def node_run_args(profile: str = PROFILE, mode: str = "daemonset",
                  extra: Sequence[str] = ()) -> list[str]:
    return ["node-run", "--host-root", HOST_ROOT, "--profile", profile, "--mode", mode,
            "--report-dir", REPORT_DIR, *(["--", *extra] if extra else [])]


def security_context() -> dict[str, Any]:
    return {"runAsUser": 0, "runAsNonRoot": False, "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True, "privileged": False,
            "capabilities": {"drop": ["ALL"], "add": ["SYS_CHROOT", "DAC_READ_SEARCH"]},
            "seccompProfile": {"type": "RuntimeDefault"}}


def host_mount(recursive_read_only: str | None = "Enabled") -> dict[str, Any]:
    """The lab's mount of a whole node root (volume ``host``, :func:`whole_root_volume`):
    the lab's in-cluster runner runs the node's own kgc from it. Not the product's."""
    m: dict[str, Any] = {"name": "host", "mountPath": HOST_ROOT, "readOnly": True}
    if recursive_read_only:
        m["recursiveReadOnly"] = recursive_read_only
    return m


def whole_root_volume() -> dict[str, Any]:
    return {"name": "host", "hostPath": {"path": "/", "type": "Directory"}}


def _mask_volume(path: str) -> str:
    return "mask" + re.sub(r"[^a-z0-9]+", "-", path.lower()).rstrip("-")


def host_mounts(recursive_read_only: str | None = "Enabled", *, lib64: bool = True,
                masks: Sequence[str] = MASKS) -> list[dict[str, Any]]:
    """The container's read-only mounts of :data:`HOST_PATHS` under ``/host``, then the
    masks over what they must not show (parents first, as the runtime mounts them)."""
    out: list[dict[str, Any]] = []
    for h in host_paths(lib64):
        m: dict[str, Any] = {"name": h.volume, "mountPath": HOST_ROOT + h.path,
                             "readOnly": True}
        if recursive_read_only and h.type == "Directory":
            m["recursiveReadOnly"] = recursive_read_only
        out.append(m)
    out += [{"name": _mask_volume(p), "mountPath": HOST_ROOT + p, "readOnly": True}
            for p in masks]
    out += [{"name": "mask-file", "mountPath": HOST_ROOT + p, "readOnly": True}
            for p in MASK_FILES]
    return out


def host_volumes(*, lib64: bool = True, masks: Sequence[str] = MASKS) -> list[dict[str, Any]]:
    """The hostPath volumes of :func:`host_mounts` (each with its type: nothing is created
    on the node) and the masks' empty volumes."""
    return ([{"name": h.volume, "hostPath": {"path": h.path, "type": h.type}}
             for h in host_paths(lib64)]
            + [{"name": _mask_volume(p), "emptyDir": {"sizeLimit": "1Mi"}} for p in masks]
            + ([{"name": "mask-file", "hostPath": {"path": "/dev/null", "type": "CharDevice"}}]
               if MASK_FILES else []))


def host_daemonset(name: str, containers: Sequence[Mapping[str, Any]], *,
                   ns: str | None = NAMESPACE,
                   volumes: Sequence[Mapping[str, Any]] = (),
                   host: Sequence[Mapping[str, Any]] | None = None,
                   pod_labels: Mapping[str, str] | None = None,
                   service_account: str | None = SERVICE_ACCOUNT,
                   node_selector: Mapping[str, str] | None = None,
                   tolerations: Sequence[Mapping[str, Any]] = (),
                   runtime_class: str | None = None,
                   host_network: bool = False,
                   grace_s: int = 5) -> dict[str, Any]:
    """A DaemonSet whose pods mount the node's paths (``host``: the volumes of
    :func:`host_volumes` by default) and run ``containers``. The pods are selected by
    ``kgc.io/fleet=<name>``; every object and pod is labelled ``kgc.io/part-of`` and
    ``kgc.io/component``."""
    selector = {FLEET_LABEL: name}
    obj_labels = labels("node-run", {**(pod_labels or {}), **selector})
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": grace_s,
        "containers": [dict(c) for c in containers],
        "volumes": [*(dict(v) for v in (host_volumes() if host is None else host)),
                    *(dict(v) for v in volumes)],
    }
    if service_account:
        spec["serviceAccountName"] = service_account
    if host_network:
        spec["hostNetwork"] = True
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {}),
                            "labels": dict(obj_labels)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta,
        "spec": {"selector": {"matchLabels": selector},
                 "updateStrategy": {"type": "RollingUpdate",
                                    "rollingUpdate": {"maxUnavailable": "100%"}},
                 "template": {"metadata": {"labels": obj_labels}, "spec": spec}},
    }


def node_run_container(image: str = IMAGE, *, profile: str = PROFILE, mode: str = "daemonset",
                       extra_args: Sequence[str] = (),
                       recursive_read_only: str | None = "Enabled",
                       lib64: bool = True, masks: Sequence[str] = MASKS,
                       name: str = "node-run") -> dict[str, Any]:
    """The container running ``kgc node-run`` (the image's entry point is ``kgc``)."""
    return {
        "name": name,
        "image": pinned_image(image),
        "imagePullPolicy": "IfNotPresent",
        "args": node_run_args(profile, mode, extra_args),
        "env": [NODE_NAME_ENV, {"name": "PYTHONUNBUFFERED", "value": "1"}],
        "securityContext": security_context(),
        # a run that could not start leaves its last words as the termination message
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                      "limits": {"memory": "1Gi"}},
        "volumeMounts": [*host_mounts(recursive_read_only, lib64=lib64, masks=masks),
                         {"name": "report", "mountPath": REPORT_DIR},
                         {"name": "tmp", "mountPath": "/tmp"},
                         # the same scratch volume as the chrooted node's /tmp (in the
                         # pod's mount namespace only): lsinitramfs unpacks there
                         {"name": "tmp", "mountPath": HOST_SCRATCH}],
    }


def scratch_volumes() -> list[dict[str, Any]]:
    return [{"name": "report", "emptyDir": {"sizeLimit": "64Mi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]


def fleet_daemonset(image: str = IMAGE, *, name: str = NAME, ns: str = NAMESPACE,
                    profile: str = PROFILE,
                    node_selector: Mapping[str, str] | None = None,
                    tolerations: Sequence[Mapping[str, Any]] | None = None,
                    runtime_class: str | None = None,
                    recursive_read_only: str | None = "Enabled",
                    lib64: bool = True, masks: Sequence[str] = MASKS,
                    extra_args: Sequence[str] = ()) -> dict[str, Any]:
    """The fleet DaemonSet: ``kgc node-run`` on every node it selects."""
    return host_daemonset(
        name, [node_run_container(image, profile=profile, extra_args=extra_args,
                                  recursive_read_only=recursive_read_only, lib64=lib64,
                                  masks=masks)],
        ns=ns, volumes=scratch_volumes(), host=host_volumes(lib64=lib64, masks=masks),
        node_selector=NODE_SELECTOR if node_selector is None else node_selector,
        tolerations=TOLERATIONS if tolerations is None else tolerations,
        runtime_class=runtime_class)


def fleet_objects(image: str = IMAGE, **kw: Any) -> list[dict[str, Any]]:
    """Namespace, ServiceAccount, DaemonSet: what ``deploy/fleet/daemonset.yaml`` holds."""
    ns = kw.get("ns", NAMESPACE)
    return [namespace(ns), service_account(ns=ns), fleet_daemonset(image, **kw)]


def collector_rbac(ns: str = NAMESPACE) -> list[dict[str, Any]]:
    """What ``kgc fleet collect`` needs (read only): the fleet's DaemonSets, pods and their
    logs in its namespace, and the nodes (which ones the DaemonSet should cover). Bind it to
    the user or ServiceAccount that collects."""
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "kgc-fleet-collect", "namespace": ns,
                         "labels": labels("fleet-collect")},
            "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                       "verbs": ["get", "list"]},
                      {"apiGroups": ["apps"], "resources": ["daemonsets"],
                       "verbs": ["get", "list"]}]}
    crole = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "metadata": {"name": "kgc-fleet-collect", "labels": labels("fleet-collect")},
             "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}]}
    return [role, crole]


def sonobuoy_plugin(image: str = IMAGE, *, profile: str = PROFILE,
                    node_selector: Mapping[str, str] | None = None,
                    tolerations: Sequence[Mapping[str, Any]] | None = None,
                    recursive_read_only: str | None = "Enabled",
                    lib64: bool = True, masks: Sequence[str] = MASKS) -> dict[str, Any]:
    """A Sonobuoy plugin definition (not a Kubernetes object): a DaemonSet-driver plugin
    whose container runs ``kgc node-run --mode sonobuoy``, which writes the run's JUnit into
    ``$SONOBUOY_RESULTS_DIR`` (Sonobuoy mounts its ``results`` volume at
    /tmp/sonobuoy/results), then the path of that file into the ``done`` file there (the
    worker sidecar's signal to upload), then idles so the DaemonSet does not restart it.
    Sonobuoy adds the ``results`` volume and its worker container to ``podSpec``."""
    c = node_run_container(image, profile=profile, mode="sonobuoy",
                           recursive_read_only=recursive_read_only, lib64=lib64, masks=masks,
                           name="plugin")
    c["volumeMounts"] = [m for m in c["volumeMounts"]] + [
        {"name": "results", "mountPath": SONOBUOY_RESULTS}]
    c["env"] = [*c["env"], {"name": "SONOBUOY_RESULTS_DIR", "value": SONOBUOY_RESULTS}]
    pod: dict[str, Any] = {
        "containers": [],
        "serviceAccountName": "sonobuoy-serviceaccount",
        "nodeSelector": dict(NODE_SELECTOR if node_selector is None else node_selector),
        "tolerations": [dict(t) for t in (TOLERATIONS if tolerations is None else tolerations)],
        "volumes": [*host_volumes(lib64=lib64, masks=masks), *scratch_volumes()],
    }
    return {
        "sonobuoy-config": {
            "driver": "DaemonSet",
            "plugin-name": SONOBUOY_PLUGIN,
            "result-format": "junit",
            "description": "kata-gpu-conformance node layers (IOMMU, VFIO, persistence, "
                           "containerd/NRI, Kata) on every selected node, read-only",
        },
        "spec": c,
        "podSpec": pod,
    }


def sonobuoy_as_daemonset(plugin: Mapping[str, Any], name: str = "sonobuoy-kgc-node",
                          ns: str = NAMESPACE) -> dict[str, Any]:
    """The DaemonSet Sonobuoy would make of ``plugin`` (its podSpec, the plugin container,
    the ``results`` emptyDir Sonobuoy adds; the worker sidecar left out): what a server-side
    dry-run can validate, since the plugin file itself is not a Kubernetes object."""
    pod = dict(plugin["podSpec"])
    spec = {**{k: v for k, v in pod.items() if k not in ("containers", "volumes",
                                                         "serviceAccountName")},
            "automountServiceAccountToken": False,
            "containers": [dict(plugin["spec"])],
            "volumes": [*pod.get("volumes", []), {"name": "results", "emptyDir": {}}]}
    sel = {FLEET_LABEL: name}
    lab = labels("sonobuoy-plugin", sel)
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": ns, "labels": dict(lab)},
            "spec": {"selector": {"matchLabels": sel},
                     "template": {"metadata": {"labels": dict(lab)}, "spec": spec}}}
