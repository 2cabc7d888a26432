"""A scripted fake NRI runtime (the server side of the socket) for probe self-tests.

It speaks the same multiplexed ttrpc protocol as containerd, but lets a test choose the
awkward cases: Configure before the RegisterPlugin reply, split Synchronize, oversized
replies, garbage frames, silence. Frames it sends are built by hand (struct), not by the
codecs under test.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kgc.nri import nri_pb2 as pb


def frame(conn: int, payload: bytes) -> bytes:
    return struct.pack(">II", conn, len(payload)) + payload


def ttrpc(stream: int, typ: int, payload: bytes) -> bytes:
    return struct.pack(">IIBB", len(payload), stream, typ, 0) + payload


@dataclass
class FakeRuntime:
    path: Path
    configure_first: bool = False  # send Configure before answering RegisterPlugin
    sync_chunks: int = 1
    events: list[tuple[str, bytes]] = field(default_factory=list)  # (method, payload) after sync
    garbage_after_sync: bytes | None = None
    max_recv_frame: int = 4096  # like containerd: a bigger frame closes the connection
    received: list[tuple[int, pb.TtrpcRequest | pb.TtrpcResponse]] = field(default_factory=list)
    replies: dict[str, bytes] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    oversize_seen: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    on_request: Callable[[pb.TtrpcRequest], None] | None = None

    def __post_init__(self) -> None:
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(str(self.path))
        self.srv.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.srv.close()
        self.thread.join(timeout=5)

    # -- plumbing -----------------------------------------------------------------------
    def _read_exact(self, c: socket.socket, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = c.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _streams(self, c: socket.socket):  # type: ignore[no-untyped-def]
        bufs = {1: b"", 2: b""}
        while True:
            conn, length = struct.unpack(">II", self._read_exact(c, 8))
            if length > self.max_recv_frame:
                self.oversize_seen = True
                raise EOFError
            bufs[conn] = bufs.get(conn, b"") + self._read_exact(c, length)
            while len(bufs[conn]) >= 10:
                ln, sid, typ, _ = struct.unpack(">IIBB", bufs[conn][:10])
                if len(bufs[conn]) < 10 + ln:
                    break
                body = bufs[conn][10 : 10 + ln]
                bufs[conn] = bufs[conn][10 + ln :]
                yield conn, sid, typ, body

    def _call(self, c: socket.socket, sid: int, method: str, payload: bytes) -> None:
        req = pb.TtrpcRequest(
            service="nri.pkg.api.v1alpha1.Plugin",
            method=method,
            payload=payload,
            timeout_nano=2_000_000_000,
        )
        c.sendall(frame(1, ttrpc(sid, 1, req.SerializeToString())))

    def _serve(self) -> None:
        try:
            c, _ = self.srv.accept()
        except OSError:
            return
        c.settimeout(10)
        try:
            streams = self._streams(c)
            conn, sid, typ, body = next(streams)
            req = pb.TtrpcRequest.FromString(body)
            self.received.append((conn, req))
            assert conn == 2 and req.method == "RegisterPlugin", (conn, req.method)
            reg = pb.RegisterPluginRequest.FromString(req.payload)
            self.registered = (reg.plugin_name, reg.plugin_idx)
            ok = ttrpc(sid, 2, pb.TtrpcResponse().SerializeToString())
            out_sid = 1
            if not self.configure_first:
                c.sendall(frame(2, ok))
            self._call(
                c,
                out_sid,
                "Configure",
                pb.ConfigureRequest(runtime_name="fake", runtime_version="0.0").SerializeToString(),
            )
            if self.configure_first:
                c.sendall(frame(2, ok))
            out_sid += 2
            pending = {out_sid - 2: "Configure"}
            for i in range(self.sync_chunks):
                more = i < self.sync_chunks - 1
                sreq = pb.SynchronizeRequest(more=more)
                sreq.pods.add(id=f"pod{i}", name=f"p{i}", namespace="default")
                self._call(c, out_sid, "Synchronize", sreq.SerializeToString())
                pending[out_sid] = "Synchronize"
                # wait for this reply before the next chunk, like the runtime does
                while True:
                    conn, rsid, typ, body = next(streams)
                    if typ == 2 and rsid in pending:
                        m = pending.pop(rsid)
                        self.replies[f"{m}#{rsid}"] = body
                        if m == "Synchronize":
                            break
                out_sid += 2
            if self.garbage_after_sync is not None:
                c.sendall(self.garbage_after_sync)
            for method, payload in self.events:
                self._call(c, out_sid, method, payload)
                while True:
                    conn, rsid, typ, body = next(streams)
                    if typ == 2 and rsid == out_sid:
                        self.replies[f"{method}#{rsid}"] = body
                        break
                out_sid += 2
            # then wait for the plugin to go away (EOF)
            for _ in streams:
                pass
        except (EOFError, OSError, StopIteration) as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            c.close()
            self.done.set()
