"""Live goodput and job success on the dev server: the fleet scan measures simulated guarded
jobs (their runs and checkpoint reports), hands each its figures through its guard, and they
show in `remedy status --jobs` and on the metrics endpoint."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim.jobs import SimJobs
from contract.names import job_guard_workflow_id
from remedy.attribution.evidence import GuardedFailure
from remedy.attribution.guard import JobRef
from tests.conftest import Queues, own_fleet, running_workers
from tests.test_cli import cli
from tests.test_job_guard import oom
from tests.test_job_watch import eventually, scan
from tests.test_metrics import scrape, scraped_client, scraped_when, value

HOUR = timedelta(hours=1)


@dataclass
class Jobs:
    running: JobRef  # checkpoints every 25 min for the last hour
    done: JobRef  # ran 50 min and succeeded
    failed: JobRef  # the application's fault: stopped


class Clock:
    """Settable: None is the real clock."""

    def __init__(self, at: datetime) -> None:
        self.now: datetime | None = at

    def __call__(self) -> datetime:
        return self.now or datetime.now(UTC)


def sim_jobs() -> tuple[SimJobs, Clock]:
    clock = Clock(datetime.now(UTC) - HOUR)
    return SimJobs(clock=clock, checkpoint_every=timedelta(minutes=25)), clock


async def test_status_jobs_shows_goodput_and_job_success(dev_env: WorkflowEnvironment) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("goodput-cli", 3)
    jobs, clock = sim_jobs()
    async with running_workers(client, fleet, jobs=jobs) as queues:
        launched = await three_jobs_at(client, queues, jobs, clock, sorted(fleet.nodes))
        code, out = await cli("status", "--jobs", "--json", "--address", address)
        _, table = await cli("status", "--jobs", "--address", address)
    rows = {row["job"]: row for row in json.loads(out)}
    running = rows[str(launched.running)]["ledger"]
    # 50 of 60 min kept (the last checkpoint, at 50), less two 1 s writes: about 83 %.
    ratio = running["goodput"]["productive_s"] / running["goodput"]["paid_s"]
    assert 0.80 < ratio < 0.84 and running["goodput"]["checkpoint_step"] == 200
    assert rows[str(launched.done)]["ledger"]["end"] == {"outcome": "succeeded", "cause": ""}
    assert rows[str(launched.failed)]["ledger"]["end"] == {
        "outcome": "failed",
        "cause": "application",
    }
    assert code == 0
    # The line counts every guard the server has (other tests' too): it is checked against the
    # ends listed beside it, and this test's two ends are among them.
    ends = [row["ledger"]["end"] for row in rows.values() if row["ledger"]["end"]]
    counted = [e for e in ends if e["outcome"] != "deleted"]
    succeeded = sum(1 for e in counted if e["outcome"] == "succeeded")
    causes = Counter(e["cause"] for e in counted if e["outcome"] == "failed")
    failed = ", ".join(f"{cause} {n}" for cause, n in sorted(causes.items()))
    assert (
        f"job success: {100 * succeeded / len(counted):.1f} % of {len(counted)} ended "
        f"(failed by cause: {failed})" in table
    )
    assert "goodput" in table and "succeeded" in table


async def three_jobs_at(
    client: Client, queues: Queues, jobs: SimJobs, clock: Clock, nodes: list[str]
) -> Jobs:
    """The jobs on the test's clock: launched an hour ago, the done one finished 10 min ago."""
    tag = uuid.uuid4().hex[:6]
    out = Jobs(*(JobRef(namespace="ml", name=f"{kind}-{tag}") for kind in ("run", "done", "bad")))
    for job, node in zip((out.running, out.done, out.failed), nodes, strict=True):
        jobs.launch(job, [node])
    clock.now = None
    await scan(client, queues)  # every running job gets a guard, fed its goodput
    jobs.failures.append(
        GuardedFailure(
            job=out.failed,
            pod_uid=f"uid-{tag}",
            job_nodes=[nodes[2]],
            failure=oom(nodes[2], str(out.failed), datetime.now(UTC)),
        )
    )
    clock.now = datetime.now(UTC) - timedelta(minutes=10)
    jobs.finish(out.done)
    clock.now = None

    async def ended() -> bool:
        await scan(client, queues)
        done = [
            await client.get_workflow_handle(job_guard_workflow_id(j.namespace, j.name)).describe()
            for j in (out.done, out.failed)
        ]
        return all(d.status is not None and d.status.name == "COMPLETED" for d in done)

    await eventually(ended, within_s=60)
    await scan(client, queues)  # the running job's latest figures
    return out


async def test_the_metrics_endpoint_shows_goodput_and_jobs_ended(
    dev_env: WorkflowEnvironment,
) -> None:
    client, port = await scraped_client(dev_env)
    # The counters are the process's: other tests' guards may have ended jobs already.
    before = await asyncio.to_thread(scrape, port)
    fleet = own_fleet("goodput-metrics", 3)
    jobs, clock = sim_jobs()
    async with running_workers(client, fleet, jobs=jobs) as queues:
        launched = await three_jobs_at(client, queues, jobs, clock, sorted(fleet.nodes))
        lines = await scraped_when(
            port,
            lambda lines: (
                value(lines, "remedy_pool_goodput_ratio")
                and value(lines, "remedy_job_goodput_ratio", job=str(launched.running))
            ),
        )
    job = value(lines, "remedy_job_goodput_ratio", job=str(launched.running), pool="default")
    assert job is not None and 0.80 < job < 0.84
    assert (value(lines, "remedy_pool_goodput_ratio", pool="default") or 0) > 0
    # Workflow metrics are at least once: a guard's workflow task that timed out on a loaded
    # machine runs again and counts its job's end again (seen: 2 under make test-stress).
    for labels in ({"outcome": "succeeded"}, {"outcome": "failed", "cause": "application"}):
        ended = value(lines, "remedy_jobs_ended_total", **labels) or 0
        assert ended - (value(before, "remedy_jobs_ended_total", **labels) or 0) >= 1, labels
    assert value(lines, "remedy_jobs_ended_total", outcome="deleted") is None  # nothing else
