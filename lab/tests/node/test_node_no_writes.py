"""A read-only host run writes nothing anywhere on the node (issue 9): the whole-filesystem
listing before and after the host layers run over SSH (kgc_lab.node.nowrites), measured on
the good scenario's VM after its scenario (conftest.node_lab: no VM of its own). Only /tmp
itself, where the suite's own temp directory comes and goes, may change; one plain SSH
login's noise (login records) must stay under /var/log."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_host_layers_write_nothing_on_the_whole_filesystem(node_lab: Any) -> None:
    got = node_lab.hook("no-writes")
    assert all(p.startswith("/var/log") for p in got.noise), sorted(got.noise)
    assert got.verdicts and got.round_trips == 1
    assert got.written == set(), sorted(got.written)
    # the initramfs listing really ran over the two-segment image (it is what used to
    # unpack into /var/tmp) and still found vfio_pci in the main archive
    ini = next(v for v in got.verdicts if v.check == "persistence.initramfs")
    assert ini.status.value != "skip" and "vfio" in str(ini.evidence), ini.reason
