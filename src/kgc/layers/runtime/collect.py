"""containerd + Kata evidence: the host query and the pure parser (tomllib).

Sources, best first: ``containerd config dump`` (the effective, merged config with every
default spelled out), then the config file plus its ``imports``. Keys that containerd
ignores (``enable_nri`` under the CRI plugin) never appear in a dump, so they are looked
for in the files. Everything here is pure: the snapshot in, a frozen evidence object out.
"""

from __future__ import annotations

import fnmatch
import posixpath

from kgc.core.hostfs import HostQuery, HostSnapshot
from kgc.core.profile import Profile, RuntimeProfile
from kgc.evidence.containerd import (
    DEFAULT_NRI_SOCKET,
    KATA_SHIM,
    ConfigFile,
    ContainerdVersion,
    RuntimeEvidence,
    parse_toml,
    parse_version,
    strip_log_lines,
)

_KATA_DIRS = (
    "/etc/kata-containers/*.toml",
    "/etc/kata-containers/config.d/*.toml",
    "/opt/kata/share/defaults/kata-containers/*.toml",
    "/opt/kata/share/defaults/kata-containers/config.d/*.toml",
    "/opt/kata/share/defaults/kata-containers/runtimes/*/*.toml",
    "/opt/kata/share/defaults/kata-containers/runtimes/*/config.d/*.toml",
    "/usr/share/defaults/kata-containers/*.toml",
    "/usr/share/defaults/kata-containers/config.d/*.toml",
)


def _no_root(cmd: str) -> str:
    """A command that only makes sense on the live root (an offline tree has no binaries)."""
    return f'if [ -n "$R" ]; then echo KGC-OFFLINE-TREE; exit 3; fi; {cmd}'


def _sh_quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


def query_for(rp: RuntimeProfile) -> HostQuery:
    """Everything the runtime layer reads for a given profile (one batched script)."""
    cfg = rp.containerd_config
    cfg_dir = posixpath.dirname(cfg) or "/"
    binq = _sh_quote(rp.containerd_bin)
    shim_dirs = " ".join(_sh_quote(d) for d in rp.shim_dirs)
    return HostQuery(
        files=(
            cfg,
            f"{cfg_dir}/*.toml",
            f"{cfg_dir}/conf.d/*.toml",
            f"{cfg_dir}/config.d/*.toml",
            *_KATA_DIRS,
            *rp.kata_config_paths,
        ),
        stats=(
            rp.nri_socket,
            DEFAULT_NRI_SOCKET,
            "/run/nri/nri.sock",
            *(f"{d}/{KATA_SHIM}" for d in rp.shim_dirs),
        ),
        commands=(
            ("containerd_version", _no_root(f"{binq} --version")),
            ("containerd_config_dump", _no_root(f"{binq} --config {_sh_quote(cfg)} config dump")),
            (
                "kata_shim_path",
                _no_root(f"PATH=\"$PATH:$(printf '%s:' {shim_dirs})\"; command -v {KATA_SHIM}"),
            ),
        ),
    )


QUERY = query_for(RuntimeProfile())


def _imports(snap: HostSnapshot, main: ConfigFile) -> tuple[list[ConfigFile], list[str]]:
    pats = main.data.get("imports") if main.data else None
    if not isinstance(pats, list):
        return [], []
    files: list[ConfigFile] = []
    missing: list[str] = []
    base = posixpath.dirname(main.path)
    for pat in pats:
        if not isinstance(pat, str):
            continue
        full = pat if pat.startswith("/") else posixpath.join(base, pat)
        hits = sorted(p for p in snap.files if fnmatch.fnmatchcase(p, full) and p != main.path)
        if not hits:
            missing.append(full)
        for h in hits:
            files.append(parse_toml(h, snap.read(h)))
    return files, missing


def _kata_files(snap: HostSnapshot) -> dict[str, ConfigFile]:
    out: dict[str, ConfigFile] = {}
    for p in sorted(snap.files):
        if "kata" in p and p.endswith(".toml"):
            out[p] = parse_toml(p, snap.read(p))
    return out


def parse(snap: HostSnapshot, profile: Profile | None = None) -> RuntimeEvidence:
    rp = profile.runtime if profile is not None else RuntimeProfile()
    main = parse_toml(rp.containerd_config, snap.read(rp.containerd_config))
    imports, missing = _imports(snap, main)

    dump: ConfigFile | None = None
    dump_error = ""
    offline = False
    d = snap.command("containerd_config_dump")
    if d is None:
        dump_error = "containerd config dump was not run"
    elif "KGC-OFFLINE-TREE" in d.output:
        offline = True
        dump_error = "offline tree: no containerd binary to ask"
    elif d.rc != 0:
        dump_error = (
            f"`{rp.containerd_bin} config dump` failed (exit {d.rc}): {d.output.strip()[:300]}"
        )
    else:
        dump = parse_toml("containerd config dump", strip_log_lines(d.output))

    v = snap.command("containerd_version")
    version = ContainerdVersion("")
    version_error = ""
    if v is None:
        version_error = "containerd --version was not run"
    elif "KGC-OFFLINE-TREE" in v.output:
        version_error = "offline tree: no containerd binary to ask"
    elif v.rc != 0:
        version_error = (
            f"`{rp.containerd_bin} --version` failed (exit {v.rc}): {v.output.strip()[:200]}"
        )
    else:
        version = parse_version(v.output)
        if not version.known:
            version_error = f"unrecognised version output: {v.output.strip()[:200]!r}"

    shim_found: list[str] = []
    s = snap.command("kata_shim_path")
    if s is not None and s.rc == 0 and s.output.strip().startswith("/"):
        shim_found.append(s.output.strip().splitlines()[0])
    for dirp in rp.shim_dirs:
        p = f"{dirp}/{KATA_SHIM}"
        st = snap.stats.get(p)
        if st is not None and st.kind.startswith(("regular", "symbolic")) and p not in shim_found:
            shim_found.append(p)

    return RuntimeEvidence(
        config_path=rp.containerd_config,
        main=main,
        imports=tuple(imports),
        missing_imports=tuple(missing),
        dump=dump,
        dump_error=dump_error,
        version=version,
        version_error=version_error,
        stats=dict(snap.stats),
        shim_found=tuple(shim_found),
        kata_files=_kata_files(snap),
        offline=offline,
    )
