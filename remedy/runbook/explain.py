"""A runbook in plain words: what remedy will do, in which order, and by when at the latest.

The worst case adds up every bound the ladder has: the tolerance window, each approval's
timeout, each action's attempts × timeout plus the retry backoff between them, the settle
time and the verification: the probe, and for a runbook an Xid can trigger its quiet ``watch``
(no probe sees most Xids: the ladder waits that long for the Xid to come back, then reads the
node's Xids and probes again; remedy/ladder/verification.py). A wait for a disruption lease has no
bound (the pool's budget decides), nor has an approval with ``on_approval_timeout: wait``:
named, never added."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from remedy.core.actions import ACTIONS
from remedy.core.durations import format_duration
from remedy.core.models import Action, Scope
from remedy.core.numbering import rung_number
from remedy.runbook.authored import Approval, OnApprovalTimeout
from remedy.runbook.drain_first import clearing_rung, drain_like, drains_first
from remedy.runbook.schema import Match, Runbook, Rung
from remedy.runbook.undrained import IfNotDrained

WAIT = OnApprovalTimeout.WAIT
# A runbook that ``proves`` a suspicion: its first rung's verdict (workflows/node_remediation.py).
PROOF = (
    "a fault found → proven: that fault's runbook takes over (its cordon); "
    "passed → unproven, nothing done to the node"
)
PROOF_FAILED = "could not judge the node: outcome needs_human, no cordon (a person looks)"
DRAINS_FIRST = "no node drain before it: the ladder cordons and drains the node first (by then)"
FORCED = "no node drain before it, and if_not_drained: force: runs with the node's pods on it"

# The verification probe: two attempts of 60 s with 5 s between (workflows/node_remediation.py).
PROBE_WORST_CASE = timedelta(seconds=125)
XIDS_READ = timedelta(seconds=60)  # the read of the node's Xids after a watch (CLUSTER_CALL)
BOOT_ID_TIMEOUT = timedelta(seconds=60)


class RungTiming(BaseModel):
    index: int
    action: Action
    starts_by: timedelta  # the latest the rung can start, leases aside
    action_worst_case: timedelta
    ends_by: timedelta  # the latest the rung's verification can end, leases aside


def action_worst_case(rung: Rung) -> timedelta:
    """Every attempt runs to its timeout, with the retry backoff between attempts."""
    retry = rung.retry
    waits = timedelta(0)
    interval = retry.initial_interval
    for _ in range(retry.max_attempts - 1):
        waits += min(interval, max(retry.max_interval, retry.initial_interval))
        interval = interval * retry.backoff
    worst = rung.timeout * retry.max_attempts + waits
    if rung.action is Action.REBOOT:  # then the wait for the node to come back, and its boot id
        worst += rung.timeout + BOOT_ID_TIMEOUT
    return worst


def watched(runbook: Runbook) -> bool:
    """Whether an Xid can trigger the runbook, so a verified rung waits out its watch (the worst
    case: an Xid no probe sees)."""
    return runbook.watch > timedelta(0) and any(
        m.xids or m.nvidia_actions or any(r.startswith("Xid") for r in m.reasons)
        for m in runbook.match
    )


def verification_worst_case(runbook: Runbook, rung: Rung) -> timedelta:
    """The settle, the probe, and for a watched runbook the watch, the Xid read, a probe."""
    if not rung.verifies:
        return timedelta(0)
    watch = runbook.watch + XIDS_READ + PROBE_WORST_CASE if watched(runbook) else timedelta(0)
    return rung.settle + PROBE_WORST_CASE + watch


def timings(runbook: Runbook) -> list[RungTiming]:
    at = runbook.tolerance
    out = []
    for index, rung in enumerate(runbook.ladder):
        if rung.approval is Approval.REQUIRED and rung.on_approval_timeout is not WAIT:
            at += rung.approval_timeout  # it may come at the last moment (an endless one: named)
        if drains_first(runbook.ladder, index):  # the node's drain, under the rung
            at += action_worst_case(drain_like(runbook.ladder) or Rung(action=Action.DRAIN))
        worst = action_worst_case(rung)
        ends = at + worst + verification_worst_case(runbook, rung)
        out.append(
            RungTiming(
                index=index, action=rung.action, starts_by=at, action_worst_case=worst, ends_by=ends
            )
        )
        at = ends
    return out


def describe_match(match: Match) -> str:
    parts = []
    if match.xids:
        parts.append("Xid " + _either([str(x) for x in match.xids]))
    if match.checks:
        parts.append("check " + _either(match.checks))
    if match.reasons:
        parts.append("reason " + _either(match.reasons))
    if match.severities:
        parts.append("severity " + _either([s.value for s in match.severities]))
    if match.nvidia_actions:
        parts.append("NVIDIA's action " + _either(match.nvidia_actions))
    return " with ".join(parts)


def explain(runbook: Runbook) -> list[str]:
    """The ladder as sentences, one step a line, each with the latest time it can happen."""
    lines = [
        f"{runbook.name}: {runbook.description or '(no description)'}",
        f"cause: {runbook.cause.value}"
        + (
            " (hardware actions allowed)"
            if runbook.cause.value == "platform"
            else " (the job is at fault: never reset, reboot or replace)"
        ),
        "matches a finding with " + "; or ".join(describe_match(m) for m in runbook.match),
        "",
        "when it matches:",
    ]
    step = "  {:>12}  {}"
    lines.append(
        step.format(
            "at once",
            ACTIONS[Action.CORDON].does
            if runbook.cordon
            else "no cordon: a suspect keeps its work until proven"
            if runbook.proves
            else "no cordon: the node keeps taking work while tolerated",
        )
    )
    if runbook.tolerance > timedelta(0):
        recheck = (
            f", re-probing every {format_duration(runbook.recheck_every)}"
            if runbook.recheck_every
            else ""
        )
        lines.append(
            step.format(
                "0s",
                f"tolerate for {format_duration(runbook.tolerance)}"
                f"{recheck}; a clean probe ends it (cleared, restored)",
            )
        )
    else:
        lines.append(step.format("0s", "no tolerance window: the ladder starts at once"))
    for timing, rung in zip(timings(runbook), runbook.ladder, strict=True):
        forced = rung.if_not_drained is IfNotDrained.FORCE
        by = f"by {format_duration(timing.starts_by)}"
        spec = ACTIONS[rung.action]
        does = spec.on_one_gpu if rung.scope is Scope.GPU else spec.does
        lines.append(step.format(by, f"rung {rung_number(timing.index)}: {does}"))
        if rung.approval is Approval.REQUIRED:
            lines.append(
                step.format(
                    "",
                    "  needs approval (remedy approve NODE); "
                    + (
                        "no deadline (its wait is not counted here)"
                        if rung.on_approval_timeout is WAIT
                        else f"none within {format_duration(rung.approval_timeout)} → "
                        + rung.on_approval_timeout.comes_to()
                    ),
                )
            )
        if ACTIONS[rung.action].disruptive:
            lines.append(
                step.format(
                    "",
                    "  holds a disruption lease of the pool first (its wait is not counted here)",
                )
            )
        if drains_first(runbook.ladder, timing.index):
            lines.append(step.format("", f"  {DRAINS_FIRST}"))
        elif forced and clearing_rung(runbook.ladder, timing.index) is None:
            lines.append(step.format("", f"  {FORCED}"))
        tries = rung.retry.max_attempts
        comeback = " + the wait to come back" if rung.action is Action.REBOOT else ""
        lines.append(
            step.format(
                "",
                f"  takes at most {format_duration(timing.action_worst_case)}"
                f" ({tries} × {format_duration(rung.timeout)}"
                f"{' + retry backoff' if tries > 1 else ''}{comeback})",
            )
        )
        if runbook.proves and timing.index == 0:
            lines.append(step.format("", f"  {PROOF}"))
        elif rung.verifies:
            settle = f"settle {format_duration(rung.settle)}, then " if rung.settle else ""
            watch = (
                f", then for an Xid a {format_duration(runbook.watch)} watch for it again"
                if watched(runbook)
                else ""
            )
            lines.append(
                step.format(
                    "",
                    f"  {settle}re-probe{watch}: healthy → restore and stop "
                    f"(recovered); else the next rung",
                )
            )
        elif rung.action is Action.REPLACE:
            lines.append(step.format("", "  done: the node is gone (replaced)"))
        else:
            lines.append(step.format("", "  not verified (it prepares the next rung)"))
    end = timings(runbook)[-1].ends_by if runbook.ladder else runbook.tolerance
    if runbook.proves:
        lines.append(step.format(f"by {format_duration(end)}", PROOF_FAILED))
    elif not runbook.ladder or runbook.ladder[-1].action is not Action.REPLACE:
        lines.append(
            step.format(
                f"by {format_duration(end)}",
                "still unhealthy: the node stays cordoned, outcome needs_human",
            )
        )
    return lines


def _either(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
