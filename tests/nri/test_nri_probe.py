"""The probe against a scripted fake runtime: ordering, split sync, framing, safety."""

from __future__ import annotations

import shutil
import socket
import struct
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from nri_fake_runtime import FakeRuntime, frame

from kgc.nri import nri_pb2 as pb
from kgc.nri.probe import ADJUST_ENV, PROBE_LABEL, NriProbe, ProbeError, events_mask


@pytest.fixture
def sock() -> Iterator[Path]:
    # unix socket paths are limited to 108 bytes; pytest's tmp_path can be longer
    d = Path(tempfile.mkdtemp(prefix="kgc-nri-t-"))
    yield d / "nri.sock"
    shutil.rmtree(d, ignore_errors=True)


def _pod_req(token: str | None, name: str = "pod") -> bytes:
    r = pb.PodContainerRequest()
    r.pod.id = f"id-{name}"
    r.pod.name = name
    r.pod.namespace = "ns"
    if token is not None:
        r.pod.labels[PROBE_LABEL] = token
    r.container.id = f"c-{name}"
    r.container.name = "c"
    return r.SerializeToString()


def test_events_mask_stays_within_what_containerd_accepts():
    assert events_mask((1, 4, 11)) == 0b10000001001
    with pytest.raises(ValueError):
        events_mask((12,))


def test_handshake_registers_under_a_high_two_digit_index(sock: Path):
    fr = FakeRuntime(sock)
    with NriProbe(str(sock), name="kgc-probe", index="99") as p:
        hs = p.connect(timeout_s=5)
        assert hs.registered and hs.synchronized
        assert hs.runtime_name == "fake"
    fr.done.wait(5)
    assert fr.registered == ("kgc-probe", "99")
    conf = pb.ConfigureResponse.FromString(
        pb.TtrpcResponse.FromString(
            next(v for k, v in fr.replies.items() if k.startswith("Configure"))
        ).payload
    )
    assert conf.events == events_mask((1, 2, 3, 4, 6, 10, 11))
    fr.close()


def test_bad_index_is_refused_before_connecting(sock: Path):
    with pytest.raises(ValueError):
        NriProbe(str(sock), index="1")


def test_configure_before_register_reply_is_handled(sock: Path):
    fr = FakeRuntime(sock, configure_first=True)
    with NriProbe(str(sock)) as p:
        assert p.connect(timeout_s=5).synchronized
    fr.close()


def test_split_synchronize_echoes_more_and_completes_on_last_chunk(sock: Path):
    fr = FakeRuntime(sock, sync_chunks=3)
    with NriProbe(str(sock)) as p:
        hs = p.connect(timeout_s=5)
        assert hs.sync_chunks == 3 and hs.sync_pods == 3
    fr.done.wait(5)
    sync = [
        pb.SynchronizeResponse.FromString(pb.TtrpcResponse.FromString(v).payload)
        for k, v in sorted(fr.replies.items(), key=lambda kv: int(kv[0].split("#")[1]))
        if k.startswith("Synchronize")
    ]
    assert [s.more for s in sync] == [True, True, False]
    fr.close()


def test_events_are_recorded_and_only_own_pods_are_adjusted(sock: Path):
    token = "t0k3n"
    fr = FakeRuntime(
        sock,
        events=[
            (
                "StateChange",
                pb.StateChangeEvent(
                    event=pb.RUN_POD_SANDBOX, pod=pb.PodSandbox(id="x", name="other")
                ).SerializeToString(),
            ),
            ("CreateContainer", _pod_req(None, "foreign")),
            ("CreateContainer", _pod_req("wrong-token", "impostor")),
            ("CreateContainer", _pod_req(token, "mine")),
            ("RunPodSandbox", _pod_req(token, "mine")),
        ],
    )
    with NriProbe(str(sock), adjust_token=token) as p:
        p.connect(timeout_s=5)
        got = p.wait_for(lambda e: e.event == "RUN_POD_SANDBOX" and e.pod_name == "mine", 5)
        assert got is not None and got.via == "RunPodSandbox"
    fr.done.wait(5)
    adjusted = {e.pod_name: e.adjusted for e in p.events if e.event == "CREATE_CONTAINER"}
    assert adjusted == {"foreign": False, "impostor": False, "mine": True}
    replies = {
        k.split("#")[0] + "#" + str(i): v
        for i, (k, v) in enumerate(
            sorted(fr.replies.items(), key=lambda kv: int(kv[0].split("#")[1]))
        )
    }
    bodies = [
        pb.TtrpcResponse.FromString(v).payload
        for k, v in replies.items()
        if k.startswith("CreateContainer")
    ]
    from kgc.nri.nri_pb2 import CreateContainerResponse

    envs = [
        [(kv.key, kv.value) for kv in CreateContainerResponse.FromString(b).adjust.env]
        for b in bodies
    ]
    assert envs == [[], [], [(ADJUST_ENV, token)]]
    fr.close()


def test_unknown_method_is_answered_unimplemented(sock: Path):
    fr = FakeRuntime(sock, events=[("NoSuchMethod", b"")])
    with NriProbe(str(sock)) as p:
        p.connect(timeout_s=5)
        fr.done.wait(0.5)
    fr.done.wait(5)
    resp = pb.TtrpcResponse.FromString(
        next(v for k, v in fr.replies.items() if k.startswith("NoSuchMethod"))
    )
    assert resp.status.code == 12
    fr.close()


def test_large_replies_are_split_into_frames_of_at_most_4096_bytes(sock: Path):
    # an adjustment token of 20 KB makes the CreateContainer reply span several frames;
    # the fake closes the connection (like containerd) on any frame above 4096 bytes
    token = "x" * 20000
    fr = FakeRuntime(sock, events=[("CreateContainer", _pod_req(token, "mine"))])
    with NriProbe(str(sock), adjust_token=token) as p:
        p.connect(timeout_s=5)
        assert p.wait_for(lambda e: e.adjusted, 5) is not None
    fr.done.wait(5)
    assert not fr.oversize_seen
    body = pb.TtrpcResponse.FromString(
        next(v for k, v in fr.replies.items() if k.startswith("CreateContainer"))
    ).payload
    assert pb.CreateContainerResponse.FromString(body).adjust.env[0].value == token
    fr.close()


def test_malformed_frame_closes_the_probe_connection_not_the_run(sock: Path):
    bad = frame(1, struct.pack(">IIBB", 10, 5, 9, 0) + b"0123456789")  # ttrpc type 9
    fr = FakeRuntime(sock, garbage_after_sync=bad)
    with NriProbe(str(sock)) as p:
        p.connect(timeout_s=5)
        assert p.wait_for(lambda e: False, 5) is None  # returns as soon as the probe stops
        assert not p.alive
        assert "unknown ttrpc message type 9" in p.error
    fr.close()


def test_truncated_frame_hits_the_read_deadline(sock: Path):
    partial = struct.pack(">II", 1, 100) + b"abc"  # promises 100 bytes, sends 3
    fr = FakeRuntime(sock, garbage_after_sync=partial)
    with NriProbe(str(sock), partial_deadline_s=0.5, poll_s=0.05) as p:
        p.connect(timeout_s=5)
        t0 = time.monotonic()
        p.wait_for(lambda e: False, 5)
        assert time.monotonic() - t0 < 3
        assert "not finished within" in p.error
    fr.close()


def test_silent_runtime_times_out_registration(sock: Path):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock))
    srv.listen(1)
    t0 = time.monotonic()
    with pytest.raises(ProbeError, match="RegisterPlugin got no answer"):
        with NriProbe(str(sock)) as p:
            p.connect(timeout_s=0.5)
    assert time.monotonic() - t0 < 3
    srv.close()


def test_missing_socket_is_a_named_error(sock: Path):
    with pytest.raises(ProbeError, match="cannot connect to NRI socket"):
        NriProbe(str(sock)).connect(timeout_s=1)
