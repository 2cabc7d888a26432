"""The profile's path fields name no lab path: a test installation's private directories
(the containerd lab's /tmp/kgc-*) are accepted only where the operator says so
(``$KGC_PATH_ROOTS``), never by the product's schema itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgc.core.profile import PATH_ROOTS_ENV, ProfileError, load_profile

REPO = Path(__file__).resolve().parents[1]
LAB_CFG = "runtime:\n  containerd_config: /tmp/kgc-x1/config.toml\n"


def _write(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "p.yaml"
    p.write_text("name: t\n" + body)
    return p


def test_a_lab_path_is_refused_by_default(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PATH_ROOTS_ENV, raising=False)
    with pytest.raises(ProfileError, match=r"runtime.containerd_config: '/tmp/kgc-x1/config"
                                           r".toml': the containerd config must be under"):
        load_profile(_write(tmp_path, LAB_CFG))


def test_the_operator_accepts_a_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(PATH_ROOTS_ENV, "/srv/x:/tmp/kgc-")
    prof = load_profile(_write(tmp_path, LAB_CFG))
    assert prof.runtime.containerd_config == "/tmp/kgc-x1/config.toml"
    # the suffix rule still holds under an accepted root
    with pytest.raises(ProfileError, match="must be a .toml file"):
        load_profile(_write(tmp_path, "runtime:\n  containerd_config: /tmp/kgc-x1/shadow\n"))


@pytest.mark.parametrize("bad", ["relative/dir", "/tmp/../etc", "/tmp/a b"])
def test_a_bad_root_is_refused_not_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           bad: str) -> None:
    monkeypatch.setenv(PATH_ROOTS_ENV, bad)
    with pytest.raises(ProfileError, match=rf"\${PATH_ROOTS_ENV}: "):
        load_profile(_write(tmp_path, LAB_CFG))


def test_the_product_names_no_lab_path_or_lab_section() -> None:
    text = (REPO / "src" / "kgc" / "core" / "profile.py").read_text()
    assert "/tmp/kgc-" not in text
    assert "ClusterLabProfile" not in text and "lab:" not in text
