"""The demo's slow node (issue 55): the first guarded job is elastic (one node fewer, or a hot
spare in its place) and one of its nodes computes ``DemoConfig.slow_node`` slower than its
peers, with no Xid, no failed check and no degraded link: no agent reports it. The job's pods
print each rank's step times (adapters/sim/ranks.py), sped up like the runbooks; the job's
guard names the node from them, its ladder's first rung proves it with the load test, and the
job is restarted without it. Random slow faults (a small share of the demo's mix) are told
here too: nothing reports them, the demo says where they went.

What it prints is read from the twin: the load test that ran on the node (the proof), its
cordon, the job's new run without it, and the node fast again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from temporalio.client import Client
from temporalio.service import RPCError

from adapters.sim.ranks import EVERY
from contract.messages import JOB_LEDGER
from contract.names import job_guard_workflow_id
from remedy.attribution.elastic import ElasticRange
from remedy.attribution.guard import JobRef
from remedy.core.models import Finding
from remedy.detection.probe.load import LoadReason
from remedy.detection.stragglers.models import STRAGGLERS
from workers.demo_config import JOB_NODES, DemoConfig, spare_nodes
from workers.providers.sim import SimFleet, SimJobs, SimProvider

TAG = "  slow   "  # in the column of the demo's own lines ("  fault  ", "  job    ")
# Visible (the load test sees it: the proof succeeds) and mended by new hardware only: a reset
# or a reboot does not hold, so the node stays out while the job goes on with the spare (a
# plain slow_node's reset mends it at once, sped up, before the guard has restarted the job).
# Slow half of every ten minutes: slow throughout a few demo minutes from its start.
FAULT = "slow_node_intermittent"
WATCH_EVERY_S = 0.2


@dataclass
class SlowNode:
    name: str
    job: JobRef
    slowdown: float
    spares: list[str]
    injected_at: datetime | None = None
    actions_before: int = 0  # the fleet's actions before it (what made it fast is after)
    proofs: int = 0  # load tests on it seen so far
    cordoned: bool = False
    left: bool = False  # the job went on: a run started after its proof (without it, or mended)
    fast: bool = False  # its fault cleared
    runs: int = 0  # the job's runs when the fault came
    named: bool = False  # the job's guard holds a suspicion of it


def slow_node(config: DemoConfig, provider: SimProvider) -> SlowNode | None:
    """Make the first job elastic (one node fewer at least), with a hot spare where the fleet
    has a spare node besides the last two (the shared node, the idle one); the pods report step
    times a minute apart in runbook time. None when the config has no slow node or no job
    runs."""
    sim = provider.jobs
    if not config.slow_node or not sim.running:
        return None
    job = min(sim.running, key=str)
    sim.pace = replace(sim.pace, every=EVERY / config.speedup)
    sim.elastic[str(job)] = ElasticRange(min=max(1, JOB_NODES - 1), max=JOB_NODES)
    sim.spares = spare_nodes(config, provider.fleet)[:-2][:1]
    sim.fits_from_fleet = True
    nodes = sim.running[job]
    return SlowNode(nodes[len(nodes) // 2], job, config.slow_node, list(sim.spares))


def introduce(node: SlowNode, jobs: SimJobs) -> str:
    elastic = jobs.elastic[str(node.job)]
    spare = f", hot spare {', '.join(node.spares)}" if node.spares else ", no hot spare"
    return (
        f"Slow node        {node.name} in {node.job} (elastic {elastic}{spare}): "
        f"{node.slowdown:.0%} slower half of every 10 minutes from the start (marginal power: "
        "only new hardware mends it), nothing else shows it"
    )


def inject(fleet: SimFleet, jobs: SimJobs, node: SlowNode) -> str:
    fleet.inject(node.name, FAULT, slowdown=node.slowdown)
    node.injected_at, node.actions_before = fleet.clock(), len(fleet.actions)
    node.runs = len(jobs.runs[str(node.job)])
    return (
        f"{TAG}{node.name}: its ranks compute {node.slowdown:.0%} slower; no Xid, no failed "
        f"check: {node.job}'s guard must find it in its ranks' step times"
    )


def unreported(finding: Finding, provider: SimProvider) -> str | None:
    """The line for a random slow fault (no agent reports it), else None."""
    if finding.check != STRAGGLERS.check:
        return None
    with provider.fleet.lock:
        fault = provider.fleet.node(finding.node).faults[-1]
    running = provider.jobs.running.items()
    guarded = [str(job) for job, nodes in running if finding.node in nodes]
    where = (
        f"{', '.join(guarded)}'s guard must find it"
        if guarded
        else "no job runs there: only a load test (the active checks) can find it"
    )
    return f"{TAG}{finding.node}: {fault.kind}, {fault.slowdown:.0%} slower, nothing else; {where}"


async def watch(
    client: Client, provider: SimProvider, node: SlowNode, echo: Callable[[str], None]
) -> None:
    """Say what happens to the node and its job; ends once the job goes on without it and the
    node is fast again."""
    while not (node.left and node.fast):
        if not node.named:
            for line in await named(client, node):
                echo(line)
        for line in look(provider, node):
            echo(line)
        await asyncio.sleep(WATCH_EVERY_S)


async def named(client: Client, node: SlowNode) -> list[str]:
    """The guard's suspicion of the node, once its ledger holds one (the detector's evidence)."""
    handle = client.get_workflow_handle(job_guard_workflow_id(node.job.namespace, node.job.name))
    try:
        ledger = await JOB_LEDGER.ask(handle)
    except RPCError:  # no guard yet, or busy: the next look asks again
        return []
    found = [s for s in ledger.suspicions if s.node == node.name]
    if not found:
        return []
    node.named = True
    return [f"{TAG}{node.name}: {node.job}'s guard names it: {found[0].evidence}"]


def look(provider: SimProvider, node: SlowNode) -> list[str]:
    """What changed since the last look, as lines to print."""
    fleet, jobs, lines = provider.fleet, provider.jobs, []
    tests = [r for n, at, r in list(fleet.load_tests) if n == node.name]
    for n, report in enumerate(tests[node.proofs :], start=node.proofs):
        slow = [p for p in report.problems if p.reason is LoadReason.SLOW_GPU]
        # "GPU 0: 427 TFLOP/s is 43% of the H100 SXM reference ...": said once for them all
        first = slow[0].evidence.split(": ", 1)[-1] if slow else ""
        found = f"{len(slow)} GPUs {LoadReason.SLOW_GPU.value} ({first})"
        if n == 0:  # the first after the fault: the slow-node ladder's proof
            verdict = f"{found}: proven" if slow else "passed: the suspicion stays unproven"
            lines.append(f"{TAG}{node.name}: load test, the proof: {verdict}")
        else:  # its ladder's checks after that
            lines.append(f"{TAG}{node.name}: load test again: {found if slow else 'passed'}")
    node.proofs = len(tests)
    with fleet.lock:
        sim = fleet.node(node.name)
        cordoned, faults = sim.unschedulable, [f.kind for f in sim.faults]
    if cordoned and not node.cordoned:
        lines.append(f"{TAG}{node.name}: cordoned: no new pod lands there")
    node.cordoned |= cordoned
    runs = jobs.runs[str(node.job)]
    run = runs[-1]
    if node.injected_at is not None and not node.fast and FAULT not in faults:
        node.fast = True
        done = [a for n, a in fleet.actions[node.actions_before :] if n == node.name]
        lines.append(f"{TAG}{node.name}: fast again after {', '.join(done) or 'its fault cleared'}")
    # The job's first run after the proof without the node (a restart for another failure
    # before the node's cordon may still hold it: the drain's eviction restarts it again).
    if not node.left and node.proofs and len(runs) > node.runs and run.ended_at is None:
        if node.name not in run.nodes:
            node.left = True
            swapped = [n for n in run.nodes if n in node.spares]
            how = f"{', '.join(swapped)} swapped in" if swapped else f"shrunk to {len(run.nodes)}"
            size = len(run.nodes)
            without = f"goes on without {node.name} on {size} nodes ({how})"
            lines.append(f"  job    {node.job}: {without}")
        elif node.fast:
            node.left = True
            lines.append(f"  job    {node.job}: goes on with {node.name} back, mended")
    return lines
