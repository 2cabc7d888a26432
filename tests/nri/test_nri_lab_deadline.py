"""Why nri.* verdicts need an observed event: on real containerd 1.7 a plugin that answers
Synchronize after the 2 s deadline stays connected but gets no events; on 2.x it is
disconnected. Either way the handshake "completed" from the plugin's side, and the layer's
checks must fail."""

from __future__ import annotations

import shutil
import uuid

import pytest

from kgc.core.profile import load_profile
from kgc.cri.client import CriClient, ProbePod
from kgc.layers.nri.checks import CHECKS
from kgc.layers.nri.collect import NriEvidence
from kgc.nri.probe import PROBE_LABEL, NriProbe, ProbeError
from kgc_lab.containerd import NRI_ON, lab_profile
from kgc_lab.containerd_instance import (
    ContainerdInstance,
    LabUnavailable,
    base_config,
    cache_dir,
    new_tmp,
    require_lab,
)
from kgc_lab.images import PAUSE_IMAGE, PROBE_IMAGE, build_archive

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.mark.parametrize("flavour", ["1.7", "2"])
def test_late_synchronize_means_no_events_and_failing_verdicts(flavour):
    try:
        require_lab()
        tmp = new_tmp("kgc-deadline-")
        inst = ContainerdInstance(
            flavour, base_config(flavour, tmp, PAUSE_IMAGE, tail=NRI_ON.format(tmp=tmp)), tmp
        )
        inst.start()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc} (bootstrap installs it; it needs root)")
    try:
        inst.import_images(build_archive(cache_dir() / "images" / "kgc-lab-images.tar"))
        token = uuid.uuid4().hex
        pod_name = ""
        connect_error = ""
        with NriProbe(str(tmp / "nri.sock"), adjust_token=token, sync_delay_s=2.5) as probe:
            try:
                hs = probe.connect(timeout_s=8)
            except ProbeError as exc:
                # containerd 2.x drops a plugin that misses the deadline
                assert flavour == "2", exc
                connect_error = str(exc)
                hs = probe.handshake
            else:
                assert flavour == "1.7"
                assert hs.synchronized and hs.handshake_ms > 2000  # answered, but too late
                with CriClient(inst.address) as c:
                    pod = ProbePod(
                        c, PAUSE_IMAGE, PROBE_IMAGE, tmp / "logs", labels={PROBE_LABEL: token}
                    )
                    pod_name = pod.name
                    try:
                        pod.run_sandbox()
                        pod.create_container()
                        got = probe.wait_for(lambda e: e.pod_labels.get(PROBE_LABEL) == token, 3)
                    finally:
                        pod.remove()
                assert got is None, "a plugin that missed the Synchronize deadline got events"
                # containerd 1.7 kept the socket open: the handshake alone would look fine
                assert probe.alive, inst.log_tail()[-2000:]
        ev = NriEvidence(
            socket_path=str(tmp / "nri.sock"),
            handshake=hs.to_dict(),
            trigger="cri",
            connect_error=connect_error,
            socket_exists=True,
            pod={"name": pod_name, "token": token, "image": PROBE_IMAGE},
            events=[],
            adjustment={"requested": True, "expected": token},
        )
        profile = lab_profile(tmp, load_profile())
        verdicts = {c.id: c.judge(ev, profile, "lab") for c in CHECKS}
        assert verdicts["nri.events"].status == "fail"
        assert verdicts["nri.handshake"].status == "fail"
        assert verdicts["nri.adjustment"].status == "fail"
        if flavour == "1.7":
            assert "observed no pod/container event" in verdicts["nri.events"].reason
            assert "a handshake alone proves nothing" in verdicts["nri.handshake"].reason
        else:
            assert (
                "Broken pipe" in verdicts["nri.events"].reason
                or "closed" in verdicts["nri.events"].reason
            )
    finally:
        inst.stop()
        shutil.rmtree(tmp, ignore_errors=True)
