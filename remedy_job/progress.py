"""Reporter: what the training loop calls. Imports nothing of remedy (tests check the
spellings match remedy's: ``remedy.attribution.goodput.PROGRESS_PREFIX``, the drain's
annotation)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

from remedy_job.ranks import RankTimes, json_scores

PREFIX = "remedy.io/progress "
CHECKPOINT_REQUESTED = "remedy.io/checkpoint-requested"
# Where the pod's downward-API volume puts its annotations (docs/jobs.md shows the volume).
ANNOTATIONS = "/etc/remedy/annotations"


def _now() -> datetime:
    return datetime.now(UTC)


class Reporter:
    """One per process. Steps and checkpoints: rank 0 is enough (the ranks of a lockstep job
    move together). Step times (``timed``): every rank, each with its own ``rank``,
    ``local_rank`` and GPU UUID (remedy_job/ranks.py says what to time); ranks default to
    torchrun's ``RANK`` and ``LOCAL_RANK``.

    >>> r = Reporter(annotations="/nonexistent")
    >>> r.checkpoint_requested()  # no downward-API volume: never asked
    False
    """

    def __init__(
        self,
        out: TextIO | None = None,
        annotations: str | None = None,
        clock: Callable[[], datetime] = _now,
        step_every: timedelta = timedelta(minutes=1),
        rank: int | None = None,
        local_rank: int | None = None,
        gpu: str = "",
    ) -> None:
        self._out = out or sys.stdout
        path = annotations or os.environ.get("REMEDY_ANNOTATIONS", ANNOTATIONS)
        self._annotations = Path(path)
        self._clock = clock
        self._answered = ""  # the last request acknowledged
        # Steps are reported at most this often: the log tail that tells remedy why a pod
        # failed must still hold the failure, not only progress lines.
        self._step_every, self._stepped = step_every, datetime.min.replace(tzinfo=UTC)
        self._rank = rank if rank is not None else int(os.environ.get("RANK", "0"))
        self._local_rank = (
            local_rank if local_rank is not None else int(os.environ.get("LOCAL_RANK", "0"))
        )
        self._gpu, self._times = gpu, RankTimes(step_every)

    def _emit(self, event: str, **fields: object) -> None:
        line = {"event": event, "at": self._clock().isoformat(), **fields}
        self._out.write(PREFIX + json.dumps(line, separators=(",", ":")) + "\n")
        self._out.flush()  # a line still in a buffer is a line remedy never sees

    def resumed(self, step: int) -> None:
        """The loop works from ``step`` (0 on a fresh start): the time before was start-up."""
        self._emit("resumed", step=step)

    def step(self, step: int) -> None:
        if self._clock() - self._stepped >= self._step_every:
            self._stepped = self._clock()
            self._emit("step", step=step)

    def timed(self, step: int, compute_s: float, data_s: float = 0.0) -> None:
        """This rank's step: ``compute_s`` its own work WITHOUT the wait in collectives (CUDA
        events around forward and backward), ``data_s`` its wait for input. A line a minute
        at most, with the medians since the last."""
        line = self._times.add(self._clock(), step, compute_s, data_s)
        if line is not None:
            place = {"rank": self._rank, "local_rank": self._local_rank, "gpu": self._gpu}
            self._emit("rank", **place, **line)

    def nvrx(self, relative: dict[int, float], individual: dict[int, float]) -> None:
        """NVIDIA Resiliency Extension's straggler scores (0–1 per rank, 1 the best; rank 0
        reports them): relative to the best rank, and to each rank's own best
        (https://nvidia.github.io/nvidia-resiliency-ext/straggler_det/usage_guide.html)."""
        self._emit("nvrx", relative=json_scores(relative), individual=json_scores(individual))

    def collective_timeout(self, collective: str, missing_ranks: list[int]) -> None:
        """An NCCL timeout (the flight recorder's dump): the ranks that never joined."""
        self._emit("nccl_timeout", collective=collective, missing_ranks=sorted(missing_ranks))

    def checkpoint(self, step: int, seconds: float = 0.0) -> None:
        """A checkpoint is written and durable; ``seconds``: how long writing it took."""
        self._emit("checkpoint", step=step, seconds=round(seconds, 3))

    def request(self) -> str:
        """remedy's pending checkpoint request (its annotation's value), "" when none."""
        try:
            text = self._annotations.read_text()
        except OSError:
            return ""
        for line in text.splitlines():  # the downward API writes key="json-quoted value"
            key, sep, value = line.partition("=")
            if sep and key.strip() == CHECKPOINT_REQUESTED:
                try:
                    asked = json.loads(value)
                except ValueError:
                    asked = value.strip('"')
                return asked if isinstance(asked, str) and asked != self._answered else ""
        return ""

    def checkpoint_requested(self) -> bool:
        return bool(self.request())

    def acknowledge(self, step: int) -> None:
        """Answer the pending request once the checkpoint at ``step`` is written: the drain
        evicts the pod now rather than at the end of its grace."""
        asked = self.request()
        if asked:
            self._answered = asked
            self._emit("acknowledged", step=step, request=asked)
