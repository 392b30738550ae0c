"""The fabric tests' outputs read as the tools print them, on real published runs; an output that
stops short or cannot be read is Unreadable (a failed test), never a figure.

Samples (tests/data/fabric/), each copied unchanged from where it was published:

- nccl_2node_h100.txt: ``all_reduce_perf -b 8 -e 8G -f 2 -g 1`` on 16 ranks over two 8x H100
  80GB HBM3 nodes (GCP A3 Mega), from github.com/lessizzmore/create-a3mega-ztan-fork,
  file ``ztan-NCCL-test-result``.
- nccl_loopback_h100.txt: ``all_reduce_perf -b 256M -e 2G -f 2 -g 8`` on one 8x H100 node, from
  a public "Single Node NCCL Test" README (indented as published; code-search index id
  15601983362).
- nccl_efa_tagged.txt: ``mpirun --tag-output`` lines (``[1,0]<stdout>:``) of a 2-node EFA run,
  from the AWS EKS Blueprints elastic-fabric-adapter example README (its table header and its
  last rows, as that README shows them).
- nvbandwidth_h100.txt: ``nvbandwidth -t device_to_device_memcpy_read_ce`` v0.4 on 8x H100, from
  github.com/AlizeeChen11/azurehpc-health-checks ``customTests/debugging-test-failure.md``.
- nvbandwidth_v010.txt: the same testcase printed by nvbandwidth v0.10.0 (leading spaces,
  a COEFFICIENT_OF_VARIATION line; code-search index id 62193952648).
- ib_write_bw_roce.txt: ``ib_write_bw -d mlx5_0 10.0.33.3 -zR`` between two Kubernetes pods
  over SR-IOV RoCE, MB/sec with a "Conflicting CPU frequency" line inside the table (a public
  Kubernetes RDMA test write-up; code-search index id 47438530947).
- ib_write_bw_softroce_gbits.txt: ``ib_write_bw -d rxe0 --report_gbits`` on Soft-RoCE, Gb/sec
  (a public RDMA tutorial; code-search index id 59271472471).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from remedy.detection.fabric.nccl import parse_all_reduce
from remedy.detection.fabric.nvbandwidth import parse_testcase
from remedy.detection.fabric.output import Unreadable
from remedy.detection.fabric.perftest import MIB_PER_S_IN_GBIT, parse_write_bw

DATA = Path(__file__).parent / "data" / "fabric"


def sample(name: str) -> str:
    return (DATA / name).read_text()


def test_two_node_all_reduce_reads_ranks_hosts_and_the_largest_size() -> None:
    run = parse_all_reduce(sample("nccl_2node_h100.txt"))

    assert run.ranks == 16
    assert run.hosts == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert set(run.models) == {"NVIDIA H100 80GB HBM3"}
    assert run.peak_size == 8589934592
    # 338.82 out-of-place, 337.35 in-place: the lower is the figure; the average line's 70.742
    # averages the tiny sizes too and is not what the fabric carries.
    assert run.busbw == 337.35
    assert run.avg_busbw == 70.742
    assert run.wrong == 0


def test_single_node_loopback_indented_as_published() -> None:
    run = parse_all_reduce(sample("nccl_loopback_h100.txt"))

    assert (run.ranks, run.hosts) == (8, ["host"])
    assert run.busbw == 470.63
    assert len(run.rows) == 4


def test_mpirun_tagged_lines_are_read() -> None:
    run = parse_all_reduce(sample("nccl_efa_tagged.txt"))

    assert run.busbw == 3.11
    assert run.avg_busbw == 1.15327


def test_an_all_reduce_cut_before_its_summary_is_unreadable() -> None:
    text = sample("nccl_2node_h100.txt")
    cut = text[: text.index("  4294967296")]  # killed (activeDeadlineSeconds) mid-table

    with pytest.raises(Unreadable, match="stopped before its summary"):
        parse_all_reduce(cut)


def test_an_all_reduce_that_printed_no_table_is_unreadable() -> None:
    header = sample("nccl_2node_h100.txt").split("#\n#    ")[0]  # the devices, then it died

    with pytest.raises(Unreadable, match="no result table"):
        parse_all_reduce(header)


def test_wrong_values_are_counted_from_rows_and_the_bounds_line() -> None:
    text = sample("nccl_loopback_h100.txt")
    text = text.replace("470.73      0", "470.73      3").replace("0 OK", "3 FAILED")

    run = parse_all_reduce(text)

    assert run.wrong == 6


def test_a_row_with_a_missing_cell_is_unreadable() -> None:
    text = sample("nccl_loopback_h100.txt").replace("  470.63      0", "")

    with pytest.raises(Unreadable, match="cells"):
        parse_all_reduce(text)


def test_nvbandwidth_v04_matrix_and_sum() -> None:
    matrix = parse_testcase(sample("nvbandwidth_h100.txt"))

    assert len(matrix.pairs) == 56  # 8 GPUs, every ordered pair but a GPU with itself
    assert matrix.total == 20785.58
    assert matrix.pairs[(2, 4)] == 372.96
    assert matrix.weakest == ((0, 6), 370.26)
    assert sum(matrix.pairs.values()) == pytest.approx(matrix.total, abs=0.5)


def test_nvbandwidth_v010_with_leading_spaces() -> None:
    matrix = parse_testcase(sample("nvbandwidth_v010.txt"))

    assert len(matrix.pairs) == 56
    assert matrix.total == 22126.64
    assert matrix.weakest[1] == 395.05


def test_nvbandwidth_cut_before_its_sum_is_unreadable() -> None:
    text = sample("nvbandwidth_h100.txt").split("\nSUM ")[0]

    with pytest.raises(Unreadable, match="before its SUM"):
        parse_testcase(text)


def test_nvbandwidth_that_did_not_run_the_testcase_is_unreadable() -> None:
    with pytest.raises(Unreadable, match="did not run"):
        parse_testcase(sample("nvbandwidth_h100.txt"), "device_to_device_memcpy_write_ce")


def test_ib_write_bw_in_mib_per_second_is_converted_as_perftest_computes_it() -> None:
    result = parse_write_bw(sample("ib_write_bw_roce.txt"))

    [row] = result.rows
    assert (row.size, row.iterations) == (65536, 5000)
    # 11024.71 MiB/s (perftest divides by 0x100000) is 92.5 Gb/s on a 100 Gb/s RoCE port.
    assert result.average_gbps == pytest.approx(11024.71 * MIB_PER_S_IN_GBIT)
    assert round(result.average_gbps, 1) == 92.5


def test_ib_write_bw_report_gbits() -> None:
    result = parse_write_bw(sample("ib_write_bw_softroce_gbits.txt"))

    assert result.average_gbps == 0.48
    assert result.rows[0].peak_gbps == 0.74


def test_ib_write_bw_without_its_closing_line_is_unreadable() -> None:
    text = sample("ib_write_bw_roce.txt").rstrip().rsplit("\n", 1)[0]

    with pytest.raises(Unreadable, match="stopped before"):
        parse_write_bw(text)


def test_ib_write_bw_that_never_connected_is_unreadable() -> None:
    banner = sample("ib_write_bw_roce.txt").split(" local address")[0]

    with pytest.raises(Unreadable, match="no result header"):
        parse_write_bw(banner)
