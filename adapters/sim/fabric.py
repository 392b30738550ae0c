"""Simulated fabric tests: each Job finishes at once with the output its tool would print, in
the tools' own formats (what remedy/detection/fabric reads), from each node's simulated
figures: a healthy 8x H100 SXM node unless a test or the demo slows it (``busbw``, ``pair_gb``,
``write_gbps``: its NIC, so every ib_write_bw pair it is in) or hangs its Jobs (``hung``: they
run until their deadline)."""

from __future__ import annotations

from dataclasses import dataclass, field

from remedy.detection.fabric.verdict import FabricTest
from remedy.scan.fabric import FabricOutcome, FabricRun, JobState

H100 = "NVIDIA H100 80GB HBM3"
HEALTHY_BUSBW = 470.6  # GB/s: an 8x H100 SXM node's all_reduce_perf at 2 GiB
HEALTHY_PAIR = 370.9  # GB/s: one NVLink 4 GPU pair, device_to_device_memcpy_read_ce
HEALTHY_WRITE_GBPS = 390.0  # ib_write_bw on a 400 Gb/s port


@dataclass
class SimFabricJobs:
    gpus: int = 8
    model: str = H100
    busbw: dict[str, float] = field(default_factory=dict)  # node → all_reduce_perf busbw
    pair_gb: dict[str, float] = field(default_factory=dict)  # node → its GPU pairs' GB/s
    write_gbps: dict[str, float] = field(default_factory=dict)  # node → its NIC's RDMA Gb/s
    hung: set[str] = field(default_factory=set)  # nodes whose Jobs never finish
    started: list[FabricRun] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def start(self, run: FabricRun) -> FabricRun:
        made = run.model_copy(
            update={"gpus": run.gpus or self.gpus, "model": run.model or self.model}
        )
        if made.run_id not in {r.run_id for r in self.started}:
            self.started.append(made)
        return made

    def outcome(self, run: FabricRun) -> FabricOutcome:
        if self.hung.intersection(run.nodes):
            return FabricOutcome(state=JobState.RUNNING)
        return FabricOutcome(state=JobState.SUCCEEDED, output=self._output(run))

    def remove(self, run: FabricRun) -> None:
        self.removed.append(run.run_id)

    def _output(self, run: FabricRun) -> str:
        node = run.nodes[0]
        if run.test is FabricTest.NVBANDWIDTH:
            return nvbandwidth_output(self.gpus, self.pair_gb.get(node, HEALTHY_PAIR))
        if run.test is FabricTest.IB_WRITE_BW:
            return write_bw_output(
                min(self.write_gbps.get(n, HEALTHY_WRITE_GBPS) for n in run.nodes)
            )
        busbw = min(self.busbw.get(n, HEALTHY_BUSBW) for n in run.nodes)
        return all_reduce_output(run.nodes, run.gpus, self.model, busbw)


def all_reduce_output(nodes: list[str], gpus: int, model: str, busbw: float) -> str:
    ranks = [
        f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on {node} device {g:2d} [0x{g:02x}] {model}"
        for r, (node, g) in enumerate((n, g) for n in nodes for g in range(gpus))
    ]
    rows = [
        f"{size:12d} {size // 4:13d}     float     sum      -1   1000.0  {bw / 1.75:6.2f}"
        f"  {bw:6.2f}      0   1000.0  {bw / 1.75:6.2f}  {bw:6.2f}      0"
        for size, bw in ((268435456, busbw * 0.9), (2147483648, busbw))
    ]
    return "\n".join(
        [
            "# Using devices",
            *ranks,
            "#       size         count      type   redop    root     time   algbw   busbw"
            " #wrong     time   algbw   busbw #wrong",
            *rows,
            "# Out of bounds values : 0 OK",
            f"# Avg bus bandwidth    : {busbw * 0.95:.3f}",
        ]
    )


def nvbandwidth_output(gpus: int, pair: float) -> str:
    header = "    " + "".join(f"{c:10d}" for c in range(gpus))
    rows = [
        f"{r:<4d}" + "".join(f"{'N/A' if r == c else f'{pair:.2f}':>10}" for c in range(gpus))
        for r in range(gpus)
    ]
    total = pair * gpus * (gpus - 1)
    return "\n".join(
        [
            "Running device_to_device_memcpy_read_ce.",
            "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)",
            header,
            *rows,
            "",
            f"SUM device_to_device_memcpy_read_ce {total:.2f}",
        ]
    )


def write_bw_output(gbps: float) -> str:
    return "\n".join(
        [
            " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
            f" 65536      5000             {gbps:.2f}            {gbps:.2f}               0.74",
            "-" * 87,
        ]
    )
