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

# Bounds on what the collector reads from one node: a file larger than MAX_FILE_BYTES, or
# one that would take the node past MAX_NODE_BYTES in all, is not read; its record says so
# (HostSnapshot.truncated) and every check that needs its content is an error naming it.
MAX_FILE_BYTES = 262144
MAX_NODE_BYTES = 16 * 1024 * 1024


class FileNotRead(EvidenceError):
    """A check needs the content of a file the evidence does not hold whole: it was over the
    collector's limit (``truncated``), or it exists but could not be read as a config file
    (``unread``: a name with a newline, a FIFO or device, not re-created from an image). The
    engine turns it into an ``error`` for every check of the layer that read it, naming the
    file -- never a judgement on part of a file, never "absent"."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path
        self.why = why


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


# Reads every listed file in ONE awk, after ONE ``stat`` of them all: the per-file cost is a
# getline loop, not a fork. The files are awk's arguments, relative to the root (so a root
# whose name holds a newline cannot break stat's lines; awk takes them out of ARGV so it does
# not open them itself, and reads the root from the environment, unescaped); stat's lines
# ("SIZE MODE PATH", run from the root) come in on awk's standard input.
# A file is opened only when stat says it is a regular file no larger than the per-file limit
# M and the node's remaining byte budget T: a huge or newline-free file (a sparse 4 GiB
# placeholder) is never read at all, so reading is linear in what is read and bounded per
# node. (awk's getline on one long line is super-linear: 16 MiB 1.7 s, 64 MiB 85 s.) Each
# file's record ends with one line saying what the evidence holds:
#   R 0            read whole          R 1    could not be read (no stat answer, EACCES)
#   T SIZE LIMIT   not read whole: SIZE bytes (at least), over LIMIT (per file or budget)
#   U KIND         not a regular file (stat's mode letter: p fifo, c/b device, s socket)
_AWK_READ = (
    'BEGIN { R = ENVIRON["KGC_ROOT"]; n = ARGC - 1; for (i = 1; i < ARGC; i++) f[i] = ARGV[i]; '
    "ARGC = 1 } "
    "{ k = substr($0, length($1) + length($2) + 3); sz[k] = $1 + 0; md[k] = substr($2, 1, 1) } "
    "END { for (i = 1; i <= n; i++) { p = f[i]; "
    'printf "%s F /%s\\n", B, p; '
    'if (!(p in sz)) { printf "%s R 1\\n", B; continue } '
    'if (md[p] != "-") { printf "%s U %s\\n", B, md[p]; continue } '
    "lim = T - tot; if (lim > M) lim = M; "
    'if (sz[p] > lim) { printf "%s T %.0f %.0f\\n", B, sz[p], lim; continue } '
    "c = 0; cut = 0; q = R \"/\" p; "
    "while ((r = (getline line < q)) > 0) { c += length(line) + 1; "
    "if (c > lim) { cut = 1; break } print line } "
    "close(q); tot += cut ? lim : c; "
    'if (cut) printf "%s T %.0f %.0f\\n", B, c, lim; '
    'else printf "%s R %d\\n", B, (r < 0) } }'
)


def newline_name_fns() -> str:
    """``esc NAME`` sets ``o`` to NAME with each newline as the two characters ``\\n``
    (shell builtins only); ``odd PATH`` prints the record of a path whose name holds a
    newline (it could never be one record line): the path is listed, never read."""
    return ('esc() { s=$1; o=; while :; do case "$s" in *"$NL"*) '
            'o="$o${s%%"$NL"*}\\\\n"; s=${s#*"$NL"};; *) break;; esac; done; o="$o$s"; }\n'
            'odd() { esc "${1#"$R"}"; printf \'%s X %s\\n\' "$B" "$o"; }')


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
        "NL='\n'",
        "export LC_ALL=C",
        'ex() { [ -e "$1" ] || [ -L "$1" ]; }',
        newline_name_fns(),
        "printf '%s V 3\\n' \"$B\"",
        "set --",
    ]
    for pat in query.files:
        lines.append(
            f'for p in {_glob_words(pat)}; do ex "$p" || continue; [ -d "$p" ] && continue; '
            'case "${p#"$R"}" in *"$NL"*) odd "$p"; continue;; esac; set -- "$@" "${p#"$R"/}"; '
            "done"
        )
    lines.append(
        "[ $# -gt 0 ] && ( cd -- \"$R/\" && stat -L -c '%s %A %n' -- \"$@\" ) 2>/dev/null | "
        f'KGC_ROOT="$R" awk -v B="$B" -v M={MAX_FILE_BYTES} -v T={MAX_NODE_BYTES} '
        f"'{_AWK_READ}' \"$@\" 2>/dev/null"
    )
    lines.append("printf '%s FE\\n' \"$B\"")
    lines.append("set --")
    for pat in query.links:
        lines.append(f'for p in {_glob_words(pat)}; do [ -L "$p" ] || continue; '
                     'case "${p#"$R"}" in *"$NL"*) odd "$p"; continue;; esac; set -- "$@" "$p"; '
                     "done")
    lines.append(
        'if [ $# -gt 0 ]; then printf \'%s LS %s\\n\' "$B" "$R"; ls -ld -- "$@" 2>/dev/null; '
        "printf '%s R 0\\n' \"$B\"; fi"
    )
    for pat in query.dirs:
        lines.append(
            f'for p in {_glob_words(pat)}; do [ -d "$p" ] || continue; '
            'case "${p#"$R"}" in *"$NL"*) odd "$p"; continue;; esac; '
            'printf \'%s D %s\\n\' "$B" "${p#"$R"}"; '
            'for e in "$p"/* "$p"/.[!.]* "$p"/..?*; do ex "$e" || continue; '
            'case "${e##*/}" in *"$NL"*) esc "${e##*/}"; printf \'%s\\n\' "$o";; '
            '*) printf \'%s\\n\' "${e##*/}";; esac; '
            "done; printf '%s R 0\\n' \"$B\"; done"
        )
    for pat in query.stats:
        # A link also reports what it resolves to (kind|mode|size, or `missing`): a link
        # target that is absolute is looked up inside the root, as the node would see it.
        lines.append(
            f'for p in {_glob_words(pat)}; do ex "$p" || continue; '
            'case "${p#"$R"}" in *"$NL"*) odd "$p"; continue;; esac; '
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
    # files whose content is NOT in the evidence although they exist: path -> size in bytes
    # (over the collector's per-file limit or the node's byte budget), and path -> why
    # (a name with a newline -- kept with "\\n" for it --, not a regular file, not
    # re-created from an image). Reading either raises FileNotRead.
    truncated: Mapping[str, int] = field(default_factory=dict)
    unread: Mapping[str, str] = field(default_factory=dict)
    # command -> a file it reads whose content the evidence lacks (in truncated or unread):
    # kgc image answers a command from files it could not all re-create; command() raises
    command_gaps: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # every parser relies on these shapes: a wrong one is refused here, named, once
        for k, n in want_mapping(self.truncated, "host.truncated").items():
            want_int(n, f"host.{_where('truncated', k)}")
        for name in ("files", "links", "errors", "unread", "command_gaps"):
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
        """A file's content, or None when the node has no such file. Raises
        :class:`FileNotRead` when the file exists but its content is not (all) in the
        evidence: whatever is judged from it would be judged from part of it."""
        v = self.files.get(path)
        if v is None:
            self.require_whole(path)
        return v

    def require_whole(self, path: str) -> None:
        """Raise :class:`FileNotRead` if ``path`` is truncated or unread in this snapshot."""
        if path in self.truncated:
            raise FileNotRead(path, truncation_reason(self.truncated[path]))
        if path in self.unread:
            raise FileNotRead(path, self.unread[path])

    def text(self, path: str) -> str | None:
        """File content stripped of surrounding whitespace, or None when absent."""
        v = self.read(path)
        return None if v is None else v.strip()

    def file_paths(self) -> list[str]:
        """Every file the node has that the query matched, read or not (sorted): iterate
        these, not ``files``, so a file kept out of the evidence is never skipped."""
        return sorted(set(self.files) | set(self.truncated) | set(self.unread))

    def not_read(self) -> dict[str, str]:
        """Every existing file whose content the evidence lacks: path -> why."""
        out = {p: truncation_reason(n) for p, n in self.truncated.items()}
        out.update(self.unread)
        return out

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
            or path in self.truncated
            or path in self.unread
        )

    def glob(self, pattern: str) -> list[str]:
        """Known paths matching ``pattern``, including files whose content is not in the
        evidence (reading those raises): a glob never hides an existing file."""
        known = (set(self.files) | set(self.links) | set(self.dirs) | set(self.stats)
                 | set(self.truncated) | set(self.unread))
        return sorted(p for p in known if fnmatch.fnmatchcase(p, pattern))

    def command(self, name: str) -> CommandResult | None:
        """A command's result (None: not collected). Raises :class:`FileNotRead` when its
        answer rests on a file the evidence does not hold whole."""
        gap = self.command_gaps.get(name)
        if gap is not None:
            raise FileNotRead(gap, f"{self.not_read().get(gap, 'not in the evidence whole')} "
                              f"(read by the {name} command)")
        return self.commands.get(name)

    # -- (de)serialisation -----------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}  # absent when empty: older bundles stay byte-identical
        if self.truncated:
            extra["truncated"] = dict(self.truncated)
        if self.unread:
            extra["unread"] = dict(self.unread)
        if self.command_gaps:
            extra["command_gaps"] = dict(self.command_gaps)
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
            **extra,
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
            truncated={k: want_int(v, f"{where}.{_where('truncated', k)}")
                       for k, v in part("truncated").items()},
            unread=texts("unread"),
            command_gaps=texts("command_gaps"),
        )


def truncation_reason(size: int) -> str:
    """Why a truncated file's content is not in the evidence, in one phrase."""
    return (f"{size} bytes, over the collector's limit ({MAX_FILE_BYTES} bytes per file, "
            f"{MAX_NODE_BYTES} per node): its content was not read, so nothing is judged "
            "from it")


NEWLINE_NAME = ("its name holds a newline (shown as \\n): not read, since such a name could "
                "forge the collector's records")
NOT_REGULAR = {"p": "a FIFO", "c": "a character device", "b": "a block device",
               "s": "a socket", "l": "a symbolic link loop"}


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
    truncated: dict[str, int] = {}
    unread: dict[str, str] = {}
    complete = False
    files_done = False
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
            # v3: the file records end with FE; without it the reading stopped part-way
            complete = files_done or version in ("1", "2")
            i += 1
            continue
        if kind == "FE":
            files_done = True
            i += 1
            continue
        if kind == "X":
            unread[rest] = NEWLINE_NAME
            i += 1
            continue
        if kind == "F" and version not in ("1", "2"):
            j = i + 1
            while j < n and not lines[j].startswith(b):
                j += 1
            body = lines[i + 1 : j]
            end, _, arg = lines[j][len(b) :].partition(" ") if j < n else ("", "", "")
            i = j + 1 if end in ("R", "T", "U") else j
            if end == "T":
                truncated[rest] = max(0, _int(arg.split(" ")[0]))
            elif end == "U":
                unread[rest] = (f"{NOT_REGULAR.get(arg.strip(), 'not a regular file')}, not a "
                                "regular file: not read")
            elif end == "R" and arg.strip() == "0":
                files[rest] = "\n".join(body) + "\n" if body else ""
            else:
                errors[rest] = f"unreadable (exit {_int(arg.strip()) if end == 'R' else -1})"
        elif kind == "F":
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
    return HostSnapshot(files, links, dirs, stats, commands, errors, complete, truncated, unread)


def require_snapshot(snap: Any, layer: str) -> HostSnapshot:
    """A layer parser's guard: anything but a HostSnapshot is one named EvidenceError."""
    if not isinstance(snap, HostSnapshot):
        raise EvidenceError(f"{layer}: expected the node's host snapshot, got {_kind(snap)}")
    return snap
