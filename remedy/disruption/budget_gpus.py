"""The disruption budget in GPUs: a pool's cap on GPUs out at once (``max_gpus_out``) beside
its cap on nodes (``max_disruption``), and what each lease takes out.

A node lease takes the node out, with all its GPUs. A GPU lease (a GPU-scoped rung,
remedy/acting/gpu_scope.py) takes only its faulty GPUs: the node keeps serving on the others, so it
counts against ``max_gpus_out`` and not as a node out. Only a pool that caps GPUs grants GPU
leases; elsewhere a GPU-scoped rung's lease is a node lease, as it was before GPU budgets (else
nothing would limit GPU-scoped work). A ladder that climbs from a GPU-scoped rung to one that
takes the node (reboot, replace) asks again for the node: its GPU lease stays held (the GPU is
still out) until the node lease replaces it, so the counts never pass either cap.

Pure functions over ``BudgetState``; the DisruptionBudget workflow interprets them.
"""

from __future__ import annotations

from datetime import datetime

from remedy.core.models import Scope
from remedy.disruption.budget import BudgetState, Lease, LeaseRequest, allowed_disruptions


def allowed_gpus(spec: str | None, pool_gpus: int) -> int | None:
    """How many GPUs of the pool may be out at once; None: no cap. As for nodes: ``"2"`` → 2;
    ``"10%"`` of a pool of 4 nodes of 8 GPUs (32) rounds up to 4; ``"all-but-30"`` → 2."""
    return None if spec is None else allowed_disruptions(spec, pool_gpus)


def scope_of(req: LeaseRequest) -> Scope:
    """The lease a request gets: a GPU lease only where the pool caps GPUs and the ladder named
    its faulty GPUs; else the node, with all its GPUs."""
    gpu = req.scope is Scope.GPU and bool(req.gpus) and req.policy.max_gpus_out is not None
    return Scope.GPU if gpu else Scope.NODE


def size_of(req: LeaseRequest) -> int:
    """The GPUs its lease would take out."""
    return len(req.gpus) if scope_of(req) is Scope.GPU else req.node_gpus


def lease_for(req: LeaseRequest, now: datetime) -> Lease:
    scope = scope_of(req)
    gpus = req.gpus if scope is Scope.GPU else []
    return Lease(
        holder=req.holder,
        node=req.node,
        granted_at=now,
        scope=scope,
        gpus=gpus,
        node_gpus=req.node_gpus,
    )


def gpus_of(lease: Lease) -> int:
    """The GPUs a lease takes out: its own for a GPU lease, the node's for a node lease."""
    return len(lease.gpus) if lease.scope is Scope.GPU else lease.node_gpus


def gpus_out(state: BudgetState) -> int:
    """GPUs out under the budget: its leases' and its counted holds' (a node left for a person
    is out whole). Two GPU leases and one node lease on 8-GPU nodes: 10."""
    held = sum(h.gpus for h in state.counted_holds)
    return sum(gpus_of(lease) for lease in state.holders) + held


def gpu_cap(state: BudgetState) -> int | None:
    return allowed_gpus(state.policy.max_gpus_out, state.pool_gpus)


def own_lease(state: BudgetState, holder: str) -> Lease | None:
    return next((lease for lease in state.holders if lease.holder == holder), None)


def covered(state: BudgetState, req: LeaseRequest) -> bool:
    """The holder holds a lease as wide as it asks (it asks again: a new run, a re-ask): it is
    told again. A GPU lease does not cover the node: that ask waits, as an upgrade."""
    lease = own_lease(state, req.holder)
    if lease is None:
        return False
    return lease.scope is Scope.NODE or scope_of(req) is Scope.GPU


def fits(state: BudgetState, req: LeaseRequest) -> bool:
    """Whether the pool can grant ``req`` now, counting the lease it replaces (an upgrade from
    the holder's GPU lease) as given back. With ``max_disruption: 1`` and ``max_gpus_out: 2``
    on 8-GPU nodes: two GPU leases on two nodes fit, a third does not, and neither does a node
    lease while either is held (8 + 1 > 2). A lease larger than the whole cap (a node of 8
    GPUs under a cap of 2) is granted only while no other GPU is out, or it would never be."""
    own = own_lease(state, req.holder)
    if scope_of(req) is Scope.NODE:
        nodes = state.in_use - (1 if own is not None and own.scope is Scope.NODE else 0)
        if nodes + 1 > state.allowed:
            return False
    cap = gpu_cap(state)
    if cap is None:
        return True
    others = gpus_out(state) - (gpus_of(own) if own else 0)
    return others + size_of(req) <= cap or others == 0


def take(state: BudgetState, req: LeaseRequest, now: datetime) -> Lease:
    """Grant ``req``: its lease replaces the holder's GPU lease (an upgrade)."""
    lease = lease_for(req, now)
    state.holders = [*(le for le in state.holders if le.holder != req.holder), lease]
    state.grants += 1
    return lease


def grant_waiting(state: BudgetState, now: datetime) -> list[LeaseRequest]:
    """Grant the waiters first come, first served, while the next one ``fits`` (none while the
    breaker is tripped): the same grants, in the same order, as ``take`` one by one, counted
    in one pass (a burst of 1,000 requests took 0.3 s of the budget's workflow task one by one,
    each grant recounting every lease). In a pool of 10 at 20 % with one lease held, of three
    waiters the first is granted and the other two wait."""
    if state.tripped:
        return []
    cap = gpu_cap(state)
    nodes, gpus = state.in_use, gpus_out(state)
    leases = {lease.holder: lease for lease in state.holders}  # a holder holds one lease
    new: dict[str, Lease] = {}  # in the order granted, as ``take`` appends them
    served = 0
    for req in state.waiting:
        own = leases.get(req.holder)
        own_node = 1 if own is not None and own.scope is Scope.NODE else 0
        if scope_of(req) is Scope.NODE and nodes - own_node + 1 > state.allowed:
            break
        others = gpus - (gpus_of(own) if own else 0)
        if cap is not None and not (others + size_of(req) <= cap or others == 0):
            break
        lease = lease_for(req, now)
        nodes += (1 if lease.scope is Scope.NODE else 0) - own_node
        gpus = others + gpus_of(lease)
        new.pop(req.holder, None)  # granted again in this pass: it moves to the end
        leases[req.holder] = new[req.holder] = lease
        served += 1
    granted, state.waiting = state.waiting[:served], state.waiting[served:]
    kept = [lease for lease in state.holders if lease.holder not in new]
    state.holders = [*kept, *new.values()]
    state.grants += served
    return granted


def granted_scope(state: BudgetState, holder: str) -> Scope:
    """What the holder is told it holds (a node lease when the budget knows none)."""
    lease = own_lease(state, holder)
    return lease.scope if lease is not None else Scope.NODE


def gpu_note(state: BudgetState) -> str:
    """The GPUs out under the budget for its details and `remedy status`: "3/4" against a cap
    of 4, "3" without one."""
    cap = gpu_cap(state)
    return f"{gpus_out(state)}{'' if cap is None else f'/{cap}'}"
