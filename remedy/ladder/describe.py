"""What a remediation tells the people watching it: the values it is indexed by (Temporal search
attributes: find every node waiting for approval) and its current details (Markdown in the Web
UI: fault, evidence, rung, next step, how to approve or abort). Pure functions of the state."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from remedy.core.display import visible
from remedy.core.durations import format_duration
from remedy.core.models import Action, Finding
from remedy.core.numbering import first_number
from remedy.ladder.intake import version
from remedy.ladder.remediation import Attempt, AttemptResult, Phase, RemediationState
from remedy.ladder.under_way import under_way, verification, waiting
from remedy.runbook.authored import Approval, OnApprovalTimeout
from remedy.runbook.schema import Runbook, Rung
from remedy.trust.decisions import Consent
from remedy.trust.person_hold import held_note


class NodeIndex(BaseModel):
    """What a node's workflow (remediation or admission) is found by: its search attributes."""

    node: str
    pool: str
    fault: str = ""  # "Xid79", or the trigger's reason ("NicPortDown")
    runbook: str = ""
    rung: str = ""  # the action of the rung being (or next to be) climbed
    phase: str = ""
    phase_since: datetime | None = None
    outcome: str = ""
    gpu_serials: list[str] = []
    lease: str = ""  # "held" or "waiting": a restarted budget finds its holders by this
    rungs_run: list[str] = []  # the actions of the rungs run so far, each once, in order


def fault_code(finding: Finding) -> str:
    return f"Xid{finding.xid}" if finding.xid is not None else finding.reason


def current_rung(state: RemediationState) -> str:
    ladder = state.runbook.ladder if state.runbook else []
    if state.phase in (Phase.WAITING, Phase.TOLERATING):
        return "tolerance" if ladder else ""
    return ladder[state.rung].action.value if state.rung < len(ladder) else ""


# A rung that did not run: the node cannot perform it, or nobody approved it in time.
_NOT_RUN = frozenset({AttemptResult.SKIPPED, AttemptResult.APPROVAL_TIMED_OUT})


def rungs_run(state: RemediationState) -> list[str]:
    """The actions of the ladder's rungs that ran (cordon and restore are not rungs)."""
    return list(
        dict.fromkeys(
            a.action.value for a in state.attempts if a.rung >= 0 and a.result not in _NOT_RUN
        )
    )


def gpu_serials(state: RemediationState) -> list[str]:
    return sorted(
        dict.fromkeys(
            f.component.serial for f in state.findings if f.unhealthy and f.component.serial
        )
    )


# A rung's own steps are one phase in the index: each change of the index is an event in the
# workflow's history and a visibility write, and nobody searches for "settling".
_INDEXED_PHASE = {Phase.SETTLING: Phase.ACTING, Phase.VERIFYING: Phase.ACTING}


def remediation_index(state: RemediationState, since: datetime | None = None) -> NodeIndex:
    """``since``: when the indexed phase began (kept by the caller across the rung's steps)."""
    return NodeIndex(
        node=state.node.name,
        pool=state.node.pool,
        fault=fault_code(state.trigger) if state.trigger else "",
        runbook=state.runbook.name if state.runbook else "",
        rung=current_rung(state),
        phase=indexed_phase(state).value,
        phase_since=since,
        outcome=state.outcome.value if state.outcome else "",
        gpu_serials=gpu_serials(state),
        lease=lease_held(state),
        rungs_run=rungs_run(state),
    )


# RemedyLease: a restarted budget finds its holders and waiters by it, and a node left for a
# person whose share went back (``on_approval_timeout: release``) by the ladder's last value.
HELD, WAITING, GIVEN_BACK = "held", "waiting", "given-back"


def lease_held(state: RemediationState) -> str:
    if state.share_given_back:
        return GIVEN_BACK
    if state.lease_released_at is not None or state.lease_requested_at is None:
        return ""
    return HELD if state.lease_granted_at is not None else WAITING


def indexed_phase(state: RemediationState) -> Phase:
    return _INDEXED_PHASE.get(state.phase, state.phase)


def static_summary(node: str, finding: Finding, runbook: Runbook) -> str:
    """The one line the UI's workflow list shows: "node-17: Xid 79 on GPU 3 → gpu-fallen-off-bus
    (reboot, replace), as it began". Set once at the start (the server keeps no later one), so it
    says so: a worse fault's runbook that took over since is in the current details."""
    ladder = ", ".join(r.action.value for r in runbook.ladder) or "hold for a human"
    return visible(f"{node}: {finding.headline()} → {runbook.name} ({ladder}), as it began")[:200]


def remediation_details(state: RemediationState) -> str:
    """The workflow's current details (Markdown) in the Web UI. Plain lines and a list: this
    UI's renderer runs a table's cells together. Rungs count from 1, and on through a change of
    runbooks (remedy.core.numbering)."""
    node = state.node.name
    if state.runbook is None or state.trigger is None:
        return visible(
            "\n".join([f"### {node}", "Waiting for the first finding.", *_refusals(state)])
        )
    runbook, trigger = state.runbook, state.trigger
    began = first_fault(state)
    lines = [
        f"### {node}: {trigger.headline()}"
        + (f" (the ladder began with {began})" if began != trigger.headline() else ""),
        f"**Runbook** `{runbook.name}` ({runbook.cause.value}) · **pool** `{state.node.pool}`"
        f" · **phase** {phase_name(state)}"
        + (f" since {at(state.phase_since)}" if state.phase_since else ""),
    ]
    if trigger.evidence:
        lines.append(f"**Evidence** {trigger.evidence}")
    if (
        state.sent_by
    ):  # the door checked who (remedy.ladder.intake); the runbook is the controller's
        lines.append(f"**Reported by** {state.sent_by} · **runbook version** {version(runbook)}")
    if state.resumed:
        lines.append(f"**Recurrence** {state.resumed}")
    lines += [
        f"**{e.kind.capitalize()}** {e.describe(first_number(state.escalations, n))}"
        for n, e in enumerate(state.escalations, start=1)
    ]
    lines.append(f"**Rung** {_rung_line(state)}")
    lines.append(f"**Next** {_next_step(state)}")
    abort = f'`remedy abort {node} --reason "..."`'
    if state.phase is Phase.AWAITING_APPROVAL:  # only then is there anything to approve
        lines.append(f"**Approve** `remedy approve {node}` · **abort** {abort}")
    elif state.outcome is None:
        lines.append(f"**Abort** {abort}")
    lines += [
        f"**Approved** rung {state.number_of(a.rung, a.epoch)} by {a.who} at {at(a.at)}"
        + (f": {a.note}" if a.note else "")
        for a in state.approvals
    ]
    now = under_way(state)
    if state.attempts or now:
        lines += ["", "**Ladder so far**", ""]
        lines += [_attempt_line(state, a) for a in state.attempts]
        if now is not None:
            since = f" since {at(now.since)}" if now.since else ""
            how = f" — {now.how}" if now.how else ""
            lines.append(f"- **rung {now.number} {now.action}**: {now.phase}{since}{how}")
    if faults := waiting(state):
        lines += ["", "**Waiting their turn**", ""]
        lines += [f"- {w.describe()}" for w in faults]
    lines += _refusals(state)
    # The evidence and the attempts' details are what nodes said: shown, never obeyed.
    return visible("\n".join(lines))


def _refusals(state: RemediationState) -> list[str]:
    """What the ladder refused (workflows/door.py): the latest, and how many in all."""
    if not state.refusals:
        return []
    lines = ["", f"**Refused** {state.refusals} message(s), the latest:", ""]
    return lines + [f"- {at(r.at)} {r.verb}: {r.why}" for r in state.refused]


def at(when: datetime) -> str:
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"


def first_fault(state: RemediationState) -> str:
    """The fault the ladder began with: the trigger, unless another took over since."""
    began = next((e.from_fault for e in state.escalations if e.from_fault), "")
    return began or (state.trigger.headline() if state.trigger else "")


def phase_name(state: RemediationState) -> str:
    if state.phase is Phase.RESTORING:  # past the ladder, though the workflow still runs
        return "restoring (giving the node back; the ladder ends after it)"
    return state.phase.value.replace("_", " ")


def approval_deadline(state: RemediationState) -> datetime | None:
    """When the approval waited for now runs out (None: none waits, or it never does)."""
    ladder = state.runbook.ladder if state.runbook else []
    if state.phase is not Phase.AWAITING_APPROVAL or state.phase_since is None:
        return None
    if state.rung >= len(ladder):
        return None
    rung = ladder[state.rung]
    if rung.on_approval_timeout is OnApprovalTimeout.WAIT:
        return None
    return state.phase_since + rung.approval_timeout


def _attempt_line(state: RemediationState, a: Attempt) -> str:
    number = state.number_of(a.rung, a.epoch)
    step = f"rung {number} {a.action.value}" if a.rung >= 0 else a.action.value
    return f"- **{step}**: {a.result.value.replace('_', ' ')} at {at(a.started_at)} — " + clip(
        a.detail.replace("\n", " ")
    )


def clip(text: str, limit: int = 160) -> str:
    """At most ``limit`` characters, cut between words."""
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " …"


def _rung_line(state: RemediationState) -> str:
    ladder = state.runbook.ladder if state.runbook else []
    if not ladder:
        return "none (the runbook holds the node for a human)"
    if state.phase in (Phase.WAITING, Phase.HELD_FOR_PERSON, Phase.TOLERATING):
        return f"not climbing yet; first rung {ladder[0].action.value}"
    if state.phase is Phase.RESTORING:
        return f"none: past the ladder ({len(ladder)} rungs), restoring the node"
    if state.rung >= len(ladder):
        return f"past the last of {len(ladder)}"
    last = state.number_of(len(ladder) - 1)  # on from the runbooks before, if any
    return f"{state.number_of(state.rung)} of {last}: {ladder[state.rung].action.value}"


def _deadline(state: RemediationState, rung: Rung) -> str:
    """What an unanswered approval of the rung comes to (``on_approval_timeout``), and when."""
    if rung.on_approval_timeout is OnApprovalTimeout.WAIT:
        return "no deadline"
    timeout = format_duration(rung.approval_timeout)
    deadline = approval_deadline(state)
    by = f"at {at(deadline)}, {timeout} after it was asked" if deadline else f"after {timeout}"
    return f"times out {by}: {rung.on_approval_timeout.comes_to()}"


def _next_step(state: RemediationState) -> str:
    if state.outcome is not None:
        return f"none: {state.outcome.value} — {state.outcome_detail}"
    ladder = state.runbook.ladder if state.runbook else []
    rung = ladder[state.rung] if state.rung < len(ladder) else None
    action = rung.action.value if rung else "the end of the ladder"
    match state.phase:
        case Phase.TOLERATING:
            ends = at(state.tolerance_ends_at) if state.tolerance_ends_at else "soon"
            return f"tolerance window until {ends}; a clean re-probe ends it, else {action}"
        case Phase.AWAITING_APPROVAL if rung is not None and state.consent is Consent.UNDRAINED:
            return (
                f"**waiting for approval** to {action} the node undrained (its drain failed; "
                f"{_deadline(state, rung)}): `remedy approve {state.node.name}`"
            )
        case Phase.AWAITING_APPROVAL if rung is not None:
            return (
                f"**waiting for approval** of {action} ({_deadline(state, rung)}): "
                f"`remedy approve {state.node.name}`"
            )
        case Phase.AWAITING_LEASE:
            # The place in line changes with every grant: read from the budget when asked,
            # not signalled to every waiter (their histories stay quiet).
            pool, node = state.node.pool, state.node.name
            return (
                f"waiting for a disruption lease in pool `{pool}`, then {action}; its place in "
                f"line and who holds the pool: `remedy show {node}`, "
                f"`remedy status --blocking --pool {pool}`, or the pool's DisruptionBudget page"
            )
        case Phase.HELD_BY_BREAKER:
            held = [p for p in state.cordon_asked_of or [] if p not in state.cordon_leave]
            return (
                f"**held by the quarantine breaker** of {', '.join(held) or 'its pool'}: too "
                f"many nodes went bad at once, so the cordon waits until the storm subsides "
                f"(`remedy resume-pool {held[0] if held else state.node.pool}` ends it)"
            )
        case Phase.HELD_FOR_PERSON if state.held is not None:
            return held_note(state.held, state.node.name, state.reports_received)
        case Phase.SETTLING if rung is not None:
            return f"settling after {action}, then {verification(state, rung)}"
        case Phase.VERIFYING if rung is not None:
            return f"verification of {action}: {verification(state, rung)}"
        case Phase.RESTORING:
            restored = bool(state.attempts) and state.attempts[-1].action is Action.RESTORE
            if restored:
                return "the node is given back; the ladder closes (its lease, its record)"
            return "restore the node (uncordon, return its GPUs); then the ladder ends"
        case Phase.ACTING:
            needs = " (approval required)" if rung and rung.approval is Approval.REQUIRED else ""
            return f"{action}{needs}, then a verification probe"
        case _:
            return "waiting for the first finding"
