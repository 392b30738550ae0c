"""The ladder's door, tried as an attacker holding a node agent's Temporal credential would: a
forged start input, a report for another node, a report asking for a runbook the controller
does not have, junk and oversized payloads, a lease grant sent by hand to a ladder waiting on a
seized pool — each refused, counted and said, with nothing disruptive run. Each fails on the
code before the door. On the time-skipping server."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from adapters.sim.identity import agent_signing_key
from contract.messages import LEASE_GRANTED, REPORT_FINDING
from contract.names import NODE_REMEDIATION_WORKFLOW, remediation_workflow_id
from remedy.core.models import Action, Finding, NodeRef, Severity
from remedy.disruption.budget import BudgetPolicy, LeaseGrant
from remedy.ladder.intake import by_agent, by_operator
from remedy.ladder.remediation import (
    FindingReport,
    Outcome,
    Phase,
    RemediationInput,
    RemediationResult,
    RemediationState,
)
from remedy.runbook import Match, Runbook, Rung
from remedy.trust.decisions import Approval
from remedy.trust.signing import fingerprint, public_blob
from tests.conftest import Queues, own_fleet, running_workers
from tests.ladder import Handle, report, state_of, wait_for_phase
from tests.servers import finished
from tests.test_signed_decisions import ALICE, KEYRING, MALLORY
from workers.client import report_finding
from workflows.door import BAD_START

DISRUPTIVE = {"drain", "kill_job", "reset_gpu", "reboot", "replace"}
# What the attacker cuts the ladder down to: one replacement, "approved" by alice.
CUT = Runbook(
    name="gpu-memory-ecc",
    match=Match(xids=[48]),
    cordon=False,
    ladder=[Rung(action=Action.REPLACE, approval="required")],
)
HOLDS_THE_LEASE = Runbook(  # drains (holding its pool's lease), then waits for a person
    name="drain-then-ask",
    match=Match(xids=[48]),
    watch=timedelta(0),
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.RESET_GPU, approval="required")],
)
PARKS = Runbook(name="parks", match=Match(xids=[48]), tolerance=timedelta(hours=1))


def on(fleet_actions: list[tuple[str, str]], node: str) -> list[str]:
    return [action for name, action in fleet_actions if name == node]


async def send(client: Client, queues: Queues, node: str, sent: FindingReport) -> Handle:
    """As any holder of a Temporal credential can: signal-with-start of the node's ladder."""
    handle: Handle = await report_finding(
        client,
        NodeRef(name=node, pool=queues.pool),
        sent,
        node_task_queue=queues.agents,
        task_queue=queues.controller,
    )
    return handle


async def test_a_forged_start_records_no_approval_and_disrupts_nothing(
    time_env: WorkflowEnvironment,
) -> None:
    """The attack of issue 51: a copy of node A's start and report, its state carrying three
    approvals "by alice" with her key's fingerprint and the runbook cut to an approved
    replace, started for node B. The state is not taken, the report (A's signature about B)
    is refused, and the ladder ends having done nothing to B. Before: "approved by alice
    [key SHA256:…]" and B replaced."""
    client = time_env.client
    fleet = own_fleet("forged", 2)
    a, b = sorted(fleet.nodes)
    async with running_workers(client, fleet, keyring=KEYRING) as queues:
        genuine = by_agent(
            FindingReport(finding=fleet.inject(a, "ecc_dbe"), runbook=CUT),
            agent_signing_key(a),
            datetime.now(UTC),
        )
        about_b = genuine.finding.model_copy(update={"node": b})
        copied = genuine.model_copy(update={"finding": about_b})  # A's proof kept
        now = await time_env.get_current_time()
        said = Approval(rung=0, by="alice", at=now, key=fingerprint(public_blob(ALICE)))
        forged = RemediationState(
            node=NodeRef(name=b, pool=queues.pool),
            runbook=CUT,
            trigger=about_b,
            phase=Phase.ACTING,
            approvals=[said, said, said],
        )
        handle = await client.start_workflow(
            NODE_REMEDIATION_WORKFLOW,
            RemediationInput(
                node=NodeRef(name=b, pool=queues.pool), node_task_queue=queues.agents, state=forged
            ),
            id=remediation_workflow_id(b),
            task_queue=queues.controller,
            result_type=RemediationResult,
            **REPORT_FINDING.start_with(copied),
        )
        result = await finished(time_env, handle)
    assert result.outcome is Outcome.CLEARED and "refused" in result.detail
    assert result.approvals == [] and result.attempts == []
    assert on(fleet.actions, b) == []  # not even a cordon
    refused = {r.verb: r.why for r in result.refused}
    assert "its state" in refused["start"]
    assert f"not {b}'s agent key" in refused["report_finding"]
    assert result.refusals == 2


async def test_a_report_for_another_node_is_refused(time_env: WorkflowEnvironment) -> None:
    """Node A's agent, with its own key, signs a report about node B: refused, B untouched."""
    client = time_env.client
    fleet = own_fleet("other", 2)
    a, b = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        queues.known.add(HOLDS_THE_LEASE)
        about_b = FindingReport(finding=fleet.inject(b, "ecc_dbe"), runbook=HOLDS_THE_LEASE)
        signed_by_a = by_agent(about_b, agent_signing_key(a), datetime.now(UTC))
        result = await finished(time_env, await send(client, queues, b, signed_by_a))
    assert result.outcome is Outcome.CLEARED and on(fleet.actions, b) == []
    [refusal] = result.refused
    assert refusal.verb == "report_finding" and f"not {b}'s agent key" in refusal.why


async def test_a_report_asking_for_a_runbook_the_controller_lacks_is_refused(
    time_env: WorkflowEnvironment,
) -> None:
    """The node's own agent, signed, asking for a runbook the controller was never given (or
    one that does not match its fault): refused; the ladder climbs only the controller's."""
    client = time_env.client
    fleet = own_fleet("unknown", 2)
    a, b = sorted(fleet.nodes)
    unknown = Runbook(
        name="not-loaded", match=Match(xids=[48]), ladder=[Rung(action=Action.REBOOT)]
    )
    mismatched = Runbook(name="thermal", match=Match(xids=[48]), ladder=[])  # shipped: thermal
    async with running_workers(client, fleet) as queues:
        results = []
        for node, runbook in ((a, unknown), (b, mismatched)):
            sent = by_agent(
                FindingReport(finding=fleet.inject(node, "ecc_dbe"), runbook=runbook),
                agent_signing_key(node),
                datetime.now(UTC),
            )
            results.append(await finished(time_env, await send(client, queues, node, sent)))
    lacking, mismatching = (r.refused[0].why for r in results)
    assert "'not-loaded', which the controller does not have" in lacking
    assert "runbook 'thermal' does not match Xid 48" in mismatching
    assert on(fleet.actions, a) == on(fleet.actions, b) == []


async def test_the_ladder_climbs_the_controllers_runbook_not_the_one_sent(
    time_env: WorkflowEnvironment,
) -> None:
    """A genuine report whose runbook the sender rewrote (its ladder cut to a replace): the
    ladder climbs the controller's runbook of that name, and says which version."""
    client = time_env.client
    fleet = own_fleet("rewritten", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        queues.known.add(PARKS)
        rewritten = PARKS.model_copy(update={"tolerance": timedelta(0), "ladder": CUT.ladder})
        sent = by_agent(
            FindingReport(finding=fleet.inject(node, "ecc_dbe"), runbook=rewritten),
            agent_signing_key(node),
            datetime.now(UTC),
        )
        handle = await send(client, queues, node, sent)
        state = await wait_for_phase(time_env, handle, Phase.TOLERATING)
        await handle.terminate("seen enough")
    assert state.runbook == PARKS  # its hour-long window, no replace
    assert state.sent_by.startswith(f"{node}'s agent (key SHA256:")
    assert "replace" not in on(fleet.actions, node)


async def test_a_start_input_that_does_not_read_fails_the_run_once(
    time_env: WorkflowEnvironment,
) -> None:
    """Junk, and a start for one node under another's id: the run fails once with a reason,
    instead of failing its workflow task over and over (before: a task-failure loop)."""
    client = time_env.client
    fleet = own_fleet("junk", 2)
    a, b = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        starts: list[tuple[str, Any]] = [
            (remediation_workflow_id(a), {"bogus": 1}),
            (
                remediation_workflow_id(b),
                RemediationInput(node=NodeRef(name=a, pool=queues.pool), node_task_queue="q"),
            ),
        ]
        reasons = []
        for workflow_id, junk in starts:
            handle = await client.start_workflow(
                NODE_REMEDIATION_WORKFLOW, junk, id=workflow_id, task_queue=queues.controller
            )
            with pytest.raises(WorkflowFailureError) as failed:
                # A hang guard, not a timed assertion: the old code never ended the run.
                await asyncio.wait_for(handle.result(), timeout=60)
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == BAD_START
            reasons.append(cause.message)
            events = [e.event_type async for e in handle.fetch_history_events()]
            assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in events
    assert "not a RemediationInput: node, node_task_queue" in reasons[0]
    assert f"started for node {a} under the id {remediation_workflow_id(b)}" in reasons[1]
    assert on(fleet.actions, a) == on(fleet.actions, b) == []


async def test_an_oversized_or_unreadable_report_is_refused_and_counted(
    time_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    """1.5 MB of junk is not even read; a payload that is no report is refused with the fields
    it lacked — neither prints a decoding traceback in the controller's log."""
    client = time_env.client
    fleet = own_fleet("oversized", 1)
    [node] = sorted(fleet.nodes)
    async with running_workers(client, fleet) as queues:
        handle = await report(client, queues, fleet.inject(node, "ecc_dbe"), PARKS)
        await wait_for_phase(time_env, handle, Phase.TOLERATING)
        await handle.signal("report_finding", {"junk": "x" * 1_500_000})
        await handle.signal("report_finding", {"bogus": 1})
        for _ in range(100):
            state = await state_of(handle)
            if state.refusals == 2:
                break
            await asyncio.sleep(0.05)
        await handle.terminate("seen enough")
    oversized, unreadable = (r.why for r in state.refused)
    assert "over the limit of 65,536: not read" in oversized
    assert "not a FindingReport: finding, runbook invalid" in unreadable
    assert state.phase is Phase.TOLERATING and state.reports_received == 1
    assert "Failed deserializing" not in caplog.text


async def test_a_grant_sent_by_hand_to_a_ladder_waiting_on_a_seized_pool_is_refused(
    time_env: WorkflowEnvironment,
) -> None:
    """The pool's one share is held (a drained node waits for a person); a second ladder waits
    for it. A grant sent by hand — as the Web UI's "Send a Signal" offers, with no token or a
    guessed one — is refused: the waiter keeps waiting, nothing disruptive runs on it (before:
    it drained, reset and rebooted its node, 5 holders of 4 shares)."""
    client = time_env.client
    fleet = own_fleet("seized", 2)
    first, second = sorted(fleet.nodes)
    policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
    async with running_workers(client, fleet, policy=policy) as queues:
        holder = await report(client, queues, fleet.inject(first, "ecc_dbe"), HOLDS_THE_LEASE)
        await wait_for_phase(time_env, holder, Phase.AWAITING_APPROVAL)
        waiter = await report(client, queues, fleet.inject(second, "ecc_dbe"), HOLDS_THE_LEASE)
        await wait_for_phase(time_env, waiter, Phase.AWAITING_LEASE)
        await LEASE_GRANTED.send(waiter, LeaseGrant(pool=queues.pool))
        run = (await waiter.describe()).run_id
        await waiter.signal("lease_granted", {"pool": queues.pool, "run": run, "token": "guess"})
        for _ in range(100):
            state = await state_of(waiter)
            if state.refusals == 2:
                break
            await asyncio.sleep(0.05)
        await time_env.sleep(timedelta(minutes=1))
        state = await state_of(waiter)
    assert state.phase is Phase.AWAITING_LEASE and state.lease_granted_at is None
    assert [r.verb for r in state.refused] == ["lease_granted", "lease_granted"]
    assert "with no token" in state.refused[0].why
    assert "another request's token" in state.refused[1].why
    assert not DISRUPTIVE & set(on(fleet.actions, second))


async def test_a_ladder_started_by_hand_is_signed_by_an_operator_where_a_keyring_is_required(
    time_env: WorkflowEnvironment,
) -> None:
    """`remedy trigger` sends an operator's report: any runbook the controller has, by name.
    With a keyring, only one signed by a key in it starts a ladder; unsigned or signed by
    another key, it is refused — else anyone could start any runbook on any node."""
    client = time_env.client
    fleet = own_fleet("by-hand", 3)
    alice, unsigned, mallory = sorted(fleet.nodes)
    async with running_workers(client, fleet, keyring=KEYRING) as queues:
        queues.known.add(PARKS)
        results = {}
        for node, key in ((alice, ALICE), (unsigned, None), (mallory, MALLORY)):
            manual = Finding(
                node=node,
                check="manual",
                reason="ManualTrigger",
                severity=Severity.CRITICAL,
                observed_at=datetime.now(UTC),
            )
            sent = by_operator(
                FindingReport(finding=manual, runbook=PARKS),
                remediation_workflow_id(node),
                "alice",
                key,
                datetime.now(UTC),
            )
            handle = await send(client, queues, node, sent)
            if key is ALICE:
                state = await wait_for_phase(time_env, handle, Phase.TOLERATING)
                await handle.terminate("seen enough")
            else:
                results[node] = await finished(time_env, handle)
    assert state.runbook == PARKS and state.sent_by.startswith("alice [key SHA256:")
    assert "unsigned" in results[unsigned].refused[0].why
    assert "which is not in the keyring" in results[mallory].refused[0].why
    assert on(fleet.actions, unsigned) == on(fleet.actions, mallory) == []
