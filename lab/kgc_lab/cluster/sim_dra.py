"""The cluster lab's stand-in DRA driver: DeviceClasses and ResourceSlices for the kwok GPU
nodes, written through the API with the lab's admin credentials.

On a real DRA cluster a driver's kubelet plugin publishes one ResourceSlice per node (its
pool) and the chart installs the DeviceClass; kwok nodes run no kubelet, so the lab plays
that driver here (kwok's own DRA example does the same, kubernetes-sigs/kwok#1439). What
follows is real: the 1.37 control plane's scheduler allocates the claims against these
slices (its DynamicResources plugin), the controller-manager creates claims from templates,
the scheduler serves an extended-resource request through DRA where a DeviceClass maps the
name and the node's allocatable is 0 (KEP-5004). Nothing prepares the devices (no kubelet):
the GPU pods' guest output stays the recorded capture (:mod:`kgc_lab.cluster.sim_gpu`), its
GPU UUID set to the allocated device's, so the verdicts resting on it are simulated.

The devices mimic NVIDIA's driver (kubernetes-sigs/dra-driver-nvidia-gpu,
``cmd/gpu-kubelet-plugin/deviceinfo.go``): driver ``gpu.nvidia.com``, devices ``gpu-<i>``,
attributes ``type``, ``uuid``, ``productName``, ``driverVersion``, the standard
``resource.kubernetes.io/pciBusID``, capacity ``memory``. UUID, product, memory and driver
version come from the recorded H200 capture (``fixtures/guest/h200-firecracker.raw.txt``);
the host PCI bus ids are stand-ins (a guest never sees its host's bus id: Kata cold-plugs
the GPU on a root port of the VM). Every object carries :data:`LAB_LABEL` so that
:func:`unpublish` removes exactly what the lab made.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.rest import ApiException

from kgc import kube
from kgc.core.profile import DEFAULT_DRA_DEVICE_CLASS, DEFAULT_DRA_DRIVER
from kgc.evidence.guest import parse_guest_output
from kgc_lab.cluster.sim_gpu import CAPTURES, DEFAULT_CAPTURE, derived_uuid
from kgc_lab.cluster.simulate import fixtures_dir

GROUP, VERSION = "resource.k8s.io", "v1"
DRIVER = DEFAULT_DRA_DRIVER
DEVICE_CLASS = DEFAULT_DRA_DEVICE_CLASS
LAB_LABEL = "kgc.io/lab-dra"  # on every DeviceClass / ResourceSlice the stand-in made
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


@dataclass(frozen=True)
class RecordedGpu:
    """What the recorded capture says of its GPU (what a real driver would read by NVML)."""

    uuid: str
    product: str
    memory_mib: int
    driver_version: str


def recorded_gpu(capture: str = DEFAULT_CAPTURE) -> RecordedGpu:
    """The GPU of a recorded capture, read with the product's own parser."""
    text = (fixtures_dir() / "guest" / CAPTURES[capture][0]).read_text(errors="replace")
    smi = parse_guest_output(text).smi
    gpus = list(getattr(smi, "gpus", ()) or ())
    if smi is None or not gpus or not gpus[0].uuid:
        raise ValueError(f"fixtures/guest capture {capture!r} names no GPU with a UUID")
    g = gpus[0]
    return RecordedGpu(str(g.uuid), str(g.product_name or "NVIDIA GPU"),
                       int(g.memory_total_mib or 0), str(smi.driver_version or ""))


def device_uuid(gpu: RecordedGpu, node_index: int, device_index: int) -> str:
    """The stand-in UUID of device ``device_index`` on the ``node_index``-th GPU node: the
    recorded one for the first device of the first node, a stable derivation elsewhere (one
    GPU cannot be in two nodes)."""
    i = node_index * 100 + device_index
    return gpu.uuid if i == 0 else derived_uuid(gpu.uuid, i)


def devices(gpu: RecordedGpu, node_index: int, count: int) -> list[dict[str, Any]]:
    version = ({"version": gpu.driver_version} if _SEMVER.match(gpu.driver_version)
               else {"string": gpu.driver_version})
    out = []
    for i in range(count):
        attrs: dict[str, Any] = {
            "type": {"string": "gpu"},
            "uuid": {"string": device_uuid(gpu, node_index, i)},
            "productName": {"string": gpu.product},
            "driverVersion": version,
            PCI_BUS_ID: {"string": f"0000:{0x18 + 0x10 * i:02x}:00.0"},  # stand-in
        }
        out.append({"name": f"gpu-{i}", "attributes": attrs,
                    "capacity": {"memory": {"value": f"{gpu.memory_mib}Mi"}}})
    return out


def slice_manifest(node: str, node_index: int, count: int, gpu: RecordedGpu,
                   driver: str = DRIVER) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}", "labels": {LAB_LABEL: "true"}},
        "spec": {"driver": driver, "nodeName": node,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices(gpu, node_index, count)},
    }


def device_class_manifest(name: str = DEVICE_CLASS, driver: str = DRIVER,
                          extended_resource_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": (
        f"device.driver == '{driver}' && device.attributes['{driver}'].type == 'gpu'")}}]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "DeviceClass",
            "metadata": {"name": name, "labels": {LAB_LABEL: "true"}}, "spec": spec}


def _create(admin: kube.Kube, plural: str, body: dict[str, Any]) -> None:
    admin.custom.create_cluster_custom_object(GROUP, VERSION, plural, body)


def publish(admin: kube.Kube, nodes: Iterable[tuple[str, int]], *,
            device_class: bool = True, extended_resource_name: str | None = None,
            slices: bool = True) -> list[str]:
    """Create the DeviceClass and one ResourceSlice per ``(node, devices)``; the names of
    what was created."""
    gpu = recorded_gpu()
    made = []
    if device_class:
        _create(admin, "deviceclasses", device_class_manifest(
            extended_resource_name=extended_resource_name))
        made.append(f"deviceclass/{DEVICE_CLASS}")
    if slices:
        for i, (node, count) in enumerate(sorted(nodes)):
            body = slice_manifest(node, i, count, gpu)
            _create(admin, "resourceslices", body)
            made.append(f"resourceslice/{body['metadata']['name']}")
    return made


def unpublish(admin: kube.Kube) -> None:
    """Delete every DeviceClass and ResourceSlice the stand-in made (by its label)."""
    for plural in ("resourceslices", "deviceclasses"):
        listed: Any = admin.custom.list_cluster_custom_object(
            GROUP, VERSION, plural, label_selector=LAB_LABEL)
        items = listed.get("items") or []
        for it in items:
            try:
                admin.custom.delete_cluster_custom_object(GROUP, VERSION, plural,
                                                          it["metadata"]["name"])
            except ApiException as exc:
                if exc.status != 404:
                    raise
