"""Each fabric test's verdict: the figure, the floor for the GPU model (gpu_reference.yaml) and
pass or fail; a test that could not be read or ran short fails. Samples and their sources:
tests/test_fabric_parsers.py."""

from __future__ import annotations

from datetime import UTC, datetime

from remedy.core.models import Severity
from remedy.detection.fabric.verdict import (
    BANDWIDTH_LOW,
    COULD_NOT_RUN,
    NO_REFERENCE,
    PASSED,
    SLOW_LINK,
    WRONG_RESULTS,
    FabricTest,
    could_not_run,
    judge_nccl,
    judge_nvbandwidth,
    judge_write_bw,
)
from remedy.detection.probe.throughput import load_references
from remedy.detection.vocabulary import TERMS
from tests.test_fabric_parsers import sample

REFS = load_references()
NOW = datetime(2026, 12, 7, 18, 0, tzinfo=UTC)
PAIR = ["ztan-mig-235z", "ztan-mig-gq73"]
H100 = "NVIDIA H100 80GB HBM3"


def test_h100_floors_are_nvsentinels() -> None:
    ref = REFS.lookup(H100)
    assert ref is not None and ref.model == "H100 SXM"
    assert (ref.nccl_loopback_busbw, ref.nccl_pair_busbw) == (150, 100)
    assert "NVSentinel" in ref.fabric_source


def test_a_healthy_loopback_passes_with_its_figure_and_floor() -> None:
    verdict = judge_nccl(
        FabricTest.NCCL_LOOPBACK, sample("nccl_loopback_h100.txt"), ["host"], 8, REFS
    )

    assert verdict.passed and verdict.reason == PASSED
    assert (verdict.figure, verdict.threshold) == (470.63, 150)
    assert "470.6 GB/s >= 150 GB/s (NVIDIA H100 80GB HBM3)" in verdict.evidence


def test_a_slow_loopback_fails_below_150() -> None:
    slow = sample("nccl_loopback_h100.txt").replace("470.73", "120.10").replace("470.63", "119.9")

    verdict = judge_nccl(FabricTest.NCCL_LOOPBACK, slow, ["host"], 8, REFS)

    assert not verdict.passed and verdict.reason == BANDWIDTH_LOW
    assert (verdict.figure, verdict.threshold) == (119.9, 150)
    assert verdict.finding("host", NOW).severity is Severity.CRITICAL


def test_a_two_node_all_reduce_passes_the_pair_floor() -> None:
    verdict = judge_nccl(FabricTest.NCCL_PAIR, sample("nccl_2node_h100.txt"), PAIR, 16, REFS)

    assert verdict.passed
    assert (verdict.figure, verdict.threshold) == (337.35, 100)


def test_fewer_ranks_than_gpus_asked_is_a_failed_test() -> None:
    verdict = judge_nccl(FabricTest.NCCL_PAIR, sample("nccl_2node_h100.txt"), PAIR, 32, REFS)

    assert not verdict.passed and verdict.reason == COULD_NOT_RUN
    assert "ran 16 ranks on 2 hosts, asked 32 GPUs on 2 nodes" in verdict.evidence


def test_wrong_values_fail_whatever_the_bandwidth() -> None:
    text = sample("nccl_loopback_h100.txt").replace("0 OK", "2 FAILED")

    verdict = judge_nccl(FabricTest.NCCL_LOOPBACK, text, ["host"], 8, REFS)

    assert not verdict.passed and verdict.reason == WRONG_RESULTS


def test_output_cut_short_fails_closed() -> None:
    text = sample("nccl_2node_h100.txt").split("# Out of bounds")[0]

    verdict = judge_nccl(FabricTest.NCCL_PAIR, text, PAIR, 16, REFS)

    assert not verdict.passed and verdict.reason == COULD_NOT_RUN
    assert verdict.figure is None


def test_a_model_without_floors_passes_and_says_so() -> None:
    text = sample("nccl_loopback_h100.txt").replace(H100, "NVIDIA A100-SXM4-80GB")

    verdict = judge_nccl(FabricTest.NCCL_LOOPBACK, text, ["host"], 8, REFS)

    assert verdict.passed and verdict.reason == NO_REFERENCE
    assert verdict.finding("host", NOW).severity is Severity.INFO


def test_nvbandwidth_healthy_h100() -> None:
    verdict = judge_nvbandwidth(sample("nvbandwidth_h100.txt"), "n1", H100, REFS)

    assert verdict.passed
    assert (verdict.figure, verdict.threshold) == (370.26, 270)


def test_nvbandwidth_one_slow_pair_is_a_slow_link() -> None:
    text = sample("nvbandwidth_h100.txt").replace("372.96", "180.12")  # GPU 2 -> GPU 4

    verdict = judge_nvbandwidth(text, "n1", H100, REFS)

    assert not verdict.passed and verdict.reason == SLOW_LINK
    assert "GPU 2->4 180" in verdict.evidence


def test_nvbandwidth_all_pairs_slow_fail_the_model_floor() -> None:
    text = sample("nvbandwidth_h100.txt")
    slow = text.replace("370.", "200.").replace("371.", "201.").replace("372.", "202.")

    verdict = judge_nvbandwidth(slow, "n1", H100, REFS)

    assert not verdict.passed and verdict.reason == BANDWIDTH_LOW
    assert verdict.threshold == 270


def test_ib_write_bw_against_the_port_rate() -> None:
    good = judge_write_bw(sample("ib_write_bw_roce.txt"), ["a", "b"], rate_gbps=100)
    bad = judge_write_bw(sample("ib_write_bw_roce.txt"), ["a", "b"], rate_gbps=200)

    assert good.passed and good.unit == "Gb/s" and good.threshold == 80
    assert not bad.passed and bad.reason == BANDWIDTH_LOW
    assert "92.5 Gb/s < 160 Gb/s" in bad.evidence


def test_a_timed_out_job_is_a_failed_test() -> None:
    verdict = could_not_run(FabricTest.NCCL_PAIR, PAIR, "DeadlineExceeded after 600 s")

    assert not verdict.passed and verdict.reason == COULD_NOT_RUN
    assert verdict.finding(PAIR[0], NOW).check == "fabric"


def test_the_fabric_reasons_are_in_the_vocabulary() -> None:
    [fabric] = [t for t in TERMS if t.check == "fabric"]
    assert {BANDWIDTH_LOW, WRONG_RESULTS, SLOW_LINK, COULD_NOT_RUN} <= set(fabric.reasons)


def test_an_output_without_its_rank_lines_is_a_failed_test() -> None:
    # The EFA README's excerpt keeps the table and the summary but not the devices.
    verdict = judge_nccl(FabricTest.NCCL_PAIR, sample("nccl_efa_tagged.txt"), PAIR, 2, REFS)

    assert not verdict.passed and verdict.reason == COULD_NOT_RUN
    assert "ran 0 ranks on 0 hosts" in verdict.evidence
