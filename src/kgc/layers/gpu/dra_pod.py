"""The DRA GPU pod (issue 20 step 3): was the pod's GPU allocated by Dynamic Resource
Allocation, and is the GPU inside the guest the device DRA allocated?

- ``gpu.dra-allocation``: each of the pod's ResourceClaims is allocated (``status.allocation.
  devices.results[]``: request, driver == ``platform.gpu.request.driver``, pool, device), on the
  pod's node, and reserved for the pod (``status.reservedFor``); under ``dra-extended`` the
  pod's ``status.extendedResourceClaimStatus`` maps the collector container's extended
  resource to a request of the generated claim (core/v1 ``PodExtendedResourceClaimStatus``:
  ``resourceClaimName``, ``requestMappings[{containerName, resourceName, requestName}]``).
- ``gpu.dra-device-match``: the guest's NVIDIA GPU is the allocated device. The UUID decides:
  the GPU reports the same UUID to nvidia-smi on the host (where the DRA driver read it) and
  in the guest. A PCI bus id does not: under VFIO passthrough Kata cold-plugs the GPU on a
  root port of the VM (``cold_plug_vfio = "root-port"``), so the guest's nvidia-smi bus id is
  the VM's topology (e.g. 0000:02:00.0), never the host's ``pciBusID`` the slice publishes.
  Without a UUID in the slice only the product can be compared: a warn, never a pass.

Both skip naming the mode under ``device-plugin``; missing evidence is never a pass. The
slice attributes come with the pod's evidence (:class:`ClaimEvidence.device_attributes`).
Evaluators do no I/O; :func:`claim_from_api` turns an API object into evidence, purely.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kgc.core.model import Outcome, Severity, errored, failed, passed, skipped, warned
from kgc.layers.gpu.checks import _pod_ev, _ran, _scoped, not_a_vm, settings
from kgc.layers.gpu.classify import _DRA_FIX
from kgc.layers.gpu.evidence import ClaimEvidence, ClaimResult

MAX_RESULTS = 64  # a claim allocating more devices than this is malformed evidence
MAX_TEXT = 253
UNNAMED = "(unnamed claim)"  # a claim without metadata.name, in reasons and evidence


def _s(v: Any) -> str | None:
    return v[:MAX_TEXT] if isinstance(v, str) and v else None


def _attr_value(v: Any) -> str | None:
    """A ResourceSlice attribute value (``{string|version|int|bool: ...}``) as text."""
    if not isinstance(v, Mapping):
        return None
    for k in ("string", "version", "int", "bool"):
        if k in v and v[k] is not None:
            x = v[k]
            # a bool as the API writes it (and as kgc.layers.gpu.dra reads slices)
            return ("true" if x else "false") if isinstance(x, bool) else str(x)[:MAX_TEXT]
    return None


def slice_attributes(slices: Any, driver: str, pool: str | None,
                     device: str | None) -> dict[str, str]:
    """The attributes of ``device`` in pool ``pool`` of ``driver`` from ResourceSlice API
    objects (``spec.driver``, ``spec.pool.name``, ``spec.devices[].name/attributes``); {}
    when none publishes it."""
    for s in slices if isinstance(slices, list) else ():
        spec = _map(_map(s).get("spec"))
        if spec.get("driver") != driver:
            continue
        if pool is not None and _map(spec.get("pool")).get("name") != pool:
            continue
        for d in _list(spec.get("devices"))[:1024]:
            if isinstance(d, Mapping) and d.get("name") == device:
                attrs = d.get("attributes") or {}
                if not isinstance(attrs, Mapping):
                    return {}
                out = {str(k)[:MAX_TEXT]: v for k, v in
                       ((k, _attr_value(v)) for k, v in list(attrs.items())[:64])
                       if v is not None}
                return out
    return {}


def _map(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def claim_from_api(obj: Any, slices: Any = None) -> ClaimEvidence:
    """A ResourceClaim API object (as the API server returns it) as evidence; a malformed
    one carries ``error`` naming what is wrong, never an exception."""
    if not isinstance(obj, Mapping):
        return ClaimEvidence(error="the ResourceClaim is not an object")
    name = _s(_map(obj.get("metadata")).get("name"))
    status = obj.get("status") or {}
    if not isinstance(status, Mapping):
        return ClaimEvidence(name=name, error="status is not an object")
    reserved = tuple(_s(r.get("name")) or "?" for r in _list(status.get("reservedFor"))[:64]
                     if isinstance(r, Mapping))
    alloc = status.get("allocation")
    if alloc is None:
        return ClaimEvidence(name=name, allocated=False, reserved_for=reserved)
    if not isinstance(alloc, Mapping):
        return ClaimEvidence(name=name, error="status.allocation is not an object")
    raw = _map(alloc.get("devices")).get("results")
    if not isinstance(raw, list):
        return ClaimEvidence(name=name, allocated=True, reserved_for=reserved,
                             error="status.allocation.devices.results is missing")
    if len(raw) > MAX_RESULTS:
        return ClaimEvidence(name=name, allocated=True, reserved_for=reserved,
                             error=f"status.allocation.devices.results has {len(raw)} "
                                   f"entries (more than {MAX_RESULTS})")
    results = tuple(ClaimResult(_s(r.get("request")), _s(r.get("driver")), _s(r.get("pool")),
                                _s(r.get("device")))
                    if isinstance(r, Mapping) else ClaimResult() for r in raw)
    node = None
    for term in _list(_map(alloc.get("nodeSelector")).get("nodeSelectorTerms")):
        for f in _list(_map(term).get("matchFields")):
            vals = _list(_map(f).get("values"))
            if _map(f).get("key") == "metadata.name" and vals:
                node = _s(vals[0])
    attrs = {r.device: slice_attributes(slices, r.driver, r.pool, r.device)
             for r in results if r.device and r.driver}
    return ClaimEvidence(name=name, allocated=True, node=node, results=results,
                         reserved_for=reserved,
                         device_attributes={k: v for k, v in attrs.items() if v})


def _skip_mode(mode: str) -> Outcome | None:
    if mode == "device-plugin":
        return skipped("platform.gpu.request.mode is device-plugin: the GPU is not "
                       "allocated by DRA")
    return None


def _attr(attrs: Mapping[str, str], name: str) -> str | None:
    for k, v in attrs.items():
        if k == name or k.endswith("/" + name):
            return v
    return None


@_scoped(
    "pod",
    "gpu.dra-allocation",
    title="The pod's GPU claim is allocated on its node by the profile's DRA driver and "
    "reserved for the pod",
    remediation="Read the claim (kubectl get resourceclaim -o yaml) and the scheduler's events "
    "for the pod; the node's ResourceSlices must publish the DeviceClass's devices "
    "(see gpu.dra-slices).",
    severity=Severity.BLOCKER,
)
def dra_allocation(subj: Any, profile: Any) -> Outcome:
    gp = settings(profile)
    pod = subj.pod
    skip = _skip_mode(gp.request.mode)
    if skip is not None:
        return skip
    if pod is None:
        return skipped("no GPU pod was created (see gpu.pod-runs)")
    ev = {**_pod_ev(pod), "mode": gp.request.mode}
    if not pod.claims:
        return errored(f"{pod.ref}: no ResourceClaim of the pod was recorded "
                       f"(request.mode {gp.request.mode})", **ev)
    probs: list[str] = []
    rows: list[dict[str, Any]] = []
    for c in pod.claims:
        cname = c.name or UNNAMED
        if c.error:
            return errored(f"{pod.ref}: ResourceClaim {cname}: {c.error}", **ev)
        rows.append({"claim": cname, "node": c.node, "reserved_for": list(c.reserved_for),
                     "results": [r.to_dict() for r in c.results]})
        if not c.allocated:
            probs.append(f"ResourceClaim {cname} is not allocated")
            continue
        if not c.results:
            return errored(f"{pod.ref}: ResourceClaim {cname} is allocated but lists no "
                           "devices (status.allocation.devices.results is empty)", **ev)
        for r in c.results:
            missing = [k for k in ("request", "driver", "pool", "device") if not getattr(r, k)]
            if missing:
                return errored(f"{pod.ref}: ResourceClaim {cname}: an allocation result "
                               f"lacks {', '.join(missing)}", **ev, claims=rows)
            if r.driver != gp.request.driver:
                probs.append(f"{cname}: device {r.device} is allocated by driver {r.driver}, "
                             f"not {gp.request.driver}")
        if c.node and pod.node and c.node != pod.node:
            probs.append(f"{cname}: allocated on node {c.node}, the pod runs on {pod.node}")
        if pod.name not in c.reserved_for:
            probs.append(f"{cname}: reservedFor names "
                         f"{', '.join(c.reserved_for) or 'nobody'}, not {pod.name}")
    if gp.request.mode == "dra-extended":
        names = {c.name for c in pod.claims}
        if not pod.extended_claim:
            probs.append("status.extendedResourceClaimStatus is not set: the extended resource "
                         f"{pod.resource} was not served by DRA")
        elif pod.extended_claim not in names:
            probs.append(f"status.extendedResourceClaimStatus names claim {pod.extended_claim}, "
                         "which was not recorded")
        elif not any(m.get("resourceName") == pod.resource for m in pod.extended_mappings):
            probs.append(f"status.extendedResourceClaimStatus maps no container's "
                         f"{pod.resource} to a request")
    ev["claims"] = rows
    if probs:
        return failed(f"{pod.ref}: " + "; ".join(probs),
                      "The GPU must come from the profile's DeviceClass "
                      f"{gp.request.device_class} (driver {gp.request.driver}) on the pod's own "
                      "node: check the DeviceClass (gpu.dra-device-class), the node's "
                      "ResourceSlices (gpu.dra-slices) and, for dra-extended, that the node's "
                      f"allocatable for {pod.resource} is 0 (gpu.dra-both-ways).", **ev)
    devs = ", ".join(f"{r.driver}/{r.pool}/{r.device}" for c in pod.claims for r in c.results)
    return passed(f"{pod.ref}: allocated {devs} on {pod.node}, reserved for the pod", **ev)


@_scoped(
    "pod",
    "gpu.dra-device-match",
    title="The GPU inside the guest is the device DRA allocated (UUID)",
    remediation="Compare the claim's device with what the guest sees (nvidia-smi -q: GPU UUID) "
    "and the node's ResourceSlice.",
    severity=Severity.BLOCKER,
)
def dra_device_match(subj: Any, profile: Any) -> Outcome:
    gp = settings(profile)
    skip = _skip_mode(gp.request.mode)
    if skip is not None:
        return skip
    got = _ran(subj)
    if isinstance(got, Outcome):
        return got
    pod, g = got
    ev = {**_pod_ev(pod), "mode": gp.request.mode}
    allocated = [(c.name or UNNAMED, r, c.device_attributes.get(r.device or "", {}))
                 for c in pod.claims for r in c.results]
    if not allocated:
        return errored(f"{pod.ref}: no allocated DRA device was recorded (see "
                       "gpu.dra-allocation)", **ev)
    sandbox = not_a_vm(pod, g) or ([] if g.is_vm else ["no hypervisor in its CPU flags"])
    if g.pci_listed and not g.nvidia_gpus and sandbox:
        # no VM at all (runc, gVisor): the cold-plug gap is not the cause, the runtime is
        return failed(f"{pod.ref}: DRA allocated "
                      + ", ".join(f"{r.pool}/{r.device}" for _, r, _ in allocated)
                      + " but the pod's sandbox is not a VM (" + "; ".join(sandbox)
                      + ") and shows no NVIDIA GPU PCI function (see gpu.in-vm): nothing "
                      "was passed through",
                      "Run the GPU pod under the Kata RuntimeClass (platform.kata."
                      "runtime_class) on nodes whose DRA driver prepares VFIO devices (e.g. "
                      "dra-driver-nvidia-gpu's vfio.gpu.nvidia.com class, PassthroughSupport).",
                      **ev)
    if g.pci_listed and not g.nvidia_gpus:
        return failed(f"{pod.ref}: DRA allocated "
                      + ", ".join(f"{r.pool}/{r.device}" for _, r, _ in allocated)
                      + " but the Kata guest has no NVIDIA GPU PCI function: Kata's DRA "
                      "cold-plug gap (kata-containers#13322)",
                      _DRA_FIX.format(node=pod.node or "the node"), **ev)
    if g.smi is None:
        return skipped(f"{pod.ref}: the guest has no nvidia-smi report to compare (see "
                       "gpu.smi-count)", **ev)
    guest_uuids = {x.uuid for x in g.smi.gpus if x.uuid}
    guest_products = {x.product_name for x in g.smi.gpus if x.product_name}
    ev["guest"] = {"uuids": sorted(guest_uuids),
                   "bus_ids": sorted(x.bus_id for x in g.smi.gpus if x.bus_id)}
    rows, bad, weak = [], [], []
    for cname, r, attrs in allocated:
        uuid, product = _attr(attrs, "uuid"), _attr(attrs, "productName")
        rows.append({"claim": cname, "device": r.device, "uuid": uuid, "product": product,
                     "pciBusID": _attr(attrs, "pciBusID")})
        if uuid:
            if uuid not in guest_uuids:
                bad.append(f"{r.device} ({uuid}) is not in the guest (guest UUIDs: "
                           f"{', '.join(sorted(guest_uuids)) or 'none'})")
        elif product:
            if product not in guest_products:
                bad.append(f"{r.device} is a {product}; the guest has "
                           f"{', '.join(sorted(guest_products)) or 'no named GPU'}")
            else:
                weak.append(r.device or "?")
        else:
            return skipped(f"{pod.ref}: the ResourceSlice attributes of {r.device} (uuid, "
                           "productName) were not recorded", **ev, allocated=rows)
    ev["allocated"] = rows
    if bad:
        return failed(f"{pod.ref}: " + "; ".join(bad),
                      "The guest must see the device DRA allocated: check the DRA driver's CDI "
                      "spec for the claim on the node and what Kata cold-plugged (shim log).",
                      **ev)
    if weak:
        return warned(f"{pod.ref}: {', '.join(weak)}: the slice publishes no uuid, only the "
                      "product matched (the guest's PCI bus id is the VM's root port, not the "
                      "host's pciBusID, so it cannot decide)",
                      "Publish the GPU's uuid attribute in the ResourceSlice (NVIDIA's DRA "
                      "driver does for gpu devices).", **ev)
    return passed(f"{pod.ref}: the guest's GPU UUID(s) are the allocated device(s) "
                  + ", ".join(str(r["device"]) for r in rows), **ev)


def pod_claim_refs(pod: Any) -> tuple[list[str], str | None, tuple[dict[str, str], ...]]:
    """From a Pod API object: the names of its ResourceClaims (``status.
    resourceClaimStatuses[].resourceClaimName``, plus the extended-resource claim), and
    ``status.extendedResourceClaimStatus`` (``resourceClaimName``, ``requestMappings[]``
    of ``{containerName, resourceName, requestName}``; core/v1 types.go)."""
    status = _map(_map(pod).get("status"))
    names = [n for n in (_s(_map(r).get("resourceClaimName"))
                         for r in _list(status.get("resourceClaimStatuses"))[:16]) if n]
    ext = _map(status.get("extendedResourceClaimStatus"))
    ext_name = _s(ext.get("resourceClaimName"))
    mappings = tuple({k: str(v)[:MAX_TEXT] for k, v in _map(m).items()
                      if k in ("containerName", "resourceName", "requestName")}
                     for m in _list(ext.get("requestMappings"))[:16])
    if ext_name and ext_name not in names:
        names.append(ext_name)
    return names, ext_name, mappings
