"""What a pool's DisruptionBudget shows in the Web UI (its current details): leases, waiters,
the GPUs out (against a GPU cap), the nodes out of scheduling, a tripped breaker with how to
resume, and who holds the pool."""

from __future__ import annotations

from remedy import held_by_people
from remedy.budget import BudgetState
from remedy.budget_gpus import gpu_note
from remedy.quarantine import scope


def budget_details(state: BudgetState) -> str:
    people = held_by_people.details(state)
    return (
        f"**{scope(state.pool)}**: {len(state.holders)}/"
        f"{state.allowed} leases, {len(state.waiting)} waiting, {gpu_note(state)} GPUs out"
        + (f", {len(state.held)} held for a human" if state.held else "")
        + (f", {len(state.asking)} cordons held" if state.asking else "")
        + f"; {len(held_by_people.out_of_scheduling(state))} of {state.pool_size} nodes "
        "out of scheduling"
        + (
            f"\n\n**BREAKER TRIPPED** (condition Quarantine=True since "
            f"{state.tripped_at:%Y-%m-%d %H:%M:%S}Z): {state.breaker_note}. Resume: "
            f"`remedy resume-pool {state.pool}`"
            if state.tripped and state.tripped_at
            else ""
        )
        + (f"\n\n{people}" if people else "")
    )
