"""A ladder's side of a node held for a person (remedy.trust.person_hold).

- **An abort** (unless ``--no-hold``) marks the node, through the controller, before the ladder
  ends: the ladder's record says so, and what hands the node back.
- **A ladder the node's hold meets at its door** (the controller reads the hold with its first
  report) records that report and every one after (a worse one still takes over, as in a
  tolerance window), does nothing on the node, and waits (``Phase.HELD_FOR_PERSON``) until the
  hold is gone: nudged by `remedy resume-node` (``HOLD_LIFTED``), and every ``RECHECK_EVERY``
  for a hold removed by hand. It reads the node's mark each time; a nudge is not believed.
  Then it climbs as any new ladder does, its fault checked again before anything disruptive.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from contract.messages import HOLD_LIFTED
from contract.unreadable import Unreadable
from workflows.common import PATIENT_RETRY, cause_of
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from contract.names import remediation_workflow_id
    from remedy.ladder.remediation import Phase, RemediationState
    from remedy.trust.decisions import AbortRequest
    from remedy.trust.person_hold import HoldNode, HoldQuery, NodeHold

HOLD_CALL = timedelta(seconds=30)
HOLD_DEADLINE = timedelta(minutes=2)  # an abort's answer waits for it: not the ride-out's 10
RECHECK_EVERY = timedelta(minutes=30)  # a hold removed by hand (kubectl), with no nudge
MAX_NUDGE_BYTES = 1024  # a nudge names the node


def resume_command(node: str) -> str:
    return f"`remedy resume-node {node}`"


class PersonHold:
    def __init__(self, state: RemediationState, view: RemediationView) -> None:
        self._state, self._view = state, view
        self._nudged = False

    def nudge(self) -> None:
        self._nudged = True

    async def on_abort(self, req: AbortRequest) -> str:
        """Mark the node held for a person (unless the abort says ``--no-hold``); what the
        ladder's record says of it."""
        node = self._state.node.name
        if not req.hold:
            return "; not held: the next report starts a ladder"
        ladder = remediation_workflow_id(node)
        hold = NodeHold(by=req.who, reason=req.reason, since=workflow.now(), ladder=ladder)
        try:
            held = await act.HOLD_NODE.execute(
                HoldNode(node=node, hold=hold),
                start_to_close_timeout=HOLD_CALL,
                schedule_to_close_timeout=HOLD_DEADLINE,
                retry_policy=PATIENT_RETRY,
                summary=f"hold {node} for a person",
            )
        except ActivityError as err:  # the abort stands; the hold is said not to
            return f"; NOT held (could not mark the node: {cause_of(err)})"
        kept = held.hold or hold
        since = "" if kept == hold else f" (since {kept.since:%m-%d %H:%M:%S}, by {kept.by})"
        return (
            f"; held for a person{since}: new reports are recorded and wait until "
            f"{resume_command(node)}"
        )

    async def wait(self, before_each: Callable[[], None]) -> None:
        """While the node is held: record, act on nothing, until its mark is gone.
        ``before_each``: the ladder's continue-as-new check (a hold may last days)."""
        state, view = self._state, self._view
        if state.held is None:
            return
        view.enter(Phase.HELD_FOR_PERSON)
        while state.held is not None:
            before_each()
            with suppress(TimeoutError):  # nudged or on its clock, the hold is read again
                await workflow.wait_condition(
                    lambda: self._nudged,
                    timeout=RECHECK_EVERY,
                    timeout_summary=f"held for a person: {resume_command(state.node.name)}",
                )
            self._nudged = False
            read = await act.READ_HOLD.execute(
                HoldQuery(node=state.node.name),
                start_to_close_timeout=HOLD_CALL,
                retry_policy=PATIENT_RETRY,
                summary=f"is {state.node.name} still held?",
            )
            state.held = read.hold
        workflow.logger.info("%s: handed back; the ladder begins", state.node.name)
        view.enter(Phase.WAITING)


class PersonHoldMessages:
    """Mixed into NodeRemediation: the nudge of `remedy resume-node`."""

    _hold: PersonHold

    @HOLD_LIFTED.guarded(MAX_NUDGE_BYTES)
    def hold_lifted(self, _: HoldQuery | Unreadable) -> None:
        self._hold.nudge()  # the node's mark is read again: the nudge itself proves nothing
