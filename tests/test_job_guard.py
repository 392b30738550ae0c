"""JobGuard on the time-skipping server: a platform failure restarts the job (and puts the
blamed node in remediation), an application failure stops it with no restart, and the caps
hold until a human resumes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from adapters.sim.jobs import SimJobs
from contract.defs import UpdateRejected
from contract.messages import JOB_FINISHED, RELEASE_JOB
from contract.names import job_guard_workflow_id, remediation_workflow_id
from remedy.attribution.guard import (
    GuardAction,
    GuardInput,
    GuardPhase,
    GuardPolicy,
    GuardResult,
    JobFinished,
    JobRef,
    ResumeRequest,
)
from remedy.attribution.model import PodFailure, Termination, Verdict, XidSeen
from remedy.ladder.remediation import Outcome
from remedy.runbook import RunbookSet
from tests.conftest import Queues, running_workers
from tests.ladder import report
from workflows.job_guard import JobGuard
from workflows.node_remediation import NodeRemediation

Guard = WorkflowHandle[JobGuard, GuardResult]


async def guard(env: WorkflowEnvironment, queues: Queues, policy: GuardPolicy) -> tuple[Guard, str]:
    """A guard for a new job; returns its handle and the job as the guard names it."""
    job = JobRef(name=f"llm-{uuid.uuid4().hex[:6]}")
    handle = await env.client.start_workflow(
        JobGuard.run,
        GuardInput(
            job=job,
            policy=policy,
            controller_task_queue=queues.controller,
            node_task_queue=queues.agents,
        ),
        id=job_guard_workflow_id(job.namespace, job.name),
        task_queue=queues.controller,
    )
    # Answered once a worker ran the guard's first task: the time-skipping server's sleeps
    # below could otherwise race that first task and stall.
    await handle.query(JobGuard.phase)
    return handle, str(job)


@asynccontextmanager
async def guarded(
    env: WorkflowEnvironment, fleet: SimFleet, policy: GuardPolicy
) -> AsyncIterator[tuple[Guard, str, SimJobs]]:
    """The controller and agents, a simulated job side, and one guarded job."""
    jobs = SimJobs()
    async with running_workers(env.client, fleet, jobs=jobs) as queues:
        handle, job = await guard(env, queues, policy)
        yield handle, job, jobs


def hardware_failure(node: str, job: str, at: datetime, pod: str = "worker-0") -> PodFailure:
    return PodFailure(
        job=job,
        pod=f"{job}-{pod}",
        node=node,
        failed_at=at,
        termination=Termination(exit_code=1, reason="Error"),
        xids=[XidSeen(code=79, gpu="SN-X", node=node, at=at)],
    )


def nccl_timeout(node: str, job: str, at: datetime, seen: list[XidSeen], pod: str) -> PodFailure:
    """A rank on a healthy node that timed out because another node of the job failed."""
    return PodFailure(
        job=job,
        pod=f"{job}-{pod}",
        node=node,
        failed_at=at,
        termination=Termination(exit_code=1, reason="Error"),
        xids=seen,
        log_tail="Watchdog caught collective operation timeout: WorkNCCL(...)",
    )


def oom(node: str, job: str, at: datetime) -> PodFailure:
    return PodFailure(
        job=job,
        pod=f"{job}-worker-1",
        node=node,
        failed_at=at,
        termination=Termination(exit_code=137, reason="OOMKilled"),
    )


async def test_a_platform_failure_restarts_the_job_and_remediates_the_node(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[0]
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        failed = hardware_failure(node, job, await time_env.get_current_time())
        await handle.signal(JobGuard.pod_failed, failed)
        await handle.signal(JobGuard.pod_failed, failed)  # a watcher reporting it again
        await time_env.sleep(timedelta(minutes=5))  # past the first backoff (1 min)
        ledger = await handle.query(JobGuard.ledger)
        phase = (await handle.query(JobGuard.phase)).phase
        ladder = time_env.client.get_workflow_handle_for(
            NodeRemediation.run, remediation_workflow_id(node)
        )
        state = await ladder.query(NodeRemediation.state)
    [failure] = ledger.failures
    assert failure.attribution.verdict is Verdict.PLATFORM
    assert failure.attribution.rule == "hardware-xid-during-run"
    assert failure.decision.action is GuardAction.RESTART
    assert failure.decision.delay == timedelta(minutes=1)
    assert jobs.restarts == [(job, failure.decision.reason)]
    assert phase is GuardPhase.WATCHING
    assert state.trigger is not None and state.trigger.reason == "JobPlatformFailure"
    assert "hardware Xid" in state.trigger.evidence or "Xid 79" in state.trigger.evidence
    assert fleet.node(node).unschedulable  # the blamed node is cordoned by its ladder


async def test_an_application_failure_stops_with_no_restart(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[1]
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        await handle.signal(JobGuard.pod_failed, oom(node, job, await time_env.get_current_time()))
        result = await handle.result()
    assert result.phase is GuardPhase.STOPPED and "application's fault" in result.reason
    assert jobs.restarts == [] and jobs.stops == [(job, result.reason)]
    assert [f.attribution.rule for f in result.ledger.failures] == ["out-of-memory"]
    assert not fleet.node(node).unschedulable  # the node was never blamed


async def test_the_platform_cap_holds_until_a_human_resumes(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[2]
    async with guarded(time_env, fleet, GuardPolicy(max_platform_restarts=2)) as (
        handle,
        job,
        jobs,
    ):
        for _ in range(3):
            at = await time_env.get_current_time()
            await handle.signal(JobGuard.pod_failed, hardware_failure(node, job, at))
            await time_env.sleep(timedelta(minutes=10))
        held = (await handle.query(JobGuard.phase)).phase
        restarts_when_held = len(jobs.restarts)
        await handle.signal(JobGuard.resume, ResumeRequest(by="alice"))
        await time_env.sleep(timedelta(minutes=1))
        ledger = await handle.query(JobGuard.ledger)
        await handle.signal(JobGuard.pod_failed, oom(node, job, await time_env.get_current_time()))
        result = await handle.result()
    assert held is GuardPhase.HELD and restarts_when_held == 2
    assert len(jobs.stops) == 2  # suspended while held, and at the application failure
    assert [f.decision.action for f in ledger.failures] == [GuardAction.RESTART] * 3
    assert "resumed by alice" in ledger.failures[-1].decision.reason
    assert len(jobs.restarts) == 3
    assert result.phase is GuardPhase.STOPPED
    assert result.ledger.count(Verdict.PLATFORM) == 3
    assert result.ledger.count(Verdict.APPLICATION) == 1


async def test_a_resume_answers_with_what_the_guard_did_and_is_refused_when_nothing_is_held(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[1]
    async with guarded(time_env, fleet, GuardPolicy(max_platform_restarts=0)) as (
        handle,
        job,
        jobs,
    ):
        with pytest.raises(UpdateRejected) as early:
            await RELEASE_JOB.execute(handle, ResumeRequest(by="too-early"))
        at = await time_env.get_current_time()
        await handle.signal(JobGuard.pod_failed, hardware_failure(node, job, at))
        await time_env.sleep(timedelta(minutes=5))
        held = (await handle.query(JobGuard.phase)).phase
        answer = await RELEASE_JOB.execute(
            handle, ResumeRequest(by="alice", identity="remedy-cli:alice@host")
        )
        await time_env.sleep(timedelta(minutes=1))
        with pytest.raises(UpdateRejected) as again:
            await RELEASE_JOB.execute(handle, ResumeRequest(by="bob"))
        ledger = await handle.query(JobGuard.ledger)
    assert str(early.value) == "the guard is watching, not held: nothing to resume"
    assert held is GuardPhase.HELD
    assert answer.phase is GuardPhase.RESTARTING  # what the guard did with it
    assert answer.by == "alice (remedy-cli:alice@host)"
    assert "resumed by alice (remedy-cli:alice@host)" in ledger.failures[-1].decision.reason
    assert len(jobs.restarts) == 1
    assert str(again.value) == "the guard is watching, not held: nothing to resume"


async def test_lockstep_ranks_failing_together_restart_the_job_once(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    bad, *healthy = sorted(fleet.nodes)
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        at = await time_env.get_current_time()
        broken = hardware_failure(bad, job, at)
        # Each rank's report carries the Xid seen on the job's nodes (the job watch does so).
        ranks = [
            nccl_timeout(node, job, at + timedelta(seconds=30), broken.xids, f"worker-{i}")
            for i, node in enumerate(healthy, start=1)
        ]
        for failure in [*ranks, broken]:
            await handle.signal(JobGuard.pod_failed, failure)
        await time_env.sleep(timedelta(minutes=5))
        # A rank of the old run reported late, after the restart: it joins, no second restart.
        await handle.signal(
            JobGuard.pod_failed,
            nccl_timeout(healthy[0], job, at + timedelta(seconds=40), broken.xids, "worker-9"),
        )
        await time_env.sleep(timedelta(minutes=5))
        ledger = await handle.query(JobGuard.ledger)
    lead, *joined = ledger.failures
    assert lead.pod == broken.pod and lead.decision.action is GuardAction.RESTART
    assert lead.attribution.rule == "hardware-xid-during-run" and lead.attribution.blame == bad
    assert [f.decision.action for f in joined] == [GuardAction.JOINED] * 4
    assert {f.attribution.rule for f in joined} == {"nccl-timeout-with-a-fault-on-the-job"}
    assert "restarted at" in joined[-1].decision.reason
    assert len(jobs.restarts) == 1
    assert ledger.count(Verdict.PLATFORM) == 1  # one failure of the job, not five
    # From the first failure to the restart: the peers' 30 s to report, then the 1 min backoff.
    assert timedelta(seconds=90) <= lead.lost < timedelta(seconds=91)
    assert fleet.node(bad).unschedulable  # the node with the Xid is in remediation …
    assert not any(fleet.node(n).unschedulable for n in healthy)  # … the ranks' nodes are not


async def test_a_restart_that_fails_holds_the_job_until_a_human_resumes(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[0]
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        jobs.broken.add(job)
        at = await time_env.get_current_time()
        await handle.signal(JobGuard.pod_failed, hardware_failure(node, job, at))
        await time_env.sleep(timedelta(minutes=5))
        held = (await handle.query(JobGuard.phase)).phase
        jobs.broken.clear()
        await handle.signal(JobGuard.resume, ResumeRequest(by="carol"))
        await time_env.sleep(timedelta(minutes=1))
        ledger = await handle.query(JobGuard.ledger)
        phase = (await handle.query(JobGuard.phase)).phase
    assert held is GuardPhase.HELD and jobs.stops[0][1].startswith("the restart failed")
    assert phase is GuardPhase.WATCHING and len(jobs.restarts) == 1
    assert ledger.failures[0].decision.reason.startswith(
        "resumed by carol after: the restart failed"
    )


async def test_a_finished_job_ends_its_guard_with_the_ledger(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[0]
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, _):
        at = await time_env.get_current_time()
        await handle.signal(JobGuard.pod_failed, hardware_failure(node, job, at))
        await time_env.sleep(timedelta(minutes=5))
        await JOB_FINISHED.send(handle, JobFinished(reason="the job succeeded"))
        result = await handle.result()
    assert result.phase is GuardPhase.FINISHED and result.reason == "the job succeeded"
    assert timedelta(seconds=90) <= result.ledger.lost(Verdict.PLATFORM) < timedelta(seconds=91)


async def test_a_node_whose_ladder_already_handled_the_xid_is_not_remediated_again(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = sorted(fleet.nodes)[0]
    jobs = SimJobs()
    async with running_workers(time_env.client, fleet, jobs=jobs) as queues:
        # The agent reported the Xid first: its ladder reset the GPU before the guard heard.
        finding = fleet.inject(node, "ecc_dbe", gpu=2)
        # The job's pods died with the Xid. Read the time now: the server may skip ahead to
        # the budget's next timer while the test waits below, past the rules' window.
        at = await time_env.get_current_time()
        ladder = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        ended = await ladder.result()
        handle, job = await guard(time_env, queues, GuardPolicy())
        await handle.signal(JobGuard.pod_failed, hardware_failure(node, job, at))
        await time_env.sleep(timedelta(minutes=5))
        ledger = await handle.query(JobGuard.ledger)
        latest = await time_env.client.get_workflow_handle(remediation_workflow_id(node)).describe()
    assert ended.outcome is Outcome.RECOVERED
    assert ledger.failures[0].decision.action is GuardAction.RESTART and len(jobs.restarts) == 1
    assert latest.run_id == ladder.result_run_id  # no second ladder for the same fault
    assert not fleet.node(node).unschedulable


async def test_a_resume_sent_while_nothing_is_held_does_not_release_a_later_hold(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[0]
    async with guarded(time_env, fleet, GuardPolicy(max_platform_restarts=0)) as (
        handle,
        job,
        jobs,
    ):
        await handle.signal(JobGuard.resume, ResumeRequest(by="too-early"))  # nothing held
        at = await time_env.get_current_time()
        await handle.signal(JobGuard.pod_failed, hardware_failure(node, job, at))
        await time_env.sleep(timedelta(minutes=5))
        phase = (await handle.query(JobGuard.phase)).phase
    assert phase is GuardPhase.HELD and jobs.restarts == []  # a person must resume this hold
