"""Remediation state, messages and outcome: what the NodeRemediation workflow keeps and answers.

The state is one model, passed whole to continue-as-new and returned whole by the query.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum

from pydantic import BaseModel, Field

from remedy.core.models import (
    Action,
    CordonState,
    Finding,
    Frozen,
    NodeRef,
    ProbeReport,
    Scope,
    Severity,
)
from remedy.core.numbering import rung_index, rung_number
from remedy.runbook.authored import Approval as ApprovalMode
from remedy.runbook.schema import Runbook
from remedy.trust.decisions import Approval, ApproveRequest, Consent, Refusal
from remedy.trust.identity import ReportProof
from remedy.trust.person_hold import NodeHold
from remedy.trust.signing import Keyring

MAX_KEPT_FINDINGS = 50  # an agent re-reporting every probe must not grow the state forever
MAX_REFUSALS = 10  # a flood of forged signals must not grow the state either
MAX_ALSO = 32  # findings folded into one report: a round of one fault, not a log
MAX_REPORT_BYTES = 64 * 1024  # a report a ladder reads at all: evidence is lines, not a log


class Phase(StrEnum):
    WAITING = "waiting_for_finding"
    TOLERATING = "tolerating"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_LEASE = "awaiting_disruption_lease"
    HELD_BY_BREAKER = "held_by_breaker"  # its cordon waits for a tripped breaker to close
    HELD_FOR_PERSON = "held_for_person"  # the node is held since an abort (person_hold)
    ACTING = "acting"
    SETTLING = "settling"
    VERIFYING = "verifying"
    RESTORING = "restoring"
    DONE = "done"


class Outcome(StrEnum):
    CLEARED = "cleared"  # gone within the tolerance window, or cleared by an operator
    RECOVERED = "recovered"  # a rung left the node healthy; remedy restored it
    REPLACED = "replaced"
    NEEDS_HUMAN = "needs_human"  # past the last rung, or an approval never came: stays cordoned
    ABORTED = "aborted"
    NODE_GONE = "node_gone"  # the cluster has no such node (deleted, or never existed)
    # Another repairer (Karpenter, EKS) is at work on the node: remedy stepped back before its
    # next disruptive step, and left the node as it was (docs/operations.md).
    OTHER_REPAIRER = "other_repairer"
    # A suspicion (a slow node, from a job's symptoms) its proving rung did not confirm: the
    # deep diagnose passed, nothing was done to the node (runbook ``proves``).
    UNPROVEN = "unproven"


class AttemptResult(StrEnum):
    VERIFIED = "verified"  # the rung ran and the re-probe was clean
    UNVERIFIED = "unverified"  # the rung ran but the node is still unhealthy
    DONE = "done"  # the rung ran and is not verified (drain, replace)
    FAILED = "failed"  # the action itself failed or timed out
    CANCELLED = "cancelled"  # an operator stopped the ladder while the action ran
    SKIPPED = "skipped"  # not run: the node cannot perform it (its capabilities say why)
    APPROVAL_TIMED_OUT = "approval_timed_out"


class FindingReport(Frozen):
    """The signal that starts or joins a remediation: a finding and the runbook it matched.
    ``also``: what other checks saw of the same fault in the same round (Xid 48, then the
    probe's EccUncorrectable and RowRemapPending on that GPU), folded into this one signal;
    the ladder keeps them with the finding (a release before ignores them).

    Sent, the runbook is a request by name: the ladder climbs the controller's own runbook of
    that name, once the controller checked ``proof`` (remedy.ladder.intake); the rest of what the
    sender wrote of it is dropped (it stays on the wire for the controllers of the release
    before, which climb it). Kept by a ladder, the runbook is the controller's."""

    finding: Finding
    runbook: Runbook
    also: list[Finding] = Field(default=[], max_length=MAX_ALSO)
    proof: ReportProof | None = None  # who sent it (remedy.trust.identity); a ladder keeps none

    def findings(self) -> list[Finding]:
        return [self.finding, *self.also]


class Attempt(Frozen):
    rung: int  # -1 for the actions outside the ladder (cordon, restore)
    action: Action
    started_at: datetime
    finished_at: datetime
    result: AttemptResult
    detail: str = ""
    epoch: int = 0  # which runbook of the ladder the rung is of (one more per escalation)
    gpus: list[int] | None = None  # scope gpu: the GPUs it acted on ([]: all); None: the node

    @property
    def succeeded(self) -> bool:
        return self.result in (AttemptResult.DONE, AttemptResult.VERIFIED, AttemptResult.UNVERIFIED)


class Escalation(Frozen):
    """The ladder changed runbooks after it began: a worse fault took over, or a fault on
    another part came next once the first was verified."""

    at: datetime
    from_runbook: str
    to_runbook: str
    because: str  # the finding that took over, in one line
    # "escalated" (a worse fault), "continued" (the next part's) or "proven" (the fault a
    # suspicion's proving rung found)
    kind: str = "escalated"
    from_rung: int = 0
    to_rung: int = 0  # where the new runbook's ladder starts: past what was already done
    from_fault: str = ""  # the fault that drove the ladder until then (empty: a run before)

    def describe(self, first: int = 0) -> str:
        """``first``: the numbers the ladder's runbooks before the new one took
        (remedy.core.numbering.first_number)."""
        start = first + rung_number(self.to_rung)
        return (
            f"{self.kind} from {self.from_runbook} to {self.to_runbook} because {self.because}"
            + (f" (from rung {start}: the rungs below were done)" if self.to_rung else "")
        )


class RemediationState(BaseModel):
    node: NodeRef
    runbook: Runbook | None = None
    trigger: Finding | None = None  # the finding that chose the runbook
    findings: list[Finding] = []
    reports_received: int = 0
    phase: Phase = Phase.WAITING
    phase_since: datetime | None = None  # when the current phase began (workflow time)
    started_at: datetime | None = None
    tolerance_ends_at: datetime | None = None
    rung: int = 0  # the rung being climbed (or next)
    attempts: list[Attempt] = []
    approvals: list[Approval] = []
    cordon: CordonState | None = None
    cordon_asked: bool = False  # a cordon was sent: it may have landed though no answer came
    resumed: str = ""  # why the ladder started above its first rung (remedy/ladder/recurrence.py)
    prepare: list[int] = []  # the rungs a resumed ladder runs first (they clear the node)
    fault_confirmed: bool = False  # a re-probe saw the fault before the first disruptive rung
    last_probe: ProbeReport | None = None  # the latest re-probe, failed ones included
    lease_requested_at: datetime | None = None  # disruption budget of the node's pool
    lease_granted_at: datetime | None = None
    lease_scope: Scope = Scope.NODE  # a GPU lease is widened to the node before a node rung
    lease_released_at: datetime | None = None
    lease_asked_in: str = ""  # the run that last asked: a grant for it is this ladder's
    lease_token: str = ""  # drawn for its lease request: a grant carries it (workflows/door.py)
    cordon_token: str = ""  # drawn for its ask of leave to cordon: a leave carries it back
    # ``on_approval_timeout: release`` ended it: cordoned for a person, its share given back.
    share_given_back: bool = False
    # The budgets asked for leave to cordon (remedy.disruption.quarantine), and those that gave it.
    # None:
    # never asked (a ladder from before the breaker held cordons): it cordons at once.
    cordon_asked_of: list[str] | None = None
    cordon_leave: list[str] = []
    outcome: Outcome | None = None
    outcome_detail: str = ""
    runs: int = Field(default=1, description="workflow runs so far (continue-as-new)")
    epoch: int = 0  # runbooks the ladder switched to since it began (len(escalations))
    escalations: list[Escalation] = []
    # Reports for another part of the node (another GPU, a NIC), or for its part but not
    # worse: handled once the trigger's fault is verified gone (one per part and fault).
    pending: list[FindingReport] = []
    consent: Consent = Consent.RUNG  # what the approval being waited for agrees to
    # Other parts' faults the last verification saw (its probe, its diagnose): next in line.
    elsewhere: list[Finding] = []
    # The latest MAX_REFUSALS messages refused: decisions sent as signals, and what the door
    # turned away (workflows/door.py): reports, grants and leave that did not prove themselves.
    refused: list[Refusal] = []
    refusals: int = 0  # every message refused, not only the latest kept
    sent_by: str = ""  # who sent the report that started the ladder (remedy.ladder.intake)
    held: NodeHold | None = None  # the node held for a person: reports recorded, nothing done

    @property
    def cordoned_by_remedy(self) -> bool:
        return self.cordon in (CordonState.CORDONED, CordonState.ALREADY_OURS)

    def approved(self, rung: int, consent: Consent = Consent.RUNG) -> bool:
        return any(
            a.rung == rung and a.epoch == self.epoch and a.consent is consent
            for a in self.approvals
        )

    def waits_for(self, rung: int) -> Consent | None:
        """What an approval of ``rung`` would agree to now (None: nothing asks for one)."""
        ladder = self.runbook.ladder if self.runbook else []
        if self.phase is Phase.AWAITING_APPROVAL and rung == self.rung:
            return self.consent
        if 0 <= rung < len(ladder) and ladder[rung].approval is ApprovalMode.REQUIRED:
            return Consent.RUNG
        return None

    def number_of(self, rung: int, epoch: int | None = None) -> int:
        """The number of the rung at index ``rung`` of runbook ``epoch`` (default: the one
        climbed now), as people and the wire count it (remedy.core.numbering)."""
        return rung_number(rung, self.escalations, self.epoch if epoch is None else epoch)

    def requested_rung(self, req: ApproveRequest) -> int:
        """The index of the rung an approval names: its ``rung_number``, else the old form's
        index, else the rung the ladder is at."""
        if req.rung_number is not None:
            return rung_index(req.rung_number, self.escalations, self.epoch)
        return self.rung if req.rung is None else req.rung

    def record_report(self, report: FindingReport) -> None:
        self.reports_received += 1
        self.findings = [*self.findings, *report.findings()][-MAX_KEPT_FINDINGS:]

    def outranks_trigger(self, report: FindingReport) -> bool:
        """Whether a new report is worse than the one driving the ladder: a higher severity,
        or the same severity and a runbook of higher priority (the matcher's own order). A
        report of the running runbook never is."""
        if self.trigger is None or self.runbook is None:
            return True
        if report.runbook.name == self.runbook.name:
            return False
        return outranks(report, self.trigger, self.runbook)

    def keep_pending(self, report: FindingReport) -> None:
        """Keep a report for later (the latest of each part and fault, the worst first)."""
        same = _fault_key(report.finding)
        rest = [p for p in self.pending if _fault_key(p.finding) != same]
        kept = [*rest, report][-MAX_PENDING:]
        self.pending = sorted(kept, key=lambda p: _rank(p), reverse=True)


MAX_PENDING = 8  # one per part is plenty: the node has at most a few broken at once
_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}


def _rank(report: FindingReport) -> tuple[int, int]:
    return _SEVERITY_RANK[report.finding.severity], report.runbook.priority


def outranks(report: FindingReport, trigger: Finding, runbook: Runbook) -> bool:
    """``report`` is worse than ``trigger`` under ``runbook``. For example, Xid 79 (critical,
    gpu-fallen-off-bus) outranks Xid 13 (warning, application-xid); two critical findings go
    by their runbooks' priority."""
    new, old = _SEVERITY_RANK[report.finding.severity], _SEVERITY_RANK[trigger.severity]
    return new > old or (new == old and report.runbook.priority > runbook.priority)


def _fault_key(finding: Finding) -> str:
    c = finding.component
    return f"{c.kind}/{c.index}/{c.device}/{finding.check}/{finding.reason}/{finding.xid}"


HANDLED_KEPT = 256  # fingerprints a ladder passes on: far more than one node's late duplicates


class RemediationInput(BaseModel):
    node: NodeRef
    node_task_queue: str
    # A node agent that has not picked a task up within this long is dead: fail closed.
    node_pickup_timeout: timedelta = Field(
        default=timedelta(minutes=2), gt=timedelta(0), le=timedelta(hours=1)
    )
    state: RemediationState | None = None  # set by continue-as-new
    # What the node's earlier ladders handled (fingerprints, newest last): a report of an older
    # ladder's finding delivered late is as stale as one of the last ladder's.
    handled_before: list[str] = []
    # The operator keyring the ladder loaded, carried by continue-as-new (taken only in a run
    # continued from one: whoever starts a workflow cannot hand it keys of their own).
    keyring: Keyring | None = None
    keyring_read_at: datetime | None = None  # the controller's keyring read at (workflow time)


class RemediationResult(BaseModel):
    node: str
    outcome: Outcome
    detail: str
    runbook: str | None
    attempts: list[Attempt]
    # Every finding the ladder and the node's earlier ladders received (fingerprints, the newest
    # HANDLED_KEPT): the same one reported again after it finished is stale and starts nothing.
    handled: list[str] = []
    approvals: list[Approval] = []  # who approved what (the ladder's record of decisions)
    escalations: list[Escalation] = []  # when and why it changed runbooks
    refused: list[Refusal] = []  # the latest messages it refused (its state's ``refused``)
    refusals: int = 0  # every message it refused
    sent_by: str = ""  # who sent the report that started it


class ApproveResult(Frozen):
    """What an approval did: the rung, who, and the phase the ladder moved to."""

    node: str
    rung: int  # the ladder's index, from 0, for clients of the release before
    action: Action
    by: str  # signed: the name given and the caller's identity
    phase: Phase  # after the workflow acted on the approval (or as it was, if it had not yet)
    ahead: bool = False  # approved before the ladder reached the rung
    moved: bool = True  # False: the ladder had not left the approval when the answer was due
    rung_number: int = 0  # the rung as people count it, from 1 (0: a worker of the release before)


class StopResult(Frozen):
    """What an abort or clear did: the outcome once the ladder ended, or the phase it was in
    when the answer was due (outcome None: still stopping)."""

    node: str
    phase: Phase
    outcome: Outcome | None = None
    detail: str = ""
    already: str = ""  # an abort that came after another: who stopped the ladder first
