"""Fuzz the live probe: whatever a (broken) runtime sends after the handshake, the probe
closes its own connection or keeps going — it never crashes the run and never hangs."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nri_fake_runtime import FakeRuntime, frame, ttrpc

from kgc.nri import nri_pb2 as pb
from kgc.nri.probe import NriProbe

METHODS = [
    "Configure",
    "Synchronize",
    "Shutdown",
    "StateChange",
    "RunPodSandbox",
    "CreateContainer",
    "UpdateContainer",
    "StopContainer",
    "RemoveContainer",
    "Bogus",
]


def _request(method: str, payload: bytes, service: str) -> bytes:
    req = pb.TtrpcRequest(service=service, method=method, payload=payload)
    return frame(1, ttrpc(101, 1, req.SerializeToString()))


@given(
    garbage=st.one_of(
        st.binary(max_size=600),
        st.binary(max_size=300).map(lambda b: frame(1, b)),
        st.binary(max_size=300).map(lambda b: frame(2, b)),
        # well-framed requests for real methods with random message bodies
        st.builds(
            _request,
            st.sampled_from(METHODS),
            st.binary(max_size=400),
            st.sampled_from(["nri.pkg.api.v1alpha1.Plugin", "x"]),
        ),
    )
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_probe_survives_garbage_after_handshake(garbage):
    d = Path(tempfile.mkdtemp(prefix="kgc-fz-"))
    sock = d / "nri.sock"
    fr = FakeRuntime(sock, garbage_after_sync=garbage)
    t0 = time.monotonic()
    try:
        with NriProbe(str(sock), partial_deadline_s=0.3, poll_s=0.05) as p:
            p.connect(timeout_s=5)
            p.wait_for(lambda e: False, 0.4)
        assert time.monotonic() - t0 < 5
    finally:
        fr.close()
        shutil.rmtree(d, ignore_errors=True)
