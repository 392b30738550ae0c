"""The job's per-rank reports end to end: remedy_job's Reporter prints each rank's step times
once a minute (and NVRx scores, NCCL timeouts); the controller parses them from pod logs,
places each rank on its pod's node and judges the job. Goodput ignores them; an older
controller skips events it does not know. Fast: pure, no server."""

from __future__ import annotations

import doctest
import io
import json
import random
from datetime import UTC, datetime, timedelta

import remedy_job.ranks
from remedy.attribution.goodput import (
    Event,
    JobTimes,
    PodTime,
    Progress,
    goodput,
    parse,
    summarise,
)
from remedy.scan.job_symptoms import judge_jobs, symptoms
from remedy_job import PREFIX, Reporter

T0 = datetime(2026, 12, 7, 12, 0, 0, tzinfo=UTC)
# The three lines as the helpers agreed them (the simulator prints the same).
RANK = (
    'remedy.io/progress {"event":"rank","at":"2026-12-07T12:01:00.5+00:00","rank":13,'
    '"local_rank":5,"gpu":"GPU-5e8f","step":1200,"steps":30,"compute_s":0.412,"data_s":0.010}'
)
NVRX = (
    'remedy.io/progress {"event":"nvrx","at":"2026-12-07T12:01:02+00:00",'
    '"relative":{"13":0.71},"individual":{"13":0.8}}'
)
TIMEOUT = (
    'remedy.io/progress {"event":"nccl_timeout","at":"2026-12-07T12:01:03+00:00",'
    '"collective":"allreduce","missing_ranks":[13]}'
)


def test_the_docstring_example() -> None:
    assert doctest.testmod(remedy_job.ranks).failed == 0


def test_one_noisy_step_moves_no_minutes_median() -> None:
    times = remedy_job.ranks.RankTimes(timedelta(minutes=1))
    steps = [0.4] * 14 + [20.0] + [0.4] * 15  # one step 50 times as long (a GC pause, a retry)
    for i, compute in enumerate(steps):
        assert times.add(T0 + timedelta(seconds=2 * i), i, compute, 0.01) is None
    line = times.add(T0 + timedelta(seconds=60), 30, 0.4, 0.01)
    assert line == {"step": 29, "steps": 30, "compute_s": 0.4, "data_s": 0.01}


def test_the_three_lines_parse_and_unknown_events_are_skipped() -> None:
    future = 'remedy.io/progress {"event":"power_cap","at":"2026-12-07T12:01:04+00:00"}'
    rank, nvrx, timeout = parse("\n".join(["hello", RANK, future, NVRX, TIMEOUT]))
    assert (rank.event, rank.rank, rank.local_rank, rank.gpu) == (Event.RANK, 13, 5, "GPU-5e8f")
    assert (rank.step, rank.steps, rank.compute_s, rank.data_s) == (1200, 30, 0.412, 0.01)
    assert nvrx.relative == {13: 0.71} and nvrx.individual == {13: 0.8}
    assert (timeout.collective, timeout.missing_ranks) == ("allreduce", [13])
    broken = RANK.replace('"compute_s":0.412', '"compute_s":-1')  # never a negative time
    assert parse(broken) == []


def test_the_helpers_nvrx_and_timeout_lines_are_what_remedy_parses() -> None:
    out = io.StringIO()
    report = Reporter(out=out, clock=lambda: T0, rank=0)
    report.nvrx({13: 0.7123456, 2: 1.0}, {13: 0.8})
    report.collective_timeout("allreduce", [13, 4])
    nvrx, timeout = parse(out.getvalue())
    assert (nvrx.event, nvrx.relative, nvrx.individual) == (
        Event.NVRX,
        {2: 1.0, 13: 0.7123},
        {13: 0.8},
    )
    assert (timeout.event, timeout.collective, timeout.missing_ranks) == (
        Event.NCCL_TIMEOUT,
        "allreduce",
        [4, 13],
    )
    job = JobTimes(job="ml/a", pods=[PodTime(pod="p", node="n", started_at=T0)])
    [judged] = judge_jobs([job], T0)
    assert judged.not_judged == "no rank reported in the last 5 min"


def test_symptoms_place_each_rank_on_its_pods_node() -> None:
    pod = PodTime(pod="train-1", node="node-b", started_at=T0, progress=parse(f"{RANK}\n{NVRX}"))
    unplaced = PodTime(pod="train-2", started_at=T0, progress=parse(f"{RANK}\n{TIMEOUT}"))
    samples, nvrx, timeouts = symptoms(JobTimes(job="ml/a", pods=[pod, unplaced]))
    [s] = samples  # the pod with no node yet: nothing to place its rank on
    assert (s.node, s.pod, s.rank, s.gpu, s.compute_s) == (
        "node-b",
        "train-1",
        13,
        "GPU-5e8f",
        0.412,
    )
    assert nvrx[0].relative == {13: 0.71} and timeouts[0].missing_ranks == [13]


def test_goodput_ignores_the_detectors_events() -> None:
    loop = [
        Progress(event=Event.RESUMED, at=T0, step=0),
        Progress(event=Event.CHECKPOINT, at=T0 + timedelta(minutes=30), step=300, seconds=60),
        Progress(event=Event.STEP, at=T0 + timedelta(minutes=40), step=400),
    ]
    extra = parse(
        RANK.replace("12:01:00.5", "12:50:00").replace('"step":1200', '"step":9999') + "\n" + NVRX
    )
    now = T0 + timedelta(hours=1)

    def figures(progress: list[Progress]) -> tuple[float, int | None]:
        pod = PodTime(pod="p", node="n", gpus=8, started_at=T0, progress=progress)
        g = goodput(summarise(JobTimes(job="ml/a", pods=[pod]), now), now)
        return g.productive_s, g.step

    assert figures(loop + extra) == figures(loop) == (29 * 60 * 8, 400)


def _run(minutes: int, slow_node: int, noisy_node: int) -> tuple[dict[int, str], datetime]:
    """4 nodes × 2 ranks stepping every 2 s; one node 20 % slower; one step of another node
    20 s long (a noisy step). Each node's ranks print into their pod's log."""
    rng, now = random.Random(3), [T0]
    logs = {n: io.StringIO() for n in range(4)}
    ranks = [
        Reporter(
            out=logs[n],
            clock=lambda: now[0],
            rank=n * 2 + local,
            local_rank=local,
            gpu=f"GPU-{n}{local}",
        )
        for n in range(4)
        for local in range(2)
    ]
    for step in range(minutes * 30):
        now[0] = T0 + timedelta(seconds=2 * step + 1)
        for i, r in enumerate(ranks):
            node = i // 2
            compute = 0.4 * (1.2 if node == slow_node else 1.0) * (1 + rng.gauss(0, 0.02))
            if node == noisy_node and step == 100:
                compute = 20.0
            r.timed(step, compute, 0.01)
    return {n: log.getvalue() for n, log in logs.items()}, now[0]


def test_the_reporters_lines_round_trip_into_a_verdict() -> None:
    logs, now = _run(minutes=8, slow_node=2, noisy_node=1)
    lines = [json.loads(line.removeprefix(PREFIX)) for line in logs[0].splitlines()]
    rank0 = [line for line in lines if line["rank"] == 0]
    # A line a minute (the first after each minute of the clock), with the minute's medians.
    assert [line["at"][11:19] for line in rank0] == [f"12:0{m}:01" for m in range(1, 8)]
    assert all(line["steps"] == 30 and abs(line["compute_s"] - 0.4) < 0.02 for line in rank0)
    assert list(rank0[0]) == [
        "event", "at", "rank", "local_rank", "gpu", "step", "steps", "compute_s", "data_s",
    ]  # fmt: skip
    pods = [
        PodTime(pod=f"train-{n}", node=f"node-{n}", gpus=2, started_at=T0, progress=parse(log))
        for n, log in logs.items()
    ]
    [report] = judge_jobs([JobTimes(job="ml/a", pods=pods)], now)
    [suspect] = report.suspects  # node-1's 20 s step moved no minute's median
    assert suspect.node == "node-2" and {r.gpu for r in suspect.ranks} == {"GPU-20", "GPU-21"}
    assert 0.8 < suspect.score < 0.86
