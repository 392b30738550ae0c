"""`remedy runbooks rehearse`: climb a runbook for real — the NodeRemediation workflow, its
activities, a disruption budget — against one simulated node on Temporal's time-skipping test
server, so hours of tolerance windows, settles and approval timeouts pass in about a second.

The simulated fault decides which rung fixes the node (a reset clears an ECC error, only a
reboot brings back a GPU that fell off the bus), so the rehearsal shows where the ladder would
stop, not only what it would try."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.testing import WorkflowEnvironment

from adapters.sim.identity import as_agent
from contract.messages import APPROVE, REMEDIATION_STATE
from remedy.core.durations import format_duration
from remedy.core.models import Action, Component, Finding, NodeRef, Severity
from remedy.core.numbering import rung_label, rung_number
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.remediation import Attempt, Escalation, FindingReport, RemediationResult
from remedy.runbook import Runbook, RunbookSet
from remedy.runbook.authored import Approval
from remedy.trust.decisions import ApproveRequest
from workers.binaries import installed_binary
from workers.client import ensure_search_attributes, report_finding
from workers.controller import controller_worker, node_agent_worker
from workers.door import DoorSettings
from workers.providers.sim import FAULTS, SimProvider, SimSettings
from workers.rehearsal_clock import ServerClock

NO_FAULT = "none"
QUIET = Runtime(
    telemetry=TelemetryConfig(
        logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    )
)
WALKS_THE_WHOLE_LADDER = "remap_failure"  # only a replacement fixes it
QUEUE, AGENTS = "rehearsal", "rehearsal-agents"
WALL_LIMIT_S = 120.0
# Each check's timeout, in wall time: the probe's own default. A hung GPU holds every probe to
# it (gpu_hang's five rechecks: about 25 s), but a stall of this process is not a hung GPU: at
# 0.2 s a busy test run's pause (a garbage collection holding the GIL) timed out a check and
# escalated a reset that had worked, and at 1 s `make test-stress` (every core busy) timed out
# the slow-node proof's checks, which sent its ladder to another runbook.
CHECK_TIMEOUT_S = 5.0


class RehearsalStuck(Exception):
    pass


class Rehearsal(BaseModel):
    runbook: str
    fault: str
    fixed_by: list[str]
    finding: str
    approved: bool
    result: RemediationResult
    started_at: datetime  # workflow time of the first report
    fault_left: bool = False  # the simulated fault was still on the node when the ladder ended
    wall_s: float


def fault_for(runbook: Runbook) -> str:
    """The first simulated fault whose finding the runbook matches; else one that only a
    replacement fixes, so the rehearsal walks every rung."""
    for name, spec in FAULTS.items():
        if runbook.specificity(spec.report("n", 0, "s", datetime.now(UTC))) is not None:
            return name
    return WALKS_THE_WHOLE_LADDER


def finding_for(runbook: Runbook, physical: Finding | None, node: str, now: datetime) -> Finding:
    """What the agent reports: the fault's own finding when the runbook matches it, else one
    built from the runbook's first match clause (the runbook under rehearsal must be climbed)."""
    if physical is not None and runbook.specificity(physical) is not None:
        return physical
    clause = runbook.match[0]
    xid = clause.xids[0] if clause.xids else None
    reason = clause.reasons[0] if clause.reasons else f"Xid{xid}" if xid else "Rehearsal"
    return Finding(
        node=node,
        check=clause.checks[0] if clause.checks else "rehearsal",
        reason=reason,
        xid=xid,
        severity=clause.severities[0] if clause.severities else Severity.CRITICAL,
        component=physical.component if physical else Component(),
        evidence="rehearsal",
        observed_at=now,
        nvidia_action=clause.nvidia_actions[0] if clause.nvidia_actions else None,
    )


def known_beside(runbook: Runbook, others: RunbookSet | None) -> RunbookSet:
    """The controller's runbooks in a rehearsal: the one rehearsed, and for a proving one
    (``proves``) the others too, which the proof hands the ladder to."""
    beside = [r for r in others or [] if r.name != runbook.name] if runbook.proves else []
    return RunbookSet([runbook, *beside])


async def rehearse(
    runbook: Runbook,
    fault: str | None = None,
    approve: bool = True,
    gpu: int = 0,
    present: bool = True,
    others: RunbookSet | None = None,
) -> Rehearsal:
    """``present=False``: the fault is reported but gone before the first re-probe.
    ``others``: the runbooks beside it, for a runbook whose first rung proves a suspicion: the
    fault the proof finds climbs its own runbook (a runbook alone is rehearsed alone)."""
    fault = fault or fault_for(runbook)
    if fault != NO_FAULT and fault not in FAULTS:
        raise KeyError(f"unknown fault {fault!r}; known: {NO_FAULT}, {', '.join(FAULTS)}")
    began = datetime.now(UTC)
    # The actions that fail on purpose (a reset cannot reach a lost GPU) are the rehearsal's
    # story, told in the timeline: keep their tracebacks and the test server's notes quiet.
    # So is the budget's note that this server cannot list workflows (no lease holders yet).
    quieted = [logging.getLogger(name) for name in ("temporalio", "activities.budget")]
    levels = [log.level for log in quieted]
    for log in quieted:
        log.setLevel(logging.CRITICAL)
    clock = ServerClock()  # the node's faults age on the workflow's (skipped) time
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter,
        interceptors=[clock],
        runtime=QUIET,
        test_server_existing_path=installed_binary("temporal-test-server"),
    )
    try:
        await ensure_search_attributes(env.client)
        await clock.sync(env)
        fleet = SimProvider(
            SimSettings(
                nodes=1, pool="rehearsal", name_prefix="rehearsal", check_timeout_s=CHECK_TIMEOUT_S
            ),
            clock,
        ).fleet
        [node] = sorted(fleet.nodes)
        now = clock()
        if fault == NO_FAULT:
            physical = None
        elif present:
            physical = fleet.inject(node, fault, gpu)
        else:  # reported, and gone by the first re-probe (a transient)
            physical = FAULTS[fault].report(node, gpu, fleet.node(node).gpus[gpu].serial, now)
        finding = finding_for(runbook, physical, node, now)
        # One node alone in its pool is 100 % of it: let the budget grant it a lease.
        policy = BudgetPolicy(max_disruption="1", storm_share=1.0)
        with ThreadPoolExecutor(max_workers=4) as executor:
            async with (
                controller_worker(
                    env.client,
                    fleet.cluster,
                    executor,
                    QUEUE,
                    policy,
                    known_beside(runbook, others),
                    door=DoorSettings(agents_queue=AGENTS),
                ),
                node_agent_worker(env.client, fleet.host, executor, AGENTS),
            ):
                handle = await report_finding(
                    env.client,
                    NodeRef(name=node, pool="rehearsal"),
                    as_agent(
                        FindingReport(finding=finding, runbook=runbook),
                        datetime.now(UTC),
                    ),
                    node_task_queue=AGENTS,
                    task_queue=QUEUE,
                )
                if approve:  # ahead of time: each approval is given the moment it is asked
                    for index, rung in enumerate(runbook.ladder):
                        if rung.approval is Approval.REQUIRED:
                            ahead = ApproveRequest(
                                by="rehearsal", rung_number=rung_number(index), ahead=True
                            )
                            await APPROVE.send(handle, ahead)
                try:  # hours of workflow time take about a second: minutes mean it is stuck
                    result = await asyncio.wait_for(handle.result(), WALL_LIMIT_S)
                except TimeoutError:
                    phase = (await REMEDIATION_STATE.ask(handle)).phase
                    raise RehearsalStuck(
                        f"{runbook.name}: no outcome within {WALL_LIMIT_S:g} s of wall time; "
                        f"last phase: {phase}"
                    ) from None
                started = (await handle.describe()).start_time
        # What the ladder left on the node: "recovered" with the fault still there is false.
        left = present and any(
            f.kind == fault and not f.expired(fleet.clock()) for f in fleet.node(node).faults
        )
    finally:
        await env.shutdown()
        for log, level in zip(quieted, levels, strict=True):
            log.setLevel(level)
    spec = FAULTS.get(fault)
    return Rehearsal(
        runbook=runbook.name,
        fault=fault,
        fixed_by=[a.value for a in Action if spec and a in spec.fixed_by]
        + (["time"] if spec and spec.passes else []),
        finding=finding.headline(),
        approved=approve,
        result=result,
        started_at=started,
        fault_left=left,
        wall_s=(datetime.now(UTC) - began).total_seconds(),
    )


def timeline(rehearsal: Rehearsal) -> list[str]:
    result = rehearsal.result
    fixed = " or ".join(rehearsal.fixed_by) or "nothing (no fault)"
    lines = [
        f"rehearsal of {rehearsal.runbook}: simulated fault {rehearsal.fault} "
        f"(fixed by {fixed}); reported as {rehearsal.finding}"
        + ("" if rehearsal.approved else "; approvals withheld"),
        "",
    ]
    end = rehearsal.started_at
    for attempt in result.attempts:
        lines.append(_line(rehearsal.started_at, attempt, result.escalations))
        end = max(end, attempt.finished_at)
    lines += [
        "",
        f"outcome {result.outcome.value} after {_at(rehearsal.started_at, end)} "
        f"of workflow time: {result.detail}",
        f"(time-skipping server: {rehearsal.wall_s:.1f} s of wall time)",
    ]
    return lines


def _line(start: datetime, attempt: Attempt, escalations: list[Escalation]) -> str:
    rung = rung_label(attempt.rung, escalations, attempt.epoch)
    took = format_duration(attempt.finished_at - attempt.started_at)
    return (
        f"  T+{_at(start, attempt.started_at):<9} rung {rung:<2} "
        f"{attempt.action.value:<10} {attempt.result.value:<18} {took:>8}  {attempt.detail}"
    )


def _at(start: datetime, when: datetime) -> str:
    return format_duration(max(when - start, timedelta(0)))
