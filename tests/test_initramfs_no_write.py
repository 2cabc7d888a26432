"""The initramfs listing writes nothing on the node outside a temporary directory the
collector creates and removes (issue 9, "writes in a read-only run"): `lsinitramfs` unpacks
through `unmkinitramfs`, which makes its work directory in ${TMPDIR:-/var/tmp}."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kgc.core.hostfs import HostQuery, build_script, parse_output
from kgc.evidence.vfio_config import INITRAMFS_CMD, parse_initramfs

# What initramfs-tools' unmkinitramfs does: mktemp -d "${TMPDIR:-/var/tmp}/unmkinitramfs_XXXXXX"
# and write the unpacked archive parts there. This stand-in also leaves them behind, as a
# killed listing would.
FAKE_LSINITRAMFS = """#!/bin/sh
d=$(mktemp -d "${TMPDIR:-/var/tmp}/unmkinitramfs_XXXXXX") || exit 9
printf '%s\\n' "$d" >> "$KGC_TEST_LOG"
echo junk > "$d/early.cpio"
echo "usr/lib/modules/6.1.0/kernel/drivers/vfio/pci/vfio-pci.ko"
echo "etc/modprobe.d/vfio.conf"
"""


@pytest.mark.parametrize("with_tmpdir", [True, False])
def test_initramfs_listing_unpacks_only_into_its_own_temp_dir(tmp_path: Path,
                                                              with_tmpdir: bool) -> None:
    root = tmp_path / "node"
    kver = subprocess.run(["uname", "-r"], capture_output=True, text=True,
                          check=True).stdout.strip()
    (root / "boot").mkdir(parents=True)
    (root / "boot" / f"initrd.img-{kver}").write_bytes(b"\x00" * 16)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "lsinitramfs").write_text(FAKE_LSINITRAMFS)
    (bindir / "lsinitramfs").chmod(0o755)
    log = tmp_path / "tmpdirs.log"
    tmp = tmp_path / "systmp" if with_tmpdir else Path("/tmp")
    tmp.mkdir(exist_ok=True)
    before_var_tmp = _ours("/var/tmp")
    before_tmp = _ours(tmp)
    script = build_script(HostQuery(commands=(("initramfs_list", INITRAMFS_CMD),)), b := "@@B@@")
    res = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False,
                         env={"KGC_ROOT": str(root), "PATH": f"{bindir}:/usr/bin:/bin",
                              "KGC_TEST_LOG": str(log)}
                         | ({"TMPDIR": str(tmp)} if with_tmpdir else {}))
    listing = parse_initramfs(parse_output(res.stdout, b))
    assert listing.error is None, res.stdout + res.stderr
    assert "vfio_pci" in listing.modules()
    used = log.read_text().split()
    assert len(used) == 1
    # the unpacking happened inside a kgc-owned directory under $TMPDIR ...
    assert Path(used[0]).parent.name.startswith("kgc-initramfs."), used
    assert Path(used[0]).parent.parent == tmp, used
    # ... which is gone afterwards, with everything in it; nothing landed in /var/tmp
    assert not Path(used[0]).parent.exists()
    assert _ours(tmp) == before_tmp
    assert _ours("/var/tmp") == before_var_tmp


def _ours(d: str | Path) -> set[str]:
    """Entries the listing could have made (other processes share /tmp and /var/tmp)."""
    return {e for e in os.listdir(d) if e.startswith(("kgc-initramfs.", "unmkinitramfs_"))}
