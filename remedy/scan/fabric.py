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

from remedy.core.models import Finding, Frozen
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


PAIR_ROUNDS = 3  # pair tests a round runs at most: the first pairing and two re-pairings
SLACK = timedelta(minutes=10)  # a Temporal task's pickup, the cluster calls around the Jobs


class FabricPolicy(Frozen):
    """The fabric tests a check runs on the node it holds, after its deep diagnose passed (an
    active check's idle or drained node, a new node behind admission's taint): none unless
    asked. ``tests``: single-node tests. ``pair_test``: a test between two nodes, run by an
    active-check round between the idle nodes it checks at once (workflows/fabric_pairs.py,
    re-paired by remedy/scan/pairs.py); ib_write_bw, against ``port_rate_gbps``."""

    tests: list[FabricTest] = []
    deadline: timedelta = timedelta(minutes=10)  # each Job's activeDeadlineSeconds
    poll: timedelta = Field(default=timedelta(seconds=30), gt=timedelta(0))
    pair_test: FabricTest | None = None  # none by default
    port_rate_gbps: float = Field(default=0.0, ge=0)  # the NICs' port rate (sysfs ``rate``)

    @model_validator(mode="after")
    def _single_node(self) -> FabricPolicy:
        if paired := [t.value for t in self.tests if t in PAIRED]:
            raise ValueError(f"{', '.join(paired)} test two nodes: not a per-node check")
        if self.pair_test not in (None, FabricTest.IB_WRITE_BW):
            raise ValueError(f"{self.pair_test}: the pair test run as Jobs is ib_write_bw")
        if self.pair_test is FabricTest.IB_WRITE_BW and self.port_rate_gbps <= 0:
            raise ValueError("ib_write_bw pairs need the port's rate in Gb/s")
        return self

    def test_time(self, tests: int = 1) -> timedelta:
        """The longest ``tests`` tests take one after another: each polled past its deadline."""
        return tests * (self.deadline + self.poll + timedelta(minutes=2))

    def ready_wait(self, diagnose_timeout: timedelta) -> timedelta:
        """How long a round waits for its checks to reach the pair tests: the diagnose and
        its retry, the single-node tests. Past it, the checks ready by then are paired."""
        return 2 * diagnose_timeout + self.test_time(len(self.tests)) + SLACK

    def verdict_wait(self, diagnose_timeout: timedelta) -> timedelta:
        """How long a check waits for its pair verdict: past it (the round gone), it stands on
        its own diagnose."""
        return self.ready_wait(diagnose_timeout) + self.test_time(PAIR_ROUNDS) + SLACK


class PairReady(Frozen):
    """An active check's word to its round: its diagnose is done (healthy: it waits for its
    pair verdict; not: it goes on to its ladder without one)."""

    node: str
    healthy: bool


class PairVerdict(Frozen):
    """The round's word to a check: the pair tests' findings on its node (none: not paired)."""

    findings: list[Finding] = []


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
