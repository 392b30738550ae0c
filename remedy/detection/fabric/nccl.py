"""nccl-tests' ``all_reduce_perf`` output, as NVIDIA/nccl-tests prints it (src/common.cu):

    #  Rank  0 Group  0 Pid 1623025 on    host device  0 [0x1b] NVIDIA H100 80GB HBM3
    #       size         count      type   redop    root     time   algbw   busbw #wrong ...
       268435456      67108864     float     sum      -1   1119.8  239.71  419.49      0 ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 448.212

The table's columns are read by the header's names (older releases print ``error`` for
``#wrong`` and no ``root``; ``-c 0`` prints ``N/A`` for it). The figure judged is the bus
bandwidth at the largest size, the lower of out-of-place and in-place: the average line
averages every size, small ones included, and is far below what the fabric carries.
"""

from __future__ import annotations

import re

from remedy.core.models import Frozen
from remedy.detection.fabric.output import Unreadable, lines_of, number

# Releases before 2.11 print these lines without the "#" and without "Group".
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\b.*?\bon\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+)$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)")
_WRONG = ("#wrong", "error")


class NcclRow(Frozen):
    size: int  # bytes
    busbw: list[float]  # GB/s: out-of-place, then in-place (when printed)
    wrong: int  # values wrong in this row, both placements (0 when not checked: N/A)


class NcclRun(Frozen):
    ranks: int
    hosts: list[str]  # the nodes the ranks ran on, in rank order, once each
    models: list[str]  # each rank's GPU name
    rows: list[NcclRow]
    avg_busbw: float
    out_of_bounds: int

    @property
    def peak_size(self) -> int:
        return self.rows[-1].size

    @property
    def busbw(self) -> float:
        """The bus bandwidth at the largest size (the lower of its placements), GB/s."""
        return min(self.rows[-1].busbw)

    @property
    def wrong(self) -> int:
        return self.out_of_bounds + sum(r.wrong for r in self.rows)


def parse_all_reduce(text: str) -> NcclRun:
    """The run, or Unreadable when the output stops short (no table, no summary lines)."""
    lines = lines_of(text)
    hosts: list[str] = []
    models: list[str] = []
    columns: list[str] = []
    rows: list[NcclRow] = []
    avg: float | None = None
    bounds: int | None = None
    for line in lines:
        if rank := _RANK.match(line):
            models.append(rank.group(3).strip())
            if rank.group(2) not in hosts:
                hosts.append(rank.group(2))
        elif {"size", "busbw"} <= set(line.lstrip("#").split()):
            columns = line.lstrip("#").split()
        elif found := _AVG.match(line):
            avg = number(found.group(1), "Avg bus bandwidth")
        elif found := _BOUNDS.match(line):
            bounds = int(found.group(1))
        elif line and not line.startswith("#") and columns and line[0].isdigit():
            rows.append(_row(line, columns))
    if not columns or not rows:
        raise Unreadable("all_reduce_perf printed no result table")
    if avg is None or bounds is None:
        raise Unreadable(
            "all_reduce_perf stopped before its summary (no 'Avg bus bandwidth' line): "
            f"last size {rows[-1].size} B"
        )
    return NcclRun(
        ranks=len(models),
        hosts=hosts,
        models=models,
        rows=rows,
        avg_busbw=avg,
        out_of_bounds=bounds,
    )


def _row(line: str, columns: list[str]) -> NcclRow:
    cells = line.split()
    if len(cells) != len(columns):
        raise Unreadable(f"a result row with {len(cells)} cells for {len(columns)} columns")
    named = list(zip(columns, cells, strict=True))
    busbw = [number(cell, "busbw") for name, cell in named if name == "busbw"]
    wrong = sum(int(number(cell, name)) for name, cell in named if name in _WRONG and cell != "N/A")
    return NcclRow(size=int(number(cells[0], "size")), busbw=busbw, wrong=wrong)
