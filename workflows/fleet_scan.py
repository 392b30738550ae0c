"""FleetScan: one pass over the fleet, run by a Temporal Schedule (overlap: skip).

Reconciles what the cluster says with what remedy is doing: a node with a problem condition and
no remediation gets one (its agent died, or another detector set the condition); a new node
behind the admission taint gets its admission; and the fleet summary per pool is the result
(and the workflow's details in the UI), which `remedy status` reads. With ``watch_jobs``, the
failed pods of guarded jobs go to their guards and the guards of finished jobs end.

Silence is judged fleet-wide first (remedy.disruption.quarantine.silence_storm): many agents silent
at once
start no AgentSilent ladder; the scan alerts once per storm (the last scan's summary, which the
schedule hands to the next, says whether the storm is new).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows import metrics

with workflow.unsafe.imports_passed_through():
    from contract.names import FLEET_SCAN_WORKFLOW, node_task_queue
    from remedy.attribution.evidence import JobFailureReport
    from remedy.attribution.job_report import GoodputWatch
    from remedy.core.models import NodeRef
    from remedy.detection.node_facts import NodeFacts
    from remedy.disruption.budget import CLUSTER_POOL
    from remedy.disruption.quarantine import (
        Alert,
        SilenceStorm,
        silence_alert,
        silence_over,
        silence_storm,
    )
    from remedy.scan.admission import AdmissionInput
    from remedy.scan.fleet import (
        ConditionStart,
        FindingStart,
        FleetSummary,
        NodeStatus,
        OpenWork,
        ScanInput,
        judge_liveness,
        ladder_phases,
        plan_scan,
        summarise,
    )
    from remedy.scan.liveness import Sightings, agent_silent
    from remedy.scan.orphans import OrphanCheck

RETRY = RetryPolicy(initial_interval=timedelta(seconds=2), maximum_attempts=3)


@workflow.defn(name=FLEET_SCAN_WORKFLOW)
class FleetScan:
    @workflow.run
    async def run(self, inp: ScanInput) -> FleetSummary:
        listing_from = workflow.now()
        fleet = await act.FLEET_NODES.execute(
            None,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RETRY,
            summary="list the fleet's nodes",
        )
        nodes = fleet.nodes
        work = await act.OPEN_WORK.execute(
            None,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RETRY,
            summary="running remediations and admissions",
        )
        # liveness on the controller's clock, from the scan before's result
        nodes, seen = judge_liveness(nodes, _seen_before(), listing_from, workflow.now())
        plan = plan_scan(nodes, work, inp.agent_silent_after)
        here = workflow.info().task_queue
        # All starts at once: 150 nodes whose agents died should not wait on each other.
        await asyncio.gather(
            *(
                act.REMEDIATE_CONDITION.execute(
                    ConditionStart(
                        node=node,
                        condition=node.problems[0],
                        task_queue=here,
                        node_task_queue=inp.node_task_queue or node_task_queue(node.name),
                    ),
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RETRY,
                    summary=f"remediate {node.name}: {node.problems[0].reason}",
                )
                for node in plan.remediate
            )
        )
        admit = plan.admit if inp.admit_new_nodes else []
        await asyncio.gather(
            *(
                act.START_ADMISSION.execute(
                    AdmissionInput(
                        node=NodeRef(name=node.name, pool=node.pool),
                        policy=inp.admission,
                        node_task_queue=inp.node_task_queue or node_task_queue(node.name),
                    ),
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RETRY,
                    summary=f"admit {node.name}",
                )
                for node in admit
            )
        )
        orphans: list[str] = []
        if plan.cordoned:
            try:
                orphans = await self._adopt_orphans(plan.cordoned, inp)
            except ActivityError as err:  # the rest of the scan still counts
                workflow.logger.warning("orphaned cordons not adopted: %s", err)
        quiet = await self._silence(nodes, plan.silent, inp)
        laddered = [n for n in plan.silent if quiet is None or n.pool not in quiet.pools]
        silent = await self._silent(laddered, inp) if laddered else []
        started_remediations = [n.name for n in plan.remediate] + orphans + silent
        started_admissions = [n.name for n in admit]
        work = OpenWork(
            remediating=sorted([*work.remediating, *started_remediations]),
            admitting=sorted([*work.admitting, *started_admissions]),
            checking=work.checking,
            ladders=work.ladders,
        )
        summary = summarise(nodes, work, workflow.now(), inp.agent_silent_after)
        summary.started_remediations, summary.started_admissions = (
            started_remediations,
            started_admissions,
        )
        summary.orphaned_cordons, summary.silence = orphans, quiet
        summary.liveness = seen
        for pool in summary.pools:
            metrics.clock_skew(pool.pool, pool.skewed, pool.largest_skew_s)
            metrics.fleet_nodes(pool.pool, {s.value: pool.count(s) for s in NodeStatus})
        pool_of = {n.name: n.pool for n in nodes}
        phases = ladder_phases(work.ladders, pool_of, workflow.now())
        for (pool_name, phase), (running, oldest_s) in phases.items():
            metrics.ladders(pool_name, phase, running, oldest_s)
        if inp.watch_jobs:
            try:
                summary.job_failures_reported, summary.guards_finished = await self._watch_jobs(inp)
            except ActivityError as err:  # the nodes' side of the scan still counts
                summary.job_watch_error = str(err.cause or err)
            await self._goodput(summary, inp)
        workflow.set_current_details(summary.markdown())
        metrics.fleet_scanned()
        return summary

    async def _adopt_orphans(self, cordoned: list[NodeFacts], inp: ScanInput) -> list[str]:
        """remedy's cordon with no ladder running: each one nobody owns gets a ladder."""
        adopted = await act.ADOPT_ORPHANS.execute(
            OrphanCheck(
                nodes=[NodeRef(name=n.name, pool=n.pool) for n in cordoned],
                task_queue=workflow.info().task_queue,
                node_task_queue=inp.node_task_queue,
                agent_cordoned_at={
                    n.name: n.agent_cordoned_at for n in cordoned if n.agent_cordoned_at
                },
            ),
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RETRY,
            summary=f"which of {len(cordoned)} cordoned nodes no ladder owns",
        )
        return adopted.nodes

    async def _silence(
        self, nodes: list[NodeFacts], silent: list[NodeFacts], inp: ScanInput
    ) -> SilenceStorm | None:
        """Whether the silent agents are a storm; an alert when one begins or ends, and the
        gauges every scan."""
        last = _last_scan()
        before = last.silence if last is not None else None
        now = workflow.now()
        quiet = silence_storm(nodes, silent, inp.silence_share, inp.silence_min_nodes, now, before)
        if quiet is not None and before is None:
            await self._alert(silence_alert(quiet))
            workflow.logger.warning("silence storm: %s", quiet.note())
        elif quiet is None and before is not None:
            await self._alert(silence_over(before, now))
        for pool in sorted({n.pool for n in nodes}):
            in_pool = sum(1 for n in silent if n.pool == pool)
            metrics.agents_silent(pool, in_pool, quiet is not None and pool in quiet.pools)
        metrics.agents_silent(CLUSTER_POOL, len(silent), quiet is not None and quiet.fleet_wide)
        return quiet

    async def _alert(self, alert: Alert) -> None:
        try:
            await act.ALERT.execute(
                alert,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=RETRY,
                summary=f"alert: {alert.reason}",
            )
        except ActivityError as err:  # the summary, the details and the metric still say it
            workflow.logger.warning("no Event for %s: %s", alert.reason, err)

    async def _silent(self, silent: list[NodeFacts], inp: ScanInput) -> list[str]:
        """Agents whose heartbeat went stale: each node gets an AgentSilent ladder."""
        here = workflow.info().task_queue
        started = await asyncio.gather(
            *(
                act.REMEDIATE_FINDING.execute(
                    FindingStart(
                        node=NodeRef(name=node.name, pool=node.pool),
                        finding=agent_silent(
                            node.name,
                            node.last_heartbeat or workflow.now(),
                            node.silent_for or timedelta(0),
                        ),
                        task_queue=here,
                        node_task_queue=inp.node_task_queue or node_task_queue(node.name),
                    ),
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RETRY,
                    summary=f"remediate {node.name}: its agent is silent",
                )
                for node in silent
            ),
            return_exceptions=True,  # one start that fails does not fail the scan
        )
        for node, outcome in zip(silent, started, strict=True):
            if isinstance(outcome, BaseException):
                workflow.logger.warning("%s: no AgentSilent ladder: %s", node.name, outcome)
        return [
            n.name for n, o in zip(silent, started, strict=True) if not isinstance(o, BaseException)
        ]

    async def _watch_jobs(self, inp: ScanInput) -> tuple[list[str], list[str]]:
        guarded = await act.GUARDED_JOB_FAILURES.execute(
            None,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RETRY,
            summary="failed pods of guarded jobs",
        )
        failures = guarded.failures
        here = workflow.info().task_queue
        await asyncio.gather(
            *(
                act.REPORT_JOB_FAILURE.execute(
                    JobFailureReport(
                        failure=failure,
                        policy=inp.guard_policy,
                        controller_task_queue=here,
                        node_task_queue=inp.node_task_queue or "",
                    ),
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RETRY,
                    summary=f"{failure.job}: {failure.failure.pod} failed",
                )
                for failure in failures
            )
        )
        finished = await act.END_FINISHED_GUARDS.execute(
            None,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RETRY,
            summary="end the guards of finished jobs",
        )
        return [f"{f.job}: {f.failure.pod}" for f in failures], finished.jobs

    async def _goodput(self, summary: FleetSummary, inp: ScanInput) -> None:
        """Each guarded job's goodput (to its guard) and each pool's: the summary and gauges."""
        watch = GoodputWatch(
            policy=inp.guard_policy,
            controller_task_queue=workflow.info().task_queue,
            node_task_queue=inp.node_task_queue or "",
        )
        try:
            summary.goodput = await act.JOB_GOODPUT.execute(
                watch,
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=RETRY,
                summary="goodput of guarded jobs",
            )
        except ActivityError as err:  # the failures' side of the watch still counts
            summary.job_watch_error = str(err.cause or err)
            return
        for pool in summary.goodput.pools:
            if pool.ratio is not None:
                metrics.pool_goodput(pool.pool, pool.ratio)


def _last_scan() -> FleetSummary | None:
    """The scan before's result: a schedule hands each run the last one that completed. None
    for a first scan, or a result that cannot be read (no memory, not a stuck scan)."""
    try:
        last = workflow.get_last_completion_result(FleetSummary)
    except Exception as err:  # noqa: BLE001 - an unreadable memory is no memory, not a stuck scan
        workflow.logger.warning("the last scan's result is unreadable: %s", err)
        return None
    return last if isinstance(last, FleetSummary) else None


def _seen_before() -> Sightings:
    """What the scan before saw of the heartbeats. Nothing starts every node's clock now."""
    last = _last_scan()
    return last.liveness if last is not None else Sightings()
