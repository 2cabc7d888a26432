"""runtime.kata-handler agrees with what REAL containerd 1.7.24 and 2.1.9 load (issue 9).

For each way of writing the Kata handler, a real containerd (the lab's cached binaries) is
started with that config and asked to run a pod with runtime handler ``kata``: containerd's
own answer (``no runtime for "kata" is configured`` or not) is the truth, and kgc's verdict,
collected through the real collector from the same node, must match it. Needs root and the
containerd lab cache (scripts/bootstrap.d/20-containerd.sh)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from kgc.core.engine import Context
from kgc.core.model import Status
from kgc.core.registry import load_layers
from kgc.core.target import NodeTarget
from kgc_lab.containerd import lab_profile
from kgc_lab.containerd_instance import (
    ContainerdInstance,
    LabUnavailable,
    base_config,
    cache_dir,
    require_lab,
)
from kgc_lab.images import PAUSE_IMAGE, build_archive

pytestmark = [pytest.mark.lab, pytest.mark.slow]

V2_SECTION = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.kata]'
V3_SECTION = '[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.kata]'
NOT_CONFIGURED = 'no runtime for "kata" is configured'

CASES = [
    # (containerd, file format of that containerd: "1.7" = version 2, "2" = version 3, section)
    ("2", "1.7", V2_SECTION),  # the case: version-2 file on containerd 2.x
    ("2", "1.7", V3_SECTION),
    ("2", "2", V2_SECTION),  # misplaced: containerd 2.x ignores it in a version-3 file
    ("2", "2", V3_SECTION),
    ("1.7", "1.7", V2_SECTION),
    ("1.7", "1.7", V3_SECTION),  # 1.7 has no io.containerd.cri.v1.runtime plugin
]


def _containerd_loads_kata(inst: ContainerdInstance, tmp: Path) -> tuple[bool, str]:
    from kgc.cri.client import CriClient, CriError, ProbePod

    with CriClient(inst.address, timeout_s=60) as c:
        pod = ProbePod(c, sandbox_image=PAUSE_IMAGE, image="", log_dir=tmp / "logs",
                       runtime_handler="kata")
        try:
            pod.run_sandbox()
            return True, "sandbox started"
        except CriError as exc:
            return NOT_CONFIGURED not in str(exc), str(exc)
        finally:
            pod.remove()


def _id(flavour: str, fmt: str, section: str) -> str:
    sec = "v2sec" if section == V2_SECTION else "v3sec"
    return f"ctd{flavour}-v{2 if fmt == '1.7' else 3}-{sec}"


@pytest.mark.parametrize(("flavour", "fmt", "section"), CASES, ids=[_id(*c) for c in CASES])
def test_kata_handler_verdict_matches_what_containerd_loads(flavour: str, fmt: str,
                                                            section: str) -> None:
    try:
        require_lab()
    except LabUnavailable as exc:
        pytest.fail(f"containerd lab unavailable: {exc}")
    tmp = Path(tempfile.mkdtemp(prefix="kgc-placement-"))
    try:
        (tmp / "bin").mkdir()
        shim = tmp / "bin" / "containerd-shim-kata-v2"
        shim.write_text("#!/bin/sh\nexit 1\n")
        shim.chmod(0o755)
        tail = f'\n{section}\n  runtime_type = "io.containerd.kata.v2"\n'
        if flavour == "1.7" and section == V2_SECTION:
            # containerd 1.7 drops its default runc handler once runtimes are listed, and then
            # refuses to start CRI (default_runtime_name = "runc" has no runtime)
            tail += ('[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]\n'
                     '  runtime_type = "io.containerd.runc.v2"\n')
        cfg = base_config(fmt, tmp, PAUSE_IMAGE, (), tail)
        inst = ContainerdInstance(flavour, cfg, tmp, extra_path=(str(tmp / "bin"),))
        try:
            inst.start()
            inst.import_images(build_archive(cache_dir() / "images" / "kgc-lab-images.tar"))
            loads, answer = _containerd_loads_kata(inst, tmp)
            prof = lab_profile(tmp)
            prof = prof.model_copy(update={"runtime": prof.runtime.model_copy(
                update={"containerd_bin": inst.containerd})})
            ctx = Context(NodeTarget("local://"), prof, load_layers(("kgc.layers.runtime",)))
            v = ctx.judge("runtime.kata-handler")
        finally:
            inst.stop()
        want = Status.PASS if loads else Status.FAIL
        print(f"containerd {flavour} answered: {answer[:200]}\nkgc: {v.status}: {v.reason}")
        assert v.status is want, (f"containerd {flavour}: {answer}", v.reason)
        if not loads and flavour == "2":
            # containerd 2.x said why in its own words; kgc passes that on
            assert "Ignoring unknown key" in v.reason, v.reason
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
