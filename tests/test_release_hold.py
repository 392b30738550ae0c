"""`remedy release-hold` answers: a node held for a person stops counting against its pool,
and a node that is not held is refused with what does hold the pool's share (exit 2), with
nothing in the budget's history. Against the real dev server (it keeps a rejected update out
of the history altogether)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from contract.names import budget_workflow_id
from remedy.core.models import Action
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome
from remedy.runbook import Match, Runbook, Rung
from tests.conftest import own_fleet, running_workers
from tests.ladder import report
from tests.test_cli import cli
from tests.test_operator_updates import events, settled_events

# Drained, and nothing left to try: the node is left cordoned for a person.
DRAIN_ONLY = Runbook(name="drain-only", match=Match(xids=[48]), ladder=[Rung(action=Action.DRAIN)])


async def test_release_hold_frees_a_held_node_and_refuses_one_that_is_not(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("hold", 2)
    held, free = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="2", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        ladder = await report(client, queues, fleet.inject(held, "ecc_dbe"), DRAIN_ONLY)
        left = await ladder.result()
        pool = ["--pool", queues.pool, "--address", address]
        budget = budget_workflow_id(queues.pool)
        before = await settled_events(client, budget)
        refused = await cli("release-hold", free, *pool)
        after = await events(client, budget)
        released = await cli("release-hold", held, *pool)
        again = await cli("release-hold", held, *pool)
    nowhere = await cli("release-hold", held, "--pool", "no-such-pool", "--address", address)
    assert left.outcome is Outcome.NEEDS_HUMAN
    assert refused == (
        2,
        f"error: pool {queues.pool}: {free} is not held for a person "
        f"(holders: {held} (held for a person))\n",
    )
    assert after == before  # refused at the caller: nothing reached the budget's history
    assert released == (
        0,
        f"pool {queues.pool}: {held} no longer held; 0 held for a person, 0 leases held, "
        "0 waiting\n",
    )
    assert again == (
        2,
        f"error: pool {queues.pool}: {held} is not held for a person (holders: none)\n",
    )
    assert nowhere[0] == 2 and "no disruption budget" in nowhere[1]
