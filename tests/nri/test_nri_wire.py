"""Multiplexer + ttrpc codecs: exact bytes, reassembly under any chunking, fuzzing."""

from __future__ import annotations

import struct
import time

import pytest
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgc.nri import nri_pb2 as pb
from kgc.nri.wire import (
    MUX_MAX_SEND,
    Demux,
    FrameDecoder,
    MessageDecoder,
    ProtocolError,
    encode_frames,
    encode_message,
)


def test_frame_header_is_big_endian_conn_then_length():
    assert encode_frames(2, b"abc") == b"\x00\x00\x00\x02\x00\x00\x00\x03abc"


def test_ttrpc_header_is_length_stream_type_flags():
    assert encode_message(3, 1, b"xy") == b"\x00\x00\x00\x02\x00\x00\x00\x03\x01\x00xy"


def test_payload_of_exactly_4096_is_one_frame_4097_is_two():
    one = encode_frames(1, b"a" * 4096)
    assert len(one) == 8 + 4096
    two = encode_frames(1, b"a" * 4097)
    assert struct.unpack(">II", two[:8]) == (1, 4096)
    assert struct.unpack(">II", two[8 + 4096 : 16 + 4096]) == (1, 1)


def test_send_limit_cannot_be_raised_above_4096():
    with pytest.raises(ValueError):
        encode_frames(1, b"x", max_payload=MUX_MAX_SEND + 1)


def test_frames_for_unopened_conns_are_dropped():
    d = Demux()
    msg = encode_message(1, 2, b"hi")
    out = list(d.feed(encode_frames(7, msg) + encode_frames(2, msg)))
    assert [(c, m.payload) for c, m in out] == [(2, b"hi")]
    assert d.dropped_frames == 1


def test_oversized_inbound_frame_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        FrameDecoder(max_payload=16).feed(struct.pack(">II", 1, 17))


@given(
    msgs=st.lists(st.tuples(st.sampled_from([1, 2]), st.binary(max_size=9000)), max_size=6),
    cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=40),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_chunking_reassembles_the_same_messages(msgs, cuts):
    wire = b"".join(
        encode_frames(conn, encode_message(2 * i + 1, 1, body))
        for i, (conn, body) in enumerate(msgs)
    )
    d = Demux()
    got = []
    pos = 0
    for c in cuts:
        got += list(d.feed(wire[pos : pos + c]))
        pos += c
    got += list(d.feed(wire[pos:]))
    assert [(c, m.payload) for c, m in got] == [(c, b) for c, b in msgs]
    assert not d.mid_unit


@given(data=st.binary(max_size=4096), chunk=st.integers(min_value=1, max_value=512))
@settings(max_examples=400, deadline=None)
def test_decoders_never_crash_or_hang_on_garbage(data, chunk):
    d = Demux()
    t0 = time.monotonic()
    try:
        for i in range(0, len(data), chunk):
            for _conn, m in d.feed(data[i : i + chunk]):
                # whatever arrives must decode or raise DecodeError, nothing else
                try:
                    pb.TtrpcRequest.FromString(m.payload)
                except DecodeError:
                    pass
    except ProtocolError:
        pass
    assert time.monotonic() - t0 < 1.0


@given(data=st.binary(max_size=2048))
@settings(max_examples=300, deadline=None)
def test_message_payload_decoders_only_raise_decode_error(data):
    for typ in (
        pb.TtrpcRequest,
        pb.TtrpcResponse,
        pb.ConfigureRequest,
        pb.SynchronizeRequest,
        pb.StateChangeEvent,
        pb.PodContainerRequest,
    ):
        try:
            typ.FromString(data)
        except DecodeError:
            pass


@given(
    length=st.integers(
        min_value=MessageDecoder().__class__.__init__.__defaults__[0] + 1, max_value=0xFFFFFFFF
    )
)
def test_huge_declared_ttrpc_length_is_refused_without_buffering(length):
    with pytest.raises(ProtocolError):
        MessageDecoder().feed(struct.pack(">IIBB", length, 1, 1, 0))
