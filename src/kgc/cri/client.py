"""A minimal CRI client: just enough of runtime.v1.RuntimeService to run one probe pod.

Messages come from kgc's own ``cri.proto`` subset; calls go through grpcio's generic
unary-unary stubs over the runtime's unix socket. Every call has a deadline.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from kgc.cri import cri_pb2 as pb

SERVICE = "/runtime.v1.RuntimeService/"


class CriError(Exception):
    """A CRI call failed; the message names the call and the runtime's answer."""


class CriClient:
    def __init__(self, socket_path: str, timeout_s: float = 30.0) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._channel = grpc.insecure_channel(f"unix://{socket_path}")

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> CriClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(
        self, method: str, request: Any, response_type: Any, timeout_s: float | None = None
    ) -> Any:
        stub = self._channel.unary_unary(
            SERVICE + method,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_type.FromString,
        )
        try:
            return stub(request, timeout=timeout_s or self.timeout_s)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            details = exc.details() if hasattr(exc, "details") else str(exc)
            raise CriError(f"CRI {method} on {self.socket_path} failed: {code}: {details}") from exc

    def version(self) -> pb.VersionResponse:
        return self.call("Version", pb.VersionRequest(version="v1"), pb.VersionResponse, 5.0)

    def status(self) -> list[dict[str, Any]]:
        """The runtime's conditions (CRI ``Status``, not verbose: no config dump, so no
        registry credentials): [{type, status, reason, message}, ...]."""
        req, resp = _status_types()
        out = self.call("Status", req(verbose=False), resp, 5.0)
        return [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                for c in out.status.conditions]


_STATUS_TYPES: tuple[Any, Any] | None = None


def _status_types() -> tuple[Any, Any]:
    """StatusRequest / StatusResponse of runtime.v1 (field numbers as in the CRI API's
    api.proto: RuntimeCondition type=1 status=2 reason=3 message=4, RuntimeStatus
    conditions=1, StatusResponse status=1, StatusRequest verbose=1), built at run time so
    kgc's generated cri_pb2 need not change."""
    global _STATUS_TYPES
    if _STATUS_TYPES is not None:
        return _STATUS_TYPES
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    f = descriptor_pb2.FileDescriptorProto(name="kgc/cri/status.proto", package="runtime.v1",
                                           syntax="proto3")
    t = descriptor_pb2.FieldDescriptorProto

    def msg(name: str, *fields: tuple[str, int, int, str]) -> None:
        m = f.message_type.add(name=name)
        for fname, num, ftype, tname in fields:
            fd = m.field.add(name=fname, number=num, type=ftype,  # type: ignore[arg-type]
                             label=t.LABEL_REPEATED if fname == "conditions"
                             else t.LABEL_OPTIONAL)
            if tname:
                fd.type_name = tname

    msg("StatusRequest", ("verbose", 1, t.TYPE_BOOL, ""))
    msg("RuntimeCondition", ("type", 1, t.TYPE_STRING, ""), ("status", 2, t.TYPE_BOOL, ""),
        ("reason", 3, t.TYPE_STRING, ""), ("message", 4, t.TYPE_STRING, ""))
    msg("RuntimeStatus", ("conditions", 1, t.TYPE_MESSAGE, ".runtime.v1.RuntimeCondition"))
    msg("StatusResponse", ("status", 1, t.TYPE_MESSAGE, ".runtime.v1.RuntimeStatus"))
    pool = descriptor_pool.DescriptorPool()
    fd = pool.Add(f)
    _STATUS_TYPES = (message_factory.GetMessageClass(fd.message_types_by_name["StatusRequest"]),
                     message_factory.GetMessageClass(fd.message_types_by_name["StatusResponse"]))
    return _STATUS_TYPES


@dataclass
class ProbePod:
    """One host-network pod sandbox + one container, created and removed through CRI."""

    client: CriClient
    sandbox_image: str
    image: str
    log_dir: Path
    labels: dict[str, str] = field(default_factory=dict)
    runtime_handler: str = ""
    command: tuple[str, ...] = ("/bin/sh", "-c", "env; exec sleep 3600")
    name: str = field(default_factory=lambda: f"kgc-nri-probe-{uuid.uuid4().hex[:8]}")
    namespace: str = "kgc-nri"
    pod_id: str = ""
    container_id: str = ""
    timings: dict[str, float] = field(default_factory=dict)

    def _sandbox_config(self) -> pb.PodSandboxConfig:
        cfg = pb.PodSandboxConfig(
            metadata=pb.PodSandboxMetadata(
                name=self.name, uid=uuid.uuid4().hex, namespace=self.namespace
            ),
            log_directory=str(self.log_dir),
        )
        cfg.labels.update(self.labels)
        ns = cfg.linux.security_context.namespace_options
        ns.network = pb.NODE
        return cfg

    def run_sandbox(self) -> str:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._cfg = self._sandbox_config()
        self.timings["run_pod_sandbox_call"] = time.monotonic()
        resp = self.client.call(
            "RunPodSandbox",
            pb.RunPodSandboxRequest(config=self._cfg, runtime_handler=self.runtime_handler),
            pb.RunPodSandboxResponse,
        )
        self.pod_id = resp.pod_sandbox_id
        return self.pod_id

    def create_container(self) -> str:
        cc = pb.ContainerConfig(
            metadata=pb.ContainerMetadata(name="probe"),
            image=pb.ImageSpec(image=self.image),
            command=list(self.command),
            log_path="probe.log",
        )
        cc.labels.update(self.labels)
        cc.linux.security_context.namespace_options.network = pb.NODE
        self.timings["create_container_call"] = time.monotonic()
        resp = self.client.call(
            "CreateContainer",
            pb.CreateContainerRequest(
                pod_sandbox_id=self.pod_id, config=cc, sandbox_config=self._cfg
            ),
            pb.CreateContainerResponse,
        )
        self.container_id = resp.container_id
        return self.container_id

    def start_container(self) -> None:
        self.timings["start_container_call"] = time.monotonic()
        self.client.call(
            "StartContainer",
            pb.StartContainerRequest(container_id=self.container_id),
            pb.StartContainerResponse,
        )

    def exec(self, cmd: list[str], timeout_s: int = 10) -> tuple[int, str]:
        resp = self.client.call(
            "ExecSync",
            pb.ExecSyncRequest(container_id=self.container_id, cmd=cmd, timeout=timeout_s),
            pb.ExecSyncResponse,
            timeout_s + 5,
        )
        return resp.exit_code, resp.stdout.decode(errors="replace")

    def log_text(self) -> str:
        p = self.log_dir / "probe.log"
        try:
            return p.read_text(errors="replace")
        except OSError:
            return ""

    def remove(self) -> list[str]:
        """Stop and remove whatever was created; returns the errors (never raises)."""
        errors: list[str] = []
        steps: list[tuple[str, Any, Any]] = []
        if self.container_id:
            steps += [
                (
                    "StopContainer",
                    pb.StopContainerRequest(container_id=self.container_id, timeout=1),
                    pb.StopContainerResponse,
                ),
                (
                    "RemoveContainer",
                    pb.RemoveContainerRequest(container_id=self.container_id),
                    pb.RemoveContainerResponse,
                ),
            ]
        if self.pod_id:
            steps += [
                (
                    "StopPodSandbox",
                    pb.StopPodSandboxRequest(pod_sandbox_id=self.pod_id),
                    pb.StopPodSandboxResponse,
                ),
                (
                    "RemovePodSandbox",
                    pb.RemovePodSandboxRequest(pod_sandbox_id=self.pod_id),
                    pb.RemovePodSandboxResponse,
                ),
            ]
        for method, req, resp_t in steps:
            try:
                self.client.call(method, req, resp_t)
            except CriError as exc:
                errors.append(str(exc))
        return errors
