"""What a simulated job's pods print about each rank's step times: one line a minute per rank,
as the job's helper (``remedy_job``) reports them, the line remedy/attribution/goodput.py
parses into a rank report:

    {"event":"rank","at":"…","rank":13,"local_rank":5,"gpu":"GPU-…","step":1200,"steps":30,
     "compute_s":0.412,"data_s":0.010}

A pod runs one rank per GPU of its node (rank = the node's place in the job × GPUs per node +
the local rank). Each rank computes ``COMPUTE_S`` a step, give or take a seeded ``NOISE``, times
``1 + slowdown`` of a slow-node fault on its GPU then (adapters/sim/node.py); it waits
``DATA_S`` a step for input, plus the job's input skew on its node (an application cause: the
job's data, not the node). Deterministic: the same job, run and minute give the same line. Only
the last ``TAIL`` lines per rank are kept, as a pod's log tail would be."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

RANK_EVENT = "rank"
EVERY = timedelta(minutes=1)  # the helper's reporting period
TAIL = 60  # lines per rank a pod's log tail holds (an hour at one a minute)
COMPUTE_S = 0.40  # a healthy rank's own work per step (forward, backward, optimizer)
DATA_S = 0.010  # its wait for input per step
NOISE = 0.03  # ± this share of seeded noise on each line's compute and data times
STEPS_PER_CHECKPOINT = 100  # the sim's checkpoints' step count (adapters/sim/jobs.py)

# A node's GPUs' UUIDs by index; its slow GPUs at a time, each with its slowdown (0.2: 20 %).
Uuids = Callable[[str], list[str]]
Slowdown = Callable[[str, datetime], dict[int, float]]


@dataclass(frozen=True)
class Pace:
    """What the fleet says of the nodes a job runs on (a fleet-less sim: fast, no UUIDs)."""

    uuids: Uuids = lambda node: []  # noqa: E731 - a default seam
    slowdown: Slowdown = lambda node, at: {}  # noqa: E731
    every: timedelta = EVERY  # the demo's is sped up like its guard's window
    input_skew: dict[str, float] = field(default_factory=dict)  # node → extra input wait, s
    tail: int = TAIL


def _noise(seed: int) -> float:
    """A value in [-1, 1) from ``seed``."""
    return seed / 2**31 - 1


def printed(started_at: datetime, until: datetime, pace: Pace) -> int:
    """How many periods' lines a run started at ``started_at`` has printed by ``until``."""
    return max(0, int((until - started_at) / pace.every))


def rank_lines(
    job: str,
    node: str,
    place: int,
    gpus: int,
    started_at: datetime,
    until: datetime,
    pace: Pace,
    checkpoint_every: timedelta,
    after: int = 0,
) -> list[dict[str, Any]]:
    """The lines of the pod at ``place`` in the job's run (from ``started_at``) on ``node``,
    up to ``until``: the last ``pace.tail`` lines of each of its ranks, oldest first; only the
    periods after the ``after``-th (what a reader has already: printed lines stay printed)."""
    minutes = printed(started_at, until, pace)
    uuids = pace.uuids(node)
    count = len(uuids) or gpus
    skew = pace.input_skew.get(node, 0.0)
    per_line = round(pace.every / checkpoint_every * STEPS_PER_CHECKPOINT)
    run = zlib.crc32(f"{job}/{started_at.isoformat()}".encode())  # the run's seed
    lines = []
    for k in range(max(after + 1, minutes - pace.tail + 1), minutes + 1):
        at = started_at + k * pace.every
        stamp, slow = at.isoformat(), pace.slowdown(node, at)
        for local in range(count):
            rank = place * count + local
            # A CRC per line, not a generator: cheap, and the same line every call.
            seed = zlib.crc32(b"%d/%d" % (rank, k), run)
            compute = COMPUTE_S * (1 + NOISE * _noise(seed)) * (1 + slow.get(local, 0.0))
            data = DATA_S * (1 + NOISE * _noise(zlib.crc32(b"data", seed))) + skew
            lines.append(
                {
                    "event": RANK_EVENT,
                    "at": stamp,
                    "rank": rank,
                    "local_rank": local,
                    "gpu": uuids[local] if local < len(uuids) else "",
                    "step": k * per_line,
                    "steps": per_line,
                    "compute_s": round(compute, 3),
                    "data_s": round(data, 3),
                }
            )
    return lines
