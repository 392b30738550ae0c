"""The fleet scan's job watch on the dev server (it reads Temporal's visibility store): failed
pods of guarded jobs reach their guard once, with remedy's ladders on their nodes as evidence;
the guard of a finished job ends. End to end on the Kubernetes adapter against the API emulator:
a Job that died of an Xid is attributed, its node put in remediation and the Job recreated."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.job_failures import JOB_LABEL, REPORTED
from adapters.kubernetes.jobs import KubernetesJobs
from adapters.sim.jobs import SimJobs
from contract.names import job_guard_workflow_id, remediation_workflow_id
from kubeapi import ApiServer
from remedy.attribution.evidence import GuardedFailure, RecentXid
from remedy.attribution.guard import (
    GuardAction,
    GuardPhase,
    GuardPolicy,
    GuardResult,
    JobLedger,
    JobRef,
)
from remedy.attribution.jobs import JobState
from remedy.attribution.model import PodFailure, Termination, Verdict
from remedy.core.models import Component, ComponentKind, Finding, Severity
from remedy.runbook import RunbookSet
from remedy.scan.fleet import FleetSummary, ScanInput
from tests.conftest import Queues, own_fleet, running_workers
from tests.kube import JOBS, NODES, PODS, node, sent
from tests.ladder import report
from tests.test_cli import WAITS
from tests.test_kubernetes_jobs import failed_job, job_pod, xids_annotation
from workers.status import FleetStatus
from workers.status_table import alerts
from workflows.fleet_scan import FleetScan
from workflows.job_guard import JobGuard
from workflows.node_remediation import NodeRemediation

T = TypeVar("T")
QUICK = GuardPolicy(gather=timedelta(0), backoff_initial=timedelta(seconds=1))


async def scan(client: Client, queues: Queues, workflow_id: str = "") -> FleetSummary:
    return await client.execute_workflow(
        FleetScan.run,
        ScanInput(
            node_task_queue=queues.agents,
            admit_new_nodes=False,
            watch_jobs=True,
            guard_policy=QUICK,
        ),
        id=workflow_id or f"scan-{uuid.uuid4().hex[:8]}",
        task_queue=queues.controller,
    )


async def eventually(probe: Callable[[], Awaitable[T | None]], within_s: float = 20) -> T:
    """Real time: the dev server's visibility store and timers do not skip."""
    for _ in range(int(within_s * 10)):
        found = await probe()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"nothing within {within_s}s")


async def ledger_with(client: Client, job: JobRef, failures: int) -> JobLedger:
    guard = client.get_workflow_handle_for(
        JobGuard.run, job_guard_workflow_id(job.namespace, job.name)
    )

    async def probe() -> JobLedger | None:
        ledger = await guard.query(JobGuard.ledger)
        return ledger if len(ledger.failures) >= failures else None

    return await eventually(probe)


async def test_a_failed_pod_reaches_its_guard_once_with_the_ladder_on_its_node(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    client = dev_env.client
    fleet = own_fleet("watch", 2)
    sick = sorted(fleet.nodes)[0]
    jobs = SimJobs()
    job = JobRef(namespace="ml", name=f"llm-{uuid.uuid4().hex[:6]}")
    runbooks = RunbookSet([WAITS, *shipped_runbooks])
    async with running_workers(client, fleet, jobs=jobs, runbooks=runbooks) as queues:
        # A ladder on the node, waiting for approval: the job's pod dies meanwhile.
        await report(
            client,
            queues,
            Finding(
                node=sick,
                check="xid",
                reason="Xid48",
                xid=48,
                severity=Severity.CRITICAL,
                component=Component(kind=ComponentKind.GPU, index=0),
                observed_at=datetime.now(UTC),
            ),
            WAITS,
        )

        async def ladder_visible() -> bool:
            query = f"RemedyNode = '{sick}' AND ExecutionStatus = 'Running'"
            return bool([w async for w in client.list_workflows(query)])

        await eventually(ladder_visible)
        jobs.failures.append(
            GuardedFailure(
                job=job,
                pod_uid="uid-0",
                job_nodes=[sick],
                failure=PodFailure(
                    job=str(job),
                    pod=f"{job.name}-0",
                    node=sick,
                    failed_at=datetime.now(UTC),
                    termination=Termination(exit_code=1, reason="Error"),
                ),
            )
        )
        first = await scan(client, queues)
        ledger = await ledger_with(client, job, 1)
        await eventually(lambda: asyncio.sleep(0, bool(jobs.restarts)))
        second = await scan(client, queues)
        jobs.states[str(job)] = JobState.SUCCEEDED
        third = await scan(client, queues)
        ended = await client.get_workflow_handle_for(
            JobGuard.run, job_guard_workflow_id(job.namespace, job.name)
        ).result()
    [failure] = ledger.failures
    assert first.job_failures_reported == [f"{job}: {job.name}-0"]
    assert failure.attribution.rule == "platform-ladder-on-node"
    assert any("reset-after-approval" in line for line in failure.attribution.evidence)
    assert failure.decision.action is GuardAction.RESTART and len(jobs.restarts) == 1
    assert jobs.reported == {"uid-0": job_guard_workflow_id(job.namespace, job.name)}
    assert second.job_failures_reported == []  # reported once
    assert str(job) in third.guards_finished
    assert ended.phase is GuardPhase.FINISHED and ended.reason == "the job succeeded"
    assert ended.ledger.count(Verdict.PLATFORM) == 1


async def test_a_kubernetes_job_killed_by_an_xid_is_restarted_and_its_node_remediated(
    dev_env: WorkflowEnvironment, api: ApiServer
) -> None:
    client = dev_env.client
    fleet = own_fleet("k8s-job", 2)
    bad = sorted(fleet.nodes)[0]
    name = f"llm-{uuid.uuid4().hex[:6]}"
    job = JobRef(namespace="ml", name=name)
    now = datetime.now(UTC)
    # What the agent kept on the node: Xid 79 a minute before the pod died.
    api.objects[NODES, None, bad] = node(
        bad,
        annotations=xids_annotation(RecentXid(code=79, gpu="SN-7", at=now - timedelta(minutes=1))),
    )
    pod = job_pod(f"{name}-0", bad, job=name, started=-60, ended=0)
    pod["status"]["startTime"] = (now - timedelta(hours=1)).isoformat()
    pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = now.isoformat()
    api.objects[PODS, "ml", f"{name}-0"] = pod
    api.objects[JOBS, "ml", name] = failed_job(name)
    api.logs["ml", f"{name}-0"] = "RuntimeError: CUDA error: unspecified launch failure"
    jobs = KubernetesJobs(api.client())
    async with running_workers(client, fleet, jobs=jobs) as queues:
        summary = await scan(client, queues)
        ledger = await ledger_with(client, job, 1)

        async def recreated() -> list[object]:
            return sent(api, "POST", "/apis/batch/v1/namespaces/ml/jobs")

        [created] = await eventually(recreated)
        ladder = client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(bad))
        trigger = (await ladder.query(NodeRemediation.state)).trigger
    [failure] = ledger.failures
    assert summary.job_failures_reported == [f"{job}: {name}-0"]
    assert failure.attribution.verdict is Verdict.PLATFORM
    assert failure.attribution.rule == "hardware-xid-during-run"
    assert any("Xid 79" in line and "SN-7" in line for line in failure.attribution.evidence)
    assert created.data["metadata"]["name"] == f"{name}-r1"
    assert created.data["metadata"]["labels"][JOB_LABEL] == name
    assert api.objects[PODS, "ml", f"{name}-0"]["metadata"]["annotations"][
        REPORTED
    ] == job_guard_workflow_id("ml", name)
    assert trigger is not None and trigger.reason == "JobPlatformFailure"
    assert fleet.node(bad).unschedulable  # its ladder cordoned it


def failed(job: JobRef, pod: str, node: str, at: datetime, **termination: object) -> GuardedFailure:
    return GuardedFailure(
        job=job,
        pod_uid=f"uid-{pod}",
        job_nodes=[node],
        failure=PodFailure(
            job=str(job),
            pod=pod,
            node=node,
            failed_at=at,
            termination=Termination.model_validate(termination),
        ),
    )


async def test_ranks_reported_after_their_guard_stopped_the_job_do_not_restart_it(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    fleet = own_fleet("late-rank", 1)
    where = sorted(fleet.nodes)[0]
    jobs = SimJobs()
    job = JobRef(namespace="ml", name=f"llm-{uuid.uuid4().hex[:6]}")
    guard = client.get_workflow_handle_for(
        JobGuard.run, job_guard_workflow_id(job.namespace, job.name)
    )
    async with running_workers(client, fleet, jobs=jobs) as queues:
        at = datetime.now(UTC)
        jobs.failures.append(failed(job, "rank-0", where, at, exit_code=137, reason="OOMKilled"))
        await scan(client, queues)
        stopped = await guard.result()
        stopped_run = (await guard.describe()).run_id
        # A peer that failed with it, seen only by the next scan: the stopped guard's.
        jobs.failures.append(failed(job, "rank-1", where, at, exit_code=143, reason="Error"))
        late = await scan(client, queues)
        run_after_late = (await guard.describe()).run_id
        # A rank killed by the stop itself ends after the guard did: a new guard judges it
        # (unknown: one retry), but no automatic restart undoes a stop — it waits for a person.
        jobs.failures.append(
            failed(job, "rank-2", where, datetime.now(UTC), exit_code=143, reason="Error")
        )
        await scan(client, queues)
        latest = client.get_workflow_handle_for(JobGuard.run, guard.id)
        phase = await eventually(lambda: held(latest))
    assert stopped.phase is GuardPhase.STOPPED and len(jobs.stops) >= 1
    assert late.job_failures_reported == [f"{job}: rank-1"]
    assert run_after_late == stopped_run and jobs.reported["uid-rank-1"] == guard.id
    assert phase is GuardPhase.HELD and jobs.restarts == []
    assert "the restart failed" in jobs.stops[-1][1]
    assert "stopped by remedy" in jobs.stops[-1][1]


async def held(handle: WorkflowHandle[JobGuard, GuardResult]) -> GuardPhase | None:
    try:
        phase = (await handle.query(JobGuard.phase)).phase
    except RPCError:
        return None  # not started yet
    return phase if phase is GuardPhase.HELD else None


async def test_a_failing_job_watch_leaves_the_rest_of_the_scan_standing(
    dev_env: WorkflowEnvironment,
) -> None:
    fleet = own_fleet("watch-denied", 2)
    jobs = SimJobs()
    jobs.forbidden = True
    async with running_workers(dev_env.client, fleet, jobs=jobs) as queues:
        summary = await scan(dev_env.client, queues)
    assert "RBAC 'list' on pods" in summary.job_watch_error
    assert [p.nodes for p in summary.pools] == [2]  # the fleet is still counted
    assert "job watch failed" in summary.markdown()
    # `remedy status` raises it with the other alerts.
    shown = alerts(FleetStatus(job_watch_error=summary.job_watch_error))
    assert shown == [
        f"ALERT the job watch failed (guarded jobs' failures wait): {summary.job_watch_error}"
    ]
