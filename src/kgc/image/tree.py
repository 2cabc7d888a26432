"""Build a private directory tree holding exactly what the node layers' query reads from an
image, so the unchanged offline-tree path (a ``NodeTarget`` with ``root=``) judges it.

Safety: the tree is read by host tools (``awk``, ``grep``, ``stat``) that follow symlinks
on the HOST. An image's absolute symlink (``/etc/x -> /etc/shadow``) or one that climbs
above the root (``../../..``) would lead them out of the image. So every symlink is
re-created *relative*, pointing at the place it resolves to inside the image (or, when it
dangles, at a place inside the tree that does not exist). Device nodes, sockets and FIFOs
are not re-created (a FIFO would hang a reader); set-id bits are dropped; nothing is
executed.

A regular file the query only ``stat``s (e.g. the Kata shim binary) gets a sparse stand-in
of the same size and mode: its metadata is the image's, its content is never read. So does
a file whose content is wanted but is over the limits below: its stand-in is always larger
than the collector's per-file limit, so the collector marks it truncated (with its size)
and never reads the zeros -- and :meth:`TreeBuilder.gaps` names it, with every special file
and every file that could not be copied, by the paths the query reaches them through.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kgc.core import hostfs
from kgc.core.hostfs import HostQuery
from kgc.image.disk import ImageError
from kgc.image.extfs import Node, Vfs

MAX_FILE_BYTES = 64 * 1024 * 1024  # a config file larger than this is not a config file
MAX_TOTAL_BYTES = 1024 * 1024 * 1024
MAX_LISTED_FILE = 1024 * 1024  # entries of a listed directory: real content up to this size
MAX_COMMAND_FILE = 16 * 1024 * 1024  # what a collector command reads under $R
# a stand-in of an over-limit file must never be read as if it were the file
assert min(MAX_FILE_BYTES, MAX_LISTED_FILE, MAX_COMMAND_FILE) > hostfs.MAX_FILE_BYTES
# "$R"/path or "$R/path" in a collector command: the paths it reads inside the root
_CMD_PATH = re.compile(r'\$R"?(/[A-Za-z0-9_./*?\[\]:+,=@%-]*(?:\$[A-Za-z_]\w*[A-Za-z0-9_./*-]*)?)')


def command_paths(script: str) -> list[str]:
    """Globs for what a collector command reads under ``$R`` (``$var`` parts -> ``*``)."""
    out = []
    for m in _CMD_PATH.finditer(script):
        p = re.sub(r"\$[A-Za-z_]\w*", "*", m.group(1)).rstrip("/")
        if p and p != "/":
            out.append(p)
    return list(dict.fromkeys(out))


def _meta(p: Path, node: Node) -> None:
    """The image's permission bits (without set-id bits) and, as root, its owner ids."""
    if os.geteuid() == 0:
        os.chown(p, node.entry.uid, node.entry.gid, follow_symlinks=False)
    os.chmod(p, node.entry.perm & 0o1777)


@dataclass
class TreeStats:
    files: int = 0
    placeholders: int = 0
    links: int = 0
    dirs: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # path -> why not re-created
    too_big: dict[str, int] = field(default_factory=dict)  # content wanted, over the limit
    rewritten_links: int = 0


@dataclass(frozen=True)
class TreeGaps:
    """What the tree does not hold whole, by the paths the query reads (see
    :meth:`TreeBuilder.gaps`)."""

    truncated: dict[str, int] = field(default_factory=dict)  # path -> size, over the limit
    unread: dict[str, str] = field(default_factory=dict)  # path -> why not re-created
    commands: dict[str, str] = field(default_factory=dict)  # command -> such an input


class TreeBuilder:
    def __init__(self, vfs: Vfs, root: Path, scratch: Path) -> None:
        self.vfs = vfs
        self.root = root
        self.scratch = scratch
        self.stats = TreeStats()
        self._done: set[str] = set()
        self._content: set[str] = set()
        self._pending: dict[str, Node] = {}  # canonical path -> node whose content is wanted
        # how the query reaches each file whose content it wants: query path -> canonical
        # path it resolves to (None: dangling); and each command's inputs (canonical paths)
        self.reached: dict[str, str | None] = {}
        self.command_inputs: dict[str, set[str]] = {}

    # -- tree paths ----------------------------------------------------------------------
    def _host(self, canon: str) -> Path:
        rel = canon.lstrip("/")
        p = (self.root / rel) if rel else self.root
        if ".." in Path(rel).parts:
            raise ImageError(f"internal: path {canon!r} escapes the tree")
        return p

    def _mkdir(self, canon: str, node: Node | None = None) -> None:
        if canon in self._done:
            return
        parent = posixpath.dirname(canon)
        if parent != canon:
            self._ensure_canon_dir(parent)
        p = self._host(canon)
        p.mkdir(exist_ok=True)
        if node is not None:
            os.chmod(p, node.entry.perm & 0o1777 | 0o700)
        self._done.add(canon)
        self.stats.dirs += 1

    def _ensure_canon_dir(self, canon: str) -> None:
        if canon in ("", "/"):
            return
        if canon in self._done:
            return
        self._ensure_canon_dir(posixpath.dirname(canon))
        node = self.vfs.lookup(canon, follow=False)
        self._mkdir(canon, node if node is not None and node.kind == "dir" else None)

    def _link(self, orig_parent_canon: str, node: Node) -> None:
        """Re-create a symlink safely: relative, pointing where it resolves in the image."""
        if node.canon in self._done:
            return
        target = node.fs.readlink(node.entry.ino)
        resolved = self.vfs.lookup(node.canon, follow=True)
        if resolved is not None:
            dest = resolved.canon
        else:  # dangling: a lexical place inside the root that does not exist
            base = "/" if target.startswith("/") else orig_parent_canon
            dest = posixpath.normpath(posixpath.join(base, target))
            while dest.startswith("/.."):
                dest = dest[3:] or "/"
        rel = posixpath.relpath(dest, orig_parent_canon)
        if rel != target:
            self.stats.rewritten_links += 1
        self._ensure_canon_dir(orig_parent_canon)
        p = self._host(node.canon)
        if not (p.is_symlink() or p.exists()):
            os.symlink(rel, p)
        self._done.add(node.canon)
        self.stats.links += 1
        if resolved is not None and resolved.kind == "dir":
            self._ensure_canon_dir(resolved.canon)

    def mirror(self, path: str) -> None:
        """Re-create the directories and symlinks along ``path`` (as the node would walk
        it), so that the same path under the tree leads to the same place."""
        comps = [c for c in path.split("/") if c]
        cur = "/"
        walked = ""
        for c in comps[:-1]:
            walked = f"{walked}/{c}"
            node = self.vfs.lookup(walked, follow=False)
            if node is None:
                return
            if node.kind == "link":
                self._link(posixpath.dirname(node.canon), node)
                res = self.vfs.lookup(walked, follow=True)
                if res is None:
                    return
                cur = res.canon
            else:
                self._ensure_canon_dir(node.canon)
                cur = node.canon
            walked = cur

    # -- placing one matched path --------------------------------------------------------
    def place(self, path: str, node: Node, *, content: bool, listing: bool = False,
              max_bytes: int = MAX_FILE_BYTES) -> None:
        self.mirror(path)
        if node.kind == "link":
            self._link(posixpath.dirname(node.canon), node)
            res = self.vfs.lookup(node.canon, follow=True)
            if res is not None and res.kind != "link":
                self.place(res.canon, res, content=content, listing=listing,
                           max_bytes=max_bytes)
            return
        if node.kind == "dir":
            self._ensure_canon_dir(node.canon)
            if listing:
                entries = node.fs.listdir(node.entry.ino) or {}
                for name in sorted(entries):
                    child = self.vfs.lookup(posixpath.join(node.canon, name), follow=False)
                    if child is not None:
                        self.place(child.canon, child, content=True,
                                   max_bytes=MAX_LISTED_FILE if child.kind == "file"
                                   else max_bytes)
            return
        if node.kind != "file":
            self.stats.skipped[node.canon] = f"a {node.kind} in the image: not re-created"
            return
        if content and node.entry.size <= max_bytes:
            if node.canon not in self._content:
                self._pending[node.canon] = node
        else:
            if content and node.canon not in self._pending and node.canon not in self._content:
                self.stats.too_big[node.canon] = node.entry.size
            self._placeholder(node)

    def _placeholder(self, node: Node) -> None:
        if node.canon in self._done or node.canon in self._pending:
            return
        self._ensure_canon_dir(posixpath.dirname(node.canon))
        p = self._host(node.canon)
        with open(p, "wb") as fh:
            fh.truncate(node.entry.size)
        _meta(p, node)
        self._done.add(node.canon)
        self.stats.placeholders += 1

    def flush(self) -> None:
        """Copy the contents of every wanted file (one debugfs run per filesystem)."""
        by_fs: dict[int, list[Node]] = {}
        for node in self._pending.values():
            by_fs.setdefault(id(node.fs), []).append(node)
        total = sum(n.entry.size for n in self._pending.values())
        if total > MAX_TOTAL_BYTES:
            raise ImageError(f"the query would copy {total} bytes out of the image (limit "
                             f"{MAX_TOTAL_BYTES}): refusing")
        for nodes in by_fs.values():
            fs = nodes[0].fs
            wanted = {n.entry.ino: self.scratch / f"f{n.entry.ino}-{id(fs)}" for n in nodes}
            got = fs.copy(wanted, MAX_FILE_BYTES)
            for n in nodes:
                src = got.get(n.entry.ino)
                if src is None:
                    self.stats.skipped[n.canon] = "could not be copied out of the image"
                    continue
                self._ensure_canon_dir(posixpath.dirname(n.canon))
                dest = self._host(n.canon)
                if dest.exists() or dest.is_symlink():
                    dest.unlink()
                os.replace(src, dest)
                self.stats.too_big.pop(n.canon, None)
                _meta(dest, n)
                self._done.add(n.canon)
                self._content.add(n.canon)
                self.stats.files += 1
        self._pending.clear()

    # -- a whole query ---------------------------------------------------------------------
    def _reach(self, path: str) -> str | None:
        res = self.vfs.lookup(path, follow=True)
        self.reached[path] = None if res is None else res.canon
        return self.reached[path]

    def build(self, query: HostQuery, extra_files: Iterable[str] = (),
              command_globs: Mapping[str, Iterable[str]] | None = None) -> None:
        """Re-create what ``query`` reads; ``command_globs``: inputs of commands that
        :func:`command_paths` cannot find in their scripts."""
        for pat in (*query.files, *extra_files):
            for path, node in self.vfs.glob(pat):
                self.place(path, node, content=True)
                self._reach(path)
        for pat in query.dirs:
            for path, node in self.vfs.glob(pat):
                self.place(path, node, content=True, listing=True)
                res = self.vfs.lookup(path, follow=True)
                if res is not None and res.kind == "dir":
                    for name in res.fs.listdir(res.entry.ino) or {}:
                        self._reach(posixpath.join(path, name))
        for pat in query.links:
            for path, node in self.vfs.glob(pat):
                self.place(path, node, content=False)
        for pat in query.stats:
            for path, node in self.vfs.glob(pat):
                self.place(path, node, content=False)
        for name, script in query.commands:
            inputs = self.command_inputs.setdefault(name, set())
            for pat in (*command_paths(script), *(command_globs or {}).get(name, ())):
                for path, node in self.vfs.glob(pat):
                    self.place(path, node, content=True, max_bytes=MAX_COMMAND_FILE)
                    canon = self._reach(path)
                    if canon is not None:
                        inputs.add(canon)
        self.flush()

    def gaps(self) -> TreeGaps:
        """What the tree does not hold whole, by the paths the query reads: query path ->
        size of an over-limit file, query path -> why a file is not re-created, command ->
        one such input of it (an input below a directory the command reads counts too)."""
        truncated: dict[str, int] = {}
        unread: dict[str, str] = {}
        for path, canon in self.reached.items():
            if canon in self.stats.too_big:
                truncated[path] = self.stats.too_big[canon]
            elif canon in self.stats.skipped:
                unread[path] = f"{self.stats.skipped[canon]} (kgc image check)"
        bad = {**{c: "" for c in self.stats.too_big}, **{c: "" for c in self.stats.skipped}}
        commands: dict[str, str] = {}
        for name, inputs in self.command_inputs.items():
            hit = sorted(c for c in bad if any(c == i or c.startswith(i.rstrip("/") + "/")
                                               for i in inputs))
            if hit:
                commands[name] = hit[0]
                if hit[0] in self.stats.too_big:
                    truncated.setdefault(hit[0], self.stats.too_big[hit[0]])
                else:
                    unread.setdefault(hit[0], f"{self.stats.skipped[hit[0]]} (kgc image check)")
        return TreeGaps(truncated, unread, commands)
