"""What a pool's DisruptionBudget shows in the Web UI (its current details): leases, waiters,
the GPUs out (against a GPU cap), the nodes out of scheduling, a tripped breaker with how to
resume, and who blocks whom: every holder with what it waits for and the commands that free
it, and the waiters in the order they are served."""

from __future__ import annotations

from remedy.disruption import blocking, held_by_people
from remedy.disruption.budget import BudgetState
from remedy.disruption.budget_gpus import gpu_note
from remedy.disruption.quarantine import scope


def budget_details(state: BudgetState) -> str:
    people = held_by_people.alert(state)
    return (
        f"**{scope(state.pool)}**: {len(state.holders)}/"
        f"{state.allowed} leases, {len(state.waiting)} waiting, {gpu_note(state)} GPUs out"
        + (f", {len(state.held)} held for a human ({_named(state)})" if state.held else "")
        + (f", {len(state.asking)} cordons held" if state.asking else "")
        + f"; {len(held_by_people.out_of_scheduling(state))} of {state.pool_size} nodes "
        "out of scheduling"
        + (f"\n\n**{people}**" if people else "")
        + f"\n\n{blocking.markdown(blocking.who_blocks(state, first=blocking.SHOWN))}"
    )


def _named(state: BudgetState) -> str:
    """The nodes held for a human, the first ``SHOWN`` by name: a count alone sends the
    operator looking for them."""
    nodes = [h.node for h in state.held]
    more = len(nodes) - held_by_people.SHOWN
    return ", ".join(nodes[: held_by_people.SHOWN]) + (f" and {more} more" if more > 0 else "")
