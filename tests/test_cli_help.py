"""Every option of every `kgc` command has a help line (issue 19.7): a walk of the argparse
tree (subcommands of subcommands included) and of the pytest plugin's own options; and
`kgc certify --help` shows kgc's own options before pytest's."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Iterator

import pytest

from kgc import cli


def _walk(p: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.Action]]:
    for act in p._actions:  # argparse keeps no public list of a parser's actions
        if isinstance(act, argparse._SubParsersAction):
            for name, sub in act.choices.items():
                yield from _walk(sub, f"{path} {name}")
        elif not isinstance(act, argparse._HelpAction):
            yield path, act


def test_every_kgc_option_has_a_help_line() -> None:
    missing = [f"{path}: {'/'.join(a.option_strings) or a.dest}"
               for path, a in _walk(cli.build_parser(), "kgc")
               if a.help != argparse.SUPPRESS and not (a.help or "").strip()]
    assert not missing, "options without a help line:\n" + "\n".join(missing)


def test_every_plugin_option_has_a_help_line(pytestconfig: pytest.Config) -> None:
    group = next(g for g in pytestconfig._parser._groups if g.name == "kgc")
    missing = [o.names() for o in group.options if not (o.attrs().get("help") or "").strip()]
    assert not missing, missing


def test_kgc_certify_help_shows_kgcs_options_first(tmp_path) -> None:
    r = subprocess.run([sys.executable, "-m", "kgc.cli", "certify", "--help"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("usage: kgc certify"), out[:300]
    for opt in ("--html", "--history", "--profile", "--hosts", "--kubeconfig"):
        assert opt in out, opt
    assert out.index("--html") < out.index("pytest")
    assert "general:" in out or "positional arguments" in out  # pytest's own help follows
    assert out.index("--history") < out.index("-k EXPRESSION")
