"""The controller's worker tuning reaches its Worker: the workflow cache is what bounds its
memory at fleet scale (bench/memory_bench.py), so an operator's setting must take effect."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner

from adapters.sim import SimFleet
from workers.controller import (
    STRICT_WORKFLOW_RUNNER,
    WORKFLOW_RUNNER,
    WorkerTuning,
    controller_worker,
)


async def test_the_controller_worker_takes_its_cache_sticky_timeout_pollers_and_slots(
    time_env: WorkflowEnvironment,
) -> None:
    tuning = WorkerTuning(
        max_cached_workflows=400,
        sticky_queue_timeout=timedelta(seconds=3),
        workflow_pollers=2,
        max_concurrent_workflow_tasks=50,
    )
    with ThreadPoolExecutor(max_workers=2) as executor:
        worker = controller_worker(
            time_env.client, SimFleet(nodes=1).cluster, executor, "tuned", tuning=tuning
        )
        config = worker.ladders.config()
    assert config["max_cached_workflows"] == 400
    assert config["sticky_queue_schedule_to_start_timeout"] == timedelta(seconds=3)
    assert config["workflow_task_poller_behavior"].maximum == 2
    assert config["max_concurrent_workflow_tasks"] == 50


async def test_by_default_the_controller_caches_500_runs_not_the_sdks_1000(
    time_env: WorkflowEnvironment,
) -> None:
    # About 0.2 MB per cached ladder (bench/results/memory.md).
    with ThreadPoolExecutor(max_workers=2) as executor:
        worker = controller_worker(time_env.client, SimFleet(nodes=1).cluster, executor, "plain")
        config = worker.ladders.config()
    assert config["max_cached_workflows"] == 500
    assert config["max_concurrent_workflow_tasks"] == 100  # the SDK's: 400 was no better


def test_runs_share_the_workflow_modules_and_replays_check_them_afresh() -> None:
    """Shared: no copy of the modules per cached run, no sandbox whose checks would not reach
    them anyway. The replay test's runner re-imports every workflow module and checks its
    calls (tests/test_replay.py)."""
    assert isinstance(WORKFLOW_RUNNER, UnsandboxedWorkflowRunner)
    strict = STRICT_WORKFLOW_RUNNER.restrictions.passthrough_modules
    assert not {"workflows", "workflows.node_remediation", "workflows.node_steps"} & strict
