"""dcgm-exporter's Xid metric, read as what it is: the last Xid each GPU raised, not a count.

``DCGM_FI_DEV_XID_ERRORS`` is DCGM field 230 (``DCGM_FI_DEV_XID_ERRORS``: "The value is the
specific XID error"); dcgm-exporter publishes it as a gauge ("Value of the last XID error
encountered."). So a value of 79 is one Xid 79, not 79 errors; a sum or a rate over it is
meaningless (some dashboards type it a counter and add it up); a second Xid of the same code
leaves the value unchanged, so a gauge cannot show a recurrence; and the first value seen has
no time. What a scrape can say, compared with the one before, is which GPUs' last Xid changed
to a code (``new_xids``); the first scrape is only the baseline. remedy's own Xid reader,
the kernel log, sees every occurrence with its time: this is for telling an exporter's word
apart from a count, and for fleets whose kernel log remedy cannot read.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

XID_METRIC = "DCGM_FI_DEV_XID_ERRORS"
MAX_BYTES = 4 * 1024 * 1024  # an 8-GPU node's full exposition is ~100 KB
_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+\d+)?\s*$"
)
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


class ExpositionError(ValueError):
    """Metrics that cannot be read as the exporter's (fail closed: not 'no Xid')."""


@dataclass(frozen=True)
class LastXid:
    gpu: str  # the GPU's UUID, or its index where the exporter gives no UUID
    code: int  # 0: no Xid since the exporter (or DCGM) started


def last_xids(text: str) -> dict[str, LastXid]:
    """Each GPU's last Xid from an exposition (MIG instances of one GPU repeat its value)."""
    if len(text.encode("utf-8", errors="replace")) > MAX_BYTES:
        raise ExpositionError(f"metrics larger than {MAX_BYTES} bytes")
    found: dict[str, LastXid] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.startswith(XID_METRIC):
            continue
        sample = _SAMPLE.match(line)
        if sample is None or sample["name"] != XID_METRIC:
            if sample is None:
                raise ExpositionError(f"line {number}: not a sample: {line[:120]!r}")
            continue
        labels = {m["key"]: m["value"] for m in _LABEL.finditer(sample["labels"] or "")}
        gpu = labels.get("UUID") or labels.get("gpu")
        if not gpu:
            raise ExpositionError(f"line {number}: {XID_METRIC} names no GPU")
        try:
            value = float(sample["value"])
        except ValueError:
            raise ExpositionError(f"line {number}: value {sample['value']!r}") from None
        if not (math.isfinite(value) and value == int(value) and 0 <= value < 10_000):
            raise ExpositionError(f"line {number}: {value} is no Xid code")
        found[gpu] = LastXid(gpu=gpu, code=int(value))
    return found


def new_xids(before: dict[str, LastXid] | None, now: dict[str, LastXid]) -> list[LastXid]:
    """The GPUs whose last Xid changed to a code since ``before``. The first reading (None)
    is the baseline and reports nothing: a gauge cannot date its value, and an Xid of last
    week must not start a ladder each time an agent restarts (the kernel log, read from its
    kept cursor, has what happened while the agent was away). A GPU first seen later with a
    code counts. The same code again is not seen: a gauge holds the last value, not how many."""
    if before is None:
        return []
    return [
        x
        for gpu, x in sorted(now.items())
        if x.code != 0 and (gpu not in before or before[gpu].code != x.code)
    ]
