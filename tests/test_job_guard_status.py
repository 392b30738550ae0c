"""JobGuard seen from the command line and over a long life: `remedy status jobs` and
`remedy resume-job`, a guard no controller answers for, continue-as-new with its ledger."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

from temporalio.testing import WorkflowEnvironment

from adapters.sim.jobs import SimJobs
from contract.names import job_guard_workflow_id
from remedy.attribution.guard import (
    GuardAction,
    GuardInput,
    GuardPhase,
    GuardPolicy,
    JobRef,
)
from remedy.attribution.model import Verdict
from tests.conftest import own_fleet, running_workers
from tests.test_cli import cli
from tests.test_job_guard import guard, hardware_failure, oom
from workflows.job_guard import JobGuard


async def test_status_jobs_and_resume_job_from_the_command_line(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("jobs", 2)
    first, second = sorted(fleet.nodes)
    jobs = SimJobs()
    async with running_workers(client, fleet, jobs=jobs) as queues:
        # No platform restart allowed: the first platform failure holds the job at once.
        # Real time here: no waiting for peers of a failure.
        held, held_job = await guard(
            dev_env, queues, GuardPolicy(max_platform_restarts=0, gather=timedelta(0))
        )
        stopped, stopped_job = await guard(dev_env, queues, GuardPolicy(gather=timedelta(0)))
        now = datetime.now(UTC)
        await held.signal(JobGuard.pod_failed, hardware_failure(first, held_job, now))
        await stopped.signal(JobGuard.pod_failed, oom(second, stopped_job, now))
        await stopped.result()
        for _ in range(100):
            if (await held.query(JobGuard.phase)).phase is GuardPhase.HELD:
                break
            await asyncio.sleep(0.05)
        code, out = await cli("status", "--jobs", "--json", "--address", address)
        _, table = await cli("status", "--jobs", "--address", address)
        name = held_job.split("/", 1)[1]
        resumed = await cli("resume-job", name, "--stop", "--by", "bob", "--address", address)
        ended = await held.result()
        missing = await cli("resume-job", "no-such-job", "--address", address)
        # The job as `status --jobs` prints it, NAMESPACE/NAME: the guard is found.
        not_held = await cli("resume-job", stopped_job, "--address", address)
    shown = {row["job"]: row for row in json.loads(out)}
    assert code == 3  # a job is held for a human
    assert shown[held_job]["phase"] == "held" and shown[stopped_job]["phase"] == "stopped"
    assert [f["attribution"]["verdict"] for f in shown[stopped_job]["ledger"]["failures"]] == [
        "application"
    ]
    assert f"HELD {held_job}: remedy resume-job {name} --namespace default" in table
    assert resumed[0] == 0 and ended.phase is GuardPhase.STOPPED
    # Who: the name given, and beside it the identity the CLI connected as.
    assert ended.reason.startswith("stopped by bob (") and jobs.restarts == []
    assert resumed[1] == f"job {held_job}: stopped ({ended.reason})\n"
    assert missing[0] == 2 and "no running guard" in missing[1]
    assert not_held[0] == 2 and "is stopped, not held: nothing to resume" in not_held[1]


async def test_a_long_lived_guard_continues_as_new_with_its_ledger(
    dev_env: WorkflowEnvironment,
) -> None:
    """The dev server suggests continue-as-new at 40 events: a few failures are enough."""
    fleet = own_fleet("guard-can", 1)
    node = sorted(fleet.nodes)[0]
    policy = GuardPolicy(
        gather=timedelta(0), backoff_initial=timedelta(0), max_platform_restarts=20
    )
    async with running_workers(dev_env.client, fleet, jobs=SimJobs()) as queues:
        handle, job = await guard(dev_env, queues, policy)
        first_run = (await handle.describe()).run_id
        for n in range(1, 7):
            await handle.signal(
                JobGuard.pod_failed,
                hardware_failure(node, job, datetime.now(UTC), pod=f"worker-{n}"),
            )
            for _ in range(200):
                if len((await handle.query(JobGuard.ledger)).failures) == n:
                    break
                await asyncio.sleep(0.05)
        latest = dev_env.client.get_workflow_handle(handle.id)
        run = (await latest.describe()).run_id
        ledger = await latest.query(JobGuard.ledger)
    assert run != first_run
    assert [f.pod for f in ledger.failures] == [f"{job}-worker-{n}" for n in range(1, 7)]
    assert ledger.count(Verdict.PLATFORM, GuardAction.RESTART) == 6


async def test_status_jobs_lists_a_guard_no_controller_answers_for(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    job = JobRef(namespace="orphans", name=f"llm-{uuid.uuid4().hex[:6]}")
    handle = await client.start_workflow(
        JobGuard.run,
        GuardInput(job=job),
        id=job_guard_workflow_id(job.namespace, job.name),
        task_queue=f"nobody-{uuid.uuid4().hex[:6]}",
    )  # no worker polls it
    try:
        for _ in range(100):  # visibility is eventually consistent
            code, out = await cli(
                "status", "--jobs", "--json", "--address", client.service_client.config.target_host
            )
            shown = {row["job"]: row for row in json.loads(out)} if code != 2 else {}
            if str(job) in shown:
                break
            await asyncio.sleep(0.1)
    finally:
        await handle.terminate("test over")
    assert shown[str(job)]["phase"] == "no answer (is a controller running?)"
