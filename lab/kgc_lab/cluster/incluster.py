"""The node layers run in-cluster: a minimal DaemonSet that runs ``pytest -m host`` inside a
pod on each selected node, with the node's root mounted read-only (recursively: every
submount — /run, /sys, /proc, /dev — is read-only too).

Where kgc comes from: **mounted read-only from the node**. The pod's image is the lab's
busybox (``kgc.local/busybox:1``, no registry); kgc and its dependencies live on the node in
``/opt/kgc`` (the wheel built from this checkout, installed when the node joined —
:func:`kgc_lab.cluster.realnode.install_kgc`). The pod reaches them through its read-only
mount of the node's root and runs them with ``chroot /host``: the suite reads the node's
/sys, /proc and /etc exactly as it would on the node, from inside the pod's namespaces.
Reports go to an ``emptyDir`` mounted over ``/host/var/lib/kgc/report`` (the only writable
path); the pod prints ``verdict.json`` to its log between markers and then idles (a
DaemonSet's pods must not exit), so the result is read with ``kubectl logs``.

The pod also prints its view of the mounts under ``/host`` (from /proc/self/mountinfo), so a
caller can prove they were read-only.

One implementation with the product's fleet (:mod:`kgc.fleet`): the DaemonSet is
:func:`kgc.fleet.manifests.host_daemonset` (the same labels and selector; the lab mounts
the node's whole root, where the product mounts only ``manifests.HOST_PATHS``), the
pod prints :mod:`kgc.fleet.protocol`'s markers, and its log is read back by the product's
parser (and can be merged by ``kgc fleet collect``). Only the container differs: the lab
has no registry for the fleet image, so it runs the node's own kgc under chroot.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from kgc.fleet import manifests
from kgc.fleet.protocol import (
    BEGIN,
    END,
    ERROR,
    EXIT,
    HOST,
    MODE,
    MOUNT,
    NODE,
    HostRun,
    parse_node_log,
    verdict_map,
)
from kgc_lab.node.kube_image import BUSYBOX_IMAGE, REPORT_MOUNT, VENV

APP_LABEL = manifests.FLEET_LABEL
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
parse_host_run = parse_node_log
__all__ = ["APP_LABEL", "BEGIN", "END", "EXIT", "MOUNT", "HostRun", "host_run_daemonset",
           "host_run_script", "parse_host_run", "verdict_map"]


def host_run_script(pytest_args: Sequence[str]) -> str:
    """The container's shell script (busybox sh), printing the fleet protocol."""
    # the node's root is read-only: lsinitramfs unpacks into a directory of the writable
    # report mount
    inner = (f"mkdir -p {REPORT_MOUNT}/tmp && cd {REPORT_MOUNT} && "
             f"TMPDIR={REPORT_MOUNT}/tmp exec {VENV}/bin/python -m pytest -m host "
             f"-p no:cacheprovider --report-dir {REPORT_MOUNT} "
             + " ".join(shlex.quote(a) for a in pytest_args))
    return "\n".join([
        f'echo "{NODE} $(hostname)"',
        # the host's own identity, as `kgc fleet collect` checks it against the kubelet's
        f'echo "{HOST} boot_id=$(cat /host/proc/sys/kernel/random/boot_id) '
        f'machine_id=$(cat /host/etc/machine-id) hostname=$(cat /host/etc/hostname)"',
        f'echo "{MODE} live"',
        # the mounts the pod sees under /host: field 5 is the mount point, 6 its options
        f"awk '$5 ~ \"^/host\" {{ print \"{MOUNT}\", $5, $6 }}' /proc/self/mountinfo",
        f"chroot /host /bin/sh -c {shlex.quote(inner)}",
        f'echo "{EXIT} $?"',
        f"if [ -s /host{REPORT_MOUNT}/verdict.json ]; then echo {BEGIN}; "
        f"cat /host{REPORT_MOUNT}/verdict.json; echo; echo {END}; "
        f"else echo \"{ERROR} pytest wrote no verdict.json\"; fi",
        "exec sleep 2147483647",
    ])


def host_run_daemonset(name: str, *, pytest_args: Sequence[str] = ("--profile", "lab", "-q"),
                       node_selector: Mapping[str, str] | None = None,
                       tolerations: Sequence[Mapping[str, Any]] = (),
                       runtime_class: str | None = "runc",
                       labels: Mapping[str, str] | None = None,
                       image: str = BUSYBOX_IMAGE) -> dict[str, Any]:
    """The product's host DaemonSet (no namespace: the caller's run namespace) running the
    node's own kgc on every node it selects."""
    container = {
        "name": "host-layers",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", host_run_script(pytest_args)],
        # the node's own tools (modprobe, containerd...) under chroot: the image's
        # PATH=/bin would hide /usr/sbin and /sbin
        "env": [{"name": "PATH", "value": NODE_PATH}],
        "volumeMounts": [manifests.host_mount("Enabled"),
                         {"name": "report", "mountPath": f"/host{REPORT_MOUNT}"}],
    }
    # the node's own network and hostname: verdicts name the node, as on the node
    return manifests.host_daemonset(
        name, [container], ns=None, service_account=None, host_network=True,
        host=[manifests.whole_root_volume()],
        volumes=[{"name": "report", "emptyDir": {"sizeLimit": "64Mi"}}],
        pod_labels=labels, node_selector=node_selector, tolerations=tolerations,
        runtime_class=runtime_class, grace_s=1)
