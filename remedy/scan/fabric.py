"""Fabric tests run as Kubernetes Jobs on idle nodes: what to run, what a Job came to, and the
verdict. Pure; the Jobs themselves are made and read in adapters/kubernetes/fabric_jobs.py.

Where they run: only on nodes the active checks already hold (remedy/scan/active_checks.py:
idle, no GPU pod, cordoned for their check, at most the pool's ``idle_at_once``) or that
admission holds behind its taint; never beside work. Each Job has an ``activeDeadlineSeconds``:
one that runs past it is a failed test (fail closed), as is one whose pod failed, or whose output
stops short.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Protocol

from pydantic import Field, model_validator

from remedy.core.models import Frozen
from remedy.detection.fabric.verdict import (
    FabricTest,
    FabricVerdict,
    could_not_run,
    judge_nccl,
    judge_nvbandwidth,
    judge_write_bw,
)
from remedy.detection.probe.throughput import References

PAIRED = (FabricTest.NCCL_PAIR, FabricTest.IB_WRITE_BW)


class FabricPolicy(Frozen):
    """The fabric tests a check runs on the node it holds, after its deep diagnose passed (an
    active check's idle or drained node, a new node behind admission's taint): none unless
    asked. Single-node tests only here; pairs are planned by remedy/scan/pairs.py."""

    tests: list[FabricTest] = []
    deadline: timedelta = timedelta(minutes=10)  # each Job's activeDeadlineSeconds
    poll: timedelta = Field(default=timedelta(seconds=30), gt=timedelta(0))

    @model_validator(mode="after")
    def _single_node(self) -> FabricPolicy:
        if paired := [t.value for t in self.tests if t in PAIRED]:
            raise ValueError(f"{', '.join(paired)} test two nodes: not a per-node check")
        return self


class FabricRun(Frozen):
    """One test on one node (loopback, nvbandwidth) or two (a pair: the first is the client)."""

    run_id: str = Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")  # in the Jobs' names
    test: FabricTest
    nodes: list[str] = Field(min_length=1, max_length=2)
    gpus: int = Field(default=0, ge=0)  # per node: the GPUs it takes (0: all the node's)
    deadline: timedelta = timedelta(minutes=10)  # the Jobs' activeDeadlineSeconds
    model: str = ""  # the GPUs' name, for nvbandwidth's floor (nccl-tests prints its own)
    port_rate_gbps: float = 0.0  # ib_write_bw: the port's rate (its sysfs ``rate``)

    @model_validator(mode="after")
    def _shape(self) -> FabricRun:
        if (len(self.nodes) == 2) != (self.test in PAIRED):
            raise ValueError(f"{self.test} runs on {'two nodes' if self.test in PAIRED else 'one'}")
        if len(set(self.nodes)) != len(self.nodes):
            raise ValueError("a pair is two different nodes")
        if self.test is FabricTest.IB_WRITE_BW and self.port_rate_gbps <= 0:
            raise ValueError("ib_write_bw needs the port's rate")
        return self


class JobState(StrEnum):
    RUNNING = "running"  # not finished yet (pending, or its pods running)
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # its pod failed (the tool's exit code, an image that would not pull)
    TIMED_OUT = "timed_out"  # past activeDeadlineSeconds: the Job controller ended it
    MISSING = "missing"  # the Job is gone (deleted by someone, or never made)


class FabricOutcome(Frozen):
    state: JobState
    output: str = ""  # the tool's output: the log of the pod that ran it
    detail: str = ""  # why it failed, as the Job's condition says


class FabricJobs(Protocol):
    """The seam: the Jobs of a run, made and read (adapters/kubernetes/fabric_jobs.py)."""

    def start(self, run: FabricRun) -> FabricRun:
        """Make its Jobs; answers the run as made (``gpus=0``: all the node's, counted)."""

    def outcome(self, run: FabricRun) -> FabricOutcome: ...

    def remove(self, run: FabricRun) -> None: ...


def verdict_of(run: FabricRun, outcome: FabricOutcome, refs: References) -> FabricVerdict | None:
    """The run's verdict once its Jobs are done (None while running). A Job that failed never
    passes, whatever its output says; one that timed out fails with the deadline it ran past."""
    if outcome.state is JobState.RUNNING:
        return None
    if outcome.state is JobState.TIMED_OUT:
        seconds = int(run.deadline.total_seconds())
        return could_not_run(run.test, run.nodes, f"ran past its {seconds} s deadline")
    if outcome.state is JobState.MISSING:
        return could_not_run(run.test, run.nodes, "its Job is gone")
    verdict = _judge(run, outcome.output, refs)
    if outcome.state is JobState.FAILED and verdict.passed:
        return could_not_run(run.test, run.nodes, f"its pod failed: {outcome.detail}")
    return verdict


def _judge(run: FabricRun, output: str, refs: References) -> FabricVerdict:
    if run.test is FabricTest.NVBANDWIDTH:
        return judge_nvbandwidth(output, run.nodes[0], run.model, refs)
    if run.test is FabricTest.IB_WRITE_BW:
        return judge_write_bw(output, run.nodes, run.port_rate_gbps)
    return judge_nccl(run.test, output, run.nodes, run.gpus * len(run.nodes), refs)


class FabricCheck(Frozen):
    """A run's state as the workflow polls it: no verdict while its Jobs run."""

    run: FabricRun
    verdict: FabricVerdict | None = None
