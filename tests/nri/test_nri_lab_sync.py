"""Synchronize with real state: pods and containers that exist before the probe connects
reach it in Synchronize (decoded from real containerd 1.7 / 2.x messages)."""

from __future__ import annotations

import shutil

import pytest

from kgc.cri.client import CriClient, ProbePod
from kgc.nri.probe import NriProbe
from kgc_lab.containerd import NRI_ON
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
def test_existing_pods_arrive_in_synchronize(flavour):
    try:
        require_lab()
        tmp = new_tmp("kgc-sync-")
        cfg = base_config(flavour, tmp, PAUSE_IMAGE, tail=NRI_ON.format(tmp=tmp))
        inst = ContainerdInstance(flavour, cfg, tmp)
        inst.start()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc} (bootstrap installs it; it needs root)")
    try:
        inst.import_images(build_archive(cache_dir() / "images" / "kgc-lab-images.tar"))
        with CriClient(inst.address) as c:
            pods = [ProbePod(c, PAUSE_IMAGE, PROBE_IMAGE, tmp / f"logs{i}") for i in range(3)]
            try:
                for p in pods:
                    p.run_sandbox()
                    p.create_container()
                with NriProbe(str(tmp / "nri.sock")) as probe:
                    hs = probe.connect(timeout_s=5)
                assert hs.sync_pods == 3, hs.to_dict()
                assert hs.sync_containers == 3, hs.to_dict()
            finally:
                for p in pods:
                    p.remove()
    finally:
        inst.stop()
        shutil.rmtree(tmp, ignore_errors=True)
