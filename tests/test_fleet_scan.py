"""The fleet scan on a real Temporal Schedule (dev server): it starts a remediation for a node
whose condition went bad while no agent signalled, admits a new node, and summarises the fleet."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from datetime import UTC, datetime, timedelta

from temporalio.client import (
    Client,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from adapters.sim.cluster import REMEDY_CORDON
from contract.names import admission_workflow_id, budget_workflow_id, remediation_workflow_id
from remedy.core.models import Action
from remedy.detection.conditions import NodeCondition, conditions_from
from remedy.detection.node_facts import NodeFacts
from remedy.detection.probe import probe_node
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome, Phase, RemediationResult
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from remedy.scan.admission import AdmissionPolicy
from remedy.scan.fleet import (
    FleetSummary,
    NodeStatus,
    OpenWork,
    ScanInput,
    finding_from_condition,
    plan_scan,
    summarise,
)
from tests.conftest import Queues, own_fleet, pool_known, running_workers
from tests.ladder import report, wait_for_phase
from tests.scans import completed_scans, scan_schedule, until
from workers.cli import app
from workers.schedules import ensure_fleet_scan
from workflows.disruption_budget import DisruptionBudget
from workflows.fleet_scan import FleetScan
from workflows.node_remediation import NodeRemediation


async def closed(client: Client, workflow_id: str, within_s: float = 30) -> None:
    """Wait (real time: the dev server does not skip) until the workflow has completed."""
    for _ in range(int(within_s * 10)):
        try:
            status = (await client.get_workflow_handle(workflow_id).describe()).status
        except RPCError:
            status = None  # not started yet
        if status is WorkflowExecutionStatus.COMPLETED:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{workflow_id} did not complete within {within_s}s")


async def scans_after(
    schedule: ScheduleHandle, more: int, within_s: float = 60
) -> ScheduleDescription:
    """Wait (real time) until the schedule has started ``more`` scans since it is asked."""
    wanted = (await schedule.describe()).info.num_actions + more
    for _ in range(int(within_s * 10)):
        description = await schedule.describe()
        if description.info.num_actions >= wanted:
            return description
        await asyncio.sleep(0.1)
    raise AssertionError(f"the schedule did not start {more} more scans within {within_s}s")


def _problem(reason: str = "Xid48") -> NodeCondition:
    now = datetime(2026, 11, 1, tzinfo=UTC)
    return NodeCondition(
        type="GpuProblem",
        status="True",
        reason=reason,
        message="x",
        last_heartbeat_time=now,
        last_transition_time=now,
    )


def test_plan_remediates_unowned_problems_and_admits_new_nodes_once() -> None:
    nodes = [
        NodeFacts(name="ok", pool="a", silent_for=timedelta(seconds=10)),
        NodeFacts(name="sick", pool="a", problems=[_problem()]),
        NodeFacts(name="sick-busy", pool="a", problems=[_problem()]),
        NodeFacts(
            name="held",
            pool="a",
            problems=[_problem()],
            unschedulable=True,
            cordoned_by_remedy=True,
        ),  # a ladder ran out: a human's, not a new ladder
        NodeFacts(name="new", pool="b", awaiting_admission=True),
        NodeFacts(name="new-busy", pool="b", awaiting_admission=True),
        NodeFacts(name="turned-away", pool="b", awaiting_admission=True, rejected="bad GPU"),
        NodeFacts(name="theirs", pool="b", unschedulable=True),
        NodeFacts(name="opted-out", pool="b", managed=False, problems=[_problem()]),
    ]
    work = OpenWork(remediating=["sick-busy"], admitting=["new-busy"])
    plan = plan_scan(nodes, work)
    assert [n.name for n in plan.remediate] == ["sick"]
    assert [n.name for n in plan.admit] == ["new"]
    summary = summarise(nodes, work, datetime(2026, 11, 1, tzinfo=UTC))
    a, b = summary.pools
    assert (
        a.pool,
        a.nodes,
        a.count(NodeStatus.HEALTHY),
        a.count(NodeStatus.UNHEALTHY),
        a.count(NodeStatus.IN_REMEDIATION),
        a.count(NodeStatus.NEEDS_HUMAN),
    ) == ("a", 4, 1, 1, 1, 1)
    assert (
        b.count(NodeStatus.ADMITTING),
        b.count(NodeStatus.REJECTED),
        b.count(NodeStatus.CORDONED),
        b.count(NodeStatus.UNMANAGED),
    ) == (2, 1, 1, 1)


def test_a_node_whose_agent_never_reported_or_went_quiet_is_not_healthy() -> None:
    beat = datetime(2026, 11, 1, tzinfo=UTC)
    nodes = [
        NodeFacts(name="fresh", pool="a", last_heartbeat=beat, silent_for=timedelta(seconds=30)),
        NodeFacts(name="quiet", pool="a", last_heartbeat=beat, silent_for=timedelta(minutes=5)),
        NodeFacts(name="never", pool="a"),  # no remedy condition at all: no heartbeat
        NodeFacts(name="new", pool="a", awaiting_admission=True),  # admission probes it
    ]
    plan = plan_scan(nodes, OpenWork(), silent_after=timedelta(minutes=2))
    [pool] = summarise(nodes, OpenWork(), beat, silent_after=timedelta(minutes=2)).pools
    assert [n.name for n in plan.silent] == ["quiet"] and not plan.remediate
    assert pool.count(NodeStatus.HEALTHY) == 1
    assert pool.attention == {"quiet": NodeStatus.SILENT, "never": NodeStatus.UNKNOWN}


def test_a_condition_reason_naming_an_xid_becomes_a_finding_with_that_xid() -> None:
    assert finding_from_condition("n", _problem("Xid79")).xid == 79
    assert finding_from_condition("n", _problem("NicDown")).xid is None


async def test_scan_remediates_a_silent_bad_condition_and_admits_a_new_node(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    client = dev_env.client
    fleet = own_fleet("scan", 4)
    sick, healthy = sorted(fleet.nodes)[:2]
    newcomer = f"{fleet.node(sick).name}-new"
    # The GPU fails and the condition says so, but no agent ever signals remedy.
    fleet.inject(sick, "ecc_dbe", gpu=3)
    host = fleet.host(sick)
    report = probe_node(sick, host.nvml(), host.probe_config)
    fleet.cluster.marks.set_conditions(sick, conditions_from(report, [], datetime.now(UTC)))
    fleet.join(newcomer)
    schedule_id = f"scan-{uuid.uuid4().hex[:8]}"
    # Real time on the dev server: the runbooks' minutes become milliseconds.
    fast = RunbookSet(r.scaled(3600) for r in shipped_runbooks)
    async with running_workers(client, fleet, runbooks=fast) as queues:
        await ensure_fleet_scan(
            client,
            timedelta(seconds=2),
            queues.controller,
            ScanInput(
                node_task_queue=queues.agents, admission=AdmissionPolicy(gap=timedelta(seconds=1))
            ),
            schedule_id=schedule_id,
        )
        schedule = client.get_schedule_handle(schedule_id)
        try:
            await closed(client, remediation_workflow_id(sick))
            await closed(client, admission_workflow_id(newcomer))
            ladder = await client.get_workflow_handle(
                remediation_workflow_id(sick), result_type=RemediationResult
            ).result()
            description = await scans_after(schedule, 2)  # the recovered node is left alone
            last = description.info.recent_actions[-1].action
            summary = await client.get_workflow_handle(
                last.workflow_id, run_id=last.first_execution_run_id, result_type=FleetSummary
            ).result()
        finally:
            await schedule.delete()
    assert ladder.outcome is Outcome.RECOVERED and ladder.runbook == "gpu-memory-ecc", ladder
    assert (
        "cordon" in [a for n, a in fleet.actions if n == sick]
        and (sick, "reset_gpu") in fleet.actions
    )
    assert [c.status for c in fleet.cluster.marks.conditions(sick)] == ["False", "False"]
    assert fleet.node(newcomer).validated_serials and not fleet.node(newcomer).awaiting_admission
    assert description.schedule.policy.overlap is ScheduleOverlapPolicy.SKIP
    assert summary.started_remediations == [] and summary.started_admissions == []
    [pool] = summary.pools
    assert pool.nodes == 5 and pool.count(NodeStatus.HEALTHY) == 5, pool
    assert healthy not in [n for n, _ in fleet.actions]
    assert "| pool | nodes |" in summary.markdown()


async def scan_every_second(client: Client, queues: Queues, schedule_id: str) -> None:
    """A fleet scan of the test's own queues every second (delete the schedule after)."""
    await ensure_fleet_scan(
        client,
        timedelta(seconds=1),
        queues.controller,
        ScanInput(node_task_queue=queues.agents),
        schedule_id=schedule_id,
    )


async def test_remedy_status_shows_the_tripped_breaker_and_resume_pool_closes_it(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("storm", 10)
    sick = sorted(fleet.nodes)[:3]  # 30 % of the pool at once: a storm
    policy = BudgetPolicy(max_disruption="50%", storm_share=0.2, storm_window=timedelta(hours=1))
    schedule_id = f"scan-{uuid.uuid4().hex[:8]}"
    runner = CliRunner()
    async with running_workers(client, fleet, policy=policy) as queues:
        for name in sick:
            finding = fleet.inject(name, "ecc_dbe", gpu=0)
            await report(client, queues, finding, shipped_runbooks.match(finding))
        budget = client.get_workflow_handle_for(
            DisruptionBudget.run, budget_workflow_id(queues.pool)
        )
        for _ in range(100):  # the budget starts with the first cordoned node's report
            with contextlib.suppress(RPCError):
                if (await budget.query(DisruptionBudget.state)).tripped:
                    break
            await asyncio.sleep(0.1)
        await scan_every_second(client, queues, schedule_id)
        try:
            shown = None
            for _ in range(100):  # until a scan has completed
                shown = await asyncio.to_thread(
                    runner.invoke,
                    app,
                    ["status", "--address", address, "--schedule", schedule_id, "--json"],
                )
                if shown.exit_code != 2 and json.loads(shown.output)["scanned_at"]:
                    break
                await asyncio.sleep(0.1)
            text = await asyncio.to_thread(
                runner.invoke,
                app,
                ["status", "--address", address, "--schedule", schedule_id, "--pool", queues.pool],
            )
            resumed = await asyncio.to_thread(
                runner.invoke,
                app,
                ["resume-pool", queues.pool, "--address", address, "--by", "alice"],
            )
            state = await budget.query(DisruptionBudget.state)
        finally:
            await client.get_schedule_handle(schedule_id).delete()
    assert shown is not None and shown.exit_code == 3, shown.output  # 3: a breaker is tripped
    [pool] = json.loads(shown.output)["pools"]
    assert pool["budget"]["tripped"] and "3 of 10 nodes unhealthy" in pool["budget"]["breaker_note"]
    assert pool["summary"]["nodes"] == 10
    assert pool["summary"]["counts"]["in_remediation"] == 3
    assert text.exit_code == 3 and f"ALERT pool {queues.pool}" in text.output
    assert "TRIPPED" in text.output and "remedy resume-pool" in text.output
    assert all(f"{name}  {queues.pool}" in text.output for name in sick)  # one row per node
    assert resumed.exit_code == 0 and not state.tripped and "alice" in state.breaker_note


async def test_remedy_status_without_a_scan_says_so_with_exit_2(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    empty = f"pool-{uuid.uuid4().hex[:8]}"  # a pool remedy knows (its budget runs), no node in it
    await pool_known(client, empty)
    try:
        result = await asyncio.to_thread(
            CliRunner().invoke,
            app,
            ["status", "--address", address, "--schedule", "nope", "--pool", empty],
        )
    finally:
        await client.get_workflow_handle(budget_workflow_id(empty)).terminate("test over")
    assert result.exit_code == 2 and "no fleet-scan schedule 'nope'" in result.output


async def scan_and_adoption(
    client: Client, queues: Queues, node: str
) -> tuple[FleetSummary, RemediationResult]:
    """One scan, and the result of the ladder it gave ``node`` (once that ladder closed)."""
    summary = await client.execute_workflow(
        FleetScan.run,
        ScanInput(node_task_queue=queues.agents),
        id=f"scan-{uuid.uuid4().hex[:8]}",
        task_queue=queues.controller,
    )
    await closed(client, remediation_workflow_id(node))
    result = await client.get_workflow_handle(
        remediation_workflow_id(node), result_type=RemediationResult
    ).result()
    return summary, result


async def test_the_scan_gives_an_orphaned_cordon_a_ladder_and_leaves_a_persons_alone(
    dev_env: WorkflowEnvironment, shipped_runbooks: RunbookSet
) -> None:
    """Three nodes carry remedy's cordon with no ladder running: one's ladder was terminated
    (nobody owns the cordon), one's ended needing a human (a person owns it), and one has no
    ladder on record at all (its history expired: no evidence, so it is left alone)."""
    client = dev_env.client
    fleet = own_fleet("orphan", 3)
    orphan, persons, forgotten = sorted(fleet.nodes)
    fleet.node(forgotten).unschedulable = True
    fleet.node(forgotten).annotations[REMEDY_CORDON] = "a ladder long gone"
    hold = Runbook(name="hold-now", match=Match(xids=[48]), ladder=[])
    wait = Runbook(
        name="wait",
        match=Match(xids=[48]),
        ladder=[Rung(action=Action.DRAIN, approval="required")],
    )
    fast = RunbookSet(r.scaled(3600) for r in shipped_runbooks)
    # Three of three nodes out of sorts would trip the quarantine breaker: not what is tried here.
    calm = BudgetPolicy(storm_share=1.0)
    async with running_workers(client, fleet, runbooks=fast, policy=calm) as queues:
        cut = await report(client, queues, fleet.inject(orphan, "ecc_dbe"), wait)
        await wait_for_phase(dev_env, cut, Phase.AWAITING_APPROVAL, step=timedelta(seconds=0.2))
        await cut.terminate("an operator's mistake")
        fleet.clear_faults(orphan)  # the fault passed meanwhile; the cordon stayed
        held = await report(client, queues, fleet.inject(persons, "ecc_dbe"), hold)
        assert (await held.result()).outcome is Outcome.NEEDS_HUMAN
        summary, result = await scan_and_adoption(client, queues, orphan)
    assert summary.orphaned_cordons == [orphan]
    assert result.runbook == "orphaned-cordon" and result.outcome is Outcome.CLEARED
    assert not fleet.node(orphan).unschedulable  # looked at again and given back
    assert fleet.node(persons).unschedulable  # still a person's
    assert fleet.node(forgotten).unschedulable


async def test_the_scan_turns_a_silent_agent_into_an_agent_silent_ladder(
    dev_env: WorkflowEnvironment,
) -> None:
    """On a schedule, as the controller runs it: one scan alone only starts a heartbeat's
    clock; the scans judge an agent silent once its heartbeat has not changed for the silent
    window by their clock (remedy.scan.liveness), whatever its last heartbeat's time says."""
    client = dev_env.client
    fleet = own_fleet("silent", 3)
    quiet, *others = sorted(fleet.nodes)
    fleet.silence_agent(quiet, since=datetime.now(UTC) - timedelta(minutes=10))
    async with running_workers(client, fleet) as queues:
        inp = ScanInput(node_task_queue=queues.agents, agent_silent_after=timedelta(seconds=2))
        async with scan_schedule(client, inp, queues.controller) as schedule:

            async def starting() -> list[FleetSummary]:
                scans = await completed_scans(client, schedule)
                return [summary for summary, _ in scans if summary.started_remediations]

            async def started() -> bool:
                return bool(await starting())

            await until("a scan starts the silent node's ladder", started)
            summary = (await starting())[0]
            ladder = client.get_workflow_handle_for(
                NodeRemediation.run, remediation_workflow_id(quiet)
            )

            async def cordoned() -> bool:  # the runbook cordons first
                return (await ladder.query(NodeRemediation.state)).cordon is not None

            await until("its ladder cordons it", cordoned)
            state = await ladder.query(NodeRemediation.state)
    assert summary.started_remediations == [quiet]
    assert state.runbook is not None and state.runbook.name == "agent-silent"
    assert state.trigger is not None and state.trigger.reason == "AgentSilent"
    evidence = state.trigger.evidence
    assert "no heartbeat from remedy's agent for " in evidence and "by the node's clock" in evidence
    assert "for 0:10:" not in evidence  # the scans' measure, not its heartbeat's age
    assert fleet.node(quiet).unschedulable  # cordoned: nothing is watching it
    [pool] = summary.pools
    assert pool.count(NodeStatus.HEALTHY) == 2 and pool.count(NodeStatus.IN_REMEDIATION) == 1
    assert all(n not in [name for name, _ in fleet.actions] for n in others)
