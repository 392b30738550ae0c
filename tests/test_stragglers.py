"""The straggler detector on synthetic rank step times: 64 nodes × 8 ranks, each rank's minute
summary (its median compute time per step) with seeded noise. One slow node is found, and only
it; the whole job slowing, one noisy step and one noisy minute blame nobody; input skew is the
application's. Fast: pure functions, no server."""

from __future__ import annotations

import doctest
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from remedy.detection import vocabulary
from remedy.detection.stragglers import scores
from remedy.detection.stragglers.models import (
    SLOW_NODE,
    STRAGGLERS,
    Cause,
    CollectiveTimeout,
    NvrxScores,
    RankSample,
    StragglerPolicy,
)
from remedy.detection.stragglers.scores import judge
from remedy.runbook import load_runbooks

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
NODES, RANKS, COMPUTE, DATA = 64, 8, 0.4, 0.01
Factor = Callable[[int, int, int], float]  # (node, local rank, minute) -> multiplier


def _one(node: int, local: int, minute: int) -> float:
    return 1.0


def series(
    minutes: int = 10,
    nodes: int = NODES,
    compute: Factor = _one,
    data: Factor = _one,
    seed: int = 7,
) -> list[RankSample]:
    """Each rank's line just after each minute (0–2 s late), summarising the minute before."""
    rng = random.Random(seed)
    out = []
    for m in range(1, minutes + 1):
        for n in range(nodes):
            for local in range(RANKS):
                out.append(
                    RankSample(
                        node=f"node-{n:02d}",
                        pod=f"train-{n:02d}",
                        rank=n * RANKS + local,
                        local_rank=local,
                        gpu=f"GPU-{n:02d}-{local}",
                        at=T0 + timedelta(minutes=m, seconds=rng.uniform(0, 2)),
                        step=m * 150,
                        steps=150,
                        compute_s=COMPUTE * compute(n, local, m) * (1 + rng.gauss(0, 0.02)),
                        data_s=DATA * data(n, local, m) * (1 + abs(rng.gauss(0, 0.1))),
                    )
                )
    return out


def at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute, seconds=30)


def test_the_docstring_example() -> None:
    assert doctest.testmod(scores).failed == 0


def test_one_slow_node_among_64_is_found_and_only_it() -> None:
    samples = series(compute=lambda n, _, m: 1.15 if n == 41 else 1.0)
    report = judge(samples, at(10), "ml/llm")
    [suspect] = report.suspects
    assert suspect.node == "node-41" and suspect.cause is Cause.NODE
    assert 0.83 < suspect.score < 0.9
    assert (suspect.slow_buckets, suspect.buckets) == (5, 5)
    assert {r.rank for r in suspect.ranks} == set(range(41 * 8, 42 * 8))
    assert not report.application and not report.not_judged
    # One readable line: score, window, slow buckets, ranks with their GPUs, history.
    assert "in 5/5 buckets of 12:05–12:10" in suspect.evidence
    assert "328→GPU-41-0" in suspect.evidence and "slow before too" in suspect.evidence


def test_a_node_slow_from_its_first_minutes_is_found_within_three() -> None:
    samples = series(minutes=3, compute=lambda n, _, m: 1.15 if n == 5 else 1.0)
    [suspect] = judge(samples, at(3), "ml/llm").suspects
    assert suspect.node == "node-05" and "no history before the window" in suspect.evidence
    assert judge(samples, at(2), "ml/llm").suspects == []  # two minutes: not yet a window


def test_the_whole_job_slowing_blames_no_node() -> None:
    # Every rank 40 % slower from minute 8 to 11: a data loader, checkpoint writes, a slow
    # collective. Scored against anything but each minute's own median (the job's usual step
    # time, the history's median, a fixed expectation), every node would be slow in 4 of the
    # 5 buckets ending at minute 11.
    slowing = lambda n, _, m: 1.4 if 8 <= m <= 11 else 1.0  # noqa: E731
    samples = series(minutes=15, compute=slowing)
    for minute in range(5, 16, 2):
        report = judge(samples, at(minute), "ml/llm")
        assert report.suspects == [] and report.application == [], minute


def test_a_slow_node_is_still_found_while_the_whole_job_slows() -> None:
    both = lambda n, _, m: (1.4 if 8 <= m <= 11 else 1.0) * (1.15 if n == 9 else 1.0)  # noqa: E731
    report = judge(series(minutes=15, compute=both), at(11), "ml/llm")
    assert [s.node for s in report.suspects] == ["node-09"]
    assert 0.83 < report.suspects[0].score < 0.9  # the same score in slowed minutes


def test_scores_are_against_each_minutes_median_not_absolute_times() -> None:
    # A regression guard: the job's pace changes every minute (0.7× to 1.6×, a shared cause);
    # only a reference taken within each minute sees through it to the one node 15 % slower.
    pace = random.Random(11)
    factors = {m: pace.uniform(0.7, 1.6) for m in range(1, 11)}
    both = lambda n, _, m: factors[m] * (1.15 if n == 50 else 1.0)  # noqa: E731
    report = judge(series(compute=both), at(10), "ml/llm")
    assert [s.node for s in report.suspects] == ["node-50"]
    assert 0.83 < report.suspects[0].score < 0.9


def test_one_noisy_minute_on_a_node_blames_no_node() -> None:
    noisy = lambda n, _, m: 1.5 if (n == 3 and m == 8) else 1.0  # noqa: E731
    samples = series(compute=noisy)
    for minute in (8, 9, 10):
        assert judge(samples, at(minute), "ml/llm").suspects == [], minute


def test_two_noisy_minutes_apart_blame_no_node() -> None:
    noisy = lambda n, _, m: 1.5 if (n == 3 and m in (6, 9)) else 1.0  # noqa: E731
    assert judge(series(compute=noisy), at(10), "ml/llm").suspects == []


def test_an_input_skewed_node_is_the_applications_not_a_suspect() -> None:
    skewed = lambda n, _, m: 8.0 if n == 17 else 1.0  # noqa: E731
    report = judge(series(data=skewed), at(10), "ml/llm")
    assert report.suspects == []
    [app] = report.application
    assert app.node == "node-17" and app.cause is Cause.APPLICATION
    assert app.score > 0.9 and "input skew" in app.evidence


def test_the_whole_job_waiting_for_input_is_nobodys_skew() -> None:
    report = judge(series(data=lambda n, _, m: 10.0), at(10), "ml/llm")
    assert report.suspects == [] and report.application == []


def test_a_few_milliseconds_more_of_a_tiny_wait_is_not_skew() -> None:
    # 0.02 s against 0.01 s: twice the job's wait, but 2.5 % of its 0.4 s compute.
    tiny = lambda n, _, m: 2.0 if n == 17 else 1.0  # noqa: E731
    assert judge(series(data=tiny), at(10), "ml/llm").application == []


def test_a_node_slow_on_one_gpu_is_found_with_that_rank_and_gpu() -> None:
    one_gpu = lambda n, local, m: 1.25 if (n == 7 and local == 3) else 1.0  # noqa: E731
    [suspect] = judge(series(compute=one_gpu), at(10), "ml/llm").suspects
    assert suspect.node == "node-07"
    [rank] = suspect.ranks
    assert (rank.rank, rank.local_rank, rank.gpu, rank.pod) == (59, 3, "GPU-07-3", "train-07")
    assert "59→GPU-07-3 0.80" in suspect.evidence


def test_a_node_that_became_slow_says_so() -> None:
    late = lambda n, _, m: 1.2 if (n == 30 and m > 10) else 1.0  # noqa: E731
    [suspect] = judge(series(minutes=16, compute=late), at(16), "ml/llm").suspects
    assert suspect.node == "node-30" and "became slow" in suspect.evidence


def test_fewer_than_three_nodes_are_not_judged() -> None:
    samples = series(nodes=2, compute=lambda n, _, m: 1.5 if n == 1 else 1.0)
    report = judge(samples, at(10), "ml/small")
    assert report.suspects == [] and report.not_judged == "2 nodes report: fewer than 3"
    assert "no rank reported" in judge([], at(10), "ml/small").not_judged


def test_nvrx_scores_and_a_timeout_are_evidence_not_suspects() -> None:
    samples = series(compute=lambda n, _, m: 1.15 if n == 41 else 1.0)
    nvrx = [NvrxScores(at=at(9), relative={330: 0.71, 8: 0.99}, individual={330: 0.8})]
    timeouts = [CollectiveTimeout(at=at(9), collective="allreduce", missing_ranks=[330, 12, 9999])]
    report = judge(samples, at(10), "ml/llm", nvrx=nvrx, timeouts=timeouts)
    [suspect] = report.suspects  # node-01 (rank 12) missed the collective: not a suspect
    assert suspect.nvrx_relative == 0.71 and "NVRx relative 0.71" in suspect.evidence
    assert "missed a collective that timed out (ranks 330)" in suspect.evidence
    assert report.missed == {"node-01": [12], "node-41": [330]}
    quiet = judge(series(), at(10), "ml/llm", nvrx=nvrx, timeouts=timeouts)
    assert quiet.suspects == [] and quiet.missed == {"node-01": [12], "node-41": [330]}


def test_a_longer_window_needs_more_slow_minutes() -> None:
    policy = StragglerPolicy(window=timedelta(minutes=10))
    three = lambda n, _, m: 1.3 if (n == 2 and m >= 8) else 1.0  # noqa: E731
    samples = series(compute=three)
    assert judge(samples, at(10), "ml/llm").suspects != []
    assert judge(samples, at(10), "ml/llm", policy=policy).suspects == []


def test_a_runbook_may_match_a_slow_node(tmp_path: Path) -> None:
    (tmp_path / "slow.yaml").write_text(
        "name: slow-node\nmatch:\n  - checks: [stragglers]\n    reasons: [SlowNode]\n"
        "ladder:\n  - action: cordon\n"
    )
    [runbook] = load_runbooks([tmp_path])
    assert runbook.name == "slow-node" and vocabulary.check_of(SLOW_NODE) == STRAGGLERS.check
