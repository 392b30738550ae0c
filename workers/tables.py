"""Tables for the CLI: rich on a terminal, plain aligned columns in a pipe, a file or a test
(so `grep` and `awk` keep working)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from remedy.core.display import visible


def plain(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    table = [list(headers), *(_visible(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(headers))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    ]


def _visible(row: Sequence[str]) -> list[str]:
    """A row's cells as a person may read them: a cell can quote a node (remedy.core.display)."""
    return [visible(cell) for cell in row]


def markdown(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table, for the benchmark report."""
    return [
        "| " + " | ".join(headers) + " |",
        "|---" * len(headers) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def records(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The narrow layout: each row as a block, its first cell a line of its own and every other
    cell under it beside its header, so nothing is cut at 80 columns (a node name, a header)."""
    width = max((len(h) for h in headers[1:]), default=0)
    out = []
    for row in rows:
        first, *rest = _visible(row)
        out.append(f"{headers[0]} {first}")
        out += [f"  {h.ljust(width)}  {cell}" for h, cell in zip(headers[1:], rest, strict=True)]
    return out


def show(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    title: str = "",
    console: Console | None = None,
) -> None:
    """Print a table to stdout: rich when it is a terminal, else ``plain``. A table wider than
    the terminal is printed as ``records`` instead: rich would cut every cell to fit."""
    if console is None and not sys.stdout.isatty():
        if title:
            print(title)
        print("\n".join(plain(headers, rows)))
        return
    console = console or Console()
    table = Table(*headers, title=title or None, title_justify="left", header_style="bold")
    for row in rows:
        table.add_row(*_visible(row))
    unbounded = console.options.update(max_width=10**6)  # its natural width, not the fit
    if Measurement.get(console, unbounded, table).maximum <= console.width:
        console.print(table)
        return
    if title:
        console.print(title, style="bold", highlight=False)
    for line in records(headers, rows):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
