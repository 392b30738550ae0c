"""linux-rdma/perftest's ``ib_write_bw`` client output, as it prints it:

    ---------------------------------------------------------------------------------------
     #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
     65536      5000             11025.44            11024.71                  0.176395
    ---------------------------------------------------------------------------------------

``--report_gbits`` prints ``[Gb/sec]`` instead. perftest divides by 0x100000 for MB/sec and by
125000000 for Gb/sec (src/perftest_parameters.c, ``format_factor``): a MiB and a gigabit. Lines
such as "Conflicting CPU frequency values detected" may sit between the header and the rows.
The closing dashes end the table: without them the run stopped short (Unreadable).
"""

from __future__ import annotations

import re

from remedy.core.models import Frozen
from remedy.detection.fabric.output import Unreadable, lines_of, number

_HEADER = re.compile(r"^#bytes\s+#iterations\s+BW peak\[(MB|Gb)/sec\]\s+BW average\[(MB|Gb)/sec\]")
_ROW = re.compile(r"^\d+\s+\d+\s+[\d.]+\s+[\d.]+")
MIB_PER_S_IN_GBIT = 0x100000 * 8 / 1e9


class WriteBwRow(Frozen):
    size: int
    iterations: int
    peak_gbps: float  # Gb/s
    average_gbps: float  # Gb/s


class WriteBw(Frozen):
    rows: list[WriteBwRow]

    @property
    def average_gbps(self) -> float:
        """The average bandwidth of the largest message size, Gb/s."""
        return max(self.rows, key=lambda r: r.size).average_gbps


def parse_write_bw(text: str) -> WriteBw:
    lines = lines_of(text)
    header = next((i for i, line in enumerate(lines) if _HEADER.match(line)), None)
    if header is None:
        raise Unreadable("ib_write_bw printed no result header (it did not connect)")
    unit = _HEADER.match(lines[header]).group(1)  # type: ignore[union-attr]
    scale = MIB_PER_S_IN_GBIT if unit == "MB" else 1.0
    rows: list[WriteBwRow] = []
    for line in lines[header + 1 :]:
        if line.startswith("---"):
            if not rows:
                raise Unreadable("ib_write_bw's result table is empty")
            return WriteBw(rows=rows)
        if _ROW.match(line):
            cells = line.split()
            rows.append(
                WriteBwRow(
                    size=int(cells[0]),
                    iterations=int(cells[1]),
                    peak_gbps=number(cells[2], "BW peak") * scale,
                    average_gbps=number(cells[3], "BW average") * scale,
                )
            )
    raise Unreadable("ib_write_bw stopped before the end of its result table")
