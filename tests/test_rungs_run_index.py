"""Every rung a ladder ran is in its search attributes (``RemedyRungsRun``), so a view finds
"all reboots in a pool" among ladders that moved past the reboot (issue 52: ``RemedyRung`` holds
only the current rung, and that query found 0 where 10 ladders rebooted)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from contract import search_attributes as sa
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Outcome, Phase
from tests.conftest import own_fleet, running_workers
from tests.ladder import report, state_of
from tests.test_cli import cli
from tests.test_operator_view import WAITS, eventually, listed


async def test_a_view_finds_ladders_by_the_rungs_they_ran_not_only_the_current_one(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("rungs-run", 2)
    node = sorted(fleet.nodes)[0]
    policy = BudgetPolicy(max_disruption="2", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        pool = f"RemedyPool = '{queues.pool}'"
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe", gpu=3), WAITS)
        await eventually(lambda: state_of(handle), lambda s: s.phase is Phase.AWAITING_APPROVAL)
        # Drained, waiting at reset_gpu: the current rung is reset_gpu, the drain is behind it.
        drained = await eventually(
            lambda: listed(client, f"{pool} AND RemedyRungsRun = 'drain'"), lambda ws: bool(ws)
        )
        reset_before = await listed(client, f"{pool} AND RemedyRungsRun = 'reset_gpu'")
        await cli("approve", node, "--address", address, "--by", "alice")
        result = await handle.result()
        both = await eventually(
            lambda: listed(
                client,
                f"{pool} AND RemedyRungsRun = 'drain' AND RemedyRungsRun = 'reset_gpu' "
                "AND ExecutionStatus = 'Completed'",
            ),
            lambda ws: bool(ws),
        )
        rebooted = await listed(client, f"{pool} AND RemedyRungsRun = 'reboot'")
    assert [w.id for w in drained] == [handle.id]
    assert drained[0].typed_search_attributes.get(sa.RUNG) == "reset_gpu"
    assert reset_before == []
    assert result.outcome is Outcome.RECOVERED
    assert [w.id for w in both] == [handle.id]
    assert both[0].typed_search_attributes.get(sa.RUNGS_RUN) == ["drain", "reset_gpu"]
    assert rebooted == []
