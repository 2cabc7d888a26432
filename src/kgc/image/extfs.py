"""Reading ext2/3/4 filesystems inside an image file with e2fsprogs' ``debugfs``, read-only
(``-c``: catastrophic mode, opens the device read-only without reading bitmaps), in user
space: no mount, no loop device, no kernel module.

:class:`ExtFS` lists directories, reads symlinks and copies file contents by inode number
(so no name from the image ever reaches debugfs's command parser). :class:`Vfs` joins the
root filesystem with others mounted below it (``/boot`` from ``/etc/fstab``) and resolves
paths and globs the way the node would see them: symlinks are followed inside the image
(an absolute target starts at the image's root, ``..`` stops at it), never on the host.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from kgc.image.disk import ImageError

ROOT_INO = 2
DEBUGFS_TIMEOUT_S = 300
MAX_SYMLINKS = 40
# one `ls -p` entry; a name cannot hold "/" but may hold newlines (debugfs prints it raw), so
# entries are matched over the whole listing, not line by line
_LS = re.compile(r"^/(\d+)/([0-7]{1,7})/(\d+)/(\d+)/([^/]*)/(\d*)/$", re.M)
_FAST_LINK = re.compile(r'Fast link dest: "(.*)"\s*$', re.M)

KIND = {0o04: "dir", 0o10: "file", 0o12: "link", 0o14: "socket", 0o02: "chardev",
        0o06: "blockdev", 0o01: "fifo"}


@dataclass(frozen=True)
class Entry:
    ino: int
    mode: int  # full st_mode
    uid: int
    gid: int
    size: int

    @property
    def kind(self) -> str:
        return KIND.get((self.mode >> 12) & 0o17, "other")

    @property
    def perm(self) -> int:
        return self.mode & 0o7777


def parse_ls(text: str) -> dict[str, Entry] | None:
    """``ls -p`` output -> name -> entry (None: nothing listed, i.e. not a directory)."""
    out: dict[str, Entry] = {}
    seen = False
    for m in _LS.finditer(text):
        seen = True
        ino, mode, uid, gid, name, size = m.groups()
        if name in (".", "..") or not name:
            continue
        out[name] = Entry(int(ino), int(mode, 8), int(uid), int(gid), int(size or 0))
    return out if seen else None


class ExtFS:
    """One ext filesystem at ``offset`` bytes into ``device`` (a raw file)."""

    def __init__(self, device: Path, offset: int, scratch: Path, name: str = "/") -> None:
        if shutil.which("debugfs") is None:
            raise ImageError("debugfs not found: install e2fsprogs")
        self.spec = f"{device}?offset={offset}" if offset else str(device)
        if "\n" in self.spec:
            raise ImageError("image path with a newline")
        self.scratch = scratch
        self.name = name
        self._dirs: dict[int, dict[str, Entry] | None] = {}
        self._links: dict[int, str] = {}
        self.runs = 0
        self.bytes_copied = 0
        self.root = Entry(ROOT_INO, 0o040755, 0, 0, 0)
        self._open_check()

    # -- debugfs -----------------------------------------------------------------------
    def _run(self, commands: list[str]) -> list[str]:
        """Run commands in one debugfs; the stdout of each, in order."""
        if not commands:
            return []
        cmdfile = self.scratch / f"debugfs-{self.runs}.cmd"
        cmdfile.write_text("".join(c + "\n" for c in commands))
        self.runs += 1
        try:
            res = subprocess.run(["debugfs", "-c", "-f", str(cmdfile), self.spec],
                                 capture_output=True, timeout=DEBUGFS_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ImageError(f"debugfs on {self.name} took longer than {DEBUGFS_TIMEOUT_S} s"
                             ) from None
        finally:
            cmdfile.unlink(missing_ok=True)
        err = res.stderr.decode("utf-8", "replace")
        if "while trying to open" in err or "while opening filesystem" in err or \
                "Bad magic number" in err:
            first = next((ln for ln in err.splitlines() if "while" in ln or "magic" in ln), err)
            raise ImageError(f"the {self.name} filesystem cannot be opened: "
                             f"{' '.join(first.split())[:200]}")
        out = res.stdout.decode("utf-8", "surrogateescape")
        # with -f, debugfs echoes every command as "debugfs: CMD" before its output; the
        # echo of the NEXT command (index `nxt`) opens a new section
        sections: list[str] = []
        cur: list[str] | None = None
        nxt = 0
        for line in out.split("\n"):
            if nxt < len(commands) and line.startswith("debugfs: ") and \
                    line[len("debugfs: "):].strip() == commands[nxt].strip():
                if cur is not None:
                    sections.append("\n".join(cur))
                cur = []
                nxt += 1
                continue
            if cur is not None:
                cur.append(line)
        if cur is not None:
            sections.append("\n".join(cur))
        # a file name with a newline could hold "debugfs: <the next command>" and so cut a
        # section short: the real echo would then sit inside a later section
        echoes = {"debugfs: " + c.strip() for c in commands}
        if any(ln in echoes for sec in sections for ln in sec.split("\n")):
            raise ImageError(f"the {self.name} filesystem holds a file name that forges "
                             "debugfs's output (a newline and a command echo): refusing")
        while len(sections) < len(commands):
            sections.append("")
        return sections

    def _open_check(self) -> None:
        listing = self._run(["ls -p <2>"])[0]
        root = parse_ls(listing)
        if root is None:
            raise ImageError(f"the {self.name} filesystem has no readable root directory: "
                             "corrupt or truncated")
        self._dirs[ROOT_INO] = root

    # -- reading -----------------------------------------------------------------------
    def listdirs(self, inos: Iterable[int]) -> None:
        """List several directories in one debugfs run (cached)."""
        todo = [i for i in dict.fromkeys(inos) if i not in self._dirs]
        for ino, text in zip(todo, self._run([f"ls -p <{i}>" for i in todo]), strict=True):
            self._dirs[ino] = parse_ls(text)

    def listdir(self, ino: int) -> dict[str, Entry] | None:
        if ino not in self._dirs:
            self.listdirs([ino])
        return self._dirs[ino]

    def readlinks(self, inos: Iterable[int]) -> None:
        todo = [i for i in dict.fromkeys(inos) if i not in self._links]
        slow = []
        for ino, text in zip(todo, self._run([f"stat <{i}>" for i in todo]), strict=True):
            m = _FAST_LINK.search(text)
            if m:
                self._links[ino] = m.group(1)
            else:
                slow.append(ino)
        if slow:
            got = self.copy({i: self.scratch / f"link-{i}" for i in slow}, 4096)
            for i in slow:
                p = got.get(i)
                self._links[i] = p.read_bytes().decode("utf-8", "surrogateescape") if p else ""
                if p:
                    p.unlink()

    def readlink(self, ino: int) -> str:
        if ino not in self._links:
            self.readlinks([ino])
        return self._links[ino]

    def copy(self, wanted: Mapping[int, Path], max_bytes: int) -> dict[int, Path]:
        """Copy file contents (by inode) to the given paths; returns what was copied."""
        cmds = []
        for ino, dest in wanted.items():
            if any(c in str(dest) for c in ' "\n\t\\'):
                raise ImageError(f"internal: unsafe scratch path {dest}")
            cmds.append(f"dump <{ino}> {dest}")
        self._run(cmds)
        out = {}
        for ino, dest in wanted.items():
            if dest.is_file():
                size = dest.stat().st_size
                if size > max_bytes:
                    dest.unlink()
                    continue
                self.bytes_copied += size
                out[ino] = dest
        return out


@dataclass(frozen=True)
class Node:
    fs: ExtFS
    entry: Entry
    canon: str  # the path without symlinks, in the image's namespace

    @property
    def kind(self) -> str:
        return self.entry.kind


class Vfs:
    """The image's directory tree: the root filesystem plus mounts below it."""

    def __init__(self, root: ExtFS) -> None:
        self.mounts: dict[str, ExtFS] = {"/": root}
        self.unread_mounts: dict[str, str] = {}  # mount point -> why it is not readable

    def mount(self, point: str, fs: ExtFS) -> None:
        self.mounts[posixpath.normpath(point)] = fs

    def _root_of(self, canon: str) -> Node | None:
        fs = self.mounts.get(canon)
        return Node(fs, fs.root, canon) if fs is not None else None

    def _child(self, parent: Node, name: str) -> Node | None:
        if parent.kind != "dir":
            return None
        entries = parent.fs.listdir(parent.entry.ino)
        if entries is None or name not in entries:
            return None
        canon = posixpath.join(parent.canon, name)
        mounted = self._root_of(canon)
        return mounted if mounted is not None else Node(parent.fs, entries[name], canon)

    def lookup(self, path: str, follow: bool = True) -> Node | None:
        """The node at ``path`` (following symlinks inside the image; the last component
        only when ``follow``). None when it does not exist or a symlink loops."""
        root = self._root_of("/")
        assert root is not None
        stack = [root]
        comps = [c for c in path.split("/") if c]
        hops = 0
        i = 0
        while i < len(comps):
            c = comps[i]
            if c == ".":
                i += 1
                continue
            if c == "..":
                if len(stack) > 1:
                    stack.pop()
                i += 1
                continue
            node = self._child(stack[-1], c)
            if node is None:
                return None
            last = i == len(comps) - 1
            if node.kind == "link" and (follow or not last):
                hops += 1
                if hops > MAX_SYMLINKS:
                    return None
                target = node.fs.readlink(node.entry.ino)
                if not target:
                    return None
                if target.startswith("/"):
                    stack = [root]
                comps = [x for x in target.split("/") if x] + comps[i + 1:]
                i = 0
                continue
            stack.append(node)
            i += 1
        return stack[-1]

    def glob(self, pattern: str) -> list[tuple[str, Node]]:
        """Paths matching a shell glob, as the shell on the node would expand them
        (``*`` does not match a leading dot); each with its node (not following the last
        symlink)."""
        comps = [c for c in pattern.split("/") if c]
        paths = [""]
        for n, c in enumerate(comps):
            last = n == len(comps) - 1
            nxt: list[str] = []
            if not any(ch in c for ch in "*?["):
                nxt = [f"{p}/{c}" for p in paths]
            else:
                dirs = [(p, self.lookup(p or "/")) for p in paths]
                for fs in {id(d.fs): d.fs for _p, d in dirs if d is not None}.values():
                    fs.listdirs(d.entry.ino for _p, d in dirs if d is not None and d.fs is fs
                                and d.kind == "dir")
                for p, d in dirs:
                    if d is None or d.kind != "dir":
                        continue
                    for name in sorted(d.fs.listdir(d.entry.ino) or {}):
                        if name.startswith(".") and not c.startswith("."):
                            continue
                        if fnmatch.fnmatchcase(name, c):
                            nxt.append(f"{p}/{name}")
            if not last:
                # prefetch the next level's directories in one run per filesystem
                nodes = [self.lookup(p) for p in nxt]
                nxt = [p for p, nd in zip(nxt, nodes, strict=True)
                       if nd is not None and nd.kind == "dir"]
            paths = nxt
            if not paths:
                return []
        out = []
        for p in paths:
            node = self.lookup(p, follow=False)
            if node is not None:
                out.append((p, node))
        return out
