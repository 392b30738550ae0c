"""GPU-hours kept by GPU-scoped remediation. The twin's fault events (the same seed, nodes and
times as the job's) hit a shared inference fleet instead, where every GPU serves its own pods,
and are remediated twice: with the shipped runbooks, where every rung takes the node and all its
GPUs out, and with an inference pool's runbooks beside them (examples/runbooks: ``scope: gpu``),
where a GPU-scoped rung takes out only the faulty GPU and the node's other GPUs keep serving.
What the node-scoped ladders took out with the node and the GPU-scoped ones left in service is
the GPU-hours kept.

Worked example: an ECC error on one GPU of an 8-GPU node, 2 h out of service either way: the
node-scoped ladder takes 8 × 2 = 16 GPU-hours, the GPU-scoped one 1 × 2 = 2; 14 are kept. A
ladder that climbs from a GPU-scoped rung to a reboot takes the node from that rung on."""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from remedy.core.actions import ACTIONS
from remedy.core.models import Action, Scope
from remedy.runbook import RunbookSet
from twin.generator import FaultEvent, FaultKind
from twin.job import ZERO, ActionCosts, LadderRun, Policy, Step, downtime
from twin.ladders import ladders_for, matching

HOUR = timedelta(hours=1)


class GpuHours(BaseModel):
    """GPU-hours out of service under node-scoped and GPU-scoped remediation of the same faults."""

    gpus_per_node: int
    node_scoped: float  # the shipped runbooks: the baseline
    gpu_scoped: float  # the shipped runbooks and the inference pool's
    outages: int  # fault events that took GPUs out, node-scoped
    gpu_scoped_outages: int  # outages climbed by a GPU-scoped ladder
    runbooks: list[str]  # the GPU-scoped runbooks that matched

    @property
    def kept(self) -> float:
        return self.node_scoped - self.gpu_scoped

    @property
    def kept_share(self) -> float:
        return self.kept / self.node_scoped if self.node_scoped else 0.0


def node_time(step: Step, policy: Policy, costs: ActionCosts) -> timedelta:
    """What a step adds to the node's time out of service (``twin.job.downtime``'s terms)."""
    return step.took + costs.of(step.action) + (policy.approval_delay if step.approval else ZERO)


def takes_node(step: Step) -> bool:
    """A step that takes the whole node out: a cordon, or a disruptive rung of node scope."""
    if step.rung < 0:
        return step.action is Action.CORDON and step.result == "done"
    return ACTIONS[step.action].disruptive and step.scope is Scope.NODE


def gpu_time(run: LadderRun, gpus: int, policy: Policy, costs: ActionCosts) -> timedelta:
    """GPU-time out of service for one fault on one GPU: the faulty GPU for the whole outage,
    the node's other GPUs from the first step that takes the node to the outage's end."""
    out = downtime(run, policy, costs)
    first = next((i for i, s in enumerate(run.steps) if takes_node(s)), None)
    if out <= ZERO or first is None:
        return out
    before = sum((node_time(s, policy, costs) for s in run.steps[:first]), ZERO)
    return out + max(out - before, ZERO) * (gpus - 1)


def gpu_hours_out(
    events: list[FaultEvent],
    ladders: dict[FaultKind, LadderRun],
    gpus: int,
    policy: Policy,
    costs: ActionCosts,
) -> tuple[float, int, int]:
    """GPU-hours out, outages, and outages by a GPU-scoped ladder. One ladder per node: a fault
    on a node already out is part of that outage."""
    until: dict[int, timedelta] = {}
    total, outages, scoped = ZERO, 0, 0
    for event in events:
        if until.get(event.node, ZERO) > event.at:
            continue
        run = ladders[event.kind]
        out = downtime(run, policy, costs)
        if out <= ZERO:
            continue
        until[event.node] = event.at + out
        total += gpu_time(run, gpus, policy, costs)
        outages += 1
        scoped += any(s.scope is Scope.GPU for s in run.steps)
    return total / HOUR, outages, scoped


async def gpu_hours_kept(
    events: list[FaultEvent],
    node_ladders: dict[FaultKind, LadderRun],
    shipped: RunbookSet,
    scoped: RunbookSet,
    policy: Policy,
    costs: ActionCosts,
    gpus: int = 8,
) -> GpuHours:
    """``node_ladders``: what the shipped runbooks did with each kind of fault (climbed already);
    the kinds whose runbook differs with ``scoped`` loaded are climbed here, for real."""
    differ: set[FaultKind] = {
        (fault, transient)
        for fault, transient in {e.kind for e in events}
        if fault is not None and matching(scoped)(fault).name != matching(shipped)(fault).name
    }
    gpu_ladders = {**node_ladders, **await ladders_for(differ, matching(scoped))}
    node_scoped, outages, _ = gpu_hours_out(events, node_ladders, gpus, policy, costs)
    gpu_scoped, _, by_gpu = gpu_hours_out(events, gpu_ladders, gpus, policy, costs)
    return GpuHours(
        gpus_per_node=gpus,
        node_scoped=node_scoped,
        gpu_scoped=gpu_scoped,
        outages=outages,
        gpu_scoped_outages=by_gpu,
        runbooks=sorted({gpu_ladders[k].runbook for k in differ}),
    )
