"""The node layers run in-cluster: a minimal DaemonSet that runs ``pytest -m host`` inside a
pod on each selected node, with the node's root mounted read-only (recursively: every
submount — /run, /sys, /proc, /dev — is read-only too).

Where kgc comes from: **mounted read-only from the node**. The pod's image is the lab's
busybox (``kgc.local/busybox:1``, no registry); kgc and its dependencies live on the node in
``/opt/kgc`` (the wheel built from this checkout, installed when the node joined —
:func:`kgc.lab.cluster.realnode.install_kgc`). The pod reaches them through its read-only
mount of the node's root and runs them with ``chroot /host``: the suite reads the node's
/sys, /proc and /etc exactly as it would on the node, from inside the pod's namespaces.
Reports go to an ``emptyDir`` mounted over ``/host/var/lib/kgc/report`` (the only writable
path); the pod prints ``verdict.json`` to its log between markers and then idles (a
DaemonSet's pods must not exit), so the result is read with ``kubectl logs``.

The pod also prints its view of the mounts under ``/host`` (from /proc/self/mountinfo), so a
caller can prove they were read-only. Pure manifest builders and a total log parser.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kgc.lab.node.kube_image import BUSYBOX_IMAGE, REPORT_MOUNT, VENV

BEGIN = "KGC-VERDICT-BEGIN"
END = "KGC-VERDICT-END"
MOUNT = "KGC-MOUNT"
EXIT = "KGC-EXIT"
APP_LABEL = "kgc.io/in-cluster"
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def host_run_script(pytest_args: Sequence[str]) -> str:
    """The container's shell script (busybox sh)."""
    inner = (f"cd {REPORT_MOUNT} && exec {VENV}/bin/python -m pytest -m host "
             f"-p no:cacheprovider --report-dir {REPORT_MOUNT} "
             + " ".join(shlex.quote(a) for a in pytest_args))
    return "\n".join([
        # the mounts the pod sees under /host: field 5 is the mount point, 6 its options
        f"awk '$5 ~ \"^/host\" {{ print \"{MOUNT}\", $5, $6 }}' /proc/self/mountinfo",
        f"chroot /host /bin/sh -c {shlex.quote(inner)}",
        f'echo "{EXIT} $?"',
        f"echo {BEGIN}",
        f"cat /host{REPORT_MOUNT}/verdict.json",
        f"echo; echo {END}",
        "exec sleep 2147483647",
    ])


def host_run_daemonset(name: str, *, pytest_args: Sequence[str] = ("--profile", "lab", "-q"),
                       node_selector: Mapping[str, str] | None = None,
                       tolerations: Sequence[Mapping[str, Any]] = (),
                       runtime_class: str | None = "runc",
                       labels: Mapping[str, str] | None = None,
                       image: str = BUSYBOX_IMAGE) -> dict[str, Any]:
    """A DaemonSet running the node layers on every node it selects."""
    selector = {APP_LABEL: name}
    tmpl_labels = {**(labels or {}), **selector}
    spec: dict[str, Any] = {
        # the node's own network and hostname: verdicts name the node, as on the node
        "hostNetwork": True,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "containers": [{
            "name": "host-layers",
            "image": image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", host_run_script(pytest_args)],
            # the node's own tools (modprobe, containerd...) under chroot: the image's
            # PATH=/bin would hide /usr/sbin and /sbin
            "env": [{"name": "PATH", "value": NODE_PATH}],
            "volumeMounts": [
                {"name": "host", "mountPath": "/host", "readOnly": True,
                 "recursiveReadOnly": "Enabled"},
                {"name": "report", "mountPath": f"/host{REPORT_MOUNT}"},
            ],
        }],
        "volumes": [
            {"name": "host", "hostPath": {"path": "/", "type": "Directory"}},
            {"name": "report", "emptyDir": {"sizeLimit": "64Mi"}},
        ],
    }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "labels": tmpl_labels},
        "spec": {"selector": {"matchLabels": selector},
                 "template": {"metadata": {"labels": tmpl_labels}, "spec": spec}},
    }


@dataclass
class HostRun:
    """What one in-cluster host run printed."""

    done: bool = False  # the END marker was seen
    exit_code: int | None = None  # pytest's exit status
    verdict: dict[str, Any] | None = None
    verdict_error: str = ""
    mounts: dict[str, str] = field(default_factory=dict)  # mount point -> options

    def writable_host_mounts(self) -> list[str]:
        """Mounts under /host that are not read-only (the report emptyDir excepted)."""
        return sorted(m for m, opts in self.mounts.items()
                      if m != f"/host{REPORT_MOUNT}" and "ro" not in opts.split(","))


def parse_host_run(log: str) -> HostRun:
    """Parse a host-run pod's log (total: any text gives a HostRun)."""
    out = HostRun()
    body: list[str] | None = None
    for line in log.splitlines():
        if body is not None:
            if line.strip() == END:
                out.done = True
                text = "\n".join(body).strip()
                try:
                    doc = json.loads(text)
                except ValueError as exc:
                    out.verdict_error = f"verdict.json unreadable: {exc}"
                else:
                    if isinstance(doc, dict):
                        out.verdict = doc
                    else:
                        out.verdict_error = "verdict.json is not an object"
                body = None
            else:
                body.append(line)
            continue
        parts = line.split()
        if line.strip() == BEGIN:
            body = []
        elif len(parts) == 3 and parts[0] == MOUNT:
            out.mounts[parts[1]] = parts[2]
        elif len(parts) == 2 and parts[0] == EXIT and parts[1].isdigit():
            out.exit_code = int(parts[1])
    return out


def verdict_map(doc: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """check id -> (status, reason) of a kgc-verdict/1 document (malformed rows skipped)."""
    out: dict[str, tuple[str, str]] = {}
    for r in doc.get("results") or []:
        if isinstance(r, Mapping) and isinstance(r.get("check"), str):
            out[r["check"]] = (str(r.get("status")), str(r.get("reason")))
    return out
