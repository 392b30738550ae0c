"""What the job guard and the node's ladder do with a slow-node suspicion (issue 55), on the
time-skipping server with the simulator: the straggler report comes with the job's progress,
built here by hand (the detector, remedy/detection/stragglers, is tested on its own).

A suspect gets the job's checkpoint, then its node's ladder (runbooks/slow-node.yaml) whose
deep diagnose proves it: a load fault found → proven, the node climbs fails-under-load (cordon,
drain) and the job, its pod evicted, restarts at the size capacity allows; a pass → unproven,
nothing done to the node, and no new suspicion of it within the quiet period. The application's
nodes get no ladder; a suspect that waits unrenewed expires."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import pytest
from pydantic import ValidationError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.job_watch import JobWatchActivities
from adapters.sim import SimFleet
from adapters.sim.jobs import SimJobs
from contract.names import job_guard_workflow_id, remediation_workflow_id
from remedy.attribution.elastic import ElasticRange
from remedy.attribution.goodput import Event, JobGoodput, JobTimes, PodTime, Progress
from remedy.attribution.guard import GuardPolicy, JobLedger, JobProgress, JobRef
from remedy.attribution.job_report import named, progress_due
from remedy.attribution.model import PodFailure, RemediationSeen, Termination
from remedy.attribution.suspicions import (
    Suspicion,
    SuspicionPolicy,
    SuspicionState,
    expire,
    heard,
    next_to_prove,
)
from remedy.core.models import Finding, Severity
from remedy.detection.stragglers.models import (
    SLOW_NODE,
    STRAGGLERS,
    Cause,
    NodeSuspicion,
    SlowRank,
    StragglerReport,
)
from remedy.ladder.remediation import Outcome, RemediationState
from remedy.runbook import RunbookSet
from remedy.runbook.explain import PROOF, PROOF_FAILED, explain
from remedy.runbook.schema import Runbook
from tests.conftest import running_workers
from tests.ladder import report
from tests.test_guard_quiet import Clock, scans
from tests.test_job_guard import Guard, guard, guarded
from tests.test_pool_held_by_people import details
from workflows.job_guard import JobGuard
from workflows.node_remediation import NodeRemediation

T0 = datetime(2026, 12, 7, 12, 0)


def suspicion(node: str, at: datetime, cause: Cause = Cause.NODE) -> NodeSuspicion:
    return NodeSuspicion(
        node=node,
        cause=cause,
        score=0.82,
        ranks=[SlowRank(rank=8, pod="worker-1", score=0.82)],
        since=at - timedelta(minutes=5),
        until=at,
        buckets=5,
        slow_buckets=5,
        evidence="ranks 8-15 at 0.82 of the job's median compute time over 5 of 5 minutes",
    )


def straggler_report(
    job: str, at: datetime, suspects: tuple[str, ...] = (), application: tuple[str, ...] = ()
) -> StragglerReport:
    return StragglerReport(
        job=job,
        at=at,
        suspects=[suspicion(n, at) for n in suspects],
        application=[suspicion(n, at, Cause.APPLICATION) for n in application],
    )


# -- the ledger, pure -------------------------------------------------------------------------
def test_a_suspect_is_renewed_not_doubled_and_the_application_is_recorded_apart() -> None:
    policy = SuspicionPolicy()
    first = heard([], straggler_report("j", T0, ("n1",), ("n2",)), policy)
    later = T0 + timedelta(minutes=10)
    again = heard(first, straggler_report("j", later, ("n1",), ("n2",)), policy)
    assert [(s.node, s.state, s.first_seen, s.last_seen) for s in again] == [
        ("n1", SuspicionState.SUSPECTED, T0, later),
        ("n2", SuspicionState.APPLICATION, T0, later),
    ]
    assert next_to_prove(again) == again[0]  # never the application's node


def test_an_unrenewed_suspect_expires_when_it_did_and_an_unproven_node_is_quiet() -> None:
    policy = SuspicionPolicy()
    ledger = heard([], straggler_report("j", T0, ("n1",)), policy)
    assert expire(ledger, T0 + timedelta(minutes=29), policy) == ledger
    [gone] = expire(ledger, T0 + timedelta(hours=5), policy)
    assert gone.state is SuspicionState.EXPIRED and gone.ended_at == T0 + policy.expire_after
    unproven = Suspicion(
        node="n1",
        first_seen=T0,
        last_seen=T0,
        state=SuspicionState.UNPROVEN,
        ended_at=T0 + timedelta(minutes=10),
    )
    soon = heard([unproven], straggler_report("j", T0 + timedelta(minutes=50), ("n1",)), policy)
    assert soon == [unproven]  # within the hour: not suspected again
    late = heard([unproven], straggler_report("j", T0 + timedelta(hours=2), ("n1",)), policy)
    assert [s.state for s in late] == [SuspicionState.UNPROVEN, SuspicionState.SUSPECTED]


def test_a_report_whose_suspects_changed_is_handed_at_once() -> None:
    last = JobGoodput(job="ml/llm", at=T0, productive_s=90.0, paid_s=100.0)
    now = last.model_copy(update={"at": T0 + timedelta(seconds=30)})
    before = named(straggler_report("ml/llm", T0))
    after = named(straggler_report("ml/llm", T0, ("n1",)))
    assert before != after and named(None) == ()
    assert not progress_due(last, now)  # coalesced: nothing moved
    assert progress_due(last, now, suspects_changed=before != after)


def test_the_slow_node_runbook_proves_and_a_proving_runbook_must_not_cordon(
    shipped_runbooks: RunbookSet,
) -> None:
    finding = Finding(
        node="n1",
        check=STRAGGLERS.check,
        reason=SLOW_NODE,
        severity=Severity.WARNING,
        observed_at=T0,
    )
    runbook = shipped_runbooks.match(finding)
    assert runbook is not None and runbook.name == "slow-node" and runbook.proves
    said = "\n".join(explain(runbook))
    assert PROOF in said and PROOF_FAILED in said and "cordoned" not in said
    fields = runbook.model_dump(mode="json")
    with pytest.raises(ValidationError, match="does not cordon"):
        Runbook.model_validate({**fields, "cordon": True})
    with pytest.raises(ValidationError, match="first rung is diagnose"):
        Runbook.model_validate({**fields, "ladder": [{"action": "reboot"}]})


# -- the guard and the ladder, on the server --------------------------------------------------
async def progress(
    env: WorkflowEnvironment, handle: Guard, job: str, pool: str, **named: tuple[str, ...]
) -> None:
    now = await env.get_current_time()
    goodput = JobGoodput(job=job, pool=pool, at=now, productive_s=900.0, paid_s=1000.0)
    report = straggler_report(job, now, **named)
    await handle.signal(JobGuard.job_progress, JobProgress(goodput=goodput, stragglers=report))


def pool_of(fleet: SimFleet) -> str:
    return next(iter(fleet.nodes.values())).pool


async def ladder_of(env: WorkflowEnvironment, node: str) -> RemediationState:
    ladder = env.client.get_workflow_handle_for(NodeRemediation.run, remediation_workflow_id(node))
    return await ladder.query(NodeRemediation.state)


def of(ledger: JobLedger, node: str) -> list[SuspicionState]:
    return [s.state for s in ledger.suspicions if s.node == node]


def evicted(node: str, job: str, at: datetime, runbook: str) -> PodFailure:
    """The job's pod on the proven node, evicted by the drain of its ladder (what the scan's
    job watch reports; sent here by hand)."""
    return PodFailure(
        job=job,
        pod=f"{job}-worker-1",
        node=node,
        failed_at=at,
        termination=Termination(reason="Evicted", disruption="EvictionByEvictionAPI"),
        remediations=[RemediationSeen(node=node, runbook=runbook, cause="platform", started_at=at)],
    )


async def test_a_proven_slow_node_climbs_its_ladder_and_the_job_restarts_without_it(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[1]
    fleet.inject(node, "silent_under_load", gpu=2)  # only a load test sees it
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        jobs.elastic[job], jobs.sizes[job], jobs.fits = ElasticRange(min=2, max=4), 4, 3
        await progress(time_env, handle, job, pool_of(fleet), suspects=(node,))
        await time_env.sleep(timedelta(minutes=10))
        ledger = await handle.query(JobGuard.ledger)
        # The drain evicted the job's pod: the guard restarts the job at the size that fits.
        now = await time_env.get_current_time()
        await handle.signal(JobGuard.pod_failed, evicted(node, job, now, "fails-under-load"))
        await time_env.sleep(timedelta(minutes=5))
        restarted = await handle.query(JobGuard.ledger)
        result = await ladder_of(time_env, node)
    [proven] = ledger.suspicions
    assert proven.state is SuspicionState.PROVEN, proven
    assert proven.checkpoint.startswith("acknowledged") and len(jobs.checkpoints) == 1
    assert proven.ladder == remediation_workflow_id(node)
    [escalation] = result.escalations
    assert (escalation.kind, escalation.from_runbook, escalation.to_runbook) == (
        "proven",
        "slow-node",
        "fails-under-load",
    )
    assert [a.action.value for a in result.attempts][:3] == ["diagnose", "cordon", "drain"]
    assert jobs.started_at == [(job, 3)]
    assert [r.size for r in restarted.resizes] == [3]


async def test_a_passing_diagnose_ends_unproven_and_the_node_is_left_alone(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    node = sorted(fleet.nodes)[2]
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        await progress(time_env, handle, job, pool_of(fleet), suspects=(node,))
        await time_env.sleep(timedelta(minutes=5))
        result = await ladder_of(time_env, node)
        await progress(
            time_env, handle, job, pool_of(fleet), suspects=(node,)
        )  # named again: quiet
        await time_env.sleep(timedelta(minutes=5))
        ledger = await handle.query(JobGuard.ledger)
        shown = await details(time_env.client, handle.id)
    assert "slow-node suspicions: unproven 1" in shown and f"{node}: unproven (" in shown
    assert result.outcome is Outcome.UNPROVEN and result.runbook
    assert result.runbook.name == "slow-node"
    assert [a.action.value for a in result.attempts] == ["diagnose"]
    assert not fleet.node(node).unschedulable
    assert [a for n, a in fleet.actions if n == node] == []  # no cordon, drain or restore
    assert of(ledger, node) == [SuspicionState.UNPROVEN]
    assert len(jobs.checkpoints) == 1  # asked once, for the one proof


async def test_a_proof_whose_checks_could_not_run_proves_nothing(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """NVML cannot load on the suspect: the diagnose's checks could not run (fail closed:
    unhealthy), which is no proof of slowness. Before, that finding 'proved' the suspicion and
    its runbook cordoned the node; now the ladder ends needs_human, the node uncordoned."""
    node = sorted(fleet.nodes)[2]
    fleet.break_nvml(node, "missing")
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, _):
        await progress(time_env, handle, job, pool_of(fleet), suspects=(node,))
        await time_env.sleep(timedelta(minutes=5))
        result = await ladder_of(time_env, node)
    assert result.outcome is Outcome.NEEDS_HUMAN
    assert "could not judge" in result.outcome_detail
    assert [e.kind for e in result.escalations] == []
    assert not fleet.node(node).unschedulable


async def test_the_application_s_node_gets_no_ladder_and_a_waiting_suspect_expires(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    first, second, skewed = sorted(fleet.nodes)[:3]
    policy = GuardPolicy(suspicions=SuspicionPolicy(expire_after=timedelta(minutes=5)))
    async with guarded(time_env, fleet, policy) as (handle, job, jobs):
        jobs.acknowledges = False  # the first proof waits the checkpoint's grace (10 min)
        await progress(
            time_env, handle, job, pool_of(fleet), suspects=(first, second), application=(skewed,)
        )
        await time_env.sleep(timedelta(minutes=1))
        await progress(
            time_env, handle, job, pool_of(fleet), suspects=(first,)
        )  # the second is not renewed
        await time_env.sleep(timedelta(hours=1))
        ledger = await handle.query(JobGuard.ledger)
        with pytest.raises(RPCError):  # never started
            await time_env.client.get_workflow_handle(remediation_workflow_id(skewed)).describe()
    assert of(ledger, skewed) == [SuspicionState.APPLICATION]
    assert of(ledger, first) == [SuspicionState.UNPROVEN]  # the sim's node passes
    assert of(ledger, second) == [SuspicionState.EXPIRED]
    [done] = [s for s in ledger.suspicions if s.node == first]
    assert done.checkpoint == "none in 10m"  # the grace passed: the proof went ahead


async def test_a_node_another_ladder_owns_is_not_proven_by_joining_it(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """A ladder for another fault runs on the suspect (here one waiting 24 h for a person to
    approve a replacement): the suspicion would only join it and end with it, unproven. The
    guard waits for it to close, at most its ride-out deadline, then gives the suspicion up."""
    node = sorted(fleet.nodes)[3]
    failed = Finding(
        node=node,
        check="admission",
        reason="AdmissionFailed",
        severity=Severity.CRITICAL,
        observed_at=await time_env.get_current_time(),
    )
    jobs = SimJobs()
    async with running_workers(time_env.client, fleet, jobs=jobs) as queues:
        await report(time_env.client, queues, failed, shipped_runbooks.match(failed))
        handle, job = await guard(time_env, queues, GuardPolicy())
        await progress(time_env, handle, job, pool_of(fleet), suspects=(node,))
        await time_env.sleep(timedelta(minutes=30))
        ledger = await handle.query(JobGuard.ledger)
        state = await ladder_of(time_env, node)
    [given_up] = ledger.suspicions
    assert given_up.state is SuspicionState.EXPIRED, given_up
    assert "its ladder is still running" in given_up.detail
    assert state.runbook is not None and state.runbook.name == "admission-failed"
    assert all(p.finding.reason != SLOW_NODE for p in state.pending)  # never joined it


class RankedJobs(SimJobs):
    """The simulated job side, each pod's ranks reporting a line a minute (remedy_job's rank
    lines, as the job watch parses them from the pods' logs): the ranks on ``slow`` compute
    20 % longer per step than the job's others."""

    def __init__(self, clock: Clock, slow: str) -> None:
        super().__init__(clock=clock)
        self._now, self.slow = clock, slow

    def job_times(self) -> list[JobTimes]:
        now = self._now()
        return [
            t.model_copy(update={"pods": [self._ranked(i, p, now) for i, p in enumerate(t.pods)]})
            for t in super().job_times()
        ]

    def _ranked(self, index: int, pod: PodTime, now: datetime) -> PodTime:
        compute = 1.2 if pod.node == self.slow else 1.0
        lines = [
            Progress(
                event=Event.RANK,
                at=now - timedelta(minutes=m),
                rank=index * 8 + local,
                local_rank=local,
                steps=60,
                compute_s=compute,
            )
            for m in range(8, -1, -1)
            for local in range(8)
        ]
        return pod.model_copy(update={"progress": [*pod.progress, *lines]})


async def test_the_job_watch_hands_the_detector_s_suspect_to_the_guard_which_proves_it(
    time_env: WorkflowEnvironment, fleet: SimFleet
) -> None:
    """From the ranks' own lines to the guard's ledger: the scan's job watch judges the job,
    hands the report with its progress (starting the guard), and the guard has the node's
    ladder prove it (the simulated node is healthy: unproven)."""
    nodes = sorted(fleet.nodes)
    clock = Clock(await time_env.get_current_time())
    jobs = RankedJobs(clock, slow=nodes[2])
    job = JobRef(namespace="ml", name=f"ranked-{uuid.uuid4().hex[:6]}")
    async with running_workers(time_env.client, fleet, jobs=jobs) as queues:
        jobs.launch(job, nodes)
        watch = JobWatchActivities(time_env.client, jobs, RunbookSet([]), clock=clock)
        await scans(time_env, watch, clock, queues, timedelta(minutes=2))
        await time_env.sleep(timedelta(minutes=5))
        ledger = await time_env.client.get_workflow_handle_for(
            JobGuard.run, job_guard_workflow_id(job.namespace, job.name)
        ).query(JobGuard.ledger)
        result = await ladder_of(time_env, nodes[2])
    assert [(s.node, s.state) for s in ledger.suspicions] == [(nodes[2], SuspicionState.UNPROVEN)]
    assert result.outcome is Outcome.UNPROVEN


async def test_a_worse_fault_reported_during_the_proof_takes_the_ladder_on(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    """An Xid 62 (critical, event-only: the passing diagnose cannot see it) reported while the
    suspect's diagnose runs: its runbook takes over after the proof, never an unproven end
    that would drop it."""
    node = sorted(fleet.nodes)[0]
    held = fleet.hold("probe")  # the diagnose's probe waits here
    jobs = SimJobs()
    async with running_workers(time_env.client, fleet, jobs=jobs) as queues:
        handle, job = await guard(time_env, queues, GuardPolicy())
        await progress(time_env, handle, job, pool_of(fleet), suspects=(node,))
        for _ in range(60):  # real seconds: a held activity stops the clock's skipping
            if held.entered.is_set():
                break
            await time_env.sleep(timedelta(seconds=1))
        halt = Finding(
            node=node,
            check="xid",
            reason="Xid62",
            xid=62,
            severity=Severity.CRITICAL,
            observed_at=await time_env.get_current_time(),
        )
        await report(time_env.client, queues, halt, shipped_runbooks.match(halt))
        await time_env.sleep(timedelta(seconds=2))  # the ladder keeps the report
        held.release()
        await time_env.sleep(timedelta(minutes=5))
        state = await ladder_of(time_env, node)
    assert held.entered.is_set()
    [escalation] = state.escalations[:1]
    assert (escalation.kind, escalation.from_runbook) == ("escalated", "slow-node")
    assert state.outcome is not Outcome.UNPROVEN
