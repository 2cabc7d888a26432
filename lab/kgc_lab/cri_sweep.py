"""Sweep NRI probe pods (label ``kgc.io/nri-probe``) off a container runtime through CRI.

A probe that was killed before its teardown leaves its pod sandbox in the runtime. The
product's CRI subset (``kgc.cri``) has no ListPodSandbox, so the two messages it needs are
declared here in a private descriptor pool (field numbers of k8s.io/cri-api
``pkg/apis/runtime/v1/api.proto``: PodSandbox id=1 metadata=2 state=3 created_at=4
labels=5; ListPodSandboxResponse items=1), without touching the product's generated code.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kgc.cri import cri_pb2 as pb
from kgc.cri.client import CriClient, CriError
from kgc.nri.probe import PROBE_LABEL

_F = descriptor_pb2.FieldDescriptorProto


def _messages() -> tuple[Any, Any]:
    fd = descriptor_pb2.FileDescriptorProto(name="kgc_lab_cri_list.proto",
                                            package="runtime.v1", syntax="proto3")
    meta = fd.message_type.add(name="PodSandboxMetadata")
    for num, name in ((1, "name"), (2, "uid"), (3, "namespace")):
        meta.field.add(name=name, number=num, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    sandbox = fd.message_type.add(name="PodSandbox")
    sandbox.field.add(name="id", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    sandbox.field.add(name="metadata", number=2, type=_F.TYPE_MESSAGE, label=_F.LABEL_OPTIONAL,
                      type_name=".runtime.v1.PodSandboxMetadata")
    sandbox.field.add(name="state", number=3, type=_F.TYPE_INT32, label=_F.LABEL_OPTIONAL)
    entry = sandbox.nested_type.add(name="LabelsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    sandbox.field.add(name="labels", number=5, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                      type_name=".runtime.v1.PodSandbox.LabelsEntry")
    fd.message_type.add(name="ListPodSandboxRequest")
    resp = fd.message_type.add(name="ListPodSandboxResponse")
    resp.field.add(name="items", number=1, type=_F.TYPE_MESSAGE, label=_F.LABEL_REPEATED,
                   type_name=".runtime.v1.PodSandbox")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    req_cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("runtime.v1.ListPodSandboxRequest"))
    resp_cls = message_factory.GetMessageClass(
        pool.FindMessageTypeByName("runtime.v1.ListPodSandboxResponse"))
    return req_cls, resp_cls


ListPodSandboxRequest, ListPodSandboxResponse = _messages()


def probe_pods(client: CriClient) -> list[tuple[str, str, str]]:
    """(sandbox id, namespace/name, probe token) of every pod carrying the probe label."""
    resp = client.call("ListPodSandbox", ListPodSandboxRequest(), ListPodSandboxResponse, 10.0)
    return [(p.id, f"{p.metadata.namespace}/{p.metadata.name}", p.labels[PROBE_LABEL])
            for p in resp.items if PROBE_LABEL in p.labels]


def sweep_probe_pods(socket_path: str, dry_run: bool = False) -> tuple[list[str], list[str]]:
    """Stop and remove every NRI probe pod on the runtime at ``socket_path`` (removing a
    sandbox removes its containers). Returns (what was removed, errors)."""
    removed: list[str] = []
    errors: list[str] = []
    with CriClient(socket_path, timeout_s=15.0) as c:
        try:
            pods = probe_pods(c)
        except CriError as exc:
            return removed, [str(exc)]
        for pod_id, name, _token in pods:
            desc = f"NRI probe pod {name} ({pod_id[:12]}) on {socket_path}"
            if dry_run:
                removed.append(desc)
                continue
            try:
                c.call("StopPodSandbox", pb.StopPodSandboxRequest(pod_sandbox_id=pod_id),
                       pb.StopPodSandboxResponse)
                c.call("RemovePodSandbox", pb.RemovePodSandboxRequest(pod_sandbox_id=pod_id),
                       pb.RemovePodSandboxResponse)
                removed.append(desc)
            except CriError as exc:
                errors.append(f"{desc}: {exc}")
    return removed, errors
