"""kgc's NRI probe: a minimal, read-only-by-default NRI plugin in pure Python.

It connects to the runtime's NRI socket, registers under a high index (so every other
plugin runs first and we never sit in front of them), answers Configure and Synchronize
(including split synchronisation, ``more=true`` chunks) within the runtime's deadline,
subscribes to pod and container lifecycle events and records them. The only change it
can make is one environment variable on containers of ITS OWN probe pods (matched by a
per-run token label), which proves the runtime really applies NRI adjustments.

Threading: one reader thread owns the socket's receive side and answers the runtime's
requests inline (they are all cheap); writes are serialised by a lock. Every blocking read
has a deadline: the reader wakes up at least every ``poll_s`` to honour ``close()``, and a
frame or message that has started arriving must complete within ``partial_deadline_s``.
A malformed frame closes the probe's connection and is reported in ``error``.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from google.protobuf.message import DecodeError

from kgc.nri import nri_pb2 as pb
from kgc.nri.wire import (
    CONN_PLUGIN,
    CONN_RUNTIME,
    MUX_MAX_SEND,
    TYPE_REQUEST,
    TYPE_RESPONSE,
    Demux,
    ProtocolError,
    TtrpcMessage,
    encode_frames,
    encode_message,
)

log = logging.getLogger(__name__)

PLUGIN_SERVICE = "nri.pkg.api.v1alpha1.Plugin"
RUNTIME_SERVICE = "nri.pkg.api.v1alpha1.Runtime"

# gRPC status codes used on the wire
CODE_OK = 0
CODE_UNKNOWN = 2
CODE_UNIMPLEMENTED = 12

EVENT_NAMES = {v.number: v.name for v in pb.Event.DESCRIPTOR.values}
# Events the probe subscribes to: the pod and container lifecycle (bits 1-11 only; the
# runtimes of containerd 1.7-2.1 reject any bit above 0x7FF and drop the plugin).
SUBSCRIBED = (
    pb.RUN_POD_SANDBOX,
    pb.STOP_POD_SANDBOX,
    pb.REMOVE_POD_SANDBOX,
    pb.CREATE_CONTAINER,
    pb.START_CONTAINER,
    pb.STOP_CONTAINER,
    pb.REMOVE_CONTAINER,
)
PROBE_LABEL = "kgc.io/nri-probe"
ADJUST_ENV = "KGC_NRI_PROBE"

# Plugin-service methods that carry a pod (field 1) and maybe a container (field 2) and
# whose empty response means "no change"; the event they stand for.
_EVENT_METHODS = {
    "RunPodSandbox": pb.RUN_POD_SANDBOX,
    "StopPodSandbox": pb.STOP_POD_SANDBOX,
    "RemovePodSandbox": pb.REMOVE_POD_SANDBOX,
    "UpdatePodSandbox": pb.UPDATE_POD_SANDBOX,
    "PostUpdatePodSandbox": pb.POST_UPDATE_POD_SANDBOX,
    "CreateContainer": pb.CREATE_CONTAINER,
    "PostCreateContainer": pb.POST_CREATE_CONTAINER,
    "StartContainer": pb.START_CONTAINER,
    "PostStartContainer": pb.POST_START_CONTAINER,
    "UpdateContainer": pb.UPDATE_CONTAINER,
    "PostUpdateContainer": pb.POST_UPDATE_CONTAINER,
    "StopContainer": pb.STOP_CONTAINER,
    "RemoveContainer": pb.REMOVE_CONTAINER,
    "ValidateContainerAdjustment": pb.VALIDATE_CONTAINER_ADJUSTMENT,
}


def events_mask(events: tuple[int, ...]) -> int:
    mask = 0
    for e in events:
        if not 1 <= e <= 11:
            raise ValueError(f"event {e} is outside what containerd 1.7-2.1 accept (1..11)")
        mask |= 1 << (e - 1)
    return mask


class ProbeError(Exception):
    """The probe could not connect, register or synchronise."""


@dataclass(frozen=True)
class ObservedEvent:
    event: str
    via: str  # the RPC that delivered it ("StateChange", "CreateContainer", ...)
    pod_id: str
    pod_name: str
    pod_namespace: str
    pod_labels: dict[str, str]
    container_id: str
    container_name: str
    at: float  # time.monotonic()
    adjusted: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Handshake:
    socket_path: str
    plugin: str
    connected_at: float = 0.0
    registered: bool = False
    register_error: str = ""
    configured_at: float = 0.0
    synchronized_at: float = 0.0
    runtime_name: str = ""
    runtime_version: str = ""
    nri_version: str = ""
    registration_timeout_ms: int = 0
    request_timeout_ms: int = 0
    configure_timeout_nano: int = 0
    sync_chunks: int = 0
    sync_pods: int = 0
    sync_containers: int = 0

    @property
    def synchronized(self) -> bool:
        return self.synchronized_at > 0

    @property
    def handshake_ms(self) -> float | None:
        if not self.synchronized:
            return None
        return (self.synchronized_at - self.connected_at) * 1000.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["synchronized"] = self.synchronized
        d["handshake_ms"] = self.handshake_ms
        return d


@dataclass
class _Pending:
    done: threading.Event = field(default_factory=threading.Event)
    response: Any = None


class NriProbe:
    """One NRI plugin connection. Use as a context manager or call close()."""

    def __init__(
        self,
        socket_path: str,
        *,
        name: str = "kgc-probe",
        index: str = "99",
        events: tuple[int, ...] = SUBSCRIBED,
        adjust_token: str | None = None,
        poll_s: float = 0.2,
        partial_deadline_s: float = 2.0,
        on_event: Callable[[ObservedEvent], None] | None = None,
        sync_delay_s: float = 0.0,
    ) -> None:
        """``sync_delay_s`` is a self-test hook: answer Synchronize that late, to reproduce
        a plugin that misses the runtime's deadline. Never set it in a real run."""
        if len(index) != 2 or not index.isdigit():
            raise ValueError(f"NRI plugin index must be exactly two digits, got {index!r}")
        self.socket_path = socket_path
        self.name = name
        self.index = index
        self.mask = events_mask(events)
        self.adjust_token = adjust_token
        self.poll_s = poll_s
        self.partial_deadline_s = partial_deadline_s
        self.on_event = on_event
        self.sync_delay_s = sync_delay_s
        self.handshake = Handshake(socket_path=socket_path, plugin=f"{index}-{name}")
        self.events: list[ObservedEvent] = []
        self.error: str = ""
        self.closed_by_peer = False
        self._sock: socket.socket | None = None
        self._wlock = threading.Lock()
        self._cond = threading.Condition()
        self._pending: dict[int, _Pending] = {}
        self._next_stream = 1
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self._demux = Demux()
        self._unpublished: list[ObservedEvent] = []

    # -- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> NriProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self, timeout_s: float = 5.0) -> Handshake:
        """Connect, register, and wait until Synchronize has been answered.

        Raises :class:`ProbeError` naming the step that failed.
        """
        deadline = time.monotonic() + timeout_s
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(max(0.05, timeout_s))
        try:
            sock.connect(self.socket_path)
        except OSError as exc:
            sock.close()
            raise ProbeError(f"cannot connect to NRI socket {self.socket_path}: {exc}") from exc
        self.handshake.connected_at = time.monotonic()
        sock.settimeout(self.poll_s)
        self._sock = sock
        self._reader = threading.Thread(target=self._read_loop, name="kgc-nri-probe", daemon=True)
        self._reader.start()
        req = pb.RegisterPluginRequest(plugin_name=self.name, plugin_idx=self.index)
        resp = self._call("RegisterPlugin", req.SerializeToString(), deadline)
        if resp is None:
            raise ProbeError(
                f"RegisterPlugin got no answer from {self.socket_path} within {timeout_s:.1f}s"
                + (f" ({self.error})" if self.error else "")
            )
        status = resp.status
        if status.code != CODE_OK:
            self.handshake.register_error = f"code {status.code}: {status.message}"
            raise ProbeError(
                f"the runtime refused RegisterPlugin for {self.handshake.plugin}: "
                f"{self.handshake.register_error}"
            )
        self.handshake.registered = True
        with self._cond:
            ok = self._cond.wait_for(
                lambda: self.handshake.synchronized or self._stop.is_set(),
                timeout=max(0.0, deadline - time.monotonic()),
            )
        if not ok or not self.handshake.synchronized:
            raise ProbeError(
                f"registered as {self.handshake.plugin} but the runtime did not complete "
                f"Configure/Synchronize within {timeout_s:.1f}s"
                + (f" ({self.error})" if self.error else "")
                + (" (connection closed by the runtime)" if self.closed_by_peer else "")
            )
        return self.handshake

    def close(self) -> None:
        """Disconnect. The runtime sees EOF and unregisters the plugin."""
        self._stop.set()
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout=2.0)
        with self._cond:
            self._cond.notify_all()
        for p in list(self._pending.values()):
            p.done.set()

    @property
    def alive(self) -> bool:
        return self._sock is not None and not self._stop.is_set()

    # -- waiting for events ------------------------------------------------------------
    def wait_for(
        self, predicate: Callable[[ObservedEvent], bool], timeout_s: float
    ) -> ObservedEvent | None:
        """First recorded event matching ``predicate``, waiting up to ``timeout_s``."""
        found: list[ObservedEvent] = []

        def check() -> bool:
            for ev in self.events:
                if predicate(ev):
                    found.append(ev)
                    return True
            return self._stop.is_set()

        with self._cond:
            self._cond.wait_for(check, timeout=timeout_s)
        return found[0] if found else None

    # -- outgoing calls ----------------------------------------------------------------
    def _send(self, conn: int, data: bytes) -> None:
        sock = self._sock
        if sock is None:
            raise ProbeError("probe is not connected")
        frames = encode_frames(conn, data, MUX_MAX_SEND)
        with self._wlock:
            sock.sendall(frames)

    def _call(self, method: str, payload: bytes, deadline: float) -> Any:
        with self._wlock:
            sid = self._next_stream
            self._next_stream += 2
        remaining = deadline - time.monotonic()
        req = pb.TtrpcRequest(
            service=RUNTIME_SERVICE,
            method=method,
            payload=payload,
            timeout_nano=int(max(remaining, 0.001) * 1e9),
        )
        pend = _Pending()
        self._pending[sid] = pend
        try:
            self._send(CONN_RUNTIME, encode_message(sid, TYPE_REQUEST, req.SerializeToString()))
        except OSError as exc:
            self._pending.pop(sid, None)
            raise ProbeError(f"cannot write to {self.socket_path}: {exc}") from exc
        pend.done.wait(timeout=max(0.0, deadline - time.monotonic()))
        self._pending.pop(sid, None)
        return pend.response

    # -- reader ------------------------------------------------------------------------
    def _read_loop(self) -> None:
        partial_since: float | None = None
        try:
            while not self._stop.is_set():
                sock = self._sock
                if sock is None:
                    break
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    data = None
                except OSError as exc:
                    if not self._stop.is_set():
                        self.error = f"read failed: {exc}"
                    break
                if data == b"":
                    self.closed_by_peer = True
                    break
                if data:
                    for conn, msg in self._demux.feed(data):
                        self._dispatch(conn, msg)
                if self._demux.mid_unit:
                    now = time.monotonic()
                    partial_since = partial_since or now
                    if now - partial_since > self.partial_deadline_s:
                        raise ProtocolError(
                            f"incomplete frame/message not finished within "
                            f"{self.partial_deadline_s:.1f}s"
                        )
                else:
                    partial_since = None
        except (ProtocolError, DecodeError) as exc:
            self.error = f"protocol error from the runtime: {exc}"
            log.warning("NRI probe: %s; closing the connection", self.error)
        except Exception as exc:  # noqa: BLE001 - recorded; the probe closes, the run goes on
            self.error = f"probe failure: {type(exc).__name__}: {exc}"
            log.warning("NRI probe: %s; closing the connection", self.error)
        finally:
            if not self._stop.is_set():
                self._stop.set()
                sock, self._sock = self._sock, None
                if sock is not None:
                    sock.close()
            with self._cond:
                self._cond.notify_all()
            for p in list(self._pending.values()):
                p.done.set()

    def _dispatch(self, conn: int, msg: TtrpcMessage) -> None:
        if conn == CONN_RUNTIME and msg.type == TYPE_RESPONSE:
            resp = pb.TtrpcResponse.FromString(msg.payload)
            pend = self._pending.get(msg.stream_id)
            if pend is not None:
                pend.response = resp
                pend.done.set()
            return
        if conn == CONN_PLUGIN and msg.type == TYPE_REQUEST:
            req = pb.TtrpcRequest.FromString(msg.payload)
            code, message, body = self._serve(req)
            out = pb.TtrpcResponse(payload=body)
            if code != CODE_OK:
                out.status.code = code
                out.status.message = message
            try:
                self._send(
                    CONN_PLUGIN,
                    encode_message(msg.stream_id, TYPE_RESPONSE, out.SerializeToString()),
                )
            except OSError as exc:
                raise ProtocolError(f"cannot answer {req.method}: {exc}") from exc
            # publish events only once the runtime has its answer: a waiter that closes the
            # probe right after seeing an event must not cut the runtime's call short
            self._publish()
            if req.method == "Synchronize" and not self.handshake.synchronized:
                # the last chunk (more=false) completes the handshake once answered
                if not self._sync_more:
                    with self._cond:
                        self.handshake.synchronized_at = time.monotonic()
                        self._cond.notify_all()
            return
        # anything else (data frames, stray responses) is ignored like ttrpc does

    _sync_more = False

    def _serve(self, req: pb.TtrpcRequest) -> tuple[int, str, bytes]:
        if req.service != PLUGIN_SERVICE:
            return CODE_UNIMPLEMENTED, f"unknown service {req.service}", b""
        m = req.method
        if m == "Configure":
            c = pb.ConfigureRequest.FromString(req.payload)
            hs = self.handshake
            hs.configured_at = time.monotonic()
            hs.runtime_name = c.runtime_name
            hs.runtime_version = c.runtime_version
            hs.nri_version = c.NRI_version
            hs.registration_timeout_ms = c.registration_timeout
            hs.request_timeout_ms = c.request_timeout
            hs.configure_timeout_nano = req.timeout_nano
            return CODE_OK, "", pb.ConfigureResponse(events=self.mask).SerializeToString()
        if m == "Synchronize":
            s = pb.SynchronizeRequest.FromString(req.payload)
            self.handshake.sync_chunks += 1
            self.handshake.sync_pods += len(s.pods)
            self.handshake.sync_containers += len(s.containers)
            self._sync_more = s.more
            if self.sync_delay_s > 0:
                self._stop.wait(self.sync_delay_s)
            # echo more=true for intermediate chunks; the update comes with the last one
            return CODE_OK, "", pb.SynchronizeResponse(more=s.more).SerializeToString()
        if m == "Shutdown":
            return CODE_OK, "", b""
        if m == "StateChange":
            ev = pb.StateChangeEvent.FromString(req.payload)
            self._record(EVENT_NAMES.get(ev.event, str(ev.event)), m, ev.pod, ev.container)
            return CODE_OK, "", b""
        if m in _EVENT_METHODS:
            r = pb.PodContainerRequest.FromString(req.payload)
            event = EVENT_NAMES[_EVENT_METHODS[m]]
            body = b""
            adjusted = False
            if m == "CreateContainer" and self._is_own(r.pod):
                adj = pb.CreateContainerResponse()
                adj.adjust.env.add(key=ADJUST_ENV, value=self.adjust_token or "")
                body = adj.SerializeToString()
                adjusted = True
            self._record(
                event, m, r.pod, r.container if r.HasField("container") else None, adjusted
            )
            return CODE_OK, "", body
        return CODE_UNIMPLEMENTED, f"{m} is not implemented by the kgc probe", b""

    def _is_own(self, pod: pb.PodSandbox) -> bool:
        """Only pods carrying this run's token are ever adjusted."""
        return bool(self.adjust_token) and pod.labels.get(PROBE_LABEL) == self.adjust_token

    def _record(
        self,
        event: str,
        via: str,
        pod: pb.PodSandbox | None,
        ctr: pb.Container | None,
        adjusted: bool = False,
    ) -> None:
        ev = ObservedEvent(
            event=event,
            via=via,
            pod_id=pod.id if pod else "",
            pod_name=pod.name if pod else "",
            pod_namespace=pod.namespace if pod else "",
            pod_labels=dict(pod.labels) if pod else {},
            container_id=ctr.id if ctr else "",
            container_name=ctr.name if ctr else "",
            at=time.monotonic(),
            adjusted=adjusted,
        )
        self._unpublished.append(ev)

    def _publish(self) -> None:
        evs, self._unpublished = self._unpublished, []
        if not evs:
            return
        with self._cond:
            self.events.extend(evs)
            self._cond.notify_all()
        if self.on_event is not None:
            for ev in evs:
                self.on_event(ev)


def default_socket() -> str:
    return os.environ.get("NRI_SOCKET_PATH", "/var/run/nri/nri.sock")
