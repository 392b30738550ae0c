"""The fleet twin's link to the real system: for each kind of fault the twin's history holds,
climb the policy's runbook for real — NodeRemediation, its activities and budget on Temporal's
time-skipping server against a simulated node (``workers.rehearse``) — and keep what it did.

Why not one workflow per fault event: a ladder's course depends only on the runbook and the
fault (the simulated fleet is deterministic), so the 500-odd events of a 54-day history need a
dozen distinct ladders per policy; each is run once for real and its timeline reused, and the
weeks themselves pass on the twin's virtual clock (``twin.job``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from adapters.sim import FAULTS
from remedy.core.models import Action, Scope, Severity
from remedy.runbook import DEFAULT_RUNBOOK, Match, Runbook, RunbookSet, Rung
from remedy.runbook.authored import Approval
from twin.generator import FaultKind
from twin.job import LadderRun, Policy, Step
from workers.rehearse import rehearse

Chooser = Callable[[str], Runbook]  # simulated fault → the runbook the policy climbs for it

ANY_FINDING = [Match(severities=[Severity.WARNING, Severity.CRITICAL])]
REPLACE_ON_ANY_FAULT = Runbook(
    name="replace-on-any-fault",
    match=ANY_FINDING,
    cordon=True,
    description="Any unhealthy finding: drain and replace the node at once.",
    ladder=[Rung(action=Action.DRAIN), Rung(action=Action.REPLACE)],
)


def manual_operations(arrives: timedelta) -> Runbook:
    """A person arrives ``arrives`` after the fault (the tolerance window: a fault gone by then
    is left alone), drains and reboots the node, and later replaces it if that did not help."""
    return Runbook(
        name="manual-operations",
        match=ANY_FINDING,
        cordon=False,
        tolerance=arrives,
        description="A person arrives, drains and reboots; replaces later if still broken.",
        ladder=[
            Rung(action=Action.DRAIN),
            Rung(action=Action.REBOOT),
            Rung(action=Action.REPLACE, approval=Approval.REQUIRED),
        ],
    )


ORACLE = Policy(
    name="oracle",
    detect=timedelta(0),
    approval_delay=timedelta(0),
    description="every fault repaired at once and perfectly (the bound): the job still "
    "stops and restarts from its checkpoint",
)


def oracle_ladders(kinds: set[FaultKind]) -> dict[FaultKind, LadderRun]:
    """The oracle's "ladder": the node is whole again the moment the fault appears, with no
    action, no time out of service and nothing left behind."""
    return {
        (fault, transient): LadderRun(
            fault=fault,
            runbook="oracle",
            outcome="not seen" if fault is None else "cleared" if transient else "recovered",
            steps=[],
            workflow_time=timedelta(0),
        )
        for fault, transient in kinds
    }


NOT_SEEN = LadderRun(
    fault=None, runbook="-", outcome="not seen", steps=[], workflow_time=timedelta(0)
)


def policies(
    shipped: RunbookSet,
    *,
    detect: timedelta,
    approval: timedelta,
    manual_detect: timedelta,
    manual_step: timedelta,
) -> list[tuple[Policy, Chooser]]:
    """The three policies compared: remedy's runbooks, and the two baselines."""
    manual = manual_operations(manual_detect)
    return [
        (
            Policy(
                name="remedy",
                detect=detect,
                approval_delay=approval,
                description="the shipped runbooks; a person approves replacements",
            ),
            matching(shipped),
        ),
        (
            Policy(
                name="replace on any fault",
                detect=detect,
                approval_delay=timedelta(0),
                description="automated: drain and replace every node with a finding",
            ),
            lambda _: REPLACE_ON_ANY_FAULT,
        ),
        (
            Policy(
                name="manual operations",
                detect=manual_detect,
                approval_delay=manual_step,
                description="a person notices, drains and reboots, then replaces",
            ),
            lambda _: manual,
        ),
    ]


def matching(runbooks: RunbookSet) -> Chooser:
    """The runbook an agent loaded with ``runbooks`` climbs for a simulated fault."""

    def runbook(fault: str) -> Runbook:
        spec = FAULTS[fault]
        return runbooks.match(spec.report("twin", 0, "SN0", datetime.now(UTC))) or DEFAULT_RUNBOOK

    return runbook


async def ladders_for(kinds: set[FaultKind], choose: Chooser) -> dict[FaultKind, LadderRun]:
    """Run the policy's ladder once for each kind of fault, for real."""
    out: dict[FaultKind, LadderRun] = {}
    for fault, transient in sorted(kinds, key=lambda k: (k[0] or "", k[1])):
        if fault is None:
            out[(fault, transient)] = NOT_SEEN
            continue
        runbook = choose(fault)
        done = await rehearse(runbook, fault, approve=True, present=not transient)
        result = done.result
        needs = {i for i, r in enumerate(runbook.ladder) if r.approval is Approval.REQUIRED}
        steps = [
            Step(
                action=a.action,
                result=a.result.value,
                rung=a.rung,
                took=a.finished_at - a.started_at,
                approval=a.rung in needs,
                # An escalation's rungs are another runbook's: counted whole-node.
                scope=runbook.ladder[a.rung].scope if a.rung >= 0 and a.epoch == 0 else Scope.NODE,
            )
            for a in result.attempts
        ]
        end = max((a.finished_at for a in result.attempts), default=done.started_at)
        out[(fault, transient)] = LadderRun(
            fault=fault,
            runbook=runbook.name,
            outcome=result.outcome.value,
            steps=steps,
            workflow_time=end - done.started_at,
            fault_left=done.fault_left,
        )
    return out
