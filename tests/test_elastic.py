"""Elastic restarts, the pure part: the range a job declares, the size a restart runs it at,
and when it grows back (with hysteresis)."""

from __future__ import annotations

import doctest
from datetime import timedelta

import pytest

from remedy.attribution import elastic
from remedy.attribution.elastic import (
    ElasticPolicy,
    ElasticRange,
    JobShape,
    declared,
    grow_size,
    restart_size,
)

JOB = ElasticRange(min=2, max=8)
HOUR = timedelta(hours=1)


def test_the_worked_examples_hold() -> None:
    assert doctest.testmod(elastic).failed == 0


@pytest.mark.parametrize(
    ("annotation", "args", "expected"),
    [
        ("2:8", [], "2:8"),
        (None, ["torchrun", "--nnodes=2:8", "train.py"], "2:8"),
        (None, ["torchrun", "--nnodes", "1:4", "train.py"], "1:4"),
        ("3:6", ["torchrun", "--nnodes=2:8"], "3:6"),  # the annotation wins
        (None, ["torchrun", "--nnodes=4", "train.py"], None),  # a fixed size
        ("4:4", [], None),
        (None, ["torchrun", "--nnodes=$(NNODES)"], None),  # not readable: not elastic
        (None, ["python", "train.py"], None),
    ],
)
def test_a_job_declares_its_range_by_annotation_or_torchrun(
    annotation: str | None, args: list[str], expected: str | None
) -> None:
    found = declared(annotation, args)
    assert (str(found) if found else None) == expected


@pytest.mark.parametrize("bad", ["8:2", "two:8", "", "0:4", "2:"])
def test_a_broken_annotation_is_refused_not_guessed(bad: str) -> None:
    with pytest.raises(ValueError):
        declared(bad, [])


def test_a_restart_takes_the_size_capacity_allows_within_the_range() -> None:
    def size(fits: int) -> int | None:
        sizing = restart_size(JobShape(elastic=JOB, size=8, fits=fits))
        return sizing.size if sizing else None

    assert [size(f) for f in (0, 1, 2, 5, 8, 12)] == [2, 2, 2, 5, 8, 8]
    assert restart_size(JobShape(elastic=None, size=8, fits=3)) is None  # fixed: as it was


def test_a_job_grows_when_capacity_returned_after_it_ran_long_enough_at_its_size() -> None:
    policy = ElasticPolicy(grow_after=timedelta(minutes=30), grow_by=2)

    def grow(size: int, fits: int, ran: timedelta) -> int | None:
        sizing = grow_size(JobShape(elastic=JOB, size=size, fits=fits), ran, policy)
        return sizing.size if sizing else None

    assert grow(5, 8, HOUR) == 8
    assert grow(5, 12, HOUR) == 8  # never past its maximum
    assert grow(5, 8, timedelta(minutes=29)) is None  # hysteresis: too soon after a restart
    assert grow(5, 6, HOUR) is None  # gains fewer than grow_by
    assert grow(5, 3, HOUR) is None  # capacity shrank further: the next failure shrinks it
    assert grow(8, 8, HOUR) is None  # at its maximum
    assert grow_size(JobShape(size=4, fits=8), HOUR, policy) is None  # not elastic
