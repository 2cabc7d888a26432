"""containerd + Kata evidence: the host query and the pure parser (tomllib).

Sources, best first: ``containerd config dump`` (the effective, merged config with every
default spelled out), then the config file plus its ``imports``. Keys that containerd
ignores (``enable_nri`` under the CRI plugin) never appear in a dump, so they are looked
for in the files. Everything here is pure: the snapshot in, a frozen evidence object out.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.core.hostfs import HostQuery, HostSnapshot, StatResult
from kgc.core.profile import Profile, RuntimeProfile

KATA_SHIM = "containerd-shim-kata-v2"
KATA_RUNTIME_TYPE = "io.containerd.kata.v2"
NRI_PLUGIN = "io.containerd.nri.v1.nri"
CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_V3_RUNTIME = "io.containerd.cri.v1.runtime"
DEFAULT_NRI_SOCKET = "/var/run/nri/nri.sock"

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


# -- evidence ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConfigFile:
    path: str
    text: str | None  # None: absent
    data: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""  # TOML syntax error, with line/column


@dataclass(frozen=True)
class ContainerdVersion:
    raw: str
    major: int | None = None
    minor: int | None = None
    patch: int | None = None

    @property
    def known(self) -> bool:
        return self.major is not None

    def at_least(self, major: int, minor: int = 0) -> bool:
        if self.major is None:
            return False
        return (self.major, self.minor or 0) >= (major, minor)

    def __str__(self) -> str:
        if self.major is None:
            return "unknown"
        return f"{self.major}.{self.minor}.{self.patch}"


@dataclass(frozen=True)
class RuntimeEvidence:
    config_path: str
    main: ConfigFile
    imports: tuple[ConfigFile, ...]
    missing_imports: tuple[str, ...]  # import patterns that matched no collected file
    dump: ConfigFile | None  # `containerd config dump`, when the binary ran
    dump_error: str
    version: ContainerdVersion
    version_error: str
    stats: Mapping[str, StatResult]
    shim_found: tuple[str, ...]
    kata_files: Mapping[str, ConfigFile]
    offline: bool = False

    @property
    def file_config(self) -> Mapping[str, Any]:
        """The config file with its imports merged the way containerd merges them."""
        return merge_imports(self.main.data, [f.data for f in self.imports])

    @property
    def effective(self) -> Mapping[str, Any]:
        if self.dump is not None and not self.dump.error and self.dump.data:
            return self.dump.data
        return self.file_config

    @property
    def effective_source(self) -> str:
        if self.dump is not None and not self.dump.error and self.dump.data:
            return "containerd config dump"
        return self.config_path + (" + imports" if self.imports else "")

    @property
    def config_version(self) -> int:
        """The config schema version containerd applies (a dump is always native)."""
        for src in (self.main.data, self.effective):
            v = src.get("version") if isinstance(src, Mapping) else None
            if isinstance(v, int):
                return v
        return 1


def parse_toml(path: str, text: str | None) -> ConfigFile:
    if text is None:
        return ConfigFile(path, None)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return ConfigFile(path, text, {}, f"{path}: invalid TOML: {exc}")
    except (ValueError, RecursionError) as exc:  # pathological input tomllib rejects
        return ConfigFile(path, text, {}, f"{path}: unreadable TOML: {type(exc).__name__}")
    return ConfigFile(path, text, data)


_LOG_LINE = re.compile(r'^(time="[^"]*" )?level=[a-z]+ msg=')


def strip_log_lines(text: str) -> str:
    """Drop containerd's own log lines (stderr is merged into the command output)."""
    return "\n".join(ln for ln in text.split("\n") if not _LOG_LINE.match(ln))


_VERSION_RE = re.compile(r"\b(?:v)?(\d+)\.(\d+)\.(\d+)")


def parse_version(raw: str) -> ContainerdVersion:
    """``containerd github.com/containerd/containerd 1.7.24~ds1 ...`` -> 1.7.24."""
    for tok in raw.split():
        m = _VERSION_RE.match(tok)
        if m:
            return ContainerdVersion(raw.strip(), int(m[1]), int(m[2]), int(m[3]))
    return ContainerdVersion(raw.strip())


def merge_imports(main: Mapping[str, Any], imported: list[Mapping[str, Any]]) -> dict[str, Any]:
    """containerd's merge: imported files override top-level keys; under ``plugins`` a
    plugin's whole section is replaced by the later file's section (not deep-merged)."""
    out: dict[str, Any] = dict(main)
    for imp in imported:
        for k, v in imp.items():
            if k == "plugins" and isinstance(v, Mapping):
                plugins = dict(out.get("plugins") or {})
                plugins.update(v)
                out["plugins"] = plugins
            elif k not in ("imports", "version"):
                out[k] = v
    return out


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
