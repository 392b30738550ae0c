"""Goodput and job success, the pure part: the worked examples in remedy/attribution/goodput.py's
docstrings, and what a lost run and a succeeded one count."""

from __future__ import annotations

import doctest
from datetime import UTC, datetime, timedelta

import remedy.attribution.goodput
import remedy_job.progress
from remedy.attribution.goodput import Event, JobTimes, PodTime, Progress, goodput, parse, summarise

T0 = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_the_worked_examples_hold() -> None:
    for module in (remedy.attribution.goodput, remedy_job.progress):
        assert doctest.testmod(module).failed == 0


def test_a_restart_loses_the_work_since_the_checkpoint_and_keeps_the_rest() -> None:
    first = PodTime(
        pod="r0",
        gpus=8,
        started_at=at(0),
        ended_at=at(50),
        progress=[
            Progress(event=Event.RESUMED, at=at(5), step=0),
            Progress(event=Event.CHECKPOINT, at=at(40), step=400),
        ],
    )
    second = PodTime(
        pod="r1",
        gpus=8,
        started_at=at(60),
        ended_at=at(100),
        succeeded=True,
        progress=[Progress(event=Event.RESUMED, at=at(62), step=400)],
    )
    work = summarise(JobTimes(job="ml/a", pods=[first, second]), at(120))
    job = goodput(work, at(120))
    # kept: 5→40 of the first run, 62→100 of the second; paid: 50 + 40 minutes
    assert job.productive_s == 8 * 60 * (35 + 38)
    assert job.paid_s == 8 * 60 * (50 + 40)
    assert (job.checkpoint_step, job.step) == (400, 400)
    # a later look that no longer sees the first pod keeps what it did
    later = work.merge(summarise(JobTimes(job="ml/a", pods=[second]), at(130)))
    assert goodput(later, at(120)).productive_s == job.productive_s


def test_only_the_helpers_lines_are_reports() -> None:
    log = "\n".join(
        [
            'remedy.io/progress {"event":"step","at":"2026-11-29T08:00:00+00:00","step":3}',
            'echo remedy.io/progress {"event":"step","at":"2026-11-29T08:00:00+00:00"}',
            "remedy.io/progress {broken",
            'remedy.io/progress {"event":"step","at":"2026-11-29T08:01:00+00:00","new":1}',
            "Traceback (most recent call last):",
        ]
    )
    assert [p.at for p in parse(log)] == [at(0), at(1)]
