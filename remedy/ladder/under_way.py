"""What a running ladder is doing now and what waits behind it, for `remedy show` and the Web
UI's details: the rung under way (acting, settling, being verified and how), and each fault
waiting its turn with what its runbook will do and when it comes. Pure functions of the state;
rungs count from 1 (remedy.core.numbering)."""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel

from remedy.core.actions import ACTIONS
from remedy.core.durations import format_duration
from remedy.core.models import Action, Finding
from remedy.core.numbering import rung_number
from remedy.ladder.gpu_ladder import covers, faulty_gpus
from remedy.ladder.remediation import Attempt, FindingReport, Phase, RemediationState, outranks
from remedy.ladder.verification import VerifyBy, on_part_of, verify_by
from remedy.runbook.schema import Runbook, Rung

# The phases a rung is under way in: its gates (approval, lease), its action, its checks.
_RUNG_PHASES = {
    Phase.AWAITING_APPROVAL: "awaiting approval",
    Phase.AWAITING_LEASE: "awaiting lease",
    Phase.ACTING: "acting",
    Phase.SETTLING: "settling",
    Phase.VERIFYING: "verifying",
}


class UnderWay(BaseModel):
    """The rung the ladder is on now: ``number`` as people count (from 1)."""

    number: int
    of: int
    action: str
    phase: str  # "acting", "settling", "verifying", "awaiting approval", "awaiting lease"
    since: datetime | None = None
    how: str = ""  # what the phase does: "a probe, a 10m watch for Xid 79 …, then a probe"

    def describe(self) -> str:
        how = f": {self.how}" if self.how else ""
        return f"rung {self.number} of {self.of} {self.action}, {self.phase}{how}"


class Waiting(BaseModel):
    """A fault kept for its turn: its runbook (empty: matched when its turn comes), what the
    runbook will do first, and when it comes."""

    fault: str
    runbook: str = ""
    does: str = ""
    when: str = ""

    def describe(self) -> str:
        runbook = f" → {self.runbook}" if self.runbook else ""
        return f"{self.fault}{runbook}: {self.does}; {self.when}"


def first_not_done(runbook: Runbook, attempts: list[Attempt], fault: Finding | None = None) -> int:
    """Where a new runbook's ladder starts: past its leading rungs whose lasting effect is
    already there (a drain that succeeded under the old runbook is not done again). ``fault``:
    the new ladder's; a GPU-scoped rung's effect is there only for the GPUs it acted on (GPU 1's
    drain quarantined GPU 1 and evicted its pods, not GPU 6's)."""
    gpus = faulty_gpus(fault, []) if fault is not None else []

    def done(rung: Rung) -> bool:
        return any(
            a.succeeded
            and a.action is rung.action
            and ACTIONS[a.action].lasting
            and (fault is None or covers(a, rung.scope, gpus))
            for a in attempts
        )

    start = 0
    while start < len(runbook.ladder) and done(runbook.ladder[start]):
        start += 1
    return start


def under_way(state: RemediationState) -> UnderWay | None:
    """The rung now climbed, if the ladder is on one."""
    ladder = state.runbook.ladder if state.runbook else []
    phase = _RUNG_PHASES.get(state.phase)
    if phase is None or state.outcome is not None or not 0 <= state.rung < len(ladder):
        return None
    rung = ladder[state.rung]
    return UnderWay(
        number=state.number_of(state.rung),
        of=len(ladder),
        action=rung.action.value,
        phase=phase,
        since=state.phase_since,
        how=_how(state, rung),
    )


def _how(state: RemediationState, rung: Rung) -> str:
    if state.phase is Phase.SETTLING:
        return f"{format_duration(rung.settle)} to settle, then {verification(state, rung)}"
    if state.phase is Phase.VERIFYING:
        return verification(state, rung)
    return ""


def verification(state: RemediationState, rung: Rung) -> str:
    """How the rung is verified (workflows/verification.py): a probe, the deep diagnose again,
    or a quiet watch for an Xid no probe sees."""
    trigger, runbook = state.trigger, state.runbook
    if trigger is None or runbook is None or not rung.verifies:
        return "a probe"
    how = verify_by(trigger)
    if how is VerifyBy.DIAGNOSE and rung.action is not Action.DIAGNOSE:
        return "a probe, then the deep diagnose again"
    if how is not VerifyBy.WATCH:
        return "a probe"
    code = f"Xid {trigger.xid}" if trigger.xid is not None else trigger.reason
    watch = f"a {format_duration(runbook.watch)} watch for no {code} on "
    if runbook.watch <= timedelta(0):
        watch = f"a look for {code} on "
    return f"a probe, {watch}{trigger.component.describe()}, then a probe"


def waiting(state: RemediationState) -> list[Waiting]:
    """Every fault waiting its turn, the next first: the reports kept (workflows/
    runbook_changes.py), then other parts' faults the last verification saw that no report
    brought (their runbook is matched when their turn comes)."""
    trigger, runbook = state.trigger, state.runbook
    if trigger is None or runbook is None or state.phase is Phase.DONE:
        return []
    now = trigger.headline()
    kept = [_kept(state, p, trigger, runbook) for p in state.pending]
    reported = {(p.finding.reason, p.finding.component.describe()) for p in state.pending}
    seen = [
        Waiting(
            fault=f.headline(),
            does="its runbook is matched when its turn comes",
            when=f"seen by the last verification; after {now} is verified gone",
        )
        for f in state.elsewhere
        if not on_part_of(trigger, f) and (f.reason, f.component.describe()) not in reported
    ]
    return kept + seen


def _kept(
    state: RemediationState, report: FindingReport, trigger: Finding, runbook: Runbook
) -> Waiting:
    now = trigger.headline()
    if outranks(report, trigger, runbook):
        when = f"worse than {now}: takes over before the next rung"
    else:
        when = f"after {now} is verified gone"
    return Waiting(
        fault=report.finding.headline(),
        runbook=report.runbook.name,
        does=_does(state, report.runbook),
        when=when,
    )


def _does(state: RemediationState, runbook: Runbook) -> str:
    """``cordon, then drain (rung 1 of 4)``: what the runbook starts with on this node."""
    steps = ["cordon"] if runbook.cordon and state.cordon is None else []
    ladder = runbook.ladder
    start = first_not_done(runbook, state.attempts)
    if not ladder:
        steps.append("hold the node for a human")
    elif start < len(ladder):
        below = ": the rungs below are done" if start else ""
        where = f"rung {rung_number(start)} of {len(ladder)}{below}"
        steps.append(f"{ladder[start].action.value} ({where})")
    else:
        steps.append("nothing left: its rungs are done")
    return ", then ".join(steps)
