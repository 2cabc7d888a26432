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
class PluginStatus:
    """One line of ``ctr plugins ls`` (``-d``: with the plugin's init error)."""

    type: str
    id: str
    status: str  # ok | skip | error
    error: str = ""

    @property
    def name(self) -> str:
        return f"{self.type}.{self.id}"


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
    # containerd's own warnings/errors while it loaded the config (`config dump` stderr)
    warnings: tuple[ContainerdWarning, ...] = ()
    # the version an offline tree will run, when the binary cannot be asked: from the
    # tree's package database or the profile (runtime.containerd_version)
    declared_version: ContainerdVersion | None = None
    declared_source: str = ""
    links: Mapping[str, str] = field(default_factory=dict)  # shim path -> link target
    # what containerd started: `ctr plugins ls -d` (None: not read) and why not, and its
    # own log lines of the current boot (journal: warnings and errors)
    plugins: tuple[PluginStatus, ...] | None = None
    plugins_error: str = ""
    log: tuple[ContainerdWarning, ...] = ()
    log_error: str = ""

    def known_version(self) -> tuple[ContainerdVersion, str]:
        """The containerd version to judge by and where it comes from: the binary's own
        answer first, else the declared one (package database or profile)."""
        if self.version.known:
            return self.version, "containerd --version"
        if self.declared_version is not None and self.declared_version.known:
            return self.declared_version, self.declared_source
        return self.version, ""

    @property
    def dump_ok(self) -> bool:
        return self.dump is not None and not self.dump.error and bool(self.dump.data)

    @property
    def dump_version(self) -> int | None:
        """The config version of the dump (what the binary loaded, already migrated)."""
        if not self.dump_ok or self.dump is None:
            return None
        v = self.dump.data.get("version")
        return v if isinstance(v, int) and not isinstance(v, bool) else 2

    @property
    def file_config(self) -> Mapping[str, Any]:
        """The config file with its imports merged the way containerd merges them."""
        return merge_imports(self.main.data, [f.data for f in self.imports])

    @property
    def effective(self) -> Mapping[str, Any]:
        if self.dump_ok and self.dump is not None:
            return self.dump.data
        return self.file_config

    @property
    def effective_source(self) -> str:
        if self.dump_ok:
            return "containerd config dump"
        return self.config_path + (" + imports" if self.imports else "")

    @property
    def config_version(self) -> int:
        """The config schema version of the file as written (a dump is always native)."""
        for src in (self.main.data, self.effective):
            v = src.get("version") if isinstance(src, Mapping) else None
            if isinstance(v, int) and not isinstance(v, bool):
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


_LOG_LINE = re.compile(r'^(time="[^"]*" )?level=[a-z]+ msg=|^\{"(level|msg|time)":')
_LOGFMT = re.compile(r'([A-Za-z_][A-Za-z0-9_.-]*)=("(?:[^"\\]|\\.)*"|\S*)')


def strip_log_lines(text: str) -> str:
    """The TOML part of ``config dump`` output (stderr is merged into the command output);
    containerd's log lines are kept separately by :func:`containerd_warnings`."""
    return "\n".join(ln for ln in text.split("\n") if not _LOG_LINE.match(ln))


@dataclass(frozen=True)
class ContainerdWarning:
    """One warning/error containerd logged while loading its config, e.g. ``Ignoring
    unknown key in TOML for plugin`` with the key and the plugin it was found under."""

    level: str
    msg: str
    key: str = ""
    plugin: str = ""
    raw: str = ""
    error: str = ""  # the error= field (``failed to load plugin`` says why there)
    id: str = ""  # the id= field (2.x names the plugin there)

    def __str__(self) -> str:
        s = f"{self.level}: {self.msg}"
        if self.error and self.msg.startswith("failed to load plugin"):
            s += f": {self.error}" + (f" ({self.id})" if self.id else "")
        if self.key:
            s += f' (key "{self.key}"' + (f" under plugin {self.plugin})" if self.plugin else ")")
        return s


def containerd_warnings(text: str, also: tuple[str, ...] = ()) -> list[ContainerdWarning]:
    """containerd's own warning/error log lines in command output (logfmt or JSON), and
    lines of any level whose message starts with one of ``also``."""
    out: list[ContainerdWarning] = []
    for ln in text.split("\n"):
        if not _LOG_LINE.match(ln):
            continue
        fields: dict[str, str] = {}
        if ln.startswith("{"):
            try:
                import json

                obj = json.loads(ln)
            except ValueError:
                continue
            if isinstance(obj, dict):
                fields = {str(k): str(v) for k, v in obj.items()}
        else:
            for k, v in _LOGFMT.findall(ln):
                if v.startswith('"') and len(v) >= 2:
                    v = re.sub(r"\\(.)", r"\1", v[1:-1])
                fields[k] = v
        level = fields.get("level", "")
        if level not in ("warning", "warn", "error", "fatal", "panic") and not (
                also and fields.get("msg", "").startswith(also)):
            continue
        out.append(ContainerdWarning(level, fields.get("msg", ""), fields.get("key", ""),
                                     fields.get("plugin", ""), ln[:500],
                                     fields.get("error", "")[:1000], fields.get("id", "")))
    return out


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
    """containerd's major version: from the binary, else the declared version (offline
    tree: package database or profile), else inferred from config version 3."""
    v, src = ev.known_version()
    if v.known:
        return v.major, f"{src}: {v}"
    if ev.config_version >= 3:
        return 2, "config version 3 (only containerd 2.x reads it)"
    return None, ev.version_error or "containerd version unknown"


def _series(ev: RuntimeEvidence, major: int | None) -> str:
    v, _src = ev.known_version()
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
    kv, _ksrc = ev.known_version()
    if kv.known and not kv.at_least(1, 7):
        return NriState(
            False,
            False,
            disable_default=None,
            evidence=ev_d,
            why=f"containerd {kv} has only NRI v0.1 (no plugin socket); NRI plugins need "
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


def loaded_handler_sections(file_version: int, major: int | None) -> tuple[tuple[str, ...], ...]:
    """The runtime-handler sections a containerd of this major version really loads from a
    config file of this version (checked against the real 1.7.24 and 2.1.9 binaries):
    1.x reads only the v2 section; 2.x migrates a version-2 file (the v2 section is moved
    to the v3 plugin, and v3 plugin names are read as they are) but ignores the v2
    section in a version-3 file. Unknown binary: the file version's own section."""
    v2, v3 = handler_section(2), handler_section(3)
    if major is None:
        return (handler_section(file_version),)
    if major >= 2:
        return (v3,) if file_version >= 3 else (v3, v2)
    return (v2,)


@dataclass(frozen=True)
class HandlerPlacement:
    """Where the profile's handler is, judged against what containerd loads."""

    handler: Handler | None
    found: dict[str, Handler]  # every handler containerd loads
    misplaced: str | None  # section in the file where the handler sits unread
    misplaced_file: str | None
    basis: str  # what the judgement rests on
    warnings: tuple[ContainerdWarning, ...]  # containerd's own words about it


def _handlers_in(cfg: Mapping[str, Any], section: tuple[str, ...]) -> dict[str, Handler]:
    found: dict[str, Handler] = {}
    rts = get_path(cfg, *section)
    if isinstance(rts, Mapping):
        for name, h in rts.items():
            if isinstance(h, Mapping):
                opts = h.get("options")
                found[name] = Handler(
                    name,
                    _section_name(section, name),
                    str(h.get("runtime_type", "")),
                    opts if isinstance(opts, Mapping) else {},
                    str(h.get("runtime_path", "") or ""),
                )
    return found


def place_handler(ev: RuntimeEvidence, name: str) -> HandlerPlacement:
    """Find the handler as the binary loads it: in ``config dump`` output when the binary
    answered (already migrated to its native config version), else in the files judged by
    :func:`loaded_handler_sections` for the known containerd version."""
    major, vwhy = containerd_major(ev)
    if ev.dump_ok and ev.dump is not None:
        loaded: tuple[tuple[str, ...], ...] = (handler_section(ev.dump_version or 2),)
        cfg: Mapping[str, Any] = ev.dump.data
        v, _src = ev.known_version()
        basis = (f"what containerd {v if v.known else '(version unknown)'} loaded: its config "
                 f"dump, version {ev.dump_version}")
        file_loaded = loaded_handler_sections(ev.config_version, major)
    else:
        loaded = file_loaded = loaded_handler_sections(ev.config_version, major)
        cfg = ev.file_config
        basis = (f"{ev.effective_source} as containerd {major}.x reads a version-"
                 f"{ev.config_version} config ({vwhy})" if major is not None else
                 f"{ev.effective_source} by its own version-{ev.config_version} sections "
                 "(containerd version unknown)")
    found: dict[str, Handler] = {}
    for sec in loaded:
        for k, h in _handlers_in(cfg, sec).items():
            found.setdefault(k, h)
    misplaced = misplaced_file = None
    if name not in found:
        for f in (ev.main, *ev.imports):
            for sec in (handler_section(2), handler_section(3)):
                if name in _handlers_in(f.data, sec) and (sec not in file_loaded or ev.dump_ok):
                    misplaced, misplaced_file = _section_name(sec, name), f.path
                    break
            if misplaced:
                break
    said = tuple(w for w in ev.warnings if name in w.key.split() or name == w.key
                 or (w.key and f"runtimes {name}" in w.key))
    return HandlerPlacement(found.get(name), found, misplaced, misplaced_file, basis, said)


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



# -- registry credentials: never into evidence, bundles or reports ---------------------------
# containerd's config may carry registry credentials: `registry.configs."<host>".auth`
# (username/password/auth/identitytoken), the deprecated `registry.auths`, and header values
# (`registry.headers`, hosts.toml `header`). They are dropped; everything else is kept.
_SECRET_TABLES = frozenset({"auth", "auths", "credentials", "headers", "header"})
_SECRET_KEYS = frozenset({"password", "identitytoken", "identity_token", "auth", "token",
                          "username", "registrytoken", "secret"})
_SECRET_COMMENT = re.compile(
    r"^\s*#.*\b(password|identitytoken|identity_token|auth|token|secret)\s*=", re.I)


def _sensitive(path: tuple[str, ...]) -> bool:
    """A key path (table path + key) whose value may hold a registry credential."""
    low = [p.lower() for p in path]
    for i, seg in enumerate(low):
        if seg in ("registry", "registries") or (i == 0 and seg in ("host", "header")):
            rest = low[i + 1 :] if seg != "header" else low[i:]
            if any(r in _SECRET_TABLES for r in rest) or (rest and rest[-1] in _SECRET_KEYS):
                return True
    return False


def strip_credentials(data: Any, path: tuple[str, ...] = ()) -> Any:
    """The parsed config without any credential-bearing key (see :func:`_sensitive`)."""
    if isinstance(data, Mapping):
        return {k: strip_credentials(v, (*path, k)) for k, v in data.items()
                if not _sensitive((*path, k))}
    if isinstance(data, list):
        return [strip_credentials(x, path) for x in data]
    return data


class _BadToml(Exception):
    pass


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SCALAR = re.compile(r"[^\s,\]\}#]+")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def _ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t":
        i += 1
    return i


def _basic(s: str, i: int) -> tuple[str, int]:
    out: list[str] = []
    j = i + 1
    while j < len(s):
        c = s[j]
        if c == '"':
            return "".join(out), j + 1
        if c == "\n":
            break
        if c == "\\":
            e = s[j + 1 : j + 2]
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
                j += 2
                continue
            if e in ("u", "U"):
                n = 4 if e == "u" else 8
                try:
                    out.append(chr(int(s[j + 2 : j + 2 + n], 16)))
                except ValueError:
                    break
                j += 2 + n
                continue
            break
        out.append(c)
        j += 1
    raise _BadToml


def _literal(s: str, i: int) -> tuple[str, int]:
    j = s.find("'", i + 1)
    if j < 0 or "\n" in s[i:j]:
        raise _BadToml
    return s[i + 1 : j], j + 1


def _key(s: str, i: int) -> tuple[tuple[str, ...], int]:
    parts: list[str] = []
    while True:
        i = _ws(s, i)
        if s[i : i + 1] == '"':
            val, i = _basic(s, i)
        elif s[i : i + 1] == "'":
            val, i = _literal(s, i)
        else:
            m = _BARE_KEY.match(s, i)
            if not m:
                raise _BadToml
            val, i = m.group(), m.end()
        parts.append(val)
        i = _ws(s, i)
        if s[i : i + 1] != ".":
            return tuple(parts), i
        i += 1


def _multiline_end(s: str, i: int, q: str) -> int:
    j = i + 3
    while j < len(s):
        if q == '"' and s[j] == "\\":
            j += 2
            continue
        if s.startswith(q * 3, j):
            end = j + 3
            while end < len(s) and s[end] == q and end - j < 5:
                end += 1
            return end
        j += 1
    raise _BadToml


def _value_end(s: str, i: int) -> int:
    i = _ws(s, i)
    if s.startswith('"""', i) or s.startswith("'''", i):
        return _multiline_end(s, i, s[i])
    c = s[i : i + 1]
    if c == '"':
        return _basic(s, i)[1]
    if c == "'":
        return _literal(s, i)[1]
    if c in ("[", "{"):
        close = "]" if c == "[" else "}"
        j = i + 1
        while True:
            while j < len(s) and s[j] in " \t\r\n,":
                j += 1
            if s[j : j + 1] == "#":
                j = s.find("\n", j)
                if j < 0:
                    raise _BadToml
                continue
            if j >= len(s):
                raise _BadToml
            if s[j] == close:
                return j + 1
            if close == "}":
                _p, j = _key(s, j)
                j = _ws(s, j)
                if s[j : j + 1] != "=":
                    raise _BadToml
                j += 1
            j = _value_end(s, j)
    m = _SCALAR.match(s, i)
    if not m:
        raise _BadToml
    return m.end()


def _statements(text: str) -> list[tuple[str, tuple[str, ...], int, int]]:
    """(kind, key path, start, end) of every header, key/value (all its lines) or other line."""
    out: list[tuple[str, tuple[str, ...], int, int]] = []
    i, n = 0, len(text)
    while i < n:
        le = text.find("\n", i)
        le = n if le < 0 else le
        j = _ws(text, i)
        if j >= le or text[j] in "#\r":
            out.append(("other", (), i, le + 1))
        elif text[j] == "[":
            arr = text.startswith("[[", j)
            path, k = _key(text, j + (2 if arr else 1))
            if not text.startswith("]]" if arr else "]", _ws(text, k)):
                raise _BadToml
            out.append(("header", path, i, le + 1))
        else:
            path, k = _key(text, j)
            k = _ws(text, k)
            if text[k : k + 1] != "=":
                raise _BadToml
            end = _value_end(text, k + 1)
            le = text.find("\n", end)
            le = n if le < 0 else le
            out.append(("kv", path, i, le + 1))
        i = le + 1
    return out


def _crude_path(text: str) -> tuple[str, ...]:
    try:
        return _key(text, 0)[0]
    except (_BadToml, IndexError):
        return tuple(p.strip().strip("\"'") for p in text.split("."))


_HEADER_LINE = re.compile(r"^\s*\[\[?\s*(.*?)\s*\]\]?\s*(#.*)?$")
_KV_LINE = re.compile(r"^\s*([^=#\s\[][^=]*?)\s*=")


def _redact_lines(text: str) -> str:
    """Invalid TOML: line by line, conservatively (a secret-looking key is dropped anywhere,
    and so is every line of a credential table and the continuation of a dropped value)."""
    out: list[str] = []
    table: tuple[str, ...] = ()
    drop_table = dropping = False
    for line in text.splitlines(keepends=True):
        h = _HEADER_LINE.match(line)
        kv = None if h else _KV_LINE.match(line)
        if h:
            table = _crude_path(h.group(1))
            drop_table = _sensitive(table)
            dropping = drop_table
        elif kv:
            path = _crude_path(kv.group(1))
            dropping = drop_table or _sensitive((*table, *path)) or (
                bool(path) and path[-1].lower() in _SECRET_KEYS)
        elif drop_table or _SECRET_COMMENT.match(line):
            dropping = True
        elif line.strip() == "" or line.lstrip().startswith("#"):
            dropping = False
        if not dropping:
            out.append(line)
    return "".join(out)


def _toml_key(k: str) -> str:
    return k if _BARE_KEY.fullmatch(k) else _toml_str(k)


def _toml_str(s: str) -> str:
    out = ['"']
    for c in s:
        if c in _ESCAPES.values() and c not in "\b\f":
            out.append({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out) + '"'


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _toml_str(v)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return v.isoformat()  # datetime, date, time


def dump_toml(data: Mapping[str, Any]) -> str:
    """A plain TOML writer (tables as [a."b.c"], everything else inline)."""
    lines: list[str] = []

    def table(d: Mapping[str, Any], path: tuple[str, ...]) -> None:
        for k, v in d.items():
            if not isinstance(v, Mapping):
                lines.append(f"{_toml_key(k)} = {_toml_value(v)}")
        for k, v in d.items():
            if isinstance(v, Mapping):
                p = (*path, k)
                lines.append("")
                lines.append("[" + ".".join(_toml_key(x) for x in p) + "]")
                table(v, p)

    table(data, ())
    return "\n".join(lines).lstrip("\n") + "\n"


def redact_containerd_config(text: str) -> str:
    """containerd config text (a file, an import or ``config dump`` output, which may carry
    containerd's log lines) without registry credentials: ``auth``/``auths``/
    ``credentials`` sections and header values under the registry configuration are
    dropped, every other line is kept as written. Pure and total.

    For valid TOML the result is checked: it must parse to exactly the original data minus
    the credentials; where the line-wise edit cannot achieve that (a credential inside an
    inline table), the config is written out anew from the stripped data."""
    if not isinstance(text, str):
        return ""
    logs = [ln for ln in text.split("\n") if _LOG_LINE.match(ln)]
    body = strip_log_lines(text) if logs else text
    try:
        data = tomllib.loads(body)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        data = None
    out: str | None = None
    if data is not None:
        try:
            kept: list[str] = []
            table: tuple[str, ...] = ()
            drop_table = False
            for kind, path, a, b in _statements(body):
                chunk = body[a:b]
                if kind == "header":
                    table, drop_table = path, _sensitive(path)
                    if drop_table:
                        continue
                elif kind == "kv":
                    if drop_table or _sensitive((*table, *path)):
                        continue
                elif drop_table or _SECRET_COMMENT.match(chunk):
                    continue
                kept.append(chunk)
            out = "".join(kept)
            if not body.endswith("\n") and out.endswith("\n") and not text.endswith("\n"):
                out = out[:-1]
        except (_BadToml, IndexError, RecursionError):
            out = None
        want = strip_credentials(data)
        if out is None or _loads_or_none(out) != want:
            out = "# kgc: rewritten without registry credentials\n" + dump_toml(want)
            if _loads_or_none(out) != want:
                out = "# kgc: containerd config withheld (it could not be redacted safely)\n"
    else:
        out = _redact_lines(body)
    return "\n".join(logs) + ("\n" if logs else "") + out


def _loads_or_none(text: str) -> Any:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        return None
