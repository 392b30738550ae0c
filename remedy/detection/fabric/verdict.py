"""The verdict on a fabric test: passed or failed, with the figure measured and the floor it was
held to. The floors are per GPU model, in ``gpu_reference.yaml`` beside the load test's (their
sources are there): an 8x H100 SXM node's NCCL loopback must reach 150 GB/s of bus bandwidth,
two nodes' all-reduce 100 GB/s. Fail closed: a test that timed out, failed, ran on fewer GPUs
than asked, or printed what cannot be read is a failed test, never a pass.
"""

from __future__ import annotations

import statistics
from datetime import datetime
from enum import StrEnum

from remedy.core.models import Finding, Frozen, Severity
from remedy.detection.check_terms import CheckTerms
from remedy.detection.fabric.nccl import parse_all_reduce
from remedy.detection.fabric.nvbandwidth import D2D_READ_CE, parse_testcase
from remedy.detection.fabric.output import Unreadable
from remedy.detection.fabric.perftest import parse_write_bw
from remedy.detection.probe.throughput import References

FABRIC = CheckTerms(
    "fabric", "tests across GPUs and nodes (nccl-tests, nvbandwidth, ib_write_bw) as Jobs"
)
BANDWIDTH_LOW = FABRIC.reason(
    "FabricBandwidthLow", "a fabric test measured less than its floor for the GPU model"
)
WRONG_RESULTS = FABRIC.reason(
    "FabricWrongResults", "all_reduce_perf found wrong values: data corrupted on the path"
)
SLOW_LINK = FABRIC.reason(
    "FabricSlowLink", "a GPU pair far slower than the node's other pairs (nvbandwidth)"
)
COULD_NOT_RUN = FABRIC.reason(
    "FabricTestCouldNotRun",
    "a fabric test timed out, failed, ran short or printed unreadable output (fail closed)",
)
PASSED = FABRIC.reason("FabricTestPassed", "a fabric test reached its floor (info)")
NO_REFERENCE = FABRIC.reason(
    "FabricNoReference", "no fabric floor for the GPU model: the test ran, nothing judged"
)
SLOW_LINK_SHARE = 0.8  # a GPU pair below 80 % of the node's median pair is a slow link


class FabricTest(StrEnum):
    NCCL_LOOPBACK = "nccl_loopback"  # all_reduce_perf on all GPUs of one node
    NCCL_PAIR = "nccl_pair"  # all_reduce_perf across two nodes
    NVBANDWIDTH = "nvbandwidth"  # device_to_device_memcpy_read_ce on one node
    IB_WRITE_BW = "ib_write_bw"  # RDMA write between two nodes' NICs


class FabricVerdict(Frozen):
    test: FabricTest
    nodes: list[str]
    passed: bool
    reason: str = PASSED  # a FABRIC reason: why it failed, or that it passed
    figure: float | None = None  # what it measured (None: nothing could be read)
    threshold: float | None = None  # the floor it was held to
    unit: str = "GB/s"
    evidence: str = ""

    def finding(self, node: str, now: datetime) -> Finding:
        return Finding(
            node=node,
            check=FABRIC.check,
            reason=self.reason,
            severity=Severity.INFO if self.passed else Severity.CRITICAL,
            evidence=self.evidence[:1024],
            observed_at=now,
        )


def could_not_run(test: FabricTest, nodes: list[str], why: str) -> FabricVerdict:
    """A Job past its activeDeadlineSeconds, a failed pod, no output: a failed test."""
    return FabricVerdict(
        test=test, nodes=nodes, passed=False, reason=COULD_NOT_RUN, evidence=f"{test}: {why}"
    )


def judge_nccl(
    test: FabricTest, text: str, nodes: list[str], gpus: int, refs: References
) -> FabricVerdict:
    """all_reduce_perf's output from ``nodes`` with ``gpus`` GPUs in all. On two H100 nodes at
    337 GB/s against the pair floor of 100: passed. Fewer ranks than GPUs: failed."""
    try:
        run = parse_all_reduce(text)
    except Unreadable as err:
        return could_not_run(test, nodes, str(err))
    if not run.models or run.ranks != gpus or len(run.hosts) != len(nodes):
        return could_not_run(
            test,
            nodes,
            f"ran {run.ranks} ranks on {len(run.hosts)} hosts, asked "
            f"{gpus} GPUs on {len(nodes)} nodes",
        )
    figure, at = run.busbw, f"at {run.peak_size} B"
    if run.wrong:
        return FabricVerdict(
            test=test,
            nodes=nodes,
            passed=False,
            reason=WRONG_RESULTS,
            figure=figure,
            evidence=f"{test}: {run.wrong} wrong values (all_reduce_perf's check)",
        )
    ref = refs.lookup(run.models[0])
    floor = None
    if ref is not None:
        floor = ref.nccl_loopback_busbw if test is FabricTest.NCCL_LOOPBACK else ref.nccl_pair_busbw
    return _against(test, nodes, figure, floor, f"bus bandwidth {at}", run.models[0])


def judge_nvbandwidth(text: str, node: str, model: str, refs: References) -> FabricVerdict:
    """The node's GPU pairs: the weakest against the model's floor, each against the median of
    its peers (one NVLink down shows as one slow pair on a node whose others are fine)."""
    test, nodes = FabricTest.NVBANDWIDTH, [node]
    try:
        matrix = parse_testcase(text, D2D_READ_CE)
    except Unreadable as err:
        return could_not_run(test, nodes, str(err))
    median = statistics.median(matrix.pairs.values())
    slow = sorted(p for p, bw in matrix.pairs.items() if bw < SLOW_LINK_SHARE * median)
    (row, column), weakest = matrix.weakest
    if slow:
        named = ", ".join(f"GPU {a}->{b} {matrix.pairs[(a, b)]:.0f}" for a, b in slow[:8])
        return FabricVerdict(
            test=test,
            nodes=nodes,
            passed=False,
            reason=SLOW_LINK,
            figure=weakest,
            threshold=round(SLOW_LINK_SHARE * median, 2),
            evidence=f"{test}: {len(slow)} GPU pairs below {SLOW_LINK_SHARE:.0%} of the "
            f"median {median:.0f} GB/s: {named}",
        )
    ref = refs.lookup(model)
    floor = ref.nvbandwidth_d2d if ref else None
    return _against(test, nodes, weakest, floor, f"weakest pair GPU {row}->{column}", model)


def judge_write_bw(
    text: str, nodes: list[str], rate_gbps: float, share: float = 0.8
) -> FabricVerdict:
    """RDMA write between two nodes' NICs against ``share`` of the port's rate (its sysfs
    ``rate``): 92.5 Gb/s on a 100 Gb/s port passes the 80 Gb/s floor."""
    test = FabricTest.IB_WRITE_BW
    try:
        result = parse_write_bw(text)
    except Unreadable as err:
        return could_not_run(test, nodes, str(err))
    floor = share * rate_gbps
    port = f"a {rate_gbps:.0f} Gb/s port x {share:.0%}"
    return _against(test, nodes, result.average_gbps, floor, "average", port, unit="Gb/s")


def _against(
    test: FabricTest,
    nodes: list[str],
    figure: float,
    floor: float | None,
    what: str,
    model: str,
    unit: str = "GB/s",
) -> FabricVerdict:
    if floor is None:
        return FabricVerdict(
            test=test,
            nodes=nodes,
            passed=True,
            reason=NO_REFERENCE,
            figure=figure,
            unit=unit,
            evidence=f"{test}: {what} {figure:.1f} {unit}; no floor for {model}",
        )
    passed = figure >= floor
    return FabricVerdict(
        test=test,
        nodes=nodes,
        passed=passed,
        reason=PASSED if passed else BANDWIDTH_LOW,
        figure=figure,
        threshold=floor,
        unit=unit,
        evidence=f"{test}: {what} {figure:.1f} {unit} {'>=' if passed else '<'} "
        f"{floor:.0f} {unit} ({model}) on {', '.join(nodes)}",
    )
