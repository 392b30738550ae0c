"""People's decisions at the ladder's door, with a keyring on the controller: one the ladder
cannot judge yet (its keyring not read, in its tolerance window) is asked for again and never
reaches the history, unsigned or not; a name or identity holding a token is refused before it
does; a key removed from the keyring stops counting on a running ladder — for a decision sent
after, and for an approval given before its rung acted. On the time-skipping server."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from google.protobuf import json_format
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from contract.defs import UpdateRejected, UpdateRetry
from contract.messages import ABORT_LADDER, APPROVE_RUNG, CLEAR_LADDER
from remedy.core.models import Action
from remedy.ladder.remediation import Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import AbortRequest, ApproveRequest, ClearRequest
from remedy.trust.signing import Keyring, sign
from tests.conftest import own_fleet, running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.test_signed_decisions import ALICE, KEYRING, WAITS, decision
from workflows.operator_keys import FRESH_FOR

MARK = "7f3a9c"  # in what a refused decision said: it must be nowhere in the history
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
WINDOW = Runbook(
    name="window-then-drain",
    match=Match(xids=[48]),
    tolerance=timedelta(minutes=10),
    ladder=[Rung(action=Action.DRAIN, approval="required")],
)
ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED


async def history_text(handle: Handle) -> str:
    events = [json_format.MessageToDict(e) async for e in handle.fetch_history_events()]
    return json.dumps(events)


async def test_a_decision_the_ladder_cannot_judge_yet_leaves_nothing_in_its_history(
    time_env: WorkflowEnvironment,
) -> None:
    """In the tolerance window the ladder has not read its keyring: an update is asked for
    again (nothing accepted), the caller signals load_keyring, and then the unsigned clear is
    refused — before, it was accepted and refused later, its payload in the history."""
    client = time_env.client
    fleet = own_fleet("window", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet, keyring=KEYRING) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WINDOW)
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        with pytest.raises(UpdateRetry, match="has not read the operator keyring"):
            await CLEAR_LADDER._execute_once(  # the first try alone: what any client gets
                handle, ClearRequest(by=f"mallory-{MARK}", reason=f"go away {MARK}")
            )
        with pytest.raises(UpdateRejected, match="unsigned") as refused:
            await CLEAR_LADDER.execute(  # as remedy's commands send it: again once read
                handle,
                ClearRequest(by=f"mallory-{MARK}", reason=f"go away {MARK}", identity=MARK),
            )
        assert not isinstance(refused.value, UpdateRetry)
        with pytest.raises(WorkflowUpdateFailedError):  # a token as the name: never decoded
            await handle.execute_update("abort", {"by": TOKEN, "reason": "x"})
        state = await state_of(handle)
        text = await history_text(handle)
        events = [e.event_type async for e in handle.fetch_history_events()]
        await handle.terminate("seen enough")
    assert MARK not in text and TOKEN not in text
    assert ACCEPTED not in events
    assert state.phase is Phase.TOLERATING and state.outcome is None


async def test_an_abort_before_the_keys_are_in_is_taken_and_judged_once_they_are(
    time_env: WorkflowEnvironment,
) -> None:
    """The one exception to the door: an abort is not asked again for want of keys — asked
    again, it lost to the drain the ladder began meanwhile (tests/test_abort_wins.py). It is
    taken, judged once the keys are in, and a forged one refused then: its text is in the
    history (the price), and the ladder goes on."""
    client = time_env.client
    fleet = own_fleet("window-abort", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet, keyring=KEYRING) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WINDOW)
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        with pytest.raises(UpdateRejected, match="unsigned") as refused:
            await ABORT_LADDER._execute_once(  # the first try alone: taken, then refused
                handle, AbortRequest(by=f"mallory-{MARK}", reason=f"go away {MARK}")
            )
        assert not isinstance(refused.value, UpdateRetry)
        state = await state_of(handle)
        text = await history_text(handle)
        events = [e.event_type async for e in handle.fetch_history_events()]
        await handle.terminate("seen enough")
    assert ACCEPTED in events and "unsigned" in text  # taken, then refused, both recorded
    assert state.phase is Phase.TOLERATING and state.outcome is None


def test_a_name_or_identity_holding_a_secret_is_refused_by_the_request_itself() -> None:
    for fields in ({"by": TOKEN}, {"by": "alice", "identity": f"remedy-cli:{TOKEN}"}):
        with pytest.raises(ValueError, match="github-token"):
            ApproveRequest.model_validate({"rung": 1, **fields})
    with pytest.raises(ValueError, match="over the limit of 64"):
        ApproveRequest(by="x" * 65)


async def test_a_key_removed_from_the_keyring_stops_counting_on_a_running_ladder(
    time_env: WorkflowEnvironment,
) -> None:
    """Alice's key is taken out of the controller's keyring while her ladder waits for her:
    once its copy of the keyring is older than FRESH_FOR, her signed approval is refused
    (before: it still counted, the ladder having read the keyring when it started)."""
    client = time_env.client
    fleet = own_fleet("revoked", 1)
    [node] = sorted(fleet.nodes)
    keyring = {"now": KEYRING}
    async with running_workers(client, fleet, keyring=lambda: keyring["now"]) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
        await wait_for_phase(time_env, handle, Phase.AWAITING_APPROVAL)
        keyring["now"] = Keyring(required=True)  # alice removed, nobody else in it
        await time_env.sleep(FRESH_FOR + timedelta(minutes=1))
        signed = sign(ALICE, await decision(time_env, handle))
        approval = ApproveRequest(by="alice", rung=1, note="RMA 7", signature=signed)
        with pytest.raises(UpdateRejected, match="not in the keyring"):
            await APPROVE_RUNG.execute(handle, approval)
        state = await state_of(handle)
        await handle.terminate("seen enough")
    assert state.phase is Phase.AWAITING_APPROVAL and state.approvals == []
    assert "reset_gpu" not in [a for n, a in fleet.actions if n == node]


async def test_an_approval_given_before_its_key_was_removed_is_dropped_before_the_rung(
    time_env: WorkflowEnvironment,
) -> None:
    """Alice approves the drain ahead, in the tolerance window; her key is removed; when the
    window ends the ladder reads the keyring again before acting: her approval no longer
    counts, the ladder says so and asks again, and nothing is drained."""
    client = time_env.client
    fleet = own_fleet("ahead", 1)
    [node] = sorted(fleet.nodes)
    keyring = {"now": KEYRING}
    async with running_workers(client, fleet, keyring=lambda: keyring["now"]) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WINDOW)
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        ahead = await decision(time_env, handle, rung=None, rung_number=1, text="")
        await APPROVE_RUNG.execute(
            handle,
            ApproveRequest(by="alice", rung_number=1, ahead=True, signature=sign(ALICE, ahead)),
        )
        assert [a.by for a in (await state_of(handle)).approvals] == ["alice"]
        keyring["now"] = Keyring(required=True)
        state = await wait_for_phase(
            time_env, handle, Phase.AWAITING_APPROVAL, step=timedelta(minutes=1)
        )
        await handle.terminate("seen enough")
    assert state.approvals == []
    refusal = state.refused[-1]
    assert refusal.verb == "approval" and "no longer in the operator keyring" in refusal.why
    assert "drain" not in [a for n, a in fleet.actions if n == node]
