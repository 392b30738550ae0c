"""`remedy status` at 80 columns: a table wider than the terminal is printed a row per block
(workers/tables.py), so no header and no node name is cut; one that fits stays a table."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from workers.status_table import NODE_HEADERS, POOL_HEADERS
from workers.tables import show

NODE = "gpu-node-a100-rack07-0123"
ROW = [
    NODE,
    "training",
    "awaiting approval",
    "Xid 48 on GPU 3 (SN3009327773)",
    "gpu-memory-ecc",
    "5/5 replace",
    "12-07 10:57:29",
    "WAITING",
]
POOL = ["training", "17", *"3 4 2 1 0 0 0 1 0 0 0 0".split(), "8", "2/2", "8/16", "3", "0", "ok"]


def printed(headers: list[str], rows: list[list[str]], width: int) -> str:
    out = StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    show(headers, rows, title="nodes", console=console)
    return out.getvalue()


def test_at_80_columns_every_header_and_node_name_is_whole() -> None:
    assert len(POOL) == len(POOL_HEADERS)
    for headers, row in ((NODE_HEADERS, ROW), (POOL_HEADERS, POOL)):
        said = printed(headers, [row, row], 80)
        assert "…" not in said, said
        assert all(len(line) <= 80 for line in said.splitlines()), said
        for header, cell in zip(headers[1:], row[1:], strict=True):
            assert f"  {header.ljust(max(map(len, headers[1:])))}  {cell}" in said.splitlines()
        assert said.splitlines().count(f"{headers[0]} {row[0]}") == 2


def test_a_table_that_fits_stays_a_table() -> None:
    said = printed(NODE_HEADERS, [ROW], 200)
    assert NODE in said and "┃ node" in said and "\n  pool " not in said
