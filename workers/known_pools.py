"""The node pools remedy knows, so a command can refuse a pool name that is a typo before it
creates anything (a `trigger --pool bogus` would start `disruption-budget/bogus` and cordon the
node under a budget no controller sizes).

A pool is known when it is the default pool (the nodes without a ``remedy.io/pool`` label), a
disruption budget was started for it (the controller starts one for a pool once a ladder there
asks for a share), the latest fleet scan saw it, or a running ladder names it."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from contract.names import DISRUPTION_BUDGET_WORKFLOW, FLEET_SCAN_SCHEDULE, budget_workflow_id
from remedy.core.models import NodeRef
from remedy.disruption.budget import CLUSTER_POOL
from workers.status import NoScanYet, latest_scan, open_work_rows

DEFAULT_POOL = NodeRef.model_fields["pool"].default
BUDGET_PREFIX = budget_workflow_id("")


class UnknownPool(Exception):
    """A pool name remedy does not know; the message lists those it does."""


async def check_pool(
    client: Client, pool: str, schedule_id: str = FLEET_SCAN_SCHEDULE, cluster: bool = False
) -> None:
    """Raise UnknownPool unless ``pool`` is known (``cluster``: the cluster's ``_cluster``
    counts too, for the commands that act on its breaker)."""
    if pool == DEFAULT_POOL or (cluster and pool == CLUSTER_POOL):
        return
    if await _has_budget(client, pool):
        return
    known = await known_pools(client, schedule_id)
    if pool in known:
        return
    listed = ", ".join(sorted(known | ({CLUSTER_POOL} if cluster else set())))
    raise UnknownPool(f"no pool {pool!r} (known pools: {listed})")


async def known_pools(client: Client, schedule_id: str = FLEET_SCAN_SCHEDULE) -> set[str]:
    """Every pool remedy knows: the default, the latest scan's, the budgets', the ladders'.
    A server with no visibility or schedules (the time-skipping test server) lists no budgets,
    ladders or scan pools."""
    known = {DEFAULT_POOL}
    try:
        known |= {p.pool for p in (await latest_scan(client, schedule_id)).pools}
    except NoScanYet:
        pass
    except RPCError as err:  # no schedules on the server (the time-skipping test server)
        if err.status is not RPCStatusCode.UNIMPLEMENTED:
            raise
    try:
        budgets = f"WorkflowType = '{DISRUPTION_BUDGET_WORKFLOW}' AND ExecutionStatus = 'Running'"
        known |= {w.id.removeprefix(BUDGET_PREFIX) async for w in client.list_workflows(budgets)}
        known |= {row.pool for row in await open_work_rows(client) if row.pool}
    except RPCError as err:
        if err.status is not RPCStatusCode.UNIMPLEMENTED:
            raise
    return known - {CLUSTER_POOL}


async def _has_budget(client: Client, pool: str) -> bool:
    """Whether a disruption budget ever ran for the pool (one read, on any server)."""
    try:
        await client.get_workflow_handle(budget_workflow_id(pool)).describe()
    except RPCError as err:
        if err.status is RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True
