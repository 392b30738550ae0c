"""Cordon at the floor (workflows/quarantine_gate.py ``cordon_first``): a ladder's first cordon
goes before anything that can wait — before its report to the budgets, before its keyring —
where the budgets' published breakers are closed; where one holds new cordons, the ladder asks
and cordons only with leave. The budget publishes its breaker (workflows/breaker_board.py);
the Kubernetes board is a ConfigMap, read and written through the real client."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.breakers import BREAKERS
from adapters.kubernetes.control import CORDONED_BY, TAINT
from adapters.sim import SimFleet
from contract import activities as act
from contract.messages import CORDON_LEAVE
from kubeapi import ApiServer
from remedy.core.errors import ActionRefused, NodeGone, PermissionDenied
from remedy.core.models import Action, CordonState
from remedy.disruption.quarantine import BreakerState
from remedy.ladder.remediation import AttemptResult, Outcome, Phase
from remedy.scan.cluster import CordonOwner, held_by
from tests.breakers import published
from tests.conftest import running_workers
from tests.kube import NODES, OWNER, call, kube, node
from tests.ladder import Handle, wait_for_phase
from tests.test_disruption_budget import budget_state
from tests.test_quarantine import POLICY, _sick

CONFIGMAPS = "v1/configmaps"


async def _steps(handle: Handle) -> list[str]:
    """The ladder's history as it went: each activity scheduled (its name; a local one's
    marker: ``local:`` its name), each signal received (``signal:`` its name), each workflow
    task completed (``task``) and timer started (``timer``)."""
    steps = []
    async for e in handle.fetch_history_events():
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            steps.append(e.activity_task_scheduled_event_attributes.activity_type.name)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            steps.append("completed")
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            steps.append("signal:" + e.workflow_execution_signaled_event_attributes.signal_name)
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            steps.append("task")
        elif e.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            steps.append("timer")
        elif e.marker_recorded_event_attributes.marker_name == "core_local_activity":
            data = e.marker_recorded_event_attributes.details["data"].payloads[0].data
            steps.append("local:" + json.loads(data)["activity_type"])
    return steps


async def test_the_first_cordon_goes_before_the_report_and_waits_for_no_leave(
    time_env: WorkflowEnvironment,
) -> None:
    """Before: the ladder asked its budget first (an activity) and cordoned only once the
    budget's leave came back (a signal), after loading its keyring (another activity). Then
    each of the three was an activity with a task of its own; now the ladder cordons and
    reports in its first workflow task (local activities), and parks. Its keyring waits for a
    decision or the first rung (tests/test_keyring_when_needed.py)."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    sick = sorted(fleet.nodes)[0]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        handle = await _sick(time_env, queues, fleet, sick)
        state = await wait_for_phase(time_env, handle, Phase.TOLERATING)
        steps = await _steps(handle)
        budget = await budget_state(time_env.client, queues.pool)
    cordon = steps.index("local:" + act.CORDON.name)
    assert "completed" not in steps[:cordon]  # no activity's answer awaited before it
    assert steps.index("local:" + act.ASK_TO_CORDON.name) > cordon  # the report follows it
    parked = steps.index("timer")  # the tolerance window
    # All of it local activities of the ladder's workflow task: no activity task of its own
    # (on a loaded machine the SDK may complete that task early and go on in the next).
    assert [s for s in steps[:parked] if s.split(":")[0] not in ("task", "local", "signal")] == []
    assert "local:" + act.OPERATOR_KEYRING.name not in steps[:parked]
    assert "signal:" + CORDON_LEAVE.name not in steps  # no leave asked, none waited for
    assert fleet.node(sick).unschedulable and state.cordon is CordonState.CORDONED
    assert state.cordon_asked_of is None and list(budget.unhealthy) == [sick]  # counted
    assert budget.asking == []
    assert fleet.breakers[queues.pool] is BreakerState.CLOSED  # 1 of 10: closed


async def test_a_published_breaker_holds_the_first_cordon_until_the_budgets_leave(
    time_env: WorkflowEnvironment,
) -> None:
    """A breaker published as tripped (by a budget run before this one, say): the ladder's
    first cordon is refused and recorded nowhere; it asks, and cordons once given leave."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    sick = sorted(fleet.nodes)[0]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        fleet.breakers[queues.pool] = BreakerState.TRIPPED
        handle = await _sick(time_env, queues, fleet, sick)
        state = await wait_for_phase(time_env, handle, Phase.TOLERATING)
        steps = await _steps(handle)
    first, leave = steps.index("local:cordon"), steps.index("signal:" + CORDON_LEAVE.name)
    assert first < steps.index(act.ASK_TO_CORDON.name) < leave  # asks leave: not local
    assert steps.index(act.CORDON.name, first + 1) > leave  # the cordon that landed: with leave
    assert [(a.action, a.result) for a in state.attempts] == [(Action.CORDON, AttemptResult.DONE)]
    assert state.cordon is CordonState.CORDONED and state.cordon_asked_of == [queues.pool]
    assert fleet.breakers[queues.pool] is BreakerState.CLOSED  # this budget's own, once judged


async def test_the_kubernetes_board_is_one_configmap_and_a_held_cordon_changes_nothing(
    api: ApiServer,
) -> None:
    api.objects["v1/namespaces", None, "remedy"] = {"metadata": {"name": "remedy"}}
    api.objects[NODES, None, "n1"] = node("n1")
    cluster = kube(api)
    board = cluster.breakers
    assert board is not None
    assert await call(board.holding, ["a", "_cluster"]) == []  # never published: closed
    await call(board.publish, "a", BreakerState.NEAR)  # creates it
    await call(board.publish, "_cluster", BreakerState.CLOSED)  # merges a key in
    kept = api.objects[CONFIGMAPS, "remedy", BREAKERS]["data"]
    assert kept == {"a": "near", "_cluster": "closed"}
    assert await call(board.holding, ["a", "_cluster", "b"]) == ["a"]
    owner = CordonOwner(OWNER.workflow_id, OWNER.reason, held=lambda: bool(board.holding(["a"])))
    assert await call(cluster.control.cordon, "n1", owner) is CordonState.HELD_BY_BREAKER
    assert not api.objects[NODES, None, "n1"]["spec"]["unschedulable"]
    await call(board.publish, "a", BreakerState.CLOSED)
    assert await call(cluster.control.cordon, "n1", owner) is CordonState.CORDONED
    after = api.objects[NODES, None, "n1"]
    assert after["spec"]["unschedulable"] and TAINT in after["spec"]["taints"]
    assert after["metadata"]["annotations"][CORDONED_BY] == OWNER.workflow_id


async def test_a_budget_publishes_near_one_node_before_it_trips_and_closed_after(
    time_env: WorkflowEnvironment,
) -> None:
    """In a pool of 10 at 20 %: two nodes out of sorts publish NEAR, so the third ladder asks
    before its cordon (and tips the breaker); the storm passes and it publishes CLOSED."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    first, second, third = sorted(fleet.nodes)[:3]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        pool = queues.pool
        seen = []
        for name in (first, second):
            await wait_for_phase(
                time_env, await _sick(time_env, queues, fleet, name), Phase.TOLERATING
            )
            seen.append(await published(time_env, fleet, pool, len(seen) + 1))
        held = await _sick(time_env, queues, fleet, third)
        await wait_for_phase(time_env, held, Phase.HELD_BY_BREAKER, step=timedelta(seconds=1))
        seen.append(await published(time_env, fleet, pool, 3))
        await time_env.sleep(timedelta(minutes=35))  # the reports leave the window
        cordoned = await wait_for_phase(time_env, held, Phase.TOLERATING)
        after = fleet.breakers[pool]
    assert seen == [BreakerState.CLOSED, BreakerState.NEAR, BreakerState.TRIPPED]
    assert cordoned.cordon is CordonState.CORDONED and cordoned.cordon_leave == [pool]
    assert after is not BreakerState.TRIPPED


class _Unread:
    def publish(self, pool: str, state: BreakerState) -> None:
        raise AssertionError("not published here")

    def holding(self, pools: list[str]) -> list[str]:
        raise PermissionDenied("forbidden: remedy needs RBAC 'get' on configmaps")


def test_a_board_that_cannot_be_read_holds_the_cordon_and_no_board_holds_every_one() -> None:
    """Unread, nothing says the breaker is closed: the cordon asks first, as before."""
    assert held_by(_Unread(), ["a"])() is True
    assert held_by(None, ["a"])() is True
    assert held_by(_Unread(), [])() is False  # a cordon with leave reads nothing


async def test_a_first_cordon_that_fails_is_recorded_and_one_for_a_gone_node_ends_the_ladder(
    time_env: WorkflowEnvironment,
) -> None:
    """Recorded like any failed cordon, or the end of a ladder whose node is gone: never a
    failed workflow. A local activity's failure comes unwrapped (contract.defs wraps it), and
    a ladder that ended beside its keyring's local activity was refused by the server (it
    waits for the keyring: OperatorKeys.idle); both failed this test."""
    fleet = SimFleet(nodes=10, pool=f"pool-{uuid.uuid4().hex[:8]}")
    refused, gone = sorted(fleet.nodes)[:2]
    async with running_workers(time_env.client, fleet, policy=POLICY) as queues:
        fleet.break_action("cordon", ActionRefused("node opted out of remedy"))
        held = await _sick(time_env, queues, fleet, refused)
        state = await wait_for_phase(time_env, held, Phase.TOLERATING)
        fleet.break_action("cordon", NodeGone(f"nodes/{gone}: 404"))
        ended = await (await _sick(time_env, queues, fleet, gone)).result()
    first = state.attempts[0]
    assert (first.action, first.result) == (Action.CORDON, AttemptResult.FAILED)
    assert "opted out" in first.detail and state.cordon is None
    assert ended.outcome is Outcome.NODE_GONE
