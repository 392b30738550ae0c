"""Liveness on the controller's clock, on a real schedule (the dev server) as the controller
runs its scans: nodes whose clocks are twenty minutes behind or ahead stay healthy while their
agents heartbeat, a fault on one behind is a current fault (its own ladder, not an AgentSilent
one), and agents that die are seen silent within the silent window whatever their clocks say.
Each clock's skew is reported: in the scan's summary and as a metric. Before, the scan compared
the agent's own ``lastHeartbeatTime`` with its clock: the node behind was silent at once, and
the dead agent ahead hid for twenty minutes more."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from contract.names import remediation_workflow_id
from remedy.core.models import Finding
from remedy.detection.conditions import conditions_from
from remedy.detection.probe import probe_node
from remedy.runbook import RunbookSet
from remedy.runbook.schema import FROM_CONDITION
from remedy.scan.fleet import ScanInput
from remedy.scan.liveness import AGENT_SILENT
from tests.conftest import own_fleet, running_workers
from tests.scans import completed_scans, scan_schedule, until
from tests.test_metrics import scrape, scraped_client, value
from workflows.node_remediation import NodeRemediation

SILENT = timedelta(seconds=3)  # the silent window: seconds, on the dev server's real time
BEHIND, AHEAD = timedelta(minutes=-20), timedelta(minutes=20)


async def _trigger(client: Client, node: str) -> Finding | None:
    """What started the node's ladder (None: no ladder, or none that said yet)."""
    ladder = client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(node))
    try:
        return (await ladder.query(NodeRemediation.state)).trigger
    except RPCError:
        return None


async def test_liveness_is_judged_on_the_controllers_clock_whatever_the_nodes_clock_says(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    client, port = await scraped_client(dev_env)
    fleet = own_fleet("clocks", 5)
    behind, ahead, sick, dead_behind, dead_ahead = sorted(fleet.nodes)
    clocks = {behind: BEHIND, ahead: AHEAD, sick: BEHIND, dead_behind: BEHIND, dead_ahead: AHEAD}
    for node, offset in clocks.items():
        fleet.set_clock(node, offset)
    # A fault its agent published on its node's clock (no report reached remedy).
    fleet.inject(sick, "ecc_dbe", gpu=3)
    host = fleet.host(sick)
    report = probe_node(sick, host.nvml(), host.probe_config)
    on_its_clock = datetime.now(UTC) + BEHIND
    fleet.cluster.marks.set_conditions(sick, conditions_from(report, [], on_its_clock))
    fast = RunbookSet(r.scaled(3600) for r in shipped_runbooks)
    async with running_workers(client, fleet, runbooks=fast) as queues:
        inp = ScanInput(node_task_queue=queues.agents, agent_silent_after=SILENT)
        async with scan_schedule(client, inp, queues.controller) as schedule:
            live_for = datetime.now(UTC) + 2 * SILENT

            async def past_the_window() -> bool:
                scans = await completed_scans(client, schedule)
                return any(summary.at > live_for for summary, _ in scans)

            await until("the live agents heartbeat past the silent window", past_the_window)
            fleet.silence_agent(dead_behind)
            fleet.silence_agent(dead_ahead)

            async def both_seen_dead() -> bool:
                found = [await _trigger(client, n) for n in (dead_behind, dead_ahead)]
                return all(f is not None and f.reason == AGENT_SILENT for f in found)

            await until("both dead agents have AgentSilent ladders", both_seen_dead)
            triggers = {node: await _trigger(client, node) for node in clocks}
            summary, _ = (await completed_scans(client, schedule))[-1]
            metrics = scrape(port)
    assert triggers[behind] is None and triggers[ahead] is None  # heartbeating: left alone
    assert not [n for n, _ in fleet.actions if n in (behind, ahead)]
    fault = triggers[sick]
    assert fault is not None and fault.check == FROM_CONDITION and fault.reason != AGENT_SILENT
    for dead in (dead_behind, dead_ahead):
        evidence = triggers[dead].evidence  # type: ignore[union-attr]
        assert "by the node's clock" in evidence and "for 0:19:" not in evidence, evidence
    # Reported, not trusted: every clock is off by twenty minutes (at least 19, by the bound).
    [pool] = summary.pools
    assert set(pool.clock_skew) == set(clocks), pool
    for node, offset in clocks.items():
        assert abs(timedelta(seconds=pool.clock_skew[node]) - offset) <= timedelta(minutes=1)
    assert "clocks off the controller's by more than 1m" in summary.markdown()
    assert value(metrics, "remedy_nodes_clock_skewed", pool=queues.pool) == len(clocks)
    largest = value(metrics, "remedy_clock_skew_largest_seconds", pool=queues.pool)
    assert largest is not None and largest >= 19 * 60
