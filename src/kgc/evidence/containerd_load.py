"""What containerd really started, and the load rules that decide whether its CRI plugin
starts (pure functions).

``containerd config dump`` prints the merged configuration even when a plugin refuses it:
on containerd 1.7.24 a ``runtimes`` table that lists only the Kata handler replaces the
default ``runc`` entry, the CRI plugin fails with ``invalid plugin config: no corresponding
runtime configured in `containerd.runtimes` for `containerd` `default_runtime_name =
"runc"``, and the dump still looks fine. What containerd started is its plugin list
(``ctr plugins ls -d``: each plugin's init error) and its own log (``failed to load
plugin``). Where neither can be read (offline trees, bundles without them) the load rules
below are applied to the config; a rule that cannot be decided says so.

Every rule and message here was checked against the real containerd 1.7.24 (Debian
trixie) and 2.1.9 (Debian sid) binaries; the captured outputs are the fixtures under
``fixtures/containerd/`` (see their README).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.evidence.containerd import (
    CRI_V2,
    CRI_V3_RUNTIME,
    ContainerdWarning,
    PluginStatus,
    RuntimeEvidence,
    containerd_major,
    get_path,
)

CRI_V3_IMAGES = "io.containerd.cri.v1.images"
# the plugins that make up CRI, root cause first (2.x splits the runtime and image
# services out of io.containerd.grpc.v1.cri; 1.7 has only the grpc plugin)
CRI_PLUGINS_2 = (CRI_V3_RUNTIME, CRI_V3_IMAGES, CRI_V2)
CRI_PLUGINS_1 = (CRI_V2,)


# -- the plugin list --------------------------------------------------------------------
def _status_of(error: str) -> str:
    if not error:
        return "ok"
    # containerd's plugin.ErrSkipPlugin reads "skip plugin" (wrapped: "...: skip plugin")
    e = error.strip()
    return "skip" if e.endswith("skip plugin") or e.startswith("skip plugin") else "error"


def parse_plugins(text: str) -> list[PluginStatus] | None:
    """``ctr plugins ls -d`` (``Type:``/``ID:``/``Error:`` blocks) or the plain table
    (``TYPE ID PLATFORMS STATUS``); None when the text is neither."""
    lines = text.splitlines()
    if any(ln.startswith("Type:") for ln in lines):
        out: list[PluginStatus] = []
        cur: dict[str, str] = {}
        in_error = False

        def flush() -> None:
            if cur.get("type") and cur.get("id"):
                err = cur.get("error", "").strip()
                out.append(PluginStatus(cur["type"], cur["id"], _status_of(err), err))

        for ln in lines:
            key, _, val = ln.partition(":")
            if ln.startswith("Type:"):
                flush()
                cur, in_error = {"type": val.strip()}, False
            elif ln.startswith("ID:"):
                cur["id"] = val.strip()
            elif ln.startswith("Error:"):
                in_error = True
            elif ln[:1] not in (" ", "\t") and ln.strip():
                in_error = False  # Platforms:, Exports:, Requires:
            elif in_error and key.strip() == "Message":
                cur["error"] = val.strip()
            elif in_error and ln.strip() and key.strip() != "Code" and "error" in cur:
                cur["error"] += " " + ln.strip()  # a wrapped message
        flush()
        return out
    if lines and lines[0].split()[:1] == ["TYPE"]:
        rows = []
        for ln in lines[1:]:
            parts = ln.split()
            if len(parts) >= 4:
                st = parts[-1] if parts[-1] in ("ok", "skip", "error") else "error"
                rows.append(PluginStatus(parts[0], parts[1], st))
        return rows
    return None


# -- containerd's log -------------------------------------------------------------------
def current_start(lines: list[ContainerdWarning]) -> list[ContainerdWarning]:
    """The log lines of containerd's last start (after its last ``starting containerd``)."""
    idx = [i for i, w in enumerate(lines) if w.msg.startswith("starting containerd")]
    return lines[idx[-1] + 1 :] if idx else lines


def load_failures(lines: list[ContainerdWarning]) -> dict[str, str]:
    """``failed to load plugin`` lines: plugin -> its error. 2.x logs ``msg="failed to
    load plugin" id=<plugin>``, 1.7 ``msg="failed to load plugin <plugin>"``."""
    out: dict[str, str] = {}
    for w in current_start(lines):
        if not w.msg.startswith("failed to load plugin"):
            continue
        pid = w.id or w.msg[len("failed to load plugin") :].strip()
        if pid and w.error:
            out[pid] = w.error
    return out


# -- load rules ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Edit:
    """One key to set (or delete) in one table of one config file: a remediation that is
    computed from the recorded config, applied by :func:`apply_edit`."""

    file: str
    table: tuple[str, ...]
    key: str
    value: Any = None
    delete: bool = False
    table_exists: bool = False

    def header(self) -> str:
        return toml_header(self.table)

    def describe(self) -> str:
        if self.delete:
            return f"delete `{self.key}` from the table {self.header()} in {self.file}"
        line = f"{self.key} = {toml_value(self.value)}"
        if self.table_exists:
            return f"set `{line}` in the existing table {self.header()} in {self.file}"
        return f"add to {self.file}:\n{self.header()}\n  {line}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "table": list(self.table), "key": self.key,
                "value": self.value, "delete": self.delete}


@dataclass(frozen=True)
class Rule:
    """One load rule applied to a config: ``broken`` (containerd will refuse the plugin,
    with containerd's own words), ``ok``, or ``unchecked`` (with the reason)."""

    name: str
    status: str  # ok | broken | unchecked
    plugin: str
    message: str
    fix: str = ""
    edits: tuple[Edit, ...] = ()


_GO_DURATION = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+")


def go_duration_ok(s: str) -> bool:
    """Go's ``time.ParseDuration`` grammar (what containerd parses these keys with)."""
    return s in ("0", "+0", "-0") or bool(_GO_DURATION.fullmatch(s))


@dataclass(frozen=True)
class ConfigView:
    """The config as one containerd reads it: the sections its plugins are configured
    from, and which file defines each (the edit goes there)."""

    data: Mapping[str, Any]
    major: int | None  # containerd's major version (None: unknown)
    file_version: int
    from_dump: bool
    files: tuple[tuple[str, Mapping[str, Any]], ...] = ()  # (path, parsed) in merge order
    source: str = ""
    default_file: str = ""  # where a table nobody defines goes (the main config file)

    def section(self, plugin: str, *sub: str) -> Mapping[str, Any] | None:
        s = get_path(self.data, "plugins", plugin, *sub)
        return s if isinstance(s, Mapping) else None

    def file_of(self, plugin: str) -> str:
        """The file whose ``[plugins."<plugin>"]`` containerd uses (imports replace a whole
        plugin section, so the last file that defines it)."""
        path = self.default_file or (self.files[0][0] if self.files else "")
        for p, d in self.files:
            if isinstance(get_path(d, "plugins", plugin), Mapping):
                path = p
        return path

    def table_in_file(self, path: str, table: tuple[str, ...]) -> bool:
        for p, d in self.files:
            if p == path:
                return isinstance(get_path(d, *table), Mapping)
        return False

    def edit(self, plugin: str, sub: tuple[str, ...], key: str, value: Any = None,
             delete: bool = False) -> Edit:
        """The edit in the file, in the section that file writes (a version-2 file keeps
        2.x's split CRI settings under io.containerd.grpc.v1.cri; 2.x migrates them)."""
        if self.file_version < 3 and plugin in (CRI_V3_RUNTIME, CRI_V3_IMAGES):
            plugin = CRI_V2
        f = self.file_of(plugin)
        table = ("plugins", plugin, *sub)
        return Edit(f, table, key, value, delete, self.table_in_file(f, table))


def runtime_plugin(view: ConfigView) -> str | None:
    """Where this containerd reads ``containerd.runtimes`` / ``default_runtime_name``."""
    if view.major is None:
        return None
    if view.major >= 2 and (view.from_dump or view.file_version >= 3):
        return CRI_V3_RUNTIME
    return CRI_V2  # 1.x, or a version-2 file that 2.x migrates


def _default_runtime(view: ConfigView) -> Rule:
    name = "default-runtime"
    cd_major = view.major
    plugin = runtime_plugin(view)
    if plugin is None:
        # unknown containerd: decide only where 1.7 and 2.x agree
        plugin = CRI_V3_RUNTIME if view.file_version >= 3 else CRI_V2
    sec = view.section(plugin, "containerd") or {}
    default = sec.get("default_runtime_name", "runc")
    rts = sec.get("runtimes")
    listed = sorted(k for k, v in rts.items() if isinstance(v, Mapping)) if isinstance(
        rts, Mapping) else []
    if not isinstance(default, str):
        return Rule(name, "unchecked", plugin,
                    f"default_runtime_name = {default!r} is not a string (not modelled)")
    if view.from_dump or (cd_major is not None and cd_major < 2):
        # a dump lists what the plugin got; containerd 1.x replaces its default runtimes
        # map with the file's table (the lab's 1.7.24: only the listed runtimes remain)
        have = listed or ["runc"]  # no table at all: containerd's default runc
    elif cd_major is not None:
        have = sorted({"runc", *listed})  # 2.x merges the file's runtimes into its default
    else:
        if default in listed or (not listed and default == "runc"):
            have = listed or ["runc"]
        elif default != "runc":
            have = sorted({"runc", *listed})  # missing on 1.7 and 2.x alike
        else:
            return Rule(
                name, "unchecked", plugin,
                f"the runtimes table lists {', '.join(listed)} without runc, the default "
                "runtime: containerd 1.7 then refuses the CRI plugin (its table replaces the "
                "default runc entry), 2.x keeps runc; the containerd version is unknown "
                "(set runtime.containerd_version in the profile)")
    if default in have:
        return Rule(name, "ok", plugin, f"default_runtime_name {default!r} is configured "
                    f"(runtimes: {', '.join(have)})")
    msg = ("invalid plugin config: no corresponding runtime configured in `containerd.runtimes` "
           f'for `containerd` `default_runtime_name = "{default}"')  # verbatim, as 1.7.24/2.1.9
    tbl = ("containerd", "runtimes", "runc")
    if default == "runc" and "runc" not in listed:
        e = view.edit(plugin, tbl, "runtime_type", "io.containerd.runc.v2")
        fix = ("list runc again next to the other runtimes (containerd 1.7: a runtimes table "
               f"replaces the default runc entry): {e.describe()}")
        edits: tuple[Edit, ...] = (e,)
    elif listed:
        e = view.edit(plugin, ("containerd",), "default_runtime_name", listed[0])
        fix = (f"make default_runtime_name name a configured runtime ({', '.join(listed)}): "
               f"{e.describe()}")
        edits = (e,)
    else:
        e = view.edit(plugin, ("containerd",), "default_runtime_name", delete=True)
        fix = e.describe()
        edits = (e,)
    return Rule(name, "broken", plugin, msg, fix, edits)


# (key, the plugin that validates it on 1.x, on 2.x, containerd's message)
_DURATIONS = (
    ("stream_idle_timeout", CRI_V2, CRI_V2, "invalid stream idle timeout"),
    ("drain_exec_sync_io_timeout", CRI_V2, CRI_V3_RUNTIME,
     "invalid `drain_exec_sync_io_timeout`"),
)


def _durations(view: ConfigView) -> list[Rule]:
    out: list[Rule] = []
    for key, p1, p2, said in _DURATIONS:
        if view.major is None:
            plugins = {p1, p2}
        elif view.major >= 2 and not view.from_dump and view.file_version < 3:
            plugins = {CRI_V2}  # a version-2 file: 2.x migrates the key out of grpc.v1.cri
        else:
            plugins = {p2 if view.major >= 2 else p1}
        for plugin in sorted(plugins):
            sec = view.section(plugin) or {}
            if key not in sec:
                continue
            v = sec[key]
            if not isinstance(v, str):
                out.append(Rule(f"duration:{key}", "unchecked", plugin,
                                f"{key} = {v!r} is not a string (not modelled)"))
            elif v == "" or go_duration_ok(v):
                out.append(Rule(f"duration:{key}", "ok", plugin, f"{key} = {v!r}"))
            else:
                e = view.edit(plugin, (), key, "4h0m0s" if key == "stream_idle_timeout"
                              else "0s")
                out.append(Rule(f"duration:{key}", "broken", plugin,
                                f'{said}: time: invalid duration "{v}"',
                                f"give {key} a Go duration (e.g. 4h0m0s, 30s): "
                                f"{e.describe()}", (e,)))
    return out


def _registry(view: ConfigView) -> list[Rule]:
    if view.major is None:
        plugins: tuple[str, ...] = (CRI_V2, CRI_V3_IMAGES)
    elif view.major >= 2 and (view.from_dump or view.file_version >= 3):
        plugins = (CRI_V3_IMAGES,)
    else:
        plugins = (CRI_V2,)
    out: list[Rule] = []
    for plugin in plugins:
        reg = view.section(plugin, "registry")
        if not reg:
            continue
        mirrors = reg.get("mirrors")
        if reg.get("config_path") and isinstance(mirrors, Mapping) and mirrors:
            e = view.edit(plugin, ("registry",), "config_path", delete=True)
            out.append(Rule(
                "registry-mirrors", "broken", plugin,
                "`mirrors` cannot be set when `config_path` is provided",
                f"configure the mirrors ({', '.join(sorted(mirrors))}) as hosts.toml files "
                f"under {reg.get('config_path')} and delete the [...registry.mirrors] tables, "
                f"or drop config_path: {e.describe()}", (e,)))
    return out


def load_rules(view: ConfigView) -> list[Rule]:
    """Every CRI load rule applied to the config (see the module docstring)."""
    return [_default_runtime(view), *_durations(view), *_registry(view)]


# -- the verdict on CRI -------------------------------------------------------------------
@dataclass(frozen=True)
class CriLoad:
    loaded: bool | None  # None: not observed and not decidable
    source: str  # what says so
    plugin: str = ""  # the plugin that failed first (root cause)
    error: str = ""  # containerd's init error of that plugin
    rules: tuple[Rule, ...] = ()
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def broken_rules(self) -> list[Rule]:
        return [r for r in self.rules if r.status == "broken"]

    @property
    def unchecked_rules(self) -> list[Rule]:
        return [r for r in self.rules if r.status == "unchecked"]

    def fix(self) -> str:
        """The computed remedy (the rule that explains the failure), or a generic one."""
        broken = self.broken_rules
        if broken:
            return "; ".join(f"{r.fix}" for r in broken if r.fix) + " — then restart containerd."
        if self.error:
            return (f"Fix what containerd names ({self.plugin}: {self.error}) in the config "
                    "and restart containerd; `ctr plugins ls -d` shows each plugin's error.")
        return "Check `ctr plugins ls -d` and `journalctl -u containerd` for the CRI plugin."

    def describe(self) -> str:
        if self.loaded is False:
            return (f"containerd's CRI plugin {self.plugin} failed to load: {self.error} "
                    f"({self.source})")
        if self.loaded:
            return f"containerd's CRI plugin is loaded ({self.source})"
        return f"whether containerd's CRI plugin loads is not known ({self.source})"


def _root_failure(failed: Mapping[str, str], order: tuple[str, ...]) -> tuple[str, str]:
    for p in order:
        if p in failed:
            return p, failed[p]
    p = next(iter(failed))
    return p, failed[p]


def cri_load(plugins: list[PluginStatus] | None, plugins_error: str,
             log: list[ContainerdWarning], view: ConfigView) -> CriLoad:
    """Did containerd start its CRI plugin? Its plugin list decides, else its log, else the
    load rules applied to the config (which also say what a restart will do)."""
    rules = tuple(load_rules(view))
    ev: dict[str, Any] = {
        "rules": [f"{r.status}: {r.name} ({r.plugin}): {r.message}" for r in rules],
        "config_source": view.source,
    }
    order = CRI_PLUGINS_1 if view.major is not None and view.major < 2 else CRI_PLUGINS_2
    if plugins is not None:
        cri = {p.name: p for p in plugins if p.name in (*CRI_PLUGINS_2,)}
        ev["plugins"] = {k: p.status + (f": {p.error}" if p.error else "")
                         for k, p in cri.items()}
        if not cri:
            return CriLoad(False, "ctr plugins ls -d", CRI_V2,
                           "the CRI plugin is not in containerd's plugin list (built without "
                           "CRI, or disabled_plugins lists it)", rules, ev)
        failed = {k: p.error or p.status for k, p in cri.items() if p.status != "ok"}
        if failed:
            p, err = _root_failure(failed, order)
            return CriLoad(False, "ctr plugins ls -d", p, err, rules, ev)
        return CriLoad(True, "ctr plugins ls -d", rules=rules, evidence=ev)
    if plugins_error:
        ev["plugins_error"] = plugins_error
    failed = {k: v for k, v in load_failures(log).items() if k in CRI_PLUGINS_2}
    if failed:
        p, err = _root_failure(failed, order)
        ev["log"] = failed
        return CriLoad(False, "containerd's log", p, err, rules, ev)
    broken = [r for r in rules if r.status == "broken"]
    src = f"load rules applied to {view.source}"
    if broken:
        return CriLoad(False, src, broken[0].plugin, broken[0].message, rules, ev)
    if any(r.status == "unchecked" for r in rules):
        return CriLoad(None, src, rules=rules, evidence=ev)
    return CriLoad(True, src, rules=rules, evidence=ev)


# -- applying an edit ------------------------------------------------------------------------
_BARE = re.compile(r"[A-Za-z0-9_-]+")


def toml_key(k: str) -> str:
    return k if _BARE.fullmatch(k) else '"' + k.replace("\\", "\\\\").replace('"', '\\"') + '"'


def toml_header(table: tuple[str, ...]) -> str:
    return "[" + ".".join(toml_key(t) for t in table) + "]"


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


_HEADER = re.compile(r"^\s*\[(?!\[)(.*?)\]\s*(#.*)?$")
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_-]+|\"[^\"]*\")\s*=")


def _parse_header(inner: str) -> tuple[str, ...] | None:
    try:
        data = tomllib.loads(f"[{inner}]")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    d: Any = data
    while isinstance(d, Mapping) and len(d) == 1:
        k = next(iter(d))
        path.append(k)
        d = d[k]
    return tuple(path)


def apply_edit(text: str, e: Edit) -> str:
    """``text`` with the edit applied: the key set (or deleted) inside its existing table,
    or the table appended when the file has none. The caller checks the result parses."""
    lines = text.splitlines(keepends=True)
    start = end = None
    for i, ln in enumerate(lines):
        m = _HEADER.match(ln)
        if not m:
            continue
        if start is not None:
            end = i
            break
        if _parse_header(m.group(1)) == e.table:
            start = i
    new = f"{toml_key(e.key)} = {toml_value(e.value)}\n"
    if start is None:
        if e.delete:
            return text
        sep = "" if not text or text.endswith("\n") else "\n"
        return f"{text}{sep}\n{toml_header(e.table)}\n  {new}"
    end = len(lines) if end is None else end
    for i in range(start + 1, end):
        m = _KEY.match(lines[i])
        if m and m.group(2).strip('"') == e.key:
            lines[i] = "" if e.delete else f"{m.group(1)}{new}"
            return "".join(lines)
    if e.delete:
        return text
    lines.insert(start + 1, f"  {new}")
    return "".join(lines)


def config_view(ev: RuntimeEvidence) -> ConfigView:
    """The config as the node's containerd reads it (its dump when it answered)."""
    major, _why = containerd_major(ev)
    files = tuple((f.path, f.data) for f in (ev.main, *ev.imports) if f.text is not None)
    return ConfigView(ev.effective, major, ev.config_version, ev.dump_ok, files,
                      ev.effective_source, ev.config_path)


def cri_state(ev: RuntimeEvidence) -> CriLoad:
    """:func:`cri_load` for the runtime layer's evidence."""
    return cri_load(list(ev.plugins) if ev.plugins is not None else None, ev.plugins_error,
                    list(ev.log), config_view(ev))


def render_edits(edits: list[Edit] | tuple[Edit, ...]) -> str:
    """The edits as one instruction: keys of a table the file lacks go under one new
    header; keys of an existing table are set there (never a second header: TOML forbids
    defining a table twice)."""
    parts: list[str] = []
    new: dict[tuple[str, tuple[str, ...]], list[Edit]] = {}
    for e in edits:
        if e.table_exists or e.delete:
            parts.append(e.describe())
        else:
            new.setdefault((e.file, e.table), []).append(e)
    for (f, table), es in new.items():
        body = "\n".join(f"  {toml_key(e.key)} = {toml_value(e.value)}" for e in es)
        parts.append(f"add to {f}:\n{toml_header(table)}\n{body}")
    return "; ".join(parts)


def nri_edits(ev: RuntimeEvidence, socket_path: str, default_socket: str) -> list[Edit]:
    """What turns NRI on in this node's config: ``disable = false`` set in the
    ``[plugins."io.containerd.nri.v1.nri"]`` table the node already has (in the file
    containerd takes it from), else that table added with ``disable = false`` (and the
    profile's socket path when it is not containerd's default)."""
    view = config_view(ev)
    nri = "io.containerd.nri.v1.nri"
    edits = [view.edit(nri, (), "disable", False)]
    sec = view.section(nri) or {}
    want_sock = socket_path != default_socket and sec.get("socket_path") != socket_path
    if want_sock and not edits[0].table_exists:
        edits.append(view.edit(nri, (), "socket_path", socket_path))
    return edits


def apply_edits(files: Mapping[str, str], edits: list[Edit] | tuple[Edit, ...]) -> dict[str, str]:
    """Every edit applied to its file (a file the node lacks starts empty)."""
    out = dict(files)
    for e in edits:
        out[e.file] = apply_edit(out.get(e.file, ""), e)
    return out
