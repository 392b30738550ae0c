"""The slow rank: one GPU much slower than its peers stalls a lockstep job."""

from __future__ import annotations

import statistics

SLOW_RANK_SHARE = 0.8  # below 80 % of the median throughput is a slow rank


def slow_ranks(throughput: dict[int, float], share: float = SLOW_RANK_SHARE) -> list[str]:
    """GPUs much slower than their peers: with seven GPUs at 700 TFLOP/s and one at 400, the
    median is 700 and the one at 400 runs at 57 % of it — a slow rank."""
    if len(throughput) < 2:
        return []
    median = statistics.median(throughput.values())
    return [
        f"GPU {gpu}: {rate:.0f} TFLOP/s is {rate / median:.0%} of the median "
        f"{median:.0f} TFLOP/s (slow rank)"
        for gpu, rate in sorted(throughput.items())
        if rate < share * median
    ]
