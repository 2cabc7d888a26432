"""One name per option across pytest and ``kgc``: the old spellings kept as deprecated aliases.

An option that means the same thing in the pytest plugin and in a ``kgc`` subcommand has
one spelling in both (``tests/test_options.py`` holds the table and fails on a divergent
pair). Renamed options keep their old spelling for users' scripts and CI jobs: it still
works and prints one line on stderr naming the new one (``kgc: --kgc-root is deprecated;
use --root``), so a pipeline keeps passing through the release that renames it and says
what to change — refusing the old name would break every nightly job on upgrade for a
cosmetic change.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# old spelling -> new spelling, by surface ("pytest" or the kgc subcommand)
DEPRECATED: dict[str, dict[str, str]] = {
    "pytest": {"--kgc-root": "--root"},
    "image check": {"--ssh-key": "--ssh-identity-file"},
}


def deprecation(old: str, new: str) -> str:
    """The one line a deprecated spelling prints on stderr."""
    return f"kgc: {old} is deprecated; use {new}"


class _Deprecated(argparse.Action):
    """Stores like the new option (same ``dest``) and says, once, to use the new name."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str = "",
                 **kw: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(deprecation(option_string or self.option_strings[0], self.new), file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_deprecated(parser: argparse.ArgumentParser | Any, old: str, new: str, dest: str,
                   metavar: str | None = None) -> None:
    """``old`` as a deprecated alias of the (already added) option ``new`` with ``dest``."""
    parser.add_argument(old, dest=dest, metavar=metavar, action=_Deprecated, new=new,
                        default=argparse.SUPPRESS, help=f"deprecated spelling of {new}")


class UnwritableOutput(Exception):
    """An output option (``--report-dir``, ``-o``) names a place kgc cannot write: bad input,
    one line, exit 2 — checked before any check runs, so nothing is collected for nothing."""


def check_writable(path: str | os.PathLike[str], option: str, directory: bool) -> None:
    """Raise :class:`UnwritableOutput` (one line) unless ``path`` — a directory, or a file —
    can be written by this process. Tried for real (the missing directories made, a
    temporary file created and removed: what root may write is not what its mode bits say);
    call it after every other check of the input, as the last thing before the work."""
    p = Path(os.path.abspath(path))
    where = p if directory else p.parent
    try:
        if p.exists() and p.is_dir() != directory:
            raise IsADirectoryError(0, "is a directory") if p.is_dir() else \
                NotADirectoryError(0, "not a directory")
        # the nearest existing ancestor must be a directory to make the rest under it
        # (mkdir would only say "File exists" of a regular file in the way)
        up = where
        while not up.exists() and up != up.parent:
            up = up.parent
        if not up.is_dir():
            raise NotADirectoryError(0, f"{up} is not a directory")
        where.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".kgc-write-test.", dir=where)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise UnwritableOutput(f"{option} {path}: cannot write there "
                               f"({exc.strerror or exc})") from None
