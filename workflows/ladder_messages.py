"""A ladder's inbound messages other than people's decisions: the reports that start or feed it
and its pool's lease grants. Mixed into NodeRemediation.

Each is read by a guarded handler (contract.defs): a payload too large or that does not read is
refused and counted, never a decoding traceback in the worker's log. A report is
taken only through the controller's check (workflows/door.py), and a grant only when it carries
the token of the ladder's own request (workflows/disruption_lease.py)."""

from __future__ import annotations

from temporalio import workflow

from contract.messages import LEASE_GRANTED, REPORT_FINDING
from contract.unreadable import Unreadable
from workflows.disruption_lease import DisruptionLease
from workflows.door import ReportIntake
from workflows.remediation_view import RemediationView
from workflows.runbook_changes import RunbookChanges

with workflow.unsafe.imports_passed_through():
    from remedy.disruption.budget import LeaseGrant
    from remedy.ladder.remediation import MAX_REPORT_BYTES, FindingReport, Phase, RemediationState
    from remedy.trust.decisions import AbortRequest, ClearRequest

MAX_GRANT_BYTES = 4096  # a grant names a pool, a scope, a run and a token
# A worse report takes over before the ladder climbs (a held one's too: workflows.person_hold).
BEFORE_CLIMBING = (Phase.WAITING, Phase.HELD_FOR_PERSON, Phase.TOLERATING)


class LadderMessages:
    _state: RemediationState
    _view: RemediationView
    _intake: ReportIntake
    _changes: RunbookChanges
    _lease: DisruptionLease
    _at_once: bool
    _bad_start: str
    _runbook_changed: bool
    _stop_request: AbortRequest | ClearRequest | None

    @REPORT_FINDING.guarded(MAX_REPORT_BYTES)
    async def report_finding(self, sent: FindingReport | Unreadable) -> None:
        if self._bad_start:
            return  # a run whose start did not read takes nothing: it fails at once
        report = await self._intake.arrived(sent)  # its ladder's first ones by the ladder itself
        if report is not None:
            self._take(report)

    def _take(self, report: FindingReport) -> None:
        state = self._state
        state.record_report(report)  # with the findings folded into it
        if state.phase in BEFORE_CLIMBING and state.outranks_trigger(report):
            if self._at_once and state.runbook is not None:  # said in the ladder's record
                self._changes.record(report, "escalated")
            state.runbook, state.trigger = report.runbook, report.finding
            self._runbook_changed = True
        elif self._stop_request is None:
            self._changes.note(report)  # acted on between rungs (workflows.runbook_changes)
        self._view.publish()

    @LEASE_GRANTED.guarded(MAX_GRANT_BYTES)
    def lease_granted(self, grant: LeaseGrant | Unreadable) -> None:
        if isinstance(grant, LeaseGrant):
            self._lease.granted(grant)  # a GPU lease, or the node (workflows.disruption_lease)
        elif self._state.lease_token:  # a ladder that keeps its door: said and counted
            self._view.refused("lease_granted", grant.why)
