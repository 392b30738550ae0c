"""A pool budget started afresh (its first run, or one after a terminate) learns, before it
grants anything, who already holds a share of the pool: granting blind could exceed the cap."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from contract.activities import LEASE_HOLDERS
from workflows.common import PATIENT_RETRY

with workflow.unsafe.imports_passed_through():
    from remedy.disruption.budget import BudgetState
    from remedy.disruption.budget_messages import PoolHolders


async def rebuild(state: BudgetState) -> None:
    """The running ladders of the pool that say they hold a lease (their search attributes),
    which of them wait for a person, and who waits for a lease, in the order they asked (else
    each would wait for its next re-ask, and be served in that order)."""
    found = await LEASE_HOLDERS.execute(
        PoolHolders(pool=state.pool),
        start_to_close_timeout=timedelta(seconds=60),
        retry_policy=PATIENT_RETRY,  # no deadline: granting blind could exceed the cap
        summary=f"who holds a lease in pool {state.pool}",
    )
    known = {h.holder for h in state.holders}
    state.holders += [lease for lease in found.leases if lease.holder not in known]
    # Nodes left cordoned for a person: remedy's cordon on the node is the record.
    busy = {h.node for h in state.held} | {lease.node for lease in state.holders}
    state.held += [h for h in found.held if h.node not in busy]
    holding = known | {lease.holder for lease in found.leases}
    state.waiting = [w for w in state.waiting if w.holder not in holding]
    listed = [w for w in found.waiting if w.holder not in holding]
    asked = {w.holder for w in listed}  # a request that started this run: in its place
    state.waiting = listed + [w for w in state.waiting if w.holder not in asked]
    for wait in found.waiting_for_human:
        state.note_human_wait(wait)
    state.rebuilt = True
