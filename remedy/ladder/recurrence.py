"""Recurrence: a fault back on the same GPU soon after a ladder declared it recovered.

The rung that "recovered" it did not fix it (a verification that could not see the fault, or a
fault that outlasts its cure), so climbing it again would only repeat the false recovery. The
new ladder resumes **above** that rung, from the GPU's hardware record, which keeps for each
incident the runbook and the rung that ended it (``remedy.ladder.hardware.Incident``).

Worked example: runbook ``gpu-reset-class`` (drain, reset_gpu, reboot, diagnose, replace),
``recurrence_window: 24h``. On Monday 10:00 the reset (rung 1) recovers Xid 62 on SN42. Xid 62
on SN42 again on Monday 16:00: the new ladder drains (rung 0: the node took work again after
its recovery, and a reboot needs it empty), then starts at rung 2, reboot. Again on Wednesday:
more than 24 h after the last recovery, so from the bottom (drain).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from remedy.core.durations import format_duration
from remedy.core.models import Action, Frozen
from remedy.ladder.hardware import Incident
from remedy.runbook.schema import Runbook

RECOVERED = "recovered"  # remedy.ladder.remediation.Outcome.RECOVERED, as the record keeps it
# Rungs that clear the node of work: a resumed ladder runs those below its rung first, since
# the node went back to work after the recovery and the rung above expects it empty.
CLEARS_THE_NODE = (Action.DRAIN, Action.KILL_JOB)


class PastIncidents(Frozen):
    """The incidents kept for some GPU serials (their hardware records)."""

    incidents: list[Incident] = []


class Resume(Frozen):
    rung: int  # where the new ladder starts
    after: Incident  # the recovery that did not hold
    prepare: list[int] = []  # the rungs below it that clear the node, run first

    def describe(self, runbook: Runbook) -> str:
        ladder = runbook.ladder
        above = self.after.action or (
            ladder[self.rung - 1].action.value if 0 < self.rung <= len(ladder) else "?"
        )
        nxt = ladder[self.rung].action.value if self.rung < len(ladder) else "nothing: a human"
        return (
            f"back within {format_duration(runbook.recurrence_window)} of its recovery by {above} "
            f"at {self.after.at:%Y-%m-%d %H:%M} ({self.after.node}): resuming at {nxt}"
        )


def resume_rung(runbook: Runbook, incidents: list[Incident], now: datetime) -> Resume | None:
    """Where a new ladder of ``runbook`` starts, given the incidents of its GPU(s): the rung
    after the one that recovered the latest incident of the same runbook inside the runbook's
    recurrence window; None (the bottom) when there is none. It may be past the last rung: the
    whole ladder was tried, and the node goes to a human."""
    window = runbook.recurrence_window
    if window <= timedelta(0):
        return None
    recent = [
        i
        for i in incidents
        if i.outcome == RECOVERED
        and i.runbook == runbook.name
        and i.rung is not None
        and now - window <= i.at <= now
    ]
    if not recent:
        return None
    last = max(recent, key=lambda i: i.at)
    assert last.rung is not None
    rung = last.rung + 1
    below = runbook.ladder[: min(rung, len(runbook.ladder))]
    prepare = [i for i, r in enumerate(below) if r.action in CLEARS_THE_NODE]
    return Resume(rung=rung, after=last, prepare=prepare if rung < len(runbook.ladder) else [])
