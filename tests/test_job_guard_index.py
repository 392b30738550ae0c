"""The Web UI's list finds the job guards held for a person: a guard indexes its job, its phase
and since when, and ``RemedyOutcome = 'needs_human'`` while it is held (the views
`remedy ui` prints query them)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio.client import WorkflowExecution
from temporalio.testing import WorkflowEnvironment

from adapters.sim.jobs import SimJobs
from contract import search_attributes as sa
from remedy.attribution.guard import GuardPhase, GuardPolicy, ResumeRequest
from tests.conftest import own_fleet, running_workers
from tests.test_job_guard import guard, hardware_failure
from workers.ui_views import VIEWS
from workflows.job_guard import JobGuard

HELD_VIEW = next(v for v in VIEWS if v.name == "remedy jobs held for a human")
LEFT_VIEW = next(v for v in VIEWS if v.name == "remedy left for a human")


async def _listed(env: WorkflowEnvironment, query: str, job: str) -> WorkflowExecution | None:
    """The guard of ``job`` as the list shows it (visibility is eventually consistent: wait
    for it to say so, or give up after 200 reads)."""
    for _ in range(200):
        async for w in env.client.list_workflows(f"{query} AND {sa.JOB.name} = '{job}'"):
            return w
        await asyncio.sleep(0.05)
    return None


async def test_the_list_finds_a_guard_held_for_a_human_and_forgets_it_once_resumed(
    dev_env: WorkflowEnvironment,
) -> None:
    fleet = own_fleet("guard-index", 1)
    node = sorted(fleet.nodes)[0]
    policy = GuardPolicy(max_platform_restarts=0, gather=timedelta(0))  # held at once
    async with running_workers(dev_env.client, fleet, jobs=SimJobs()) as queues:
        handle, job = await guard(dev_env, queues, policy)
        watching = await _listed(dev_env, f"{sa.JOB_STATE.name} = 'watching'", job)
        await handle.signal(JobGuard.pod_failed, hardware_failure(node, job, datetime.now(UTC)))
        held = await _listed(dev_env, HELD_VIEW.query, job)
        left = await _listed(dev_env, LEFT_VIEW.query, job)
        await handle.execute_update(JobGuard.release_job, ResumeRequest(by="alice", stop=True))
        await handle.result()
        stopped = await _listed(dev_env, f"{sa.JOB_STATE.name} = 'stopped'", job)
    assert watching is not None and held is not None and left is not None and stopped is not None
    attrs = held.typed_search_attributes
    assert attrs.get(sa.JOB_STATE) == GuardPhase.HELD.value
    assert attrs.get(sa.OUTCOME) == "needs_human"
    since = attrs.get(sa.PHASE_SINCE)
    assert since is not None and since > watching.start_time
    # Resumed (here: stopped by a person): no longer left for a human.
    assert stopped.typed_search_attributes.get(sa.OUTCOME) is None
    assert [c for c in HELD_VIEW.columns if c.startswith("RemedyJob")] == [
        sa.JOB.name,
        sa.JOB_STATE.name,
    ]
