"""An operator's decisions answer: approve, abort, clear and resume are workflow updates whose
validators refuse at the caller what there is nothing to do for (nothing reaches the history),
whose handlers say what happened, and which record the caller's client identity beside
``--by``. The signals stay for clients of the release before, and the CLI falls back to them
for a workflow that predates the updates. Against the real dev server: it keeps a rejected
update out of the history altogether (the time-skipping server writes a workflow task)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from contract.defs import UpdateRejected
from contract.messages import (
    APPROVE,
    APPROVE_RUNG,
    BUDGET_STATE,
    CLOSE_BREAKER,
    LOAD_KEYRING,
    RESUME_POOL,
)
from contract.names import NODE_REMEDIATION_WORKFLOW, budget_workflow_id, remediation_workflow_id
from remedy.core.models import Action, NodeRef
from remedy.disruption.budget_messages import ResumeRequest
from remedy.ladder.remediation import Outcome, Phase, RemediationInput, RemediationState
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import AbortRequest, Approval, ApproveRequest, ClearRequest
from remedy.trust.signing import KeyringWanted
from tests.conftest import own_fleet, running_workers
from tests.ladder import Handle, report, state_of
from tests.test_cli import cli
from workflows.operator_keys import OperatorKeys
from workflows.operator_updates import OperatorMessages

LADDER = [Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")]
# A real-time server: a window that outlasts the test, and no 10-minute watch after the reset.
TOLERATES = Runbook(
    name="tolerate-then-reset",
    match=Match(xids=[48]),
    tolerance=timedelta(minutes=10),
    watch=timedelta(0),
    ladder=LADDER,
)
WAITS = Runbook(
    name="reset-after-approval", match=Match(xids=[48]), watch=timedelta(0), ladder=LADDER
)


async def until_phase(handle: Handle, phase: Phase) -> RemediationState:
    for _ in range(200):
        state = await state_of(handle)
        if state.phase is phase:
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"never reached {phase}")


async def breaker_note(budget: WorkflowHandle[Any, Any], containing: str) -> str:
    for _ in range(100):
        note = (await BUDGET_STATE.ask(budget)).breaker_note
        if containing in note:
            return note
        await asyncio.sleep(0.05)
    raise AssertionError(f"the breaker note never named {containing}")


async def events(client: Client, workflow_id: str) -> list[int]:
    return [
        e.event_type async for e in client.get_workflow_handle(workflow_id).fetch_history_events()
    ]


async def settled_events(client: Client, workflow_id: str) -> list[int]:
    """The history once no workflow task is scheduled or running: the budget sends its grants
    without waiting for their delivery (budget_outbox), so its history may still be growing
    when a ladder's result is in."""
    in_task = (
        EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    )
    for _ in range(600):
        seen = await events(client, workflow_id)
        if seen[-1] not in in_task and seen == await events(client, workflow_id):
            return seen
        await asyncio.sleep(0.05)
    raise AssertionError(f"{workflow_id} never settled")


async def idle_events(client: Client, workflow_id: str) -> list[int]:
    """The history once its run waits on its tolerance timer: a ladder may continue-as-new
    as it enters the window (the dev server suggests it early), and the new run writes on."""
    for _ in range(200):
        seen = await events(client, workflow_id)
        if seen[-1] == EventType.EVENT_TYPE_TIMER_STARTED:
            return seen
        await asyncio.sleep(0.05)
    raise AssertionError("the ladder never waited on its timer")


async def keyring_read(client: Client, workflow_id: str) -> list[int]:
    """The history once the ladder read its keyring as the last signal asked (an activity),
    and the workflow task after it is done."""
    signaled = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    for _ in range(200):
        seen = await events(client, workflow_id)
        since = seen[len(seen) - 1 - seen[::-1].index(signaled) :] if signaled in seen else []
        read = EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED in since
        if read and seen[-1] == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            return seen
        await asyncio.sleep(0.05)
    raise AssertionError("the ladder never read its keyring")


async def test_an_approve_when_nothing_waits_is_refused_with_why_and_leaves_no_trace(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("updates", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), TOLERATES)
        await until_phase(handle, Phase.TOLERATING)
        # The ladder reads its keyring first (else a decision is asked for again, its words
        # nowhere): then a refused one leaves not a single event.
        await idle_events(client, handle.id)
        await LOAD_KEYRING.send(handle, KeyringWanted())
        before = await keyring_read(client, handle.id)
        refused = await cli("approve", node, "--address", address, "--by", "alice")
        with pytest.raises(UpdateRejected, match=r"rung 1 \(drain\) needs no approval"):
            await APPROVE_RUNG.execute(handle, ApproveRequest(by="alice", rung_number=1))
        with pytest.raises(UpdateRejected, match="no rung 8 in the ladder"):
            await APPROVE_RUNG.execute(handle, ApproveRequest(by="alice", rung_number=8))
        pool = await cli("resume-pool", queues.pool, "--address", address)
        budget = client.get_workflow_handle(budget_workflow_id(queues.pool))
        with pytest.raises(UpdateRejected, match="not tripped"):
            await CLOSE_BREAKER.execute(budget, ResumeRequest(by="new-client"))
        await RESUME_POOL.send(budget, ResumeRequest(by="old-client"))  # the release before
        note = await breaker_note(budget, "old-client")
        after = await events(client, handle.id)
        untouched = await state_of(handle)
        aborted = await cli("abort", node, "--address", address, "--by", "bob", "--reason", "rma")
        result = await handle.result()
        again = await cli("abort", node, "--address", address, "--reason", "twice")
    assert refused == (2, f"error: {node}: nothing waits for approval (the ladder is tolerating)\n")
    assert after == before and untouched.approvals == []  # nothing reached the history
    assert pool == (
        2,
        f"error: pool {queues.pool}: the storm breaker is not tripped: nothing to resume\n",
    )
    assert note.startswith("resumed by old-client at ")  # the signal still works
    assert result.outcome is Outcome.ABORTED
    assert aborted[0] == 0 and aborted[1] == f"{node}: ladder aborted: {result.detail}\n"
    assert (
        result.detail.startswith("aborted by bob (")
        and ": rma (node left as it is)" in result.detail
    )
    assert again == (0, f"{node}: already stopped: ladder aborted: {result.detail}\n")


async def test_an_approve_for_the_waiting_rung_answers_with_the_new_phase_and_show_names_who(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("updates", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), WAITS)
        await until_phase(handle, Phase.AWAITING_APPROVAL)
        approved = await cli(
            "approve", node, "--address", address, "--by", "alice", "--note", "RMA 7"
        )
        running = await cli("show", node, "--address", address)
        result = await handle.result()
        closed = await cli("show", node, "--address", address)
    [approval] = result.approvals
    assert approval.by == "alice" and approval.note == "RMA 7" and approval.identity
    who = f"alice ({approval.identity}) [unverified]"  # no keyring: the caller's word
    assert approved == (0, f"{node}: approved rung 2 (reset_gpu) by {who}; ladder now acting\n")
    assert f"  2 {approval.at:%H:%M:%S} approved by {who}: RMA 7" in running[1].splitlines()
    assert result.outcome is Outcome.RECOVERED
    lines = closed[1].splitlines()
    approved_at = lines.index(f"  2 {approval.at:%H:%M:%S} approved by {who}: RMA 7")
    assert lines[approved_at + 1].split()[2] == "reset_gpu"  # in time: then the rung ran


async def test_clear_answers_with_the_outcome_and_gives_the_node_back(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    fleet = own_fleet("updates", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), TOLERATES)
        await until_phase(handle, Phase.TOLERATING)
        cleared = await cli(
            "clear", node, "--address", address, "--by", "dave", "--reason", "fixed"
        )
        result = await handle.result()
    assert result.outcome is Outcome.CLEARED
    assert result.detail.startswith("cleared by dave (") and result.detail.endswith(
        ") [unverified]: fixed"
    )
    assert cleared == (0, f"{node}: ladder cleared: {result.detail}\n")
    assert not fleet.node(node).unschedulable  # remedy's cordon given back


# -- a workflow from before the updates ------------------------------------------------------
@workflow.defn(name=NODE_REMEDIATION_WORKFLOW, sandboxed=False)
class LadderBefore:
    """A NodeRemediation of the release before: the approve signal, no updates."""

    def __init__(self) -> None:
        self._approvals: list[ApproveRequest] = []

    @APPROVE.handler
    def approve(self, req: ApproveRequest) -> None:
        self._approvals.append(req)

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: bool(self._approvals))
        return self._approvals[0].by


async def test_a_workflow_from_before_the_updates_gets_the_signal_with_a_note(
    dev_env: WorkflowEnvironment,
) -> None:
    client = dev_env.client
    address = client.service_client.config.target_host
    node, queue = f"before-{uuid.uuid4().hex[:6]}", f"before-{uuid.uuid4()}"
    async with Worker(client, task_queue=queue, workflows=[LadderBefore]):
        handle = await client.start_workflow(
            LadderBefore.run, id=remediation_workflow_id(node), task_queue=queue
        )
        sent = await cli("approve", node, "--address", address, "--by", "carol")
        by = await handle.result()
    assert sent[0] == 0 and by == "carol"
    assert "predates the approve update; sent as a signal instead" in sent[1]
    assert sent[1].endswith(f"{node}: approval sent by carol\n")


# -- the validators' reasons -----------------------------------------------------------------
def _ladder(phase: Phase, rung: int, approvals: list[Approval] | None = None) -> OperatorMessages:
    messages = OperatorMessages()
    messages._state = RemediationState(
        node=NodeRef(name="n1"),
        runbook=WAITS,
        phase=phase,
        rung=rung,
        approvals=approvals or [],
    )
    messages._stop_request = None
    messages._keys = OperatorKeys(RemediationInput(node=NodeRef(name="n1"), node_task_queue="q"))
    messages._keys._checks = False  # a run without keys: the validators' own reasons
    return messages


NOT_WAITING = "is not the rung waiting for approval"
AHEAD = 'to approve it ahead of time, say so ("ahead": true; remedy approve --ahead)'
OLD = 'the old field "rung" counts from 0'


@pytest.mark.parametrize(
    ("phase", "rung", "asked", "reason"),
    [
        (Phase.TOLERATING, 0, {}, "nothing waits for approval (the ladder is tolerating)"),
        (Phase.TOLERATING, 0, {"rung_number": 2, "ahead": True}, ""),  # ahead, said so
        (
            Phase.TOLERATING,
            0,
            {"rung_number": 2},
            f"rung 2 (reset_gpu) {NOT_WAITING} (now rung 1 (drain), tolerating): {AHEAD}",
        ),
        (  # the old form ahead: a ladder of the release before took it; now refused
            Phase.TOLERATING,
            0,
            {"rung": 1},
            f"rung 2 (reset_gpu) {NOT_WAITING} (now rung 1 (drain), tolerating); {OLD} "
            '({"rung": 1} is rung 2): send "rung_number", counted from 1 as shown',
        ),
        (Phase.AWAITING_APPROVAL, 1, {}, ""),
        (Phase.AWAITING_APPROVAL, 1, {"rung_number": 2}, ""),
        (Phase.AWAITING_APPROVAL, 1, {"rung": 1}, ""),  # the old form, naming the rung waiting
        (Phase.AWAITING_APPROVAL, 1, {"rung_number": 1}, "rung 1 (drain) needs no approval"),
        (  # what a person typed into the old form on "Rung 2 of 2"
            Phase.AWAITING_APPROVAL,
            1,
            {"rung": 2},
            "no rung 3 in the ladder (rungs 1 to 2; now at rung 2 (reset_gpu), awaiting "
            f'approval); {OLD} ({{"rung": 2}} is rung 3): send "rung_number", counted from 1 '
            "as shown",
        ),
        (
            Phase.AWAITING_APPROVAL,
            1,
            {"rung_number": 2, "rung": 0},
            "rung_number 2 and rung 0 (the old form, counted from 0) name different rungs: "
            "send rung_number alone",
        ),
        (Phase.AWAITING_APPROVAL, 1, {"rung_number": 2, "rung": 1}, ""),  # both, agreeing
        (
            Phase.ACTING,
            2,
            {"rung_number": 2, "ahead": True},
            "rung 2 (reset_gpu) is behind the ladder (now at rung 3, acting)",
        ),
        (Phase.DONE, 2, {}, "the ladder is finished (done): nothing to approve"),
    ],
)
def test_an_approval_is_refused_when_it_would_change_nothing_or_names_another_rung(
    phase: Phase, rung: int, asked: dict[str, Any], reason: str
) -> None:
    ladder = _ladder(phase, rung)
    assert ladder.why_not_approve(ApproveRequest(by="a", **asked)) == reason


def test_an_approval_already_given_is_refused_naming_who_gave_it() -> None:
    at = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    given = Approval(rung=1, by="alice", at=at, identity="remedy-cli:alice@host")
    ladder = _ladder(Phase.TOLERATING, 0, [given])
    ahead = ApproveRequest(by="bob", rung_number=2, ahead=True)
    assert ladder.why_not_approve(ahead) == (
        "rung 2 (reset_gpu) was already approved by "
        "alice (remedy-cli:alice@host) [unverified] at 12:00:00"
    )


def test_abort_and_clear_are_refused_once_the_ladder_stops_or_ended() -> None:
    ladder = _ladder(Phase.ACTING, 1)
    assert ladder.why_not_abort(AbortRequest(by="a", reason="r")) == ""
    ladder._stop_request = ClearRequest(by="alice", identity="remedy-cli:alice@host")
    assert ladder.why_not_abort(AbortRequest(by="b", reason="r")) == (
        "the ladder is already stopping "
        "(cleared by alice (remedy-cli:alice@host) [unverified]): nothing to abort"
    )
    aborting = _ladder(Phase.ACTING, 1)
    aborting._stop_request = AbortRequest(by="carol", reason="r")
    assert aborting.why_not_abort(AbortRequest(by="dave", reason="r")) == ""  # harmless
    assert aborting.why_not_clear(ClearRequest(by="dave")).startswith(
        "the ladder is already stopping (aborted by carol"
    )
    ended = _ladder(Phase.DONE, 1)
    ended._state.outcome = Outcome.RECOVERED
    assert ended.why_not_clear(ClearRequest(by="a")) == (
        "the ladder is finished (recovered): nothing to clear"
    )
