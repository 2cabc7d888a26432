"""A private lab cache for cleanup tests: the real lab artefacts (node images, containerd
debs, cluster binaries) through symlinks, but its own ``lab-runs/`` records — so a test's
``kgc lab cleanup`` sees only the labs this test started, never another session's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgc_lab.common import cache_root


@pytest.fixture
def private_cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    real = cache_root()
    # short on purpose: the labs put UNIX sockets (QEMU monitor, SSH control master) under
    # the cache, and a socket path must stay under 108 bytes (pytest's tmp_path grows with
    # its run counter: /tmp/pytest-of-root/pytest-1449/test_..._0/cache/... did not)
    mine = Path(tempfile.mkdtemp(prefix="kgc-c-", dir="/tmp"))
    for lab in ("node", "containerd", "cluster"):
        (real / lab).mkdir(parents=True, exist_ok=True)
        (mine / lab).symlink_to(real / lab)
    monkeypatch.setenv("KGC_CACHE", str(mine))
    try:
        yield mine
    finally:
        # whatever the test did or where it failed, nothing it started outlives it: the
        # lab's own cleanup over this cache's records (a no-op when the test cleaned up) ...
        subprocess.run([sys.executable, "-m", "kgc.cli", "lab", "cleanup"],
                       env=lab_env(mine), capture_output=True, timeout=300, check=False)
        # ... then the symlinks and the records; never the real artefacts
        shutil.rmtree(mine, ignore_errors=True)


def lab_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "KGC_CACHE": str(cache), "PYTHONUNBUFFERED": "1"}
