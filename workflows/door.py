"""What a ladder believes at its door: only what the controller loaded or a key signed.

Anyone who can start a workflow or send it a signal — every node agent's Temporal credential,
a user of the Web UI — reaches the ladder, so the workflow is the last line, not the transport:

- **a start** gives the node and its agent's queue, nothing more: state and keys come only
  from a continue-as-new of this very workflow (checked), and an input that does not read
  fails the run once, with a reason, instead of failing its workflow task forever;
- **a report** is taken only once the controller checked who sent it and gave it its own
  runbook of the name asked (``ADMIT_REPORT``, remedy.ladder.intake), one at a time, in the order
  the reports came; one over ``MAX_REPORT_BYTES`` is not even read;
- **an internal message** (a lease grant, leave to cordon) is taken only when it carries the
  token the ladder drew for its own request (workflows.disruption_lease, quarantine_gate).

Whatever is refused is said where operators look — the state's ``refused`` (``remedy show``,
the Web UI's details), the count ``refusals``, the metric ``remedy_messages_refused`` — and the
ladder goes on as if it never came.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import NamedTuple

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

from contract import activities as act
from contract.unreadable import Unreadable
from workflows.common import PATIENT_RETRY, RIDE_OUT_DEADLINE, LadderStop, cause_of
from workflows.remediation_view import RemediationView

with workflow.unsafe.imports_passed_through():
    from contract.names import remediation_workflow_id
    from remedy.core.models import NodeRef
    from remedy.ladder.intake import ReportToAdmit
    from remedy.ladder.remediation import FindingReport, Outcome, RemediationInput, RemediationState

ADMIT_CALL = timedelta(seconds=30)
FIRST_REPORT_TIMEOUT = timedelta(minutes=5)
BAD_START = "BadStartInput"  # the failure type of a start input the ladder cannot take


class StartTaken(NamedTuple):
    """A start as the ladder takes it: its input, why part of it was dropped, and why the run
    must fail at once (``bad``: the input does not read, or names another node than the
    workflow's id; the input is then a stand-in)."""

    input: RemediationInput
    dropped: str = ""
    bad: str = ""


def start_input(raw: RawValue) -> StartTaken:
    """Read the start's input. A bad one is said, not raised: raised from the workflow's
    __init__ it would leave the SDK's run coroutine unawaited; the run fails it (``failed``)."""
    try:
        inp = workflow.payload_converter().from_payload(raw.payload, RemediationInput)
    except (ValidationError, ValueError, TypeError) as exc:
        why = f"the start input is not a {RemediationInput.__name__}: {_fields(exc)}"
        return StartTaken(_STAND_IN, bad=why)
    info = workflow.info()
    if info.workflow_id != remediation_workflow_id(inp.node.name):
        why = (
            f"started for node {inp.node.name} under the id {info.workflow_id}: a node's "
            f"ladder runs as {remediation_workflow_id(inp.node.name)}"
        )
        return StartTaken(_STAND_IN, bad=why)
    # A continue-as-new of this workflow id is the only run that carries state and keys.
    continued = bool(info.continued_run_id)
    foreign = inp.state is not None and inp.state.node.name != inp.node.name
    dropped = {
        "its state": inp.state is not None and (not continued or foreign),
        "its keyring": inp.keyring is not None and not continued,
    }
    said = [what for what, drop in dropped.items() if drop]
    if not said:
        return StartTaken(inp)
    clean = inp.model_copy(
        update={"state": None if dropped["its state"] else inp.state, "keyring": None}
        if not continued
        else {"state": None}
    )
    why = f"{' and '.join(said)} not taken: only a continue-as-new of this ladder carries them"
    return StartTaken(clean, dropped=why)


def failed(bad: str) -> ApplicationError:
    """What a run whose start was bad ends with: failed once, non-retryable, its reason said."""
    return ApplicationError(bad, type=BAD_START, non_retryable=True)


_STAND_IN = RemediationInput(node=NodeRef(name="(unread start)"), node_task_queue="")


def _fields(exc: Exception) -> str:
    if not isinstance(exc, ValidationError):
        return type(exc).__name__
    fields = sorted({".".join(str(p) for p in e["loc"]) or "(the input)" for e in exc.errors()})
    return ", ".join(fields[:5]) + " invalid"


class ReportIntake:
    """The ladder's reports through the controller's check, one at a time, in the order they
    came. Until the ladder has a runbook the ladder itself checks them, in its own coroutine
    (``first_report``: a local activity in its first workflow task, as its first cordon is);
    after, the report's handler does, by a regular activity. Never a local activity in a
    handler while the ladder goes on: where its answer lands in the history would depend on
    when it came, and a replay could place it elsewhere (a nondeterminism seen in tests)."""

    def __init__(
        self, state: RemediationState, view: RemediationView, node_task_queue: str
    ) -> None:
        self._state, self._view, self._node_task_queue = state, view, node_task_queue
        self._one_at_a_time = asyncio.Lock()
        self._checking = 0  # reports a handler is checking now
        self._waiting: list[FindingReport | Unreadable] = []  # for the ladder to check itself

    async def first_report(self, take: Callable[[FindingReport], None]) -> None:
        """Check the reports that came before the ladder had a runbook, and ``take`` each one
        taken; LadderStop when none came in time, or every one that came was refused."""
        state, deadline = self._state, workflow.now() + FIRST_REPORT_TIMEOUT
        refused = ""
        while self._waiting or state.runbook is None:
            if not self._waiting:
                if refused:
                    why = f"the report that started it was refused ({refused}); nothing done"
                    raise LadderStop(Outcome.CLEARED, why)
                try:  # a run from before took its report in the handler: runbook set
                    await workflow.wait_condition(
                        lambda: bool(self._waiting) or state.runbook is not None,
                        timeout=deadline - workflow.now(),
                        timeout_summary="wait for the first finding",
                    )
                except TimeoutError:
                    why = "started without a finding; nothing to do"
                    raise LadderStop(Outcome.CLEARED, why) from None
                continue
            taken, why = await self._checked(self._waiting.pop(0), local=True)
            if taken is not None:
                take(taken)
            refused = refused or why

    async def arrived(self, sent: FindingReport | Unreadable) -> FindingReport | None:
        """A report's handler: before the ladder has a runbook, kept for ``first_report``
        (None); after, checked here — the report as the ladder takes it, or None: refused."""
        if self._state.runbook is None:
            self._waiting.append(sent)
            return None
        self._checking += 1
        try:
            async with self._one_at_a_time:
                return (await self._checked(sent, local=False))[0]
        finally:
            self._checking -= 1

    async def settled(self) -> None:
        """Until no report is being checked: what the ladder decides next (a worse fault taking
        over, the next part's fault) takes every report that came. Idle: not even a yield (a
        run from before, replayed, must interleave as it did)."""
        if not self.idle:
            await workflow.wait_condition(lambda: self.idle)

    @property
    def idle(self) -> bool:
        """No report is being checked or waits to be: the run may continue as new."""
        return not self._checking and not self._waiting

    async def _checked(
        self, sent: FindingReport | Unreadable, local: bool
    ) -> tuple[FindingReport | None, str]:
        """The report as the ladder takes it, or None and why it is refused (said, counted)."""
        state = self._state
        if isinstance(sent, Unreadable):
            return None, self._refused(sent.why)
        try:
            admission = await act.ADMIT_REPORT.execute(
                ReportToAdmit(
                    ladder=workflow.info().workflow_id,
                    node=state.node,
                    node_task_queue=self._node_task_queue,
                    report=sent,
                    first=local,  # the ladder's first reports: the controller reads its hold
                ),
                local=local,
                start_to_close_timeout=ADMIT_CALL,
                schedule_to_close_timeout=RIDE_OUT_DEADLINE,
                retry_policy=PATIENT_RETRY,
                summary=f"check a report for {state.node.name}",
            )
        except ActivityError as err:  # fail closed: what cannot be checked is not taken
            return None, self._refused(f"could not be checked: {cause_of(err)}")
        if admission.report is None:
            return None, self._refused(admission.why)
        state.sent_by = state.sent_by or admission.sender
        state.held = state.held or admission.held  # waits for a person (workflows.person_hold)
        return admission.report, ""

    def _refused(self, why: str) -> str:
        self._view.refused("report_finding", why)
        return why
