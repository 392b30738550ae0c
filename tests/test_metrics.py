"""Prometheus metrics: a ladder on the real dev server, scraped from the worker's own /metrics
endpoint — the SDK's runtime metrics and remedy's (outcomes, rung time, cordons, the budget,
the agent's probes)."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from adapters.sim.identity import agent_signing_key
from adapters.sim.jobs import SimJobs
from contract import metrics as metric
from contract.names import remediation_workflow_id
from remedy.attribution.guard import GuardPolicy
from remedy.core.models import Action, NodeRef
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from tests.conftest import own_fleet, running_workers
from tests.processes import free_port
from tests.test_job_guard import guard, oom
from workers.agent import AgentConfig, NodeAgent
from workers.client import connect, metrics_runtime
from workflows.job_guard import JobGuard
from workflows.node_remediation import NodeRemediation

QUICK_RESET = Runbook(
    name="quick-reset",
    match=[Match(checks=["memory"])],
    cordon=True,
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU)],
)


async def scraped_client(env: WorkflowEnvironment) -> tuple[Client, int]:
    """A client to ``env`` whose workers serve their metrics on the port it gives."""
    port = free_port()
    runtime = metrics_runtime(f"127.0.0.1:{port}", "controller")
    return await connect(env.client.service_client.config.target_host, runtime=runtime), port


def scrape(port: int) -> list[str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode().splitlines()


async def scraped_when(port: int, ready: Callable[[list[str]], object]) -> list[str]:
    """The endpoint's lines once ``ready`` holds of them. The worker records its metrics as
    workflow tasks complete, the SDK's own a little later than remedy's: 60 s is a bound
    against a hang on a busy machine, not a timing."""
    for _ in range(600):
        lines = await asyncio.to_thread(scrape, port)
        if ready(lines):
            break
        await asyncio.sleep(0.1)
    return lines


def value(lines: list[str], name: str, **labels: str) -> float | None:
    """The sample of ``name`` whose labels include ``labels`` (None: no such sample)."""
    for line in lines:
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


async def test_a_ladder_shows_up_in_the_prometheus_endpoint(dev_env: WorkflowEnvironment) -> None:
    client, port = await scraped_client(dev_env)
    fleet = own_fleet("metrics", 2)
    node = sorted(fleet.nodes)[0]
    policy = BudgetPolicy(max_disruption="2", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        queues.known.add(QUICK_RESET)
        agent = NodeAgent(
            client,
            fleet.host(node),
            RunbookSet([QUICK_RESET]),
            None,
            AgentConfig(
                node=NodeRef(name=node, pool=queues.pool),
                task_queue=queues.agents,
                controller_task_queue=queues.controller,
            ),
            key=agent_signing_key(node),  # the key its node carries (no marks to publish)
        )
        fleet.inject(node, "ecc_dbe", gpu=1)
        await agent.tick([])  # probes, finds the ECC error, reports it: a ladder starts
        handle = client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(node))
        result = await handle.result()
        lines = await scraped_when(
            port,
            lambda lines: (
                value(lines, "remedy_remediations_total", pool=queues.pool)
                and value(
                    lines, "temporal_workflow_completed_total", workflow_type="NodeRemediation"
                )
            ),
        )

    assert result.outcome is Outcome.RECOVERED, result.model_dump_json(indent=1)
    pool = queues.pool
    assert (
        value(
            lines,
            "remedy_remediations_total",
            pool=pool,
            runbook="quick-reset",
            outcome="recovered",
            remedy_role="controller",
        )
        == 1
    )
    assert (
        value(lines, "remedy_rung_duration_count", pool=pool, action="reset_gpu", result="verified")
        == 1
    )
    assert value(lines, "remedy_nodes_cordoned_total", pool=pool) == 1
    assert value(lines, "remedy_storm_breaker_tripped", pool=pool) == 0
    assert value(lines, "remedy_cordons_held", pool=pool) == 0  # its cordon was let through
    assert value(lines, "remedy_disruption_leases_held", pool=pool) is not None
    assert value(lines, "remedy_probes_total", verdict="unhealthy") == 1
    assert value(lines, "remedy_findings_reported_total", check="memory")
    assert value(lines, "remedy_dependency_ok", dependency="reset_tool") == 1
    # The SDK's own runtime metrics come out of the same endpoint.
    assert value(lines, "temporal_workflow_completed_total", workflow_type="NodeRemediation")
    # The first cordon runs in the ladder's first workflow task: a local activity's metrics.
    assert value(lines, "temporal_local_activity_execution_latency_count", activity_type="cordon")
    assert value(lines, "temporal_activity_execution_latency_count", activity_type="reset_gpu")
    # Every remedy series is as the reference (docs/metrics.md) says: name, kind's suffix, labels.
    assert off_reference(lines) == []
    shown = {line.split("{")[0] for line in lines if line.startswith("remedy_")}
    assert {"remedy_probe_duration_count", "remedy_detection_to_cordon_bucket"} <= shown


def off_reference(lines: list[str]) -> list[str]:
    """Samples of remedy's (or of the SDK's that the reference lists) whose name no declaration
    exposes, or whose labels are not its declared ones (with those every sample carries)."""
    reference = {n: m for m in [*metric.declared(), *metric.SDK_METRICS] for n in metric.exposed(m)}
    carried = {*metric.GLOBAL_LABELS, *metric.WORKFLOW_LABELS}
    wrong = []
    for line in lines:
        name, _, rest = line.partition("{")
        if not name.startswith("remedy_") and name not in reference:
            continue
        m = reference.get(name)
        labels = set(re.findall(r'(\w+)="', rest.rsplit("}", 1)[0])) - carried - {"le"}
        if m is None or labels != set(m.labels) - carried:
            wrong.append(line)
    return wrong


async def test_a_guarded_job_failure_is_counted_by_verdict_and_action(
    dev_env: WorkflowEnvironment,
) -> None:
    client, port = await scraped_client(dev_env)
    fleet = own_fleet("job-metrics", 1)
    async with running_workers(client, fleet, jobs=SimJobs()) as queues:
        handle, job = await guard(dev_env, queues, GuardPolicy(gather=timedelta(0)))
        await handle.signal(
            JobGuard.pod_failed, oom(sorted(fleet.nodes)[0], job, datetime.now(UTC))
        )
        await handle.result()
        lines = await scraped_when(port, lambda lines: value(lines, "remedy_job_failures_total"))
    assert value(lines, "remedy_job_failures_total", verdict="application", action="stop") == 1
