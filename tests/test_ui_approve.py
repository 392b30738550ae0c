"""The Web UI's way to approve, as docs/tour.md and docs/ui.md write it: *Send an Update* named
``approve`` with the JSON ``{"by": "you", "rung_number": N}``, N the number the details show
("**Rung** N of M"). It approves the rung waiting and nothing else: another rung's number is
refused unless the input says ``"ahead": true``, and the old field ``rung`` (an index from 0,
which took the number people typed as the rung above) approves only the rung waiting. A refusal
is one line with no stack trace, bad JSON included, and a refused approve signal is in the
details."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from contract.defs import REJECTED
from contract.messages import APPROVE, APPROVE_RUNG, LOAD_KEYRING
from remedy.core.models import Action
from remedy.ladder.remediation import ApproveResult, Phase
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.signing import KeyringWanted
from tests.conftest import own_fleet, running_workers
from tests.ladder import Handle, report, state_of
from tests.test_cli import cli
from tests.test_operator_updates import until_phase
from workers.codec import data_converter

# Three rungs, the last two asking for a person: the ladder waits at rung 2 of 3.
ASKS_TWICE = Runbook(
    name="reset-then-reboot-after-approval",
    match=Match(xids=[48]),
    watch=timedelta(0),
    ladder=[
        Rung(action=Action.DRAIN),
        Rung(action=Action.RESET_GPU, approval="required"),
        Rung(action=Action.REBOOT, approval="required"),
    ],
)


def remedy_client(env: WorkflowEnvironment) -> Client:
    """A client with remedy's converter, as the controller's workers have it (its failure
    converter is what the UI's failures come out of)."""
    return Client(**{**env.client.config(), "data_converter": data_converter(None)})


async def details(handle: Handle) -> str:
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


async def sent(handle: Handle, update_input: dict[str, Any]) -> ApproveResult | ApplicationError:
    """What the UI's Send an Update does with the JSON typed in: the answer, or the failure
    the UI shows (an ApplicationError with the failure as the server keeps it)."""
    try:
        result: ApproveResult = await handle.execute_update(
            APPROVE_RUNG.name, update_input, result_type=ApproveResult
        )
    except WorkflowUpdateFailedError as err:
        assert isinstance(err.cause, ApplicationError), err.cause
        return err.cause
    return result


async def timer_summaries(handle: Handle) -> list[str]:
    """The summaries of the ladder's timers, as the UI's timeline shows them."""
    converter = DataConverter.default.payload_converter
    return [
        converter.from_payload(event.user_metadata.summary, str)
        async for event in handle.fetch_history_events()
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
        and event.user_metadata.HasField("summary")
    ]


def one_line_refusal(failure: ApproveResult | ApplicationError) -> str:
    assert isinstance(failure, ApplicationError), failure
    assert failure.type == REJECTED and failure.failure is not None
    assert not failure.failure.stack_trace  # the UI showed the worker's traceback here
    assert not failure.failure.HasField("cause")
    assert "\n" not in failure.message and ".py" not in failure.message
    return failure.message


async def test_the_documented_ui_json_approves_the_waiting_rung_and_nothing_else(
    dev_env: WorkflowEnvironment,
) -> None:
    client = remedy_client(dev_env)
    fleet = own_fleet("ui-approve", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), ASKS_TWICE)
        await until_phase(handle, Phase.AWAITING_APPROVAL)
        await LOAD_KEYRING.send(handle, KeyringWanted())
        shown = re.search(r"\*\*Rung\*\* (\d+) of (\d+): (\w+)", await details(handle))
        assert shown is not None and shown.groups() == ("2", "3", "reset_gpu")
        number = int(shown.group(1))
        # The rung after the one waiting, by its number: before, the field was ignored and
        # the waiting reset was approved; the old field with the number shown took the rung
        # above (the reboot) ahead of time.
        other = await sent(handle, {"by": "you", "rung_number": number + 1})
        old_form = await sent(handle, {"by": "you", "rung": number})
        untouched = await state_of(handle)
        answer = await sent(handle, {"by": "you", "rung_number": number})
        approved = await state_of(handle)
        timers = await timer_summaries(handle)
        await handle.terminate("seen enough")
    assert "rung 3 (reboot) is not the rung waiting for approval" in one_line_refusal(other)
    assert '"ahead": true' in one_line_refusal(other)
    assert "rung 3 (reboot) is not the rung waiting" in one_line_refusal(old_form)
    assert 'the old field "rung" counts from 0' in one_line_refusal(old_form)
    assert untouched.approvals == []
    assert isinstance(answer, ApproveResult)
    assert (answer.rung_number, answer.action, answer.ahead) == (2, Action.RESET_GPU, False)
    assert [(a.rung, a.by) for a in approved.approvals] == [(1, "you")]  # index 1: rung 2
    # The answer's wait, in the timeline beside "Approved rung 2" (it said "rung 1")
    assert "the ladder acts on the approval of rung 2" in timers, timers


async def test_ahead_must_be_said_and_then_approves_that_rung_alone(
    dev_env: WorkflowEnvironment,
) -> None:
    client = remedy_client(dev_env)
    fleet = own_fleet("ui-ahead", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), ASKS_TWICE)
        await until_phase(handle, Phase.AWAITING_APPROVAL)
        await LOAD_KEYRING.send(handle, KeyringWanted())
        address = client.service_client.config.target_host
        unsaid = await cli("approve", node, "--rung", "3", "--address", address, "--by", "al")
        said = await cli(
            "approve", node, "--rung", "3", "--ahead", "--address", address, "--by", "al"
        )
        state = await state_of(handle)
        again = await sent(handle, {"by": "you", "rung_number": 3, "ahead": True})
        await handle.terminate("seen enough")
    assert unsaid[0] == 2 and "rung 3 (reboot) is not the rung waiting" in unsaid[1]
    assert said[0] == 0 and f"{node}: approved rung 3 (reboot) ahead by al" in said[1]
    assert [a.rung for a in state.approvals] == [2]  # the reboot's, and not the reset's
    assert "rung 3 (reboot) was already approved by al" in one_line_refusal(again)
    assert state.phase is Phase.AWAITING_APPROVAL


@pytest.mark.parametrize(
    ("update_input", "said"),
    [
        ({"rung_number": 2}, "not a valid ApproveRequest: by: Field required"),
        ({"by": "you", "rung_number": "two"}, "rung_number: Input should be a valid integer"),
    ],
    ids=["no-by", "not-a-number"],
)
async def test_json_that_is_no_approval_is_refused_in_one_line(
    dev_env: WorkflowEnvironment, update_input: dict[str, Any], said: str
) -> None:
    client = remedy_client(dev_env)
    fleet = own_fleet("ui-bad-json", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), ASKS_TWICE)
        await until_phase(handle, Phase.AWAITING_APPROVAL)
        failure = await sent(handle, update_input)
        await handle.terminate("seen enough")
    assert said in one_line_refusal(failure)


async def test_a_refused_approve_signal_is_in_the_details(dev_env: WorkflowEnvironment) -> None:
    client = remedy_client(dev_env)
    fleet = own_fleet("ui-signal", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), ASKS_TWICE)
        await until_phase(handle, Phase.AWAITING_APPROVAL)
        await handle.signal(APPROVE.name, {"rung_number": 2})  # the UI's Signal, no "by"
        await handle.signal(APPROVE.name, {"by": "you", "rung_number": 3})  # not waiting
        for _ in range(100):
            state = await state_of(handle)
            if state.refusals >= 2:
                break
        shown = await details(handle)
        await handle.terminate("seen enough")
    assert state.approvals == []
    assert "**Refused** 2 message(s)" in shown
    assert "approve: not a ApproveRequest: by invalid" in shown
    assert "approve: rung 3 (reboot) is not the rung waiting for approval" in shown
