"""NVIDIA/nvbandwidth's output for one testcase, as it prints it (v0.4 and later):

    Running device_to_device_memcpy_read_ce.
    memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)
              0         1         2 ...
    0       N/A    370.90    370.90 ...
    ...
    SUM device_to_device_memcpy_read_ce 20785.58

A matrix of GB/s per (row, column) pair, ``N/A`` where a pair is not measured (a GPU with
itself); the ``SUM`` line ends the testcase. No SUM line: the run stopped short (Unreadable).
"""

from __future__ import annotations

import re

from remedy.core.models import Frozen
from remedy.detection.fabric.output import Unreadable, lines_of, number

D2D_READ_CE = "device_to_device_memcpy_read_ce"
_HEADER = re.compile(r"bandwidth \(GB/s\)$")


class NvbMatrix(Frozen):
    testcase: str
    pairs: dict[tuple[int, int], float]  # (row, column) → GB/s, measured pairs only
    total: float  # the SUM line

    @property
    def weakest(self) -> tuple[tuple[int, int], float]:
        pair = min(self.pairs, key=lambda p: self.pairs[p])
        return pair, self.pairs[pair]


def parse_testcase(text: str, testcase: str = D2D_READ_CE) -> NvbMatrix:
    lines = lines_of(text)
    try:
        start = lines.index(f"Running {testcase}.")
    except ValueError:
        raise Unreadable(f"nvbandwidth did not run {testcase}") from None
    body = lines[start + 1 :]
    if not body or not _HEADER.search(body[0]):
        raise Unreadable(f"{testcase}: no bandwidth matrix after its Running line")
    columns = [int(number(c, "column")) for c in body[1].split()] if len(body) > 1 else []
    if not columns:
        raise Unreadable(f"{testcase}: the matrix has no column header")
    pairs: dict[tuple[int, int], float] = {}
    for line in body[2:]:
        if not line:
            continue
        if line.startswith(f"SUM {testcase} "):
            total = number(line.split()[-1], "SUM")
            if not pairs:
                raise Unreadable(f"{testcase}: a SUM with no measured pair")
            return NvbMatrix(testcase=testcase, pairs=pairs, total=total)
        if line.startswith(("SUM ", "Running ")):
            break
        cells = line.split()
        if len(cells) != len(columns) + 1:
            raise Unreadable(
                f"{testcase}: row {cells[:1]} has {len(cells) - 1} of {len(columns)} cells"
            )
        row = int(number(cells[0], "row"))
        for column, cell in zip(columns, cells[1:], strict=True):
            if cell != "N/A":
                pairs[(row, column)] = number(cell, f"GPU {row} -> GPU {column}")
    raise Unreadable(f"{testcase} stopped before its SUM line")
