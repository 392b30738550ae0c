"""What a node can do, from its dependency checks: a ladder skips a rung its node cannot perform
and says why (time-skipping server, real activities over the simulated fleet), and the agent
publishes its readiness as a condition that never starts a ladder."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.node import NodeActivities
from adapters.sim import SimFleet
from contract import activities as act
from remedy.acting.capabilities import Ability, Capabilities, Dependency, DependencyCheck
from remedy.acting.capabilities import capabilities_from as from_checks
from remedy.core.actions import ACTIONS, Where
from remedy.core.models import Action, NodeRef
from remedy.detection.conditions import REMEDY_READY, is_problem, ready_condition
from remedy.ladder.describe import remediation_details
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import RunbookSet
from tests.conftest import running_workers
from tests.ladder import report, state_of
from workers.agent import AgentConfig, NodeAgent

NODE = "gpu-node-001"
NO_RESET = "nvidia-smi is not on PATH"
VERIFIED = AttemptResult.VERIFIED


def test_the_node_actions_are_abilities_a_dependency_enables() -> None:
    """A node action with no ability (one added later) is never skipped: it fails on its own."""
    as_actions = {Action(a) for a in Ability if a in set(Action)}
    assert as_actions == {Action.DIAGNOSE, Action.RESET_GPU, Action.REBOOT}
    assert all(ACTIONS[a].where is Where.NODE for a in as_actions)
    checks = [DependencyCheck.of(d, False, "gone") for d in Dependency]
    assert all(from_checks(checks).why_not(a) for a in as_actions)


def test_capabilities_name_every_reason_an_ability_is_missing() -> None:
    reset = DependencyCheck.of(Dependency.RESET_TOOL, False, NO_RESET)
    also = DependencyCheck(name="driver", ok=False, detail="unloaded", enables=["reset_gpu"])
    fine = DependencyCheck.of(Dependency.REBOOT_PATH, True, "systemctl reboot, allowed")
    capabilities = from_checks([reset, also, fine])
    assert not capabilities.ready
    assert capabilities.why_not(Action.RESET_GPU) == f"reset_tool: {NO_RESET}; driver: unloaded"
    assert capabilities.why_not(Action.REBOOT) is None
    assert capabilities.why_not(Action.REPLACE) is None  # the controller's
    assert from_checks([fine]).ready and from_checks([fine]).cannot == {}


def test_readiness_is_a_condition_of_its_own_that_never_reads_as_a_problem() -> None:
    t0, t1 = datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 11, 30, 1, tzinfo=UTC)
    missing = from_checks([DependencyCheck.of(Dependency.RESET_TOOL, False, NO_RESET)])
    down = ready_condition(missing, [], t0)
    assert (down.status, down.reason) == ("False", "DependenciesMissing")
    assert NO_RESET in down.message
    again = ready_condition(missing, [down], t1)
    assert again.last_transition_time == t0 and again.last_heartbeat_time == t1
    up = ready_condition(Capabilities(), [again], t1)
    assert (up.status, up.last_transition_time) == ("True", t1)
    assert not is_problem(up) and not is_problem(down)


async def test_a_rung_the_node_cannot_perform_is_skipped_with_its_reason(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    fleet.lack(NODE, Dependency.RESET_TOOL, NO_RESET)
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    async with running_workers(time_env.client, fleet) as queues:
        handle = await report(time_env.client, queues, finding, shipped_runbooks.match(finding))
        result = await handle.result()
        state = await state_of(handle)
        history = await handle.fetch_history()
    assert result.outcome is Outcome.RECOVERED, result.detail
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [
        (Action.DRAIN, AttemptResult.DONE),
        (Action.RESET_GPU, AttemptResult.SKIPPED),  # never ran: reset_tool is missing
        (Action.REBOOT, AttemptResult.VERIFIED),  # the next rung
    ]
    skipped = result.attempts[2]
    assert skipped.detail == f"node cannot: reset_tool: {NO_RESET}"
    assert "reset_gpu" not in [a for n, a in fleet.actions if n == NODE]
    skipped_line = r"- \*\*rung 2 reset_gpu\*\*: skipped at .* — node cannot: reset_tool"
    assert re.search(skipped_line, remediation_details(state))
    # In the history: the node was asked before each of its own rungs, not before drain.
    asked = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type is EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ].count(act.CAPABILITIES.name)
    assert asked == 2


async def test_an_agent_that_cannot_be_asked_gets_the_rung_run_as_before(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """An agent from before the question (no capabilities activity): after a short, patient
    wait the ladder runs the rung, which fails on its own if the node cannot do it."""
    finding = fleet.inject(NODE, "ecc_dbe", gpu=2)
    older = NodeActivities(fleet.host)
    served = [fn for fn in older.all() if fn != older.capabilities]
    async with running_workers(time_env.client, fleet, agents=False) as queues:
        with ThreadPoolExecutor(max_workers=4) as executor:
            agent = Worker(
                time_env.client,
                task_queue=queues.agents,
                activities=served,
                activity_executor=executor,
            )
            async with agent:
                handle = await report(
                    time_env.client, queues, finding, shipped_runbooks.match(finding)
                )
                result = await handle.result()
                history = await handle.fetch_history()
    ladder = [(a.action, a.result) for a in result.attempts if a.rung >= 0]
    assert ladder == [(Action.DRAIN, AttemptResult.DONE), (Action.RESET_GPU, VERIFIED)]
    [unanswered] = [
        e.activity_task_failed_event_attributes.failure.message
        for e in history.events
        if e.event_type is EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert "capabilities" in unanswered and "not registered" in unanswered


async def test_the_agent_publishes_what_is_missing_and_when_it_is_mended(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[0]
    config = AgentConfig(node=NodeRef(name=node, pool="p"), node_pickup_timeout=timedelta(1))
    agent = NodeAgent(
        time_env.client, fleet.host(node), RunbookSet([]), fleet.cluster.marks, config
    )
    fleet.lack(node, Dependency.REBOOT_PATH, "systemctl is not on PATH")
    await agent.tick([])
    ready = fleet.node(node).conditions[REMEDY_READY]
    assert (ready.status, ready.reason) == ("False", "DependenciesMissing")
    assert "reboot_path: systemctl is not on PATH" in ready.message
    assert agent.capabilities.why_not(Action.REBOOT) is not None
    [facts] = [n for n in fleet.cluster.fleet.nodes() if n.name == node]
    assert facts.problems == []  # a node that cannot reboot is not an unhealthy one
    fleet.node(node).missing.clear()
    await agent.tick([])
    assert fleet.node(node).conditions[REMEDY_READY].status == "True"
