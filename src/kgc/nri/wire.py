"""Pure wire codecs for the NRI socket: the connection multiplexer and ttrpc framing.

No I/O here: decoders are fed bytes and return whole units, so they can be fuzzed and
reused by any transport. Malformed input raises :class:`ProtocolError`; the caller then
closes its connection (never the run).

Multiplexer (containerd/nri pkg/net/multiplex): each frame is an 8-byte big-endian header
``uint32 conn_id, uint32 length`` followed by ``length`` payload bytes. The payload of
one frame must stay within 4096 bytes when we send (containerd reads through 4 KiB
buffers and closes the connection on a larger frame); a ttrpc message larger than that is
split across several frames of the same conn, which the peer reassembles as a byte stream.

ttrpc (containerd/ttrpc): a 10-byte big-endian header ``uint32 length, uint32 stream_id,
uint8 type, uint8 flags`` followed by ``length`` bytes of protobuf.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

MUX_HEADER = struct.Struct(">II")
MUX_MAX_SEND = 4096
# Frames we accept from the runtime. The Go side never sends more than one 4 KiB buffer
# per frame in practice; anything far larger is garbage and must not make us buffer it.
MUX_MAX_RECV = 1 << 20

CONN_PLUGIN = 1  # the runtime calls our Plugin service on this conn
CONN_RUNTIME = 2  # we call the runtime's Runtime service on this conn

TTRPC_HEADER = struct.Struct(">IIBB")
TTRPC_MAX_MESSAGE = 4 << 20  # ttrpc's default message size limit
TYPE_REQUEST = 1
TYPE_RESPONSE = 2
TYPE_DATA = 3


class ProtocolError(Exception):
    """The peer sent bytes that cannot be a valid frame or message."""


@dataclass(frozen=True)
class TtrpcMessage:
    stream_id: int
    type: int
    flags: int
    payload: bytes


def encode_frames(conn_id: int, data: bytes, max_payload: int = MUX_MAX_SEND) -> bytes:
    """``data`` as one or more mux frames of at most ``max_payload`` bytes each."""
    if not 0 < max_payload <= MUX_MAX_SEND:
        raise ValueError(f"frame payload limit must be 1..{MUX_MAX_SEND}")
    if not 0 <= conn_id <= 0xFFFFFFFF:
        raise ValueError(f"conn id out of range: {conn_id}")
    out = bytearray()
    view = memoryview(data)
    for off in range(0, len(data), max_payload):
        chunk = view[off : off + max_payload]
        out += MUX_HEADER.pack(conn_id, len(chunk))
        out += chunk
    return bytes(out)


class FrameDecoder:
    """Reassembles the mux byte stream into ``(conn_id, payload)`` frames."""

    def __init__(self, max_payload: int = MUX_MAX_RECV) -> None:
        self._buf = bytearray()
        self._max = max_payload

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back (non-zero = mid-frame)."""
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        self._buf += data
        out: list[tuple[int, bytes]] = []
        while len(self._buf) >= MUX_HEADER.size:
            conn_id, length = MUX_HEADER.unpack_from(self._buf)
            if length > self._max:
                raise ProtocolError(f"mux frame of {length} bytes exceeds {self._max}")
            end = MUX_HEADER.size + length
            if len(self._buf) < end:
                break
            out.append((conn_id, bytes(self._buf[MUX_HEADER.size : end])))
            del self._buf[:end]
        return out


def encode_message(stream_id: int, type_: int, payload: bytes, flags: int = 0) -> bytes:
    if len(payload) > TTRPC_MAX_MESSAGE:
        raise ValueError(f"ttrpc message of {len(payload)} bytes exceeds {TTRPC_MAX_MESSAGE}")
    return TTRPC_HEADER.pack(len(payload), stream_id, type_, flags) + payload


class MessageDecoder:
    """Reassembles one conn's byte stream into ttrpc messages."""

    def __init__(self, max_message: int = TTRPC_MAX_MESSAGE) -> None:
        self._buf = bytearray()
        self._max = max_message

    @property
    def pending(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[TtrpcMessage]:
        self._buf += data
        out: list[TtrpcMessage] = []
        while len(self._buf) >= TTRPC_HEADER.size:
            length, stream_id, type_, flags = TTRPC_HEADER.unpack_from(self._buf)
            if length > self._max:
                raise ProtocolError(f"ttrpc message of {length} bytes exceeds {self._max}")
            if type_ not in (TYPE_REQUEST, TYPE_RESPONSE, TYPE_DATA):
                raise ProtocolError(f"unknown ttrpc message type {type_}")
            end = TTRPC_HEADER.size + length
            if len(self._buf) < end:
                break
            out.append(
                TtrpcMessage(stream_id, type_, flags, bytes(self._buf[TTRPC_HEADER.size : end]))
            )
            del self._buf[:end]
        return out


class Demux:
    """Frame decoder + one message decoder per conn; frames for other conns are dropped
    (the Go multiplexer drops frames for connections that were never opened)."""

    def __init__(self, conns: tuple[int, ...] = (CONN_PLUGIN, CONN_RUNTIME)) -> None:
        self.frames = FrameDecoder()
        self.conns = {c: MessageDecoder() for c in conns}
        self.dropped_frames = 0

    @property
    def mid_unit(self) -> bool:
        """True while part of a frame or message has arrived and the rest has not."""
        return self.frames.pending > 0 or any(d.pending for d in self.conns.values())

    def feed(self, data: bytes) -> Iterator[tuple[int, TtrpcMessage]]:
        for conn_id, payload in self.frames.feed(data):
            dec = self.conns.get(conn_id)
            if dec is None:
                self.dropped_frames += 1
                continue
            for msg in dec.feed(payload):
                yield conn_id, msg
