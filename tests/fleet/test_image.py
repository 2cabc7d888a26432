"""The fleet image is reproducible from pinned inputs: its base image by digest, every
dependency installed from a requirements file with hashes (pip's --require-hashes), kgc's
own wheel with --no-deps and built by a hashed setuptools; and the requirements stay in step
with pyproject.toml (a dependency added there without regenerating them fails here)."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import REPO

IMAGE = REPO / "deploy" / "image"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _lines() -> list[str]:
    """The Containerfile's instructions, continuation lines joined."""
    text = (IMAGE / "Containerfile").read_text()
    text = re.sub(r"\\\n", " ", "\n".join(ln for ln in text.splitlines()
                                          if not ln.lstrip().startswith("#")))
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


def pins(path: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, hashes) of a pip-compile --generate-hashes file."""
    out: dict[str, tuple[str, list[str]]] = {}
    text = re.sub(r"\\\n", " ", (IMAGE / path).read_text())
    for ln in text.splitlines():
        ln = ln.split("#", 1)[0].strip()
        if not ln:
            continue
        req, *hashes = ln.split()
        name, sep, version = req.partition("==")
        assert sep and version, f"{path}: {req!r} is not pinned with =="
        out[canonicalize_name(name)] = (version, [h for h in hashes if h != "\\"])
    return out


def test_the_base_image_is_pinned_by_digest() -> None:
    lines = _lines()
    args = dict(re.match(r"ARG (\w+)=(\S+)", ln).groups()  # type: ignore[union-attr]
                for ln in lines if re.match(r"ARG \w+=", ln))
    stages = set()
    for ln in lines:
        if not ln.startswith("FROM "):
            continue
        words = ln.split()
        ref = words[1]
        m = re.fullmatch(r"\$\{(\w+)\}", ref)
        ref = args.get(m.group(1), "") if m else ref
        assert ref in stages or DIGEST.search(ref), f"FROM {words[1]} -> {ref!r}: not a digest"
        if len(words) == 4 and words[2].upper() == "AS":
            stages.add(words[3])


def test_every_install_is_hashed_or_the_local_wheel_without_deps() -> None:
    runs = [ln for ln in _lines() if ln.startswith("RUN ")]
    cmds = [c.strip() for ln in runs for c in re.split(r"&&|;", ln[4:])]
    pip = [c for c in cmds if re.match(r"pip3? (install|wheel)\b", c)]
    assert pip
    for c in pip:
        if c.startswith("pip wheel"):
            assert "--no-deps" in c and "--no-build-isolation" in c, c
        elif "--require-hashes" in c:
            assert re.search(r"-r \S+requirements\.txt", c), c
        else:
            assert "--no-deps" in c and re.search(r"/wheels/\*\.whl$", c), c


def test_the_requirements_pin_every_dependency_with_hashes() -> None:
    req = pins("requirements.txt")
    assert req and all(h and all(x.startswith("--hash=sha256:") for x in h)
                       for _, h in req.values())
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    for dep in meta["project"]["dependencies"]:
        r = Requirement(dep)
        name = canonicalize_name(r.name)
        assert name in req, f"{dep}: not in deploy/image/requirements.txt (regenerate it)"
        assert r.specifier.contains(req[name][0], prereleases=True), (dep, req[name][0])
    build = pins("build-requirements.txt")
    for dep in meta["build-system"]["requires"]:
        r = Requirement(dep)
        version, hashes = build[canonicalize_name(r.name)]
        assert hashes and r.specifier.contains(version), (dep, version)
