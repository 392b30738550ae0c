"""Every `remedy ... --help` shows every option's name whole on an 80-column terminal."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from workers.cli import app

WIDTH = 80


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the app, groups included, with the words that reach it."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = dict(_commands(typer.main.get_command(app)))


def test_the_walk_reaches_every_command() -> None:
    assert {("demo",), ("controller",), ("runbooks", "validate"), ("xid", "parse")} <= set(COMMANDS)
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p) or "remedy")
def test_help_shows_every_option_name_whole_at_80_columns(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(
        app, [*path, "--help"], env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH
    )
    assert result.exit_code == 0, result.output
    names = [
        name
        for param in COMMANDS[path].params
        if not getattr(param, "hidden", False)
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("-")
    ]
    # Words of the help, split where a name ends: a space, a comma, a slash, a panel's border.
    words = set(re.split(r"[\s,/│]+", result.output))
    assert [name for name in names if name not in words] == []
    assert not re.search(r"\S…", result.output)  # no word cut short, a default's included
    assert max(map(len, result.output.splitlines())) <= WIDTH
