"""Dynamic Resource Allocation on the lab's real node: a real kubelet prepares a claim.

The ``kube`` node image carries ``kgc-dra-plugin`` (``lab/cluster/go/dra``, built by
``scripts/bootstrap.d/30-cluster.sh`` from ``k8s.io/dynamic-resource-allocation`` v0.37.2,
the control plane's version). Once the node is Ready, :func:`start` (called by
:func:`kgc_lab.cluster.realnode.join`):

* creates the DeviceClass :data:`DEVICE_CLASS` (selector ``device.driver == "dra.kgc.io"``)
  as the lab admin — a cluster operator's step, as a driver's Helm chart does;
* starts the plugin on the node (systemd unit ``kgc-dra-plugin``, a host process beside
  the kubelet, with the kubelet's own credentials ``system:node:<name>``: the Node
  authorizer + NodeRestriction let a node create/update/delete the ResourceSlices whose
  ``spec.nodeName`` is itself, list/watch them only with that field selector, and get the
  ResourceClaims its pods reference — k8s.io/kubernetes v1.37.2
  ``plugin/pkg/auth/authorizer/node/node_authorizer.go`` ``authorizeResourceSlice``,
  ``plugin/pkg/admission/noderestriction/admission.go`` ``admitResourceSlice``);
* waits until the plugin's ResourceSlice is published (one pool named after the node,
  :data:`STAND_IN_DEVICES` stand-in GPUs, attributes named as NVIDIA's DRA driver names
  them, marked ``standIn``) and the plugin has registered with the kubelet.

A pod on the node with a claim of the class then goes through the real path: the
scheduler allocates a device of the slice, the kubelet calls the plugin's
NodePrepareResources, the plugin writes a CDI spec (``/var/run/cdi/kgc.io-dra_<claim
uid>.json``, kind :data:`CDI_KIND`) and returns its CDI device id, containerd (CDI on, its
2.x default) applies the spec's edits: the container sees ``KGC_DRA_<DEVICE>`` and
``/run/kgc-dra/<device>.json``. When the pod is gone the kubelet unprepares the claim and
the plugin removes the spec. Nothing backs the devices: they are stand-ins.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from kgc import kube
from kgc_lab.common import LabError

DRIVER = "dra.kgc.io"  # lab-only driver name (a domain the lab owns)
DEVICE_CLASS = "dra.kgc.io"
CDI_KIND = "kgc.io/dra"
CDI_DIR = "/var/run/cdi"
STATE_DIR = "/var/run/kgc-dra"  # the per-claim files the CDI mounts bind into containers
CONTAINER_DIR = "/run/kgc-dra"  # where a container sees them
STAND_IN_DEVICES = 2
UNIT = "kgc-dra-plugin"
# the plugin's sockets (kubeletplugin defaults: KubeletPluginsDir, KubeletRegistryDir)
PLUGIN_SOCKET = f"/var/lib/kubelet/plugins/{DRIVER}/dra.sock"
REGISTRATION_SOCKET = f"/var/lib/kubelet/plugins_registry/{DRIVER}-reg.sock"


def plugin_env(node: str) -> bytes:
    """``/etc/kubernetes/kgc-dra.env``: the plugin's arguments (the unit reads them)."""
    args = (f"--node-name={node} --kubeconfig=/etc/kubernetes/kubelet.kubeconfig "
            f"--driver={DRIVER} --devices={STAND_IN_DEVICES} --cdi-dir={CDI_DIR} "
            f"--state-dir={STATE_DIR} --v=1")
    return f"DRA_ARGS={args}\n".encode()


def device_class_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS, "labels": {"kgc.io/lab": "real-node-dra"}},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def claim_template_manifest(name: str, namespace: str, request: str = "gpu"
                            ) -> dict[str, Any]:
    """A ResourceClaimTemplate asking for one device of :data:`DEVICE_CLASS`."""
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [
            {"name": request, "exactly": {"deviceClassName": DEVICE_CLASS, "count": 1}}]}}},
    }


def cdi_spec_path(claim_uid: str) -> str:
    return f"{CDI_DIR}/kgc.io-dra_{claim_uid}.json"


def env_name(device: str) -> str:
    return "KGC_DRA_" + device.upper().replace("-", "_")


def ensure_device_class(api: kube.Kube) -> None:
    res = client.ResourceV1Api(api.api)
    try:
        api.call("create", "deviceclasses.resource.k8s.io", res.create_device_class,
                 device_class_manifest())
    except ApiException as exc:
        if exc.status != 409:
            raise


def node_slices(api: kube.Kube, node: str) -> list[dict[str, Any]]:
    """The ResourceSlices of :data:`DRIVER` on ``node``, as the API serves them."""
    res = client.ResourceV1Api(api.api)
    doc: Any = api.call("list", "resourceslices.resource.k8s.io", res.list_resource_slice,
                        field_selector=f"spec.driver={DRIVER},spec.nodeName={node}")
    return [api.api.sanitize_for_serialization(s) for s in doc.items]


def _published(api: kube.Kube, node: str) -> Any:
    slices = node_slices(api, node)
    devices = sum(len(s["spec"].get("devices") or []) for s in slices)
    if devices < STAND_IN_DEVICES:
        return kube.NotYet(f"{len(slices)} ResourceSlice(s) of {DRIVER} on {node} with "
                           f"{devices} device(s)")
    return slices


def plugin_journal(ssh: list[str], lines: int = 60) -> str:
    try:
        res = subprocess.run([*ssh, f"journalctl -u {UNIT} --no-pager -n {lines} -o cat"],
                             capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired as exc:
        return f"(journal unreadable: {exc})"
    return (res.stdout or res.stderr)[-6000:]


def _sockets(ssh: list[str]) -> Any:
    res = subprocess.run([*ssh, f"test -S {PLUGIN_SOCKET} && test -S {REGISTRATION_SOCKET}"],
                         capture_output=True, text=True, timeout=60, check=False)
    if res.returncode != 0:
        return kube.NotYet(f"the plugin's sockets ({PLUGIN_SOCKET}, {REGISTRATION_SOCKET}) "
                           "are not there yet")
    return True


def start(api: kube.Kube, ssh: list[str], node: str, timeout_s: float = 180.0
          ) -> dict[str, Any]:
    """DeviceClass, plugin started, its slice published and its sockets served (the
    kubelet's plugin watcher registers it from the registration socket). Returns what was
    published (``slices``)."""
    ensure_device_class(api)
    res = subprocess.run([*ssh, f"systemctl start {UNIT}"], capture_output=True, text=True,
                         timeout=120, check=False)
    if res.returncode != 0:
        raise LabError(f"starting {UNIT} on {node} failed: {res.stderr[-2000:]}")
    try:
        slices = kube.wait_for(f"{DRIVER}'s ResourceSlice of {node}",
                               lambda: _published(api, node), timeout_s, 1.0)
        kube.wait_for(f"{DRIVER}'s sockets on {node}", lambda: _sockets(ssh),
                      timeout_s, 2.0)
    except kube.WaitTimeout as exc:
        raise LabError(f"{exc}\n{UNIT} journal:\n{plugin_journal(ssh)}") from None
    return {"slices": slices}


def allocation(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``status.allocation.devices.results`` of a claim (JSON), [] when not allocated."""
    st = claim.get("status") or {}
    return list(((st.get("allocation") or {}).get("devices") or {}).get("results") or [])


__all__ = ["CDI_DIR", "CDI_KIND", "CONTAINER_DIR", "DEVICE_CLASS", "DRIVER", "STAND_IN_DEVICES",
           "UNIT", "allocation", "cdi_spec_path", "claim_template_manifest",
           "device_class_manifest", "ensure_device_class", "env_name", "node_slices",
           "plugin_env", "plugin_journal", "start"]
