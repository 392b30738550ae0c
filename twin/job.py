"""The training job and the fleet over weeks, on a virtual clock.

One lockstep job spans ``nodes`` nodes; ``spares`` more wait, paid for. Each fault event hits a
physical node. How the node fares comes from a real ladder (``LadderRun``: what the workflow did
with that fault under the policy's runbooks, measured on Temporal's time-skipping server) plus
what the simulation cannot time itself: how long each action really takes and how long people
take to answer. How the job fares follows from that: an interruption costs the work since the
last checkpoint, the time to take the bad node out (seconds when automated, a human's delay
otherwise), a restart, and any wait for a spare.
"""

from __future__ import annotations

import heapq
import random
from datetime import timedelta

from pydantic import BaseModel, Field

from adapters.sim.faults import FAULTS
from remedy.core.actions import ACTIONS
from remedy.core.models import Action, Scope
from twin.generator import FaultEvent, FaultKind

ZERO = timedelta(0)


class Step(BaseModel):
    action: Action
    result: str
    rung: int  # -1: cordon or restore around the ladder
    took: timedelta  # workflow time (settle included; actions themselves take none in the sim)
    approval: bool = False  # the rung needed an approval
    scope: Scope = Scope.NODE  # the rung's (gpu: it took only the faulty GPU out)


class LadderRun(BaseModel):
    """What the real NodeRemediation did with one fault under one policy."""

    fault: str | None
    runbook: str
    outcome: str
    steps: list[Step]
    workflow_time: timedelta
    fault_left: bool = False  # the fault was still on the node when the ladder ended

    @property
    def cordoned(self) -> bool:
        return any(s.action is Action.CORDON and s.result == "done" for s in self.steps)

    @property
    def disruptive(self) -> bool:
        return any(ACTIONS[s.action].disruptive and s.rung >= 0 for s in self.steps)

    @property
    def takes_node_out(self) -> bool:
        return self.cordoned or self.disruptive

    @property
    def replaced(self) -> bool:
        return self.outcome == "replaced"

    @property
    def false_recovery(self) -> bool:
        """Declared recovered (or cleared: nothing found) while the fault was still there: it
        comes back on that GPU."""
        return self.outcome in ("recovered", "cleared") and self.fault_left

    @property
    def needless_replacement(self) -> bool:
        """Replaced, though a reset, a reboot or time would have done (or nothing was wrong)."""
        if not self.replaced:
            return False
        spec = FAULTS.get(self.fault or "")
        return (
            spec is None or spec.passes or bool(spec.fixed_by & {Action.RESET_GPU, Action.REBOOT})
        )


class ActionCosts(BaseModel):
    """What each action really takes, which the simulated fleet does in no time."""

    drain: timedelta = timedelta(minutes=5)
    kill_job: timedelta = timedelta(minutes=1)
    reset_gpu: timedelta = timedelta(minutes=3)
    reboot: timedelta = timedelta(minutes=15)
    diagnose: timedelta = timedelta(minutes=15)
    replace: timedelta = timedelta(hours=4)  # a new machine racked or provisioned, admitted

    def of(self, action: Action) -> timedelta:
        cost: timedelta = getattr(self, action.value, ZERO)
        return cost

    def cheapest_fix(self, fault: str | None) -> timedelta:
        spec = FAULTS.get(fault or "")
        if spec is None:
            return ZERO
        if spec.passes:
            return ZERO
        return min(self.of(action) for action in spec.fixed_by)


class Policy(BaseModel):
    name: str
    detect: timedelta  # from the fault to the bad node out of the job
    approval_delay: timedelta  # a person answering an approval (or doing the step by hand)
    description: str = ""


class JobConfig(BaseModel):
    nodes: int = Field(default=2048, ge=1)
    spares: int = Field(default=32, ge=0)
    days: float = Field(default=54, gt=0)
    # of training between checkpoints
    checkpoint_interval: timedelta = Field(default=timedelta(minutes=15), gt=timedelta(0))
    checkpoint_cost: timedelta = Field(default=timedelta(seconds=30), ge=timedelta(0))
    restart: timedelta = Field(default=timedelta(minutes=5), ge=timedelta(0))
    # Elastic (torchrun --nnodes=MIN:MAX): with no spare, carry on with as few as this many
    # nodes instead of waiting; grow back (a restart at a checkpoint) when a node returns.
    elastic_min: int | None = Field(default=None, ge=1)
    # A drain of a node that has not stopped the job (a fault with a tolerance window) waits
    # for the job's next checkpoint, so it loses no work.
    coordinated_drains: bool = False

    @property
    def duration(self) -> timedelta:
        return timedelta(days=self.days)


class PolicyResult(BaseModel):
    policy: str
    goodput: float  # useful training time / paid GPU time
    availability: float  # node-time healthy and schedulable / all node-time
    interruptions: int
    replacements: int
    needless_replacements: int
    false_recoveries: int = 0  # ladders that said "recovered" with the fault still there
    comebacks: int = 0  # of those, faults that came back within the run: another interruption
    mttr: timedelta  # mean time from a fault to the node back, over faults that took it out
    repairs: int
    job_down: timedelta
    lost_work: timedelta
    waiting_for_spares: timedelta
    short_node_time: timedelta = ZERO  # node-time an elastic job ran without a node
    checkpoint_overhead: timedelta


def downtime(run: LadderRun, policy: Policy, costs: ActionCosts) -> timedelta:
    """How long the node is out of service for this fault."""
    if not run.takes_node_out:
        return ZERO
    took = run.workflow_time + sum((costs.of(s.action) for s in run.steps if s.rung >= 0), ZERO)
    took += policy.approval_delay * sum(1 for s in run.steps if s.approval and s.rung >= 0)
    if run.outcome == "needs_human":  # someone has to come and do the real fix
        took += policy.approval_delay + costs.cheapest_fix(run.fault)
    return took


def came_back(run: LadderRun) -> LadderRun:
    """A fault a ladder left behind, back: it has now stopped the job twice on one node, so
    it is treated as a known bad node: taken out and fixed for real by a person."""
    return LadderRun(
        fault=run.fault,
        runbook=run.runbook,
        outcome="needs_human",
        steps=[Step(action=Action.CORDON, result="done", rung=-1, took=ZERO)],
        workflow_time=ZERO,
    )


def simulate(
    events: list[FaultEvent],
    ladders: dict[FaultKind, LadderRun],
    policy: Policy,
    job: JobConfig,
    costs: ActionCosts,
    seed: int = 0,
) -> PolicyResult:
    """Play the events against the job. ``ladders`` maps each kind of fault (a simulated fault,
    None for one with no node signal; transient or not) to what the policy's ladder did. A
    false recovery comes back after a random time (``seed``) at its fault's ``comes_back``
    mean; the comebacks are the only events the run adds."""
    rng = random.Random(seed)
    horizon = job.duration
    cycle = job.checkpoint_interval + job.checkpoint_cost
    in_job = set(range(job.nodes))
    spares = set(range(job.nodes, job.nodes + job.spares))
    back: list[tuple[timedelta, int]] = []  # (when, node): nodes in repair
    down_until: dict[int, timedelta] = {}
    missing: list[timedelta] = []  # elastic: since when each node the job runs without
    queue: list[tuple[timedelta, int, FaultEvent, LadderRun | None]] = [
        (e.at, i, e, None) for i, e in enumerate(events)
    ]  # sorted by time already: a heap; comebacks are pushed onto it
    tally = _Tally()
    resumed = ZERO  # when the job last started training
    stopped_until = ZERO  # the job is restarting until then

    def release(until: timedelta, charge: bool) -> None:
        nonlocal resumed, stopped_until
        while back and back[0][0] <= until:
            when, node = heapq.heappop(back)
            down_until.pop(node, None)
            if node in in_job:  # a node only cordoned kept running the job meanwhile
                continue
            if not missing:
                spares.add(node)
                continue
            # An elastic job short of nodes grows back at its next checkpoint: a restart at
            # the new size, no work lost (free when it is restarting anyway).
            in_job.add(node)
            tally.shrunk += when - missing.pop()
            if charge and when >= stopped_until:
                restart_at = min(when + job.restart, horizon)
                tally.job_down += restart_at - when
                stopped_until = resumed = restart_at

    while queue:
        now, _, event, forced = heapq.heappop(queue)
        if now >= horizon:
            break
        node = event.node
        release(now, charge=True)
        if node in down_until:  # in repair already: part of that outage
            continue
        run = forced or ladders[event.kind]
        out = downtime(run, policy, costs)
        tally.comebacks += forced is not None
        if forced is None and run.false_recovery:
            tally.false_recoveries += 1
            mean = FAULTS[run.fault or ""].comes_back.total_seconds()
            again = now + out + timedelta(seconds=rng.expovariate(1 / mean))
            comeback = event.model_copy(
                update={"at": again, "cause": f"{event.cause} (came back)", "interrupts_job": True}
            )
            heapq.heappush(
                queue, (again, len(events) + tally.false_recoveries, comeback, came_back(run))
            )
        if out > ZERO:
            tally.repair(run, now, out, horizon)
            heapq.heappush(back, (now + out, node))
            down_until[node] = now + out
            spares.discard(node)
        if node not in in_job or not (event.interrupts_job or run.disruptive):
            continue  # a spare, or a cordon that lets the running job carry on
        restarting = now < stopped_until
        # A drain of a node that has not stopped the job can wait for the next checkpoint.
        coordinated = job.coordinated_drains and not event.interrupts_job
        if not restarting:
            tally.interruptions += 1
            if not coordinated:
                tally.lost += min((now - resumed) % cycle, job.checkpoint_interval)
        ready = now
        if out > ZERO:  # the bad node leaves the job once someone (or remedy) takes it out
            in_job.discard(node)
            ready += policy.detect
        while len(in_job) + len(missing) < job.nodes:
            if spares:
                in_job.add(spares.pop())
            elif job.elastic_min is not None and len(in_job) >= job.elastic_min:
                missing.append(ready)  # carry on smaller rather than wait
            else:  # no spare left: the job waits for the first node back
                when = back[0][0]
                tally.waiting += max(when - ready, ZERO)
                ready = max(ready, when)
                release(when, charge=False)
        restart_at = min(ready + job.restart, horizon)
        tally.job_down += (
            max(restart_at - max(now, stopped_until), ZERO) if restarting else restart_at - now
        )
        stopped_until = resumed = max(stopped_until, restart_at)
    release(horizon, charge=True)  # nodes back after the last event: grow back then too
    tally.shrunk += sum((horizon - since for since in missing), ZERO)
    running = horizon - tally.job_down
    overhead = job.checkpoint_cost * (running / cycle)
    useful = running - overhead - tally.lost
    total = job.nodes + job.spares
    return PolicyResult(
        policy=policy.name,
        goodput=(useful * job.nodes - tally.shrunk) / (horizon * total),
        availability=1 - tally.node_down / (horizon * total),
        interruptions=tally.interruptions,
        replacements=tally.replacements,
        needless_replacements=tally.needless,
        false_recoveries=tally.false_recoveries,
        comebacks=tally.comebacks,
        mttr=tally.outage / tally.repairs if tally.repairs else ZERO,
        repairs=tally.repairs,
        job_down=tally.job_down,
        lost_work=tally.lost,
        waiting_for_spares=tally.waiting,
        short_node_time=tally.shrunk,
        checkpoint_overhead=overhead,
    )


class _Tally:
    def __init__(self) -> None:
        self.node_down = self.outage = self.job_down = self.lost = self.waiting = ZERO
        self.repairs = self.replacements = self.needless = self.interruptions = 0
        self.false_recoveries = self.comebacks = 0
        self.shrunk = ZERO

    def repair(self, run: LadderRun, now: timedelta, out: timedelta, horizon: timedelta) -> None:
        self.node_down += min(now + out, horizon) - now
        self.outage += out
        self.repairs += 1
        self.replacements += run.replaced
        self.needless += run.needless_replacement
