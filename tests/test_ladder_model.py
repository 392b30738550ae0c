"""The ladder's state machine (tests/ladder_model.py), a bounded number of interleavings: a
few examples here, many more in `make chaos` (REMEDY_MODEL_EXAMPLES)."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.ladder_model import COUNTS, LadderModel

EXAMPLES = int(os.environ.get("REMEDY_MODEL_EXAMPLES", "12"))


@pytest.mark.server  # each interleaving starts its own time-skipping server and workers
@pytest.mark.timeout(120 + 60 * EXAMPLES)
def test_interleaved_findings_aborts_and_failures_keep_the_ladder_safe() -> None:
    try:
        run_state_machine_as_test(
            LadderModel,
            settings=settings(
                max_examples=EXAMPLES,
                stateful_step_count=30,
                deadline=None,  # each step waits on real workflows
                database=None,  # no .hypothesis folder; a failure prints its steps
                # No shrinking: each replay runs real workflows for minutes, and a replay of an
                # interleaving need not fail the same way; the failing steps print as they ran.
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
            ),
        )
    except Exception as err:  # the first failure as it happened, with its steps
        raise AssertionError("\n\n".join(COUNTS.failures[:1]) or str(err)) from err
    assert COUNTS.examples >= EXAMPLES and COUNTS.steps > 0
    print(
        f"ladder model: {COUNTS.examples} interleavings, {COUNTS.steps} steps, "
        f"{COUNTS.reports} reports to {COUNTS.ladders} ladders, {COUNTS.aborts} aborts, "
        f"{COUNTS.escalations} runbook changes, {COUNTS.budget_checks} budget checks, "
        f"{COUNTS.discarded} discarded (test server), "
        f"outcomes {dict(sorted(COUNTS.outcomes.items()))}"
    )
