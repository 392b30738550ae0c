"""A ladder loads the controller's keyring when it first needs it (``KEYS_WHEN_NEEDED``,
workflows/operator_keys.py): not in its first workflow task, where every ladder of a storm paid
a local activity for it, but before its first rung, or as soon as an operator's decision
comes. A decision during the tolerance window is still checked against the keyring: the
handler waits for the keys, then refuses what is not signed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from contract import activities as act
from contract.defs import UpdateRejected
from contract.messages import ABORT_LADDER
from remedy.core.models import Action
from remedy.ladder.remediation import Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import AbortRequest
from tests.conftest import own_fleet, running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.test_cordon_first import _steps
from tests.test_signed_decisions import KEYRING

KEYS = "local:" + act.OPERATOR_KEYRING.name
TOLERATES = Runbook(
    name="reset-after-a-window",
    match=Match(xids=[48]),
    tolerance=timedelta(minutes=10),
    watch=timedelta(0),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")],
)


@asynccontextmanager
async def parked(env: WorkflowEnvironment, name: str) -> AsyncIterator[Handle]:
    """A ladder on a controller with a keyring, parked in its tolerance window."""
    fleet = own_fleet(name, 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(env.client, fleet, keyring=KEYRING) as queues:
        handle = await report(env.client, queues, fleet.inject(node, "ecc_dbe"), TOLERATES)
        await wait_for_phase(env, handle, Phase.TOLERATING)
        yield handle


async def test_the_keyring_loads_after_the_window_before_the_first_rung(
    time_env: WorkflowEnvironment,
) -> None:
    async with parked(time_env, "keys-later") as handle:
        first = await _steps(handle)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        steps = await _steps(handle)
    assert "local:" + act.CORDON.name in first and KEYS not in first  # parked without it
    window = steps.index("timer")
    assert steps.count(KEYS) == 1  # once, when the window ended
    assert window < steps.index(KEYS) < steps.index(act.DRAIN.name)  # before the first rung


async def test_a_decision_in_the_window_loads_the_keyring_and_is_checked_against_it(
    time_env: WorkflowEnvironment,
) -> None:
    async with parked(time_env, "keys-asked") as handle:
        with pytest.raises(UpdateRejected, match="unsigned"):
            await ABORT_LADDER.execute(handle, AbortRequest(by="mallory", reason="go away"))
        during = await state_of(handle)
        asked = await _steps(handle)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        steps = await _steps(handle)
    assert during.phase is Phase.TOLERATING  # the unsigned abort did not stop it
    # Loaded for the decision: an abort is taken before the keys are in (asked again, it would
    # lose to the step taken meanwhile) and its handler reads them, by an activity, not a
    # local one (workflows/door.py says why), then refuses it.
    assert "signal:load_keyring" not in asked and act.DRAIN.name not in asked
    assert asked.count(act.OPERATOR_KEYRING.name) == 1 and KEYS not in asked
    assert steps.count(act.OPERATOR_KEYRING.name) == 1 and KEYS not in steps  # not again
