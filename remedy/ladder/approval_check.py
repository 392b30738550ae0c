"""Whether an operator's approval goes ahead (remedy.ladder.remediation's ApproveRequest, on a
ladder's
state): the rung waiting now, or with ``ahead`` a rung above it, named by its number as people
see it (remedy.core.numbering). A refusal says why in one line, with where the ladder stands.

The old wire form (``rung``, an index from 0, from clients of the release before) approves only
the rung waiting now: read as a number it names the rung below, and a person typing the number
they see (``{"rung": 4}`` on "Rung 4 of 4") named the rung above, which a ladder of the release
before took as an approval ahead of time."""

from __future__ import annotations

from remedy.ladder.remediation import Phase, RemediationState
from remedy.trust.decisions import ApproveRequest


def why_not_approve(
    state: RemediationState, req: ApproveRequest, old_form_strict: bool = True
) -> str:
    """Why an approval would change nothing, or might do what its sender did not mean (empty:
    go ahead). The rung waiting now, or, with ``ahead``, a rung above it; never one the ladder
    passed, or one needing no approval. ``old_form_strict`` False: a run from before, which
    took the old form's index ahead of the ladder (its signals replayed as they were)."""
    if state.outcome is not None or state.phase is Phase.DONE:
        return f"the ladder is finished ({state.outcome or 'done'}): nothing to approve"
    named = req.rung_number is not None or req.rung is not None
    if not named and state.phase is not Phase.AWAITING_APPROVAL:
        return f"nothing waits for approval (the ladder is {state.phase.value})"
    why = _why_not_rung(state, req, old_form_strict)
    if why and req.rung_number is None and req.rung is not None:  # the old form: say it now
        why += (
            f'; the old field "rung" counts from 0 ({{"rung": {req.rung}}} is rung '
            f'{state.number_of(req.rung)}): send "rung_number", counted from 1 as shown'
        )
    return why


def _why_not_rung(state: RemediationState, req: ApproveRequest, old_form_strict: bool) -> str:
    ladder = state.runbook.ladder if state.runbook else []
    rung = state.requested_rung(req)
    said = f"rung {state.number_of(rung)}"
    old = req.rung_number is None and req.rung is not None
    if req.rung_number is not None and req.rung is not None and req.rung != rung:
        return (
            f"rung_number {req.rung_number} and rung {req.rung} (the old form, counted from 0) "
            "name different rungs: send rung_number alone"
        )
    if rung < 0:  # a rung of a runbook the ladder left (remedy.core.numbering)
        return f"{said} is behind the ladder, in a runbook it left (now at {_now(state)})"
    if rung >= len(ladder):
        first, last = state.number_of(0), state.number_of(len(ladder) - 1)
        return f"no {said} in the ladder (rungs {first} to {last}; now at {_now(state)})"
    action = ladder[rung].action.value
    consent = state.waits_for(rung)
    if consent is None:
        return f"{said} ({action}) needs no approval"
    if rung < state.rung:
        return f"{said} ({action}) is behind the ladder (now at {_now(state)})"
    waiting = state.phase is Phase.AWAITING_APPROVAL and rung == state.rung
    named = req.rung_number is not None or req.rung is not None
    if named and not waiting and old and old_form_strict:
        return f"{said} ({action}) is not the rung waiting for approval (now {_now(state)})"
    if named and not waiting and not old and not req.ahead:
        return (
            f"{said} ({action}) is not the rung waiting for approval (now {_now(state)}): "
            'to approve it ahead of time, say so ("ahead": true; remedy approve --ahead)'
        )
    done = next(
        (
            a
            for a in state.approvals
            if a.rung == rung and a.epoch == state.epoch and a.consent is consent
        ),
        None,
    )
    if done is not None:
        return f"{said} ({action}) was already approved by {done.who} at {done.at:%H:%M:%S}"
    return ""


def _now(state: RemediationState) -> str:
    """Where the ladder stands, for a refusal: "rung 4 (replace), awaiting approval"."""
    ladder = state.runbook.ladder if state.runbook else []
    at = f"rung {state.number_of(state.rung)}"
    if state.rung < len(ladder):
        at += f" ({ladder[state.rung].action.value})"
    return f"{at}, {state.phase.value.replace('_', ' ')}"
