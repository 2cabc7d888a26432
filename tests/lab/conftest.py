"""A private lab cache for cleanup tests: the real lab artefacts (node images, containerd
debs, cluster binaries) through symlinks, but its own ``lab-runs/`` records — so a test's
``kgc lab cleanup`` sees only the labs this test started, never another session's."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kgc.lab.common import cache_root


@pytest.fixture
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    real = cache_root()
    mine = tmp_path / "cache"
    mine.mkdir()
    for lab in ("node", "containerd", "cluster"):
        (real / lab).mkdir(parents=True, exist_ok=True)
        (mine / lab).symlink_to(real / lab)
    monkeypatch.setenv("KGC_CACHE", str(mine))
    yield mine


def lab_env(cache: Path) -> dict[str, str]:
    return {**os.environ, "KGC_CACHE": str(cache), "PYTHONUNBUFFERED": "1"}
