"""Tables for the CLI: rich on a terminal, plain aligned columns in a pipe, a file or a test
(so `grep` and `awk` keep working)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from remedy.display import visible


def plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    table = [list(headers), *(_visible(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]


def _visible(row: Sequence[str]) -> list[str]:
    """A row's cells as a person may read them: a cell can quote a node (remedy.display)."""
    return [visible(cell) for cell in row]


def markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table, for the benchmark report."""
    return [
        "| " + " | ".join(headers) + " |",
        "|---" * len(headers) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def show(headers: Sequence[str], rows: Sequence[Sequence[str]], title: str = "") -> None:
    """Print a table to stdout: rich when it is a terminal, else ``plain``."""
    if sys.stdout.isatty():
        table = Table(*headers, title=title or None, title_justify="left", header_style="bold")
        for row in rows:
            table.add_row(*_visible(row))
        Console().print(table)
        return
    if title:
        print(title)
    print("\n".join(plain(headers, rows)))
