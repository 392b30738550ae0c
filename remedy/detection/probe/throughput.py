"""Is each GPU as fast as it should be? Compared with its peers on the node (the slow rank that
stalls a lockstep job) and with a reference for its model (a node whose GPUs are all equally
slow has no slow peer). The references ship in ``gpu_reference.yaml``; an agent may override
them with a file of the same shape."""

from __future__ import annotations

import statistics
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from remedy.core.models import Severity
from remedy.core.yaml_source import read_yaml
from remedy.detection.probe.load import LoadProblem, LoadReason

REFERENCE_FILE = Path(__file__).with_name("gpu_reference.yaml")
SLOW_RANK_SHARE = 0.8  # below 80 % of the node's median throughput is a slow rank


class GpuReference(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    match: list[str] = Field(min_length=1)  # substrings of the device name (case-insensitive)
    tflops: float = Field(gt=0)  # dense 16-bit tensor throughput, datasheet
    source: str = ""
    # The fabric tests' floors (remedy/detection/fabric/verdict.py), GB/s; None: not judged
    # against the model, only against peers where there are some.
    nccl_loopback_busbw: float | None = Field(default=None, gt=0)  # all GPUs of one node
    nccl_pair_busbw: float | None = Field(default=None, gt=0)  # all-reduce across two nodes
    nvbandwidth_d2d: float | None = Field(default=None, gt=0)  # each GPU pair, memcpy read CE
    fabric_source: str = ""


class References(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    floor: float = Field(0.5, gt=0, le=1)  # share of the reference a healthy GPU reaches
    models: list[GpuReference] = []

    def lookup(self, device_name: str) -> GpuReference | None:
        name = device_name.lower()
        return next((r for r in self.models if any(m.lower() in name for m in r.match)), None)


@cache
def load_references(path: Path = REFERENCE_FILE) -> References:
    """The references in ``path`` (ValueError or OSError when it is not a valid file)."""
    return References.model_validate(read_yaml(path).data)


def slow_ranks(throughput: dict[int, float], share: float = SLOW_RANK_SHARE) -> list[LoadProblem]:
    """GPUs much slower than their peers: with seven GPUs at 700 TFLOP/s and one at 400, the
    median is 700 and the one at 400 runs at 57 % of it — a slow rank. One GPU has no peer."""
    if len(throughput) < 2:
        return []
    median = statistics.median(throughput.values())
    return [
        LoadProblem(
            gpu=gpu,
            reason=LoadReason.SLOW_RANK,
            evidence=f"GPU {gpu}: {rate:.0f} TFLOP/s is {rate / median:.0%} of the median "
            f"{median:.0f} TFLOP/s of its peers (slow rank)",
        )
        for gpu, rate in sorted(throughput.items())
        if rate < share * median
    ]


def below_reference(
    throughput: dict[int, float], models: dict[int, str], refs: References
) -> list[LoadProblem]:
    """GPUs slower than their model should be: an H100 SXM (989 TFLOP/s dense bf16 on its
    datasheet) measured at 400 is at 40 %, under the 50 % floor — slow, even when all eight on
    the node are at 400. A model with no reference is compared with its peers only, and the
    report says so (an info finding, not a problem)."""
    problems, unknown = [], set()
    for gpu, rate in sorted(throughput.items()):
        name = models.get(gpu, "")
        ref = refs.lookup(name) if name else None
        if ref is None:
            unknown.add(name or "unknown model")
            continue
        if rate < refs.floor * ref.tflops:
            problems.append(
                LoadProblem(
                    gpu=gpu,
                    reason=LoadReason.SLOW_GPU,
                    evidence=f"GPU {gpu}: {rate:.0f} TFLOP/s is {rate / ref.tflops:.0%} of the "
                    f"{ref.model} reference {ref.tflops:.0f} TFLOP/s (below {refs.floor:.0%})",
                )
            )
    notes = [
        LoadProblem(
            reason=LoadReason.NO_REFERENCE,
            severity=Severity.INFO,
            evidence=f"no throughput reference for {name}: compared with its peers only",
        )
        for name in sorted(unknown)
    ]
    return problems + notes


def compare_throughput(
    throughput: dict[int, float], models: dict[int, str], refs: References
) -> list[LoadProblem]:
    """Both comparisons; a GPU below its reference is not also named a slow rank."""
    slow = below_reference(throughput, models, refs)
    named = {p.gpu for p in slow if p.reason is LoadReason.SLOW_GPU}
    return slow + [p for p in slow_ranks(throughput) if p.gpu not in named]
