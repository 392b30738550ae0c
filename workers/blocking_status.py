"""`remedy status --blocking`: who blocks whom in each pool — every holder of a share with what
it waits for and the commands that free it, the waiters in the order they are served, the
breaker — read from each pool's DisruptionBudget (one `state` query each, so a pool's holders
and waiters are one consistent read) with the ladders' phases from visibility."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from remedy.disruption import blocking
from remedy.disruption.budget import CLUSTER_POOL
from remedy.ladder.remediation import Phase
from workers.status import NodeRow, NoScanYet, latest_scan, open_work_rows, read_budget


class PoolsBlocking(BaseModel):
    at: datetime  # when the budgets were read
    pools: list[blocking.Blocking] = []
    cluster_breaker: str = ""  # the cluster-wide breaker (empty: none was ever asked)

    @property
    def tripped(self) -> bool:
        breakers = [p.breaker for p in self.pools] + [self.cluster_breaker]
        return any(b.startswith(blocking.TRIPPED) for b in breakers)


async def pools_blocking(client: Client, schedule_id: str, pool: str | None) -> PoolsBlocking:
    """Each pool's holders and waiters: ``pool``, or every pool the latest scan saw or a
    running ladder names. Raises NoScanYet when no pool is known."""
    rows = await _open_rows(client)
    names = {pool} if pool else {r.pool for r in rows if r.pool}
    if not pool:
        try:
            names |= {p.pool for p in (await latest_scan(client, schedule_id)).pools}
        except NoScanYet:
            if not names:
                raise
    phases = {r.node: r.state for r in rows}
    waiting_since = {
        r.node: r.since for r in rows if r.since and r.state == Phase.AWAITING_LEASE.value
    }
    found = []
    for name in sorted(names):
        state = await read_budget(client, name)
        if state is not None:
            found.append(blocking.who_blocks(state, phases, waiting_since))
    cluster = await read_budget(client, CLUSTER_POOL) if not pool else None
    return PoolsBlocking(
        at=datetime.now(UTC),
        pools=found,
        cluster_breaker=blocking.breaker(cluster) if cluster else "",
    )


async def _open_rows(client: Client) -> list[NodeRow]:
    """The running ladders, for their phases; none where the server has no visibility (the
    time-skipping test server): holders are shown without a phase."""
    try:
        return await open_work_rows(client)
    except RPCError as err:
        if err.status is RPCStatusCode.UNIMPLEMENTED:
            return []
        raise


def render(shown: PoolsBlocking) -> list[str]:
    if not shown.pools:
        return [f"no pool has asked for a disruption lease yet (read at {shown.at:%H:%M:%S} UTC)"]
    out = [line for pool in shown.pools for line in blocking.lines(pool, shown.at)]
    if shown.cluster_breaker:
        out.append(f"cluster breaker: {shown.cluster_breaker.replace('`', '')}")
    return out
