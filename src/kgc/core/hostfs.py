"""Batched, read-only evidence collection from a host.

Every host layer declares a :class:`HostQuery` (file globs to read, links to resolve,
directories to list, files to stat, commands to run). The union of all layers' queries
becomes ONE POSIX shell script, run once per node through whatever transport the target
uses (local, ssh, chroot, kubectl via testinfra). The script's size does not depend on the
number of devices: it expands globs on the node. Its output is parsed into a
:class:`HostSnapshot`, which is plain JSON-able data: the same snapshot can be saved as an
evidence bundle and evaluated offline with identical results.

The script writes nothing on the node. ``KGC_ROOT`` (empty by default) prefixes every path,
so a directory tree shaped like ``/sys`` and ``/proc`` can be read through the very same code.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import posixpath
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kgc.core.model import EvidenceError

MAX_FILE_BYTES = 262144


@dataclass(frozen=True)
class HostQuery:
    files: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    stats: tuple[str, ...] = ()
    commands: tuple[tuple[str, str], ...] = ()

    def __or__(self, other: HostQuery) -> HostQuery:
        def merge(a: Iterable[Any], b: Iterable[Any]) -> tuple[Any, ...]:
            return tuple(dict.fromkeys([*a, *b]))

        return HostQuery(
            files=merge(self.files, other.files),
            links=merge(self.links, other.links),
            dirs=merge(self.dirs, other.dirs),
            stats=merge(self.stats, other.stats),
            commands=merge(self.commands, other.commands),
        )


# Characters a query path may hold. Everything else -- quotes, `$`, backquotes, backslashes,
# blanks, braces, `~`, `#`, `;&|<>()`, control characters -- is refused, so a path pasted
# into the script can only ever be one word (with * ? [ ] left for the node's glob).
_PATH_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./*?[]:+,=@%-"
)


def _glob_words(pattern: str) -> str:
    """Render a path glob for sh: root prefix quoted, glob part left for expansion."""
    if not pattern.startswith("/"):
        raise ValueError(f"query paths must be absolute: {pattern!r}")
    for ch in pattern:
        if ch not in _PATH_CHARS:
            raise ValueError(f"unsupported character {ch!r} in query path {pattern!r}")
    return '"$R"' + pattern


def _shell_quote(s: str) -> str:
    return "'" + s.replace("'", "'\"'\"'") + "'"


# Reads every listed file in ONE process: the per-file cost is a getline loop, not a fork.
# Contents come back line by line, so a non-empty file always ends with a newline.
_AWK_READ = (
    "BEGIN { for (i = 1; i < ARGC; i++) { f = ARGV[i]; "
    'printf "%s F %s\\n", B, substr(f, length(R) + 1); n = 0; '
    "while ((r = (getline line < f)) > 0) { if (n < M) print line; n += length(line) + 1 } "
    'close(f); printf "%s R %d\\n", B, (r < 0) } exit }'
)


def build_script(query: HostQuery, boundary: str) -> str:
    """One read-only POSIX sh script that answers the whole query.

    The number of processes it starts does not grow with the number of files: globs are
    expanded and filtered by shell builtins, all files are read by one awk, all link targets
    by one ``ls``, directories are listed with builtins. Only stats and commands fork each.
    """
    b = boundary
    lines = [
        'R="${KGC_ROOT:-}"',
        f"B='{b}'",
        "export LC_ALL=C",
        'ex() { [ -e "$1" ] || [ -L "$1" ]; }',
        "printf '%s V 2\\n' \"$B\"",
        "set --",
    ]
    for pat in query.files:
        lines.append(
            f'for p in {_glob_words(pat)}; do ex "$p" || continue; [ -d "$p" ] && continue; '
            'set -- "$@" "$p"; done'
        )
    lines.append(
        f'[ $# -gt 0 ] && awk -v B="$B" -v R="$R" -v M={MAX_FILE_BYTES} \'{_AWK_READ}\' "$@" '
        "2>/dev/null"
    )
    lines.append("set --")
    for pat in query.links:
        lines.append(f'for p in {_glob_words(pat)}; do [ -L "$p" ] && set -- "$@" "$p"; done')
    lines.append(
        'if [ $# -gt 0 ]; then printf \'%s LS %s\\n\' "$B" "$R"; ls -ld -- "$@" 2>/dev/null; '
        "printf '%s R 0\\n' \"$B\"; fi"
    )
    for pat in query.dirs:
        lines.append(
            f'for p in {_glob_words(pat)}; do [ -d "$p" ] || continue; '
            'printf \'%s D %s\\n\' "$B" "${p#"$R"}"; '
            'for e in "$p"/* "$p"/.[!.]* "$p"/..?*; do ex "$e" && printf \'%s\\n\' "${e##*/}"; '
            "done; printf '%s R 0\\n' \"$B\"; done"
        )
    for pat in query.stats:
        # A link also reports what it resolves to (kind|mode|size, or `missing`): a link
        # target that is absolute is looked up inside the root, as the node would see it.
        lines.append(
            f'for p in {_glob_words(pat)}; do ex "$p" || continue; '
            'printf \'%s S %s\\n\' "$B" "${p#"$R"}"; '
            "s=$(stat -c '%F|%a|%U|%G|%s' -- \"$p\" 2>/dev/null) || s='?'; "
            'if [ -L "$p" ]; then l=$(readlink -- "$p"); case "$l" in /*) t="$R$l";; '
            '*) t="${p%/*}/$l";; esac; '
            "s=\"$s|$(stat -L -c '%F|%a|%s' -- \"$t\" 2>/dev/null || echo 'missing||')\"; fi; "
            'printf \'%s\\n\' "$s"; done'
        )
    for name, cmd in query.commands:
        if not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise ValueError(f"bad command name {name!r}")
        lines.append(
            f"printf '%s C %s\\n' \"$B\" {_shell_quote(name)}; "
            f'( {cmd} ) </dev/null 2>&1; rc=$?; printf \'\\n%s R %s\\n\' "$B" "$rc"'
        )
    lines.append("printf '%s END\\n' \"$B\"")
    return "\n".join(lines) + "\n"


def new_boundary() -> str:
    return f"@@KGC-{secrets.token_hex(8)}@@"


@dataclass(frozen=True)
class CommandResult:
    rc: int
    output: str


@dataclass(frozen=True)
class StatResult:
    kind: str  # "socket", "regular file", "directory", ... as stat(1) %F prints it
    mode: str  # octal permission bits, e.g. "660"
    owner: str
    group: str
    size: int
    # for a symbolic link: what it points at ("missing" when the target does not exist),
    # its permission bits and size; None for anything that is not a link (or old bundles)
    target_kind: str | None = None
    target_mode: str | None = None
    target_size: int | None = None

    @property
    def is_link(self) -> bool:
        return self.kind == "symbolic link"

    @property
    def dangling(self) -> bool:
        return self.is_link and self.target_kind == "missing"

    def resolved(self) -> tuple[str | None, str | None, int | None]:
        """(kind, mode, size) of what the path finally is: the link target for a link
        (all None when the collector did not resolve it), else the path itself."""
        if self.is_link:
            return self.target_kind, self.target_mode, self.target_size
        return self.kind, self.mode, self.size

    def executable(self) -> bool | None:
        """Any execute bit on what the path resolves to (None: unknown)."""
        _kind, mode, _size = self.resolved()
        if mode is None:
            return None
        try:
            return bool(int(mode, 8) & 0o111)
        except ValueError:
            return None


# -- shape checks for recorded evidence (bundles): one EvidenceError line naming the field --
def _where(prefix: str, key: object) -> str:
    return f"{prefix}[{key!r}]"


def want_mapping(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise EvidenceError(f"{where}: expected an object, got {_kind(v)}")
    for k in v:
        if not isinstance(k, str):
            raise EvidenceError(f"{where}: keys must be text, got {_kind(k)}")
    return v


def want_str(v: Any, where: str, *, optional: bool = False) -> Any:
    if v is None and optional:
        return None
    if not isinstance(v, str):
        raise EvidenceError(f"{where}: expected text, got {_kind(v)}")
    return v


def want_int(v: Any, where: str, *, optional: bool = False) -> Any:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise EvidenceError(f"{where}: expected an integer, got {_kind(v)}")
    return v


def want_number(v: Any, where: str, *, optional: bool = False) -> Any:
    if v is None and optional:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise EvidenceError(f"{where}: expected a number, got {_kind(v)}")
    return v


def want_bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise EvidenceError(f"{where}: expected true or false, got {_kind(v)}")
    return v


def want_list(v: Any, where: str) -> list[Any]:
    if not isinstance(v, list | tuple):
        raise EvidenceError(f"{where}: expected a list, got {_kind(v)}")
    return list(v)


def _names(keys: list[str]) -> str:
    """Field names taken from the record, quoted: one of them may hold a newline, and an
    ``EvidenceError`` is one line."""
    return ", ".join(repr(k) for k in keys)


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, int | float):
        return f"a number ({v!r})"
    if isinstance(v, str):
        return "text"
    if isinstance(v, Mapping):
        return "an object"
    if isinstance(v, list | tuple):
        return "a list"
    return type(v).__name__


_STAT_FIELDS = ("kind", "mode", "owner", "group", "size")
_STAT_OPTIONAL = ("target_kind", "target_mode", "target_size")


def _stat_from(v: Any, where: str) -> StatResult:
    d = want_mapping(v, where)
    unknown = sorted(set(d) - set(_STAT_FIELDS) - set(_STAT_OPTIONAL))
    if unknown:
        raise EvidenceError(f"{where}: unknown field(s) {_names(unknown)}")
    missing = [k for k in _STAT_FIELDS if k not in d]
    if missing:
        raise EvidenceError(f"{where}: missing field(s) {', '.join(missing)}")
    return StatResult(
        kind=want_str(d["kind"], f"{where}.kind"),
        mode=want_str(d["mode"], f"{where}.mode"),
        owner=want_str(d["owner"], f"{where}.owner"),
        group=want_str(d["group"], f"{where}.group"),
        size=want_int(d["size"], f"{where}.size"),
        target_kind=want_str(d.get("target_kind"), f"{where}.target_kind", optional=True),
        target_mode=want_str(d.get("target_mode"), f"{where}.target_mode", optional=True),
        target_size=want_int(d.get("target_size"), f"{where}.target_size", optional=True),
    )


def _command_from(v: Any, where: str) -> CommandResult:
    d = want_mapping(v, where)
    unknown = sorted(set(d) - {"rc", "output"})
    if unknown:
        raise EvidenceError(f"{where}: unknown field(s) {_names(unknown)}")
    if "rc" not in d or "output" not in d:
        raise EvidenceError(f"{where}: needs both rc and output")
    return CommandResult(want_int(d["rc"], f"{where}.rc"),
                         want_str(d["output"], f"{where}.output"))


@dataclass(frozen=True)
class HostSnapshot:
    """What a node answered: plain data, JSON round-trippable, safe to evaluate offline."""

    files: Mapping[str, str] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)
    dirs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    stats: Mapping[str, StatResult] = field(default_factory=dict)
    commands: Mapping[str, CommandResult] = field(default_factory=dict)
    errors: Mapping[str, str] = field(default_factory=dict)
    complete: bool = True

    def __post_init__(self) -> None:
        # every parser relies on these shapes: a wrong one is refused here, named, once
        for name in ("files", "links", "errors"):
            for k, v in want_mapping(getattr(self, name), f"host.{name}").items():
                want_str(v, f"host.{_where(name, k)}")
        for k, v in want_mapping(self.dirs, "host.dirs").items():
            if not isinstance(v, tuple) or not all(isinstance(e, str) for e in v):
                raise EvidenceError(f"host.{_where('dirs', k)}: expected a tuple of names")
        for k, v in want_mapping(self.stats, "host.stats").items():
            if not isinstance(v, StatResult):
                raise EvidenceError(f"host.{_where('stats', k)}: expected a stat result")
        for k, v in want_mapping(self.commands, "host.commands").items():
            if not isinstance(v, CommandResult):
                raise EvidenceError(f"host.{_where('commands', k)}: expected a command result")
        want_bool(self.complete, "host.complete")

    # -- reading --------------------------------------------------------------------
    def read(self, path: str) -> str | None:
        return self.files.get(path)

    def text(self, path: str) -> str | None:
        """File content stripped of surrounding whitespace, or None when absent."""
        v = self.files.get(path)
        return None if v is None else v.strip()

    def listdir(self, path: str) -> tuple[str, ...] | None:
        return self.dirs.get(path.rstrip("/") or "/")

    def link(self, path: str) -> str | None:
        return self.links.get(path)

    def link_name(self, path: str) -> str | None:
        """Last component of a symlink's target (``driver`` -> ``vfio-pci``)."""
        t = self.links.get(path)
        return None if t is None else posixpath.basename(t.rstrip("/"))

    def exists(self, path: str) -> bool:
        return (
            path in self.files
            or path in self.links
            or path in self.dirs
            or path in self.stats
            or path in self.errors
        )

    def glob(self, pattern: str) -> list[str]:
        known = set(self.files) | set(self.links) | set(self.dirs) | set(self.stats)
        return sorted(p for p in known if fnmatch.fnmatchcase(p, pattern))

    def command(self, name: str) -> CommandResult | None:
        return self.commands.get(name)

    # -- (de)serialisation -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "files": dict(self.files),
            "links": dict(self.links),
            "dirs": {k: list(v) for k, v in self.dirs.items()},
            "stats": {k: {f: x for f, x in vars(v).items()
                          if x is not None or f not in _STAT_OPTIONAL}
                      for k, v in self.stats.items()},
            "commands": {k: vars(v) for k, v in self.commands.items()},
            "errors": dict(self.errors),
            "complete": self.complete,
        }

    @classmethod
    def from_dict(cls, d: Any, where: str = "host") -> HostSnapshot:
        """Load a recorded snapshot. Anything of the wrong shape raises one
        :class:`EvidenceError` line naming the field (``host.files['/x']: expected text``).
        ``complete`` is kept as recorded: an incomplete snapshot stays detectable."""
        d = want_mapping(d, where)

        def part(name: str) -> Mapping[str, Any]:
            return want_mapping(d.get(name, {}), f"{where}.{name}")

        def texts(name: str) -> dict[str, str]:
            return {k: want_str(v, f"{where}.{_where(name, k)}") for k, v in part(name).items()}

        dirs: dict[str, tuple[str, ...]] = {}
        for k, v in part("dirs").items():
            w = f"{where}.{_where('dirs', k)}"
            dirs[k] = tuple(want_str(e, f"{w}[{i}]") for i, e in enumerate(want_list(v, w)))
        return cls(
            files=texts("files"),
            links=texts("links"),
            dirs=dirs,
            stats={k: _stat_from(v, f"{where}.{_where('stats', k)}")
                   for k, v in part("stats").items()},
            commands={k: _command_from(v, f"{where}.{_where('commands', k)}")
                      for k, v in part("commands").items()},
            errors=texts("errors"),
            complete=want_bool(d.get("complete", True), f"{where}.complete"),
        )


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def parse_output(output: str, boundary: str) -> HostSnapshot:
    """Parse the script's output. Never raises: garbage yields an incomplete snapshot."""
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    dirs: dict[str, tuple[str, ...]] = {}
    stats: dict[str, StatResult] = {}
    commands: dict[str, CommandResult] = {}
    errors: dict[str, str] = {}
    complete = False
    version = "2"
    b = boundary + " "

    lines = output.split("\n")
    i = 0
    n = len(lines)

    def collect_until_rc(start: int) -> tuple[list[str], int, int]:
        body: list[str] = []
        j = start
        while j < n:
            if lines[j].startswith(b + "R "):
                try:
                    rc = int(lines[j][len(b) + 2 :].strip())
                except ValueError:
                    rc = -1
                return body, rc, j + 1
            if lines[j].startswith(b):
                return body, -1, j  # truncated record
            body.append(lines[j])
            j += 1
        return body, -1, j

    while i < n:
        line = lines[i]
        if not line.startswith(b):
            i += 1
            continue
        kind, _, rest = line[len(b) :].partition(" ")
        if kind == "V":
            version = rest.strip()
            i += 1
            continue
        if kind == "END":
            complete = True
            i += 1
            continue
        if kind == "F":
            body, rc, i = collect_until_rc(i + 1)
            if version == "1":
                # v1 printed the raw bytes, then one newline: the join restores them exactly
                content = "\n".join(body)
            else:
                # v2: awk prints each line with its newline: a non-empty file ends with one
                content = "\n".join(body) + "\n" if body else ""
            if rc == 0:
                files[rest] = content
            else:
                errors[rest] = f"unreadable (exit {rc})"
        elif kind == "L":  # v1: one link per record, its target on the next line
            links[rest] = lines[i + 1] if i + 1 < n else ""
            i += 2
        elif kind == "LS":
            # `ls -ld` of every link: "... <root><path> -> <target>"
            root = rest
            body, _rc, i = collect_until_rc(i + 1)
            for row in body:
                left, sep, target = row.partition(" -> ")
                if not sep:
                    continue
                path = (
                    left[left.find(" " + root + "/") + 1 :] if root else left[left.find(" /") + 1 :]
                )
                if root and path.startswith(root):
                    path = path[len(root) :]
                if path.startswith("/"):
                    links[path] = target
        elif kind == "D":
            body, rc, i = collect_until_rc(i + 1)
            if rc == 0:
                dirs[rest.rstrip("/") or "/"] = tuple(e for e in body if e)
            else:
                errors[rest] = f"directory unreadable (exit {rc})"
        elif kind == "S":
            raw = lines[i + 1] if i + 1 < n else ""
            parts = raw.split("|")
            if len(parts) in (5, 8):
                st = StatResult(parts[0], parts[1], parts[2], parts[3], _int(parts[4]))
                if len(parts) == 8:
                    st = dataclasses.replace(
                        st, target_kind=parts[5] or "missing", target_mode=parts[6] or None,
                        target_size=_int(parts[7]) if parts[7] else None)
                stats[rest] = st
            else:
                errors[rest] = "stat failed"
            i += 2
        elif kind == "C":
            body, rc, i = collect_until_rc(i + 1)
            commands[rest] = CommandResult(rc, "\n".join(body))
        else:
            i += 1
    return HostSnapshot(files, links, dirs, stats, commands, errors, complete)


def require_snapshot(snap: Any, layer: str) -> HostSnapshot:
    """A layer parser's guard: anything but a HostSnapshot is one named EvidenceError."""
    if not isinstance(snap, HostSnapshot):
        raise EvidenceError(f"{layer}: expected the node's host snapshot, got {_kind(snap)}")
    return snap
