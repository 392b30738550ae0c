"""Elastic restarts: a guarded job that declares a size range runs at the size healthy capacity
allows instead of waiting for a spare, and grows back when capacity returns.

A job declares its range with the annotation ``remedy.io/elastic: "MIN:MAX"`` (nodes, one pod
each), or by running ``torchrun --nnodes=MIN:MAX``; the annotation wins. Pure: the adapter
reports the job's shape (its range, its size, how many of its pods healthy nodes can hold) and
the JobGuard workflow acts on what these functions decide. No clock: time comes in as
arguments."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import timedelta

from pydantic import BaseModel, Field, model_validator

ELASTIC = "remedy.io/elastic"
# torchrun's elastic range: --nnodes=1:4 or --nnodes 1:4 (a single number is a fixed size).
NNODES = re.compile(r"^--nnodes(?:=(?P<value>.+))?$")


class ElasticRange(BaseModel):
    min: int = Field(ge=1)
    max: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> ElasticRange:
        if self.max < self.min:
            raise ValueError(f"max {self.max} is below min {self.min}")
        return self

    @classmethod
    def parse(cls, text: str) -> ElasticRange:
        """``"2:4"`` → 2 to 4 nodes; ``"4"`` → exactly 4. ValueError otherwise."""
        low, colon, high = text.strip().partition(":")
        high = high if colon else low
        if not low.isdigit() or not high.isdigit():
            raise ValueError(f"{ELASTIC} {text!r} is not MIN:MAX")
        return cls(min=int(low), max=int(high))

    def __str__(self) -> str:
        return f"{self.min}:{self.max}"


def declared(annotation: str | None, args: Iterable[str]) -> ElasticRange | None:
    """The job's range: its annotation, else torchrun's ``--nnodes`` among the container's
    command and args. A fixed size (``--nnodes=4``, or ``"4:4"``) is not elastic: None.

    >>> str(declared(None, ["torchrun", "--nnodes=2:8", "train.py"]))
    '2:8'
    >>> declared(None, ["torchrun", "--nnodes", "4", "train.py"]) is None
    True
    """
    found = ElasticRange.parse(annotation) if annotation is not None else _torchrun(list(args))
    return found if found is not None and found.min < found.max else None


def _torchrun(args: list[str]) -> ElasticRange | None:
    for i, arg in enumerate(args):
        matched = NNODES.match(arg)
        if matched is None:
            continue
        value = matched["value"] or (args[i + 1] if i + 1 < len(args) else "")
        try:
            return ElasticRange.parse(value)
        except ValueError:
            return None  # "$(NNODES)" and the like: a range remedy cannot read
    return None


class JobShape(BaseModel):
    """What the adapter reports about a guarded job's size."""

    elastic: ElasticRange | None = None  # None: a fixed size, restarted as it was
    size: int = Field(default=0, ge=0)  # pods of its newest incarnation (parallelism)
    fits: int = Field(default=0, ge=0)  # pods of it healthy, schedulable nodes can hold now


class Sizing(BaseModel):
    size: int
    reason: str


class ElasticPolicy(BaseModel):
    # How often a job running below its maximum looks for capacity to grow into.
    grow_check: timedelta = timedelta(minutes=10)
    # Hysteresis: a job runs this long at a size before it grows, and grows by at least
    # ``grow_by`` nodes, so a node that flaps does not restart the job each time it returns.
    grow_after: timedelta = timedelta(minutes=30)
    grow_by: int = Field(default=1, ge=1)
    # A grow waits for the job to acknowledge a checkpoint, at most this long (polled).
    checkpoint_grace: timedelta = timedelta(minutes=10)
    checkpoint_poll: timedelta = timedelta(seconds=30)


def restart_size(shape: JobShape) -> Sizing | None:
    """The size to restart an elastic job at: as large as capacity allows within its range;
    None for a fixed-size job (restarted as it was, its pods wait for capacity).

    >>> job = ElasticRange(min=2, max=8)
    >>> restart_size(JobShape(elastic=job, size=8, fits=5)).size  # 3 nodes short: 5 now
    5
    >>> restart_size(JobShape(elastic=job, size=8, fits=1)).size  # below min: wait at min
    2
    """
    job = shape.elastic
    if job is None:
        return None
    size = max(job.min, min(job.max, shape.fits))
    if shape.fits < job.min:
        why = f"capacity for {shape.fits}, below its minimum: at {size}, waiting for nodes"
    elif size < job.max:
        why = f"capacity for {shape.fits}: at {size} of {job}, grown back when nodes return"
    else:
        why = f"at its full size {size}"
    return Sizing(size=size, reason=why)


def grow_size(shape: JobShape, at_size_for: timedelta, policy: ElasticPolicy) -> Sizing | None:
    """A larger size for a running elastic job, once capacity returned: None while it is at
    its maximum, ran less than ``grow_after`` at its size, or would gain fewer than
    ``grow_by`` nodes.

    >>> job, policy = ElasticRange(min=2, max=8), ElasticPolicy()
    >>> grow_size(JobShape(elastic=job, size=5, fits=8), timedelta(hours=1), policy).size
    8
    >>> grow_size(JobShape(elastic=job, size=5, fits=8), timedelta(minutes=5), policy) is None
    True
    """
    job = shape.elastic
    if job is None or shape.size >= job.max or at_size_for < policy.grow_after:
        return None
    size = min(job.max, shape.fits)
    if size < shape.size + policy.grow_by:
        return None
    return Sizing(size=size, reason=f"capacity returned: grow from {shape.size} to {size}")


def below_max(shape: JobShape | None) -> bool:
    """Whether a job may grow: elastic and running below its maximum."""
    return shape is not None and shape.elastic is not None and shape.size < shape.elastic.max
