"""containerd's real semantics for NRI and runtime handlers, as pure functions.

- NRI is the plugin ``io.containerd.nri.v1.nri`` (same name in config versions 2 and 3).
  ``disable`` defaults to **true** on containerd 1.7 and **false** from 2.0;
  ``disable_connections`` (false) turns off the socket for external plugins;
  ``socket_path`` defaults to /var/run/nri/nri.sock. containerd < 1.7 has only NRI v0.1.
- ``enable_nri`` is CRI-O's key (``[crio.nri]``); containerd ignores it wherever it sits.
- Runtime handlers: config v2 ``plugins."io.containerd.grpc.v1.cri".containerd.runtimes.<h>``,
  config v3 ``plugins."io.containerd.cri.v1.runtime".containerd.runtimes.<h>``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.core.hostfs import StatResult

KATA_SHIM = "containerd-shim-kata-v2"
KATA_RUNTIME_TYPE = "io.containerd.kata.v2"
NRI_PLUGIN = "io.containerd.nri.v1.nri"
CRI_V2 = "io.containerd.grpc.v1.cri"
CRI_V3_RUNTIME = "io.containerd.cri.v1.runtime"
DEFAULT_NRI_SOCKET = "/var/run/nri/nri.sock"


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




NRI_KEYS = {
    "disable",
    "disable_connections",
    "socket_path",
    "plugin_path",
    "plugin_config_path",
    "plugin_registration_timeout",
    "plugin_request_timeout",
    # newer containerd (2.2+) additions
    "default_validator",
}
NRI_SECTION = f'[plugins."{NRI_PLUGIN}"]'


def get_path(d: Any, *keys: str) -> Any:
    """``d[k1][k2]...`` through nested mappings; None where a level is missing."""
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


def nri_enable_snippet(socket_path: str = DEFAULT_NRI_SOCKET) -> str:
    return f'{NRI_SECTION}\n  disable = false\n  socket_path = "{socket_path}"'


@dataclass(frozen=True)
class IgnoredKey:
    file: str
    section: str
    key: str
    why: str


def ignored_keys(files: list[ConfigFile]) -> list[IgnoredKey]:
    """NRI-looking keys containerd silently ignores, in the files as written."""
    out: list[IgnoredKey] = []
    for f in files:
        plugins = get_path(f.data, "plugins")
        if not isinstance(plugins, Mapping):
            plugins = {}
        for cri in (CRI_V2, CRI_V3_RUNTIME, "cri"):
            sec = plugins.get(cri)
            if not isinstance(sec, Mapping):
                continue
            for k in sec:
                if "nri" in k.lower():
                    out.append(
                        IgnoredKey(
                            f.path,
                            f'[plugins."{cri}"]',
                            k,
                            f"`{k}` is not a containerd key (it is CRI-O's "
                            "`[crio.nri] enable_nri`); containerd ignores it. NRI is enabled "
                            f"by `disable = false` in {NRI_SECTION}",
                        )
                    )
        nri = plugins.get(NRI_PLUGIN)
        if isinstance(nri, Mapping):
            for k in nri:
                if k not in NRI_KEYS:
                    out.append(
                        IgnoredKey(
                            f.path,
                            NRI_SECTION,
                            k,
                            f"`{k}` is not a key of the NRI plugin "
                            f"(known: {', '.join(sorted(NRI_KEYS))}); "
                            "containerd ignores it. Use `disable = false`",
                        )
                    )
    return out


@dataclass(frozen=True)
class NriState:
    enabled: bool | None  # None: cannot be decided (version unknown and `disable` unset)
    connections: bool | None
    socket_path: str
    disable_value: Any  # as configured (None: unset)
    disable_default: bool | None
    disable_connections_value: Any
    source: str
    version: str
    config_version: int
    section_present: bool
    why: str
    evidence: dict[str, Any] = field(default_factory=dict)


def containerd_major(ev: RuntimeEvidence) -> tuple[int | None, str]:
    """containerd's major version, from the binary, else inferred from config version 3."""
    v: ContainerdVersion = ev.version
    if v.known:
        return v.major, f"containerd --version: {v}"
    if ev.config_version >= 3:
        return 2, "config version 3 (only containerd 2.x reads it)"
    return None, ev.version_error or "containerd version unknown"


def _series(ev: RuntimeEvidence, major: int | None) -> str:
    v = ev.version
    return f"{v.major}.{v.minor}" if v.known else f"{major}.x"


def nri_state(ev: RuntimeEvidence) -> NriState:
    cfg = ev.effective
    major, vwhy = containerd_major(ev)
    sec = get_path(cfg, "plugins", NRI_PLUGIN)
    present = isinstance(sec, Mapping)
    sec = sec if isinstance(sec, Mapping) else {}
    disable_v = sec.get("disable")
    dc_v = sec.get("disable_connections")
    sock = sec.get("socket_path") or DEFAULT_NRI_SOCKET
    base: dict[str, Any] = dict(
        socket_path=str(sock),
        disable_value=disable_v,
        disable_connections_value=dc_v,
        source=ev.effective_source,
        version=vwhy,
        config_version=ev.config_version,
        section_present=present,
    )
    ev_d = {
        "nri_section": dict(sec),
        "config_source": ev.effective_source,
        "containerd_version": vwhy,
        "config_version": ev.config_version,
    }
    if ev.version.known and not ev.version.at_least(1, 7):
        return NriState(
            False,
            False,
            disable_default=None,
            evidence=ev_d,
            why=f"containerd {ev.version} has only NRI v0.1 (no plugin socket); NRI plugins need "
            "containerd >= 1.7",
            **base,
        )
    default: bool | None = None if major is None else (major < 2)
    file_sec = get_path(ev.file_config, "plugins", NRI_PLUGIN)
    file_sets = isinstance(file_sec, Mapping) and "disable" in file_sec
    if isinstance(disable_v, bool) and not file_sets and default is not None:
        # the dump spells the default out; say where it comes from
        enabled: bool | None = not disable_v
        why = (
            f"{ev.config_path} does not set `disable` in {NRI_SECTION}; the default on containerd "
            f"{_series(ev, major)} is disable = {str(default).lower()}"
            + (
                f" (confirmed by {ev.effective_source})"
                if ev.effective_source != ev.config_path
                else ""
            )
        )
    elif isinstance(disable_v, bool):
        enabled = not disable_v
        why = f"{NRI_SECTION} sets disable = {str(disable_v).lower()} ({ev.effective_source})"
    elif disable_v is not None:
        enabled = None
        why = f"{NRI_SECTION} disable = {disable_v!r} is not a boolean"
    elif default is None:
        enabled = None
        why = (
            f"{NRI_SECTION} does not set `disable` and the containerd version is unknown "
            f"({vwhy}): NRI is off by default on 1.7 and on by default on 2.x"
        )
    else:
        enabled = not default
        why = (
            f"{NRI_SECTION} {'does not set' if present else 'is absent, so nothing sets'} "
            "`disable`; "
            f"the default on containerd {_series(ev, major)} is disable = {str(default).lower()}"
        )
    connections: bool | None = None
    if enabled:
        connections = dc_v is not True
    return NriState(enabled, connections, disable_default=default, why=why, evidence=ev_d, **base)


# -- runtime handlers ------------------------------------------------------------------------
@dataclass(frozen=True)
class Handler:
    name: str
    section: str
    runtime_type: str
    options: Mapping[str, Any]
    runtime_path: str


def handler_section(config_version: int) -> tuple[str, ...]:
    if config_version >= 3:
        return ("plugins", CRI_V3_RUNTIME, "containerd", "runtimes")
    return ("plugins", CRI_V2, "containerd", "runtimes")


def _section_name(path: tuple[str, ...], name: str) -> str:
    return "[plugins." + ".".join(f'"{p}"' if "." in p else p for p in path[1:]) + f".{name}]"


def handlers(
    cfg: Mapping[str, Any], config_version: int
) -> tuple[dict[str, Handler], dict[str, str]]:
    """Handlers in the section this config version uses, and those misplaced in the other
    version's section (name -> where they were found)."""
    right = handler_section(config_version)
    wrong = handler_section(2 if config_version >= 3 else 3)
    found: dict[str, Handler] = {}
    rts = get_path(cfg, *right)
    if isinstance(rts, Mapping):
        for name, h in rts.items():
            if isinstance(h, Mapping):
                opts = h.get("options")
                found[name] = Handler(
                    name,
                    _section_name(right, name),
                    str(h.get("runtime_type", "")),
                    opts if isinstance(opts, Mapping) else {},
                    str(h.get("runtime_path", "") or ""),
                )
    misplaced: dict[str, str] = {}
    other = get_path(cfg, *wrong)
    if isinstance(other, Mapping):
        for name in other:
            if name not in found:
                misplaced[name] = _section_name(wrong, name)
    return found, misplaced


def handler_snippet(config_version: int, name: str, config_path: str | None = None) -> str:
    sec = _section_name(handler_section(config_version), name)
    s = f'{sec}\n  runtime_type = "{KATA_RUNTIME_TYPE}"'
    if config_path:
        s += f'\n{sec[:-1]}.options]\n  ConfigPath = "{config_path}"'
    return s


# -- Kata configuration -------------------------------------------------------------------------
VFIO_PORTS = ("no-port", "bridge-port", "root-port", "switch-port")
SIZING_RUNTIME_KEYS = ("static_sandbox_resource_mgmt", "sandbox_cgroup_only", "enable_pprof")
SIZING_HV_KEYS = (
    "default_vcpus",
    "default_maxvcpus",
    "default_memory",
    "default_maxmemory",
    "memory_slots",
    "memory_offset",
    "enable_annotations",
    "machine_type",
    "kernel_params",
)


def deep_merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


@dataclass(frozen=True)
class KataConfig:
    path: str | None
    chosen_because: str
    data: Mapping[str, Any]
    dropins: tuple[str, ...]
    error: str
    searched: tuple[str, ...]


def kata_config(
    ev: RuntimeEvidence, handler: Handler | None, search: tuple[str, ...]
) -> KataConfig:
    """The Kata config the handler uses: its ``ConfigPath`` option, else the first of the
    standard locations (``/etc/kata-containers`` overrides the shipped default)."""
    candidates: list[tuple[str, str]] = []
    if handler is not None:
        cp = handler.options.get("ConfigPath")
        if isinstance(cp, str) and cp:
            candidates.append((cp, f"ConfigPath of handler {handler.name!r}"))
    for p in search:
        candidates.append((p, "standard location"))
    for path, because in candidates:
        f = ev.kata_files.get(path)
        if f is None or f.text is None:
            if because.startswith("ConfigPath"):
                return KataConfig(
                    None,
                    f"{because} = {path} was not found (or not collected: add it to the profile's "
                    "runtime.kata_config_paths)",
                    {},
                    (),
                    "",
                    tuple(p for p, _ in candidates),
                )
            continue
        if f.error:
            return KataConfig(path, because, {}, (), f.error, tuple(p for p, _ in candidates))
        d = posixpath_dirname(path) + "/config.d/"
        drops = sorted(p for p in ev.kata_files if p.startswith(d))
        data: dict[str, Any] = dict(f.data)
        for dp in drops:
            df = ev.kata_files[dp]
            if not df.error:
                data = deep_merge(data, df.data)
        return KataConfig(path, because, data, tuple(drops), "", tuple(p for p, _ in candidates))
    return KataConfig(
        None, "no Kata configuration file found", {}, (), "", tuple(p for p, _ in candidates)
    )


def posixpath_dirname(p: str) -> str:
    return p.rsplit("/", 1)[0] if "/" in p else "."


def hypervisors(data: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    hv = data.get("hypervisor")
    if not isinstance(hv, Mapping):
        return {}
    return {k: v for k, v in hv.items() if isinstance(v, Mapping)}


def sizing_evidence(data: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    rt = data.get("runtime")
    if isinstance(rt, Mapping):
        for k in SIZING_RUNTIME_KEYS:
            if k in rt:
                out[f"runtime.{k}"] = rt[k]
    for name, hv in hypervisors(data).items():
        for k in SIZING_HV_KEYS:
            if k in hv:
                out[f"hypervisor.{name}.{k}"] = hv[k]
    return out
