"""`kgc NAME ...` for commands other distributions add (entry-point group ``kgc.commands``):
the product dispatches whatever is installed without naming or importing it, and says in
one line which distribution to install when a command a checkout has is missing."""

from __future__ import annotations

import pytest

from kgc import cli


def test_an_installed_plugin_command_gets_the_rest_of_the_line(monkeypatch, capsys) -> None:
    seen: list[list[str]] = []

    def demo_main(argv: list[str]) -> int:
        seen.append(argv)
        return 7

    monkeypatch.setattr(cli, "_plugins", lambda: {"demo": "some-dist"})
    monkeypatch.setattr(cli, "_plugin_main", lambda name: demo_main if name == "demo" else None)
    assert cli.main(["demo", "run", "--flag", "x"]) == 7
    assert seen == [["run", "--flag", "x"]]
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "demo" in capsys.readouterr().out  # listed in kgc --help, from its distribution


def test_a_missing_lab_is_one_line_naming_the_distribution(monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli, "_plugins", lambda: {})
    monkeypatch.setattr(cli, "_plugin_main", lambda name: None)
    assert cli.main(["lab", "node", "list"]) == 2
    out = capsys.readouterr()
    assert out.err.strip().count("\n") == 0 and not out.out
    assert "pip install kata-gpu-conformance-lab" in out.err


def test_a_stale_entry_point_is_skipped_for_the_one_that_loads(monkeypatch) -> None:
    """An editable install made before the lab moved leaves ``lab = kgc.lab.cli:main``
    behind; the lab's own entry point is used, not "not installed"."""

    class EP:
        def __init__(self, ok: bool) -> None:
            self.ok = ok

        def load(self):  # type: ignore[no-untyped-def]
            if not self.ok:
                raise ModuleNotFoundError("No module named 'kgc.lab'")
            return "the lab's main"

    monkeypatch.setattr("importlib.metadata.entry_points",
                        lambda group, name: [EP(False), EP(True)])
    assert cli._plugin_main("lab") == "the lab's main"


def test_builtin_commands_win_over_a_plugin_of_the_same_name(monkeypatch, capsys) -> None:
    monkeypatch.setattr(cli, "_plugins", lambda: {"certify": "evil", "checks": "evil"})
    monkeypatch.setattr(cli, "_plugin_main", lambda name: lambda argv: 99)
    monkeypatch.setattr(cli, "PASSTHROUGH", {**cli.PASSTHROUGH, "certify": lambda a, e: 0})
    assert cli.main(["certify"]) == 0
    assert cli.main(["checks", "--format", "json"]) == 0  # the catalogue, not the plug-in
    assert capsys.readouterr().out.lstrip().startswith(("[", "{"))
