"""Proof on a real kernel, run every time: boot ONE small QEMU guest (TCG) at the size the
model predicts for a limit-less pod under Kata's Go QEMU defaults, run the sizing collector
inside, and judge it with the sizing evaluator — pass at the predicted size, fail one vCPU or
one memory block off. ``python -m kgc_lab.guests selftest`` does the same by hand.

Needs ``qemu-system-x86_64`` (scripts/bootstrap.d/10-node-lab.sh installs it), a guest
kernel (the node lab's, else Debian's linux-image-amd64 via ``apt-get download``, cached in
$KGC_CACHE/sizing) and a static busybox (``/bin/busybox`` or busybox-static):
scripts/bootstrap.d/15-sizing-guests.sh fetches both (``python -m kgc_lab.guests assets``),
and the test fetches them itself when they are still missing.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from kgc.core.model import Status
from kgc.layers.sizing.checks import judge_guest
from kgc.layers.sizing.profile import MemTotalTolerance
from kgc_lab.guests import CAPTURES, GuestError, boot_guest, find_assets, predicted

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_a_real_guest_at_the_predicted_size_passes_and_one_off_fails(tmp_path: Path) -> None:
    if shutil.which("qemu-system-x86_64") is None:
        pytest.fail("the real-guest proof needs qemu-system-x86_64: run "
                    "scripts/bootstrap.d/10-node-lab.sh (or apt-get install qemu-system-x86)")
    try:
        assets = find_assets()
    except GuestError as exc:
        pytest.fail(f"no guest assets: {exc}")
    spec = CAPTURES[0]
    vm = predicted(spec)
    assert (vm.vcpus, vm.memory_mib) == (1, 2048)
    cap = boot_guest(vm.vcpus, vm.memory_mib, assets=assets, workdir=tmp_path, timeout_s=150)
    g = cap.guest
    tol = MemTotalTolerance()
    j = judge_guest(vm, g, tol)
    assert j.status is Status.PASS, f"{j.reason}\nconsole:\n{cap.console[-1500:]}"
    assert g.ram_mib is not None and g.block_mib is not None
    assert judge_guest(replace(vm, vcpus=2), g, tol).status is Status.FAIL
    more = vm.memory_mib + g.block_mib
    assert judge_guest(replace(vm, memory_mib=more), g, tol).status is Status.FAIL
    less = vm.memory_mib - g.block_mib
    assert judge_guest(replace(vm, memory_mib=less, boot_memory_mib=less), g,
                       tol).status is Status.FAIL
    assert cap.boot_s < 120
