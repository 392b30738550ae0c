"""The demo's shared inference node: one one-GPU pod on each GPU (the twin's ``shared`` layout),
on a node whose agent matches findings with an inference pool's runbooks beside the shipped ones
(examples/runbooks/inference-gpu-ecc.yaml, ``scope: gpu``). Its fault, an uncorrectable ECC
error on one GPU, is the demo's first: only that GPU's pod is evicted, the node stays
schedulable (degraded, not in remediation) and the GPU comes back after its reset. Random faults
pass it by, so it tells that one story.

What it prints is read from the twin and judged by remedy's own status (``status_of``, as the
fleet scan judges): a line when the GPU goes out, a line when it comes back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from adapters.sim import SimFleet
from adapters.sim.gpu_scope import SimGpuScope
from remedy.core.models import Finding, Scope
from remedy.runbook import Runbook, RunbookSet
from remedy.scan.fleet import OpenWork, status_of
from workers.demo_config import DemoConfig, DemoRunbooks, spare_nodes

TAG = "  gpu    "  # in the column of the demo's own lines ("  fault  ", "  job    ")
FAULT = "ecc_dbe"
BAD_GPU = 3
WATCH_EVERY_S = 0.1  # the twin in memory: cheap to look at, and a quarantine lasts seconds


@dataclass
class SharedNode:
    name: str
    runbooks: RunbookSet  # its agent's: the shipped runbooks and its pool's
    gpu: int  # the GPU that fails
    pods: list[str] = field(default_factory=list)  # its GPU pods when the fault came
    out: list[int] = field(default_factory=list)  # the GPUs seen quarantined
    cordoned: bool = False  # ever seen unschedulable
    back: bool = False  # the quarantine seen lifted


def shared_node(config: DemoConfig, fleet: SimFleet, runbooks: DemoRunbooks) -> SharedNode | None:
    """The last spare node but one (the last is the active checks' idle node), turned into a
    shared inference node; None when the fleet has no two spare nodes or no shared runbooks."""
    spare = spare_nodes(config, fleet)
    if runbooks.shared is None or len(spare) < 2:
        return None
    name = spare[-2]
    fleet.place(name, "shared")
    return SharedNode(name, runbooks.shared, gpu=min(BAD_GPU, config.gpus_per_node - 1))


def introduce(node: SharedNode, fleet: SimFleet) -> str:
    gpu_scoped = sorted(
        r.name for r in node.runbooks if any(rung.scope is Scope.GPU for rung in r.ladder)
    )
    return (
        f"Shared node      {node.name}: {len(_pods(fleet, node.name))} one-GPU inference pods; "
        f"its agent also loads {', '.join(gpu_scoped)} (scope: gpu)"
    )


def inject(fleet: SimFleet, node: SharedNode) -> tuple[Finding, Runbook | None]:
    """Its GPU's fault, and the runbook its agent matches it with."""
    node.pods = _pods(fleet, node.name)
    finding = fleet.inject(node.name, FAULT, gpu=node.gpu)
    return finding, node.runbooks.match(finding)


async def watch(fleet: SimFleet, node: SharedNode, echo: Callable[[str], None]) -> None:
    """Say when the GPU goes out and when it comes back; ends once it is back."""
    while not node.back:
        for line in look(fleet, node):
            echo(line)
        await asyncio.sleep(WATCH_EVERY_S)


def look(fleet: SimFleet, node: SharedNode) -> list[str]:
    """What changed on the node since the last look, as lines to print."""
    facts = next(n for n in fleet.cluster.fleet.nodes() if n.name == node.name)
    node.cordoned |= facts.unschedulable
    serving = _pods(fleet, node.name)
    if facts.gpus_out and not node.out:
        node.out = facts.gpus_out
        evicted = [p for p in node.pods if p not in serving]
        # Its ladder holds the quarantine: judged as the fleet scan judges a node at work.
        status = status_of(facts, OpenWork(remediating=[node.name]))
        return [
            f"{TAG}{node.name}: GPU {_gpus(node.out)} quarantined; evicted only "
            f"{', '.join(evicted) or 'nothing'}, {len(serving)} of {len(node.pods)} pods serve "
            f"on; node {'cordoned' if facts.unschedulable else 'schedulable'}, "
            f"status {status.value}"
        ]
    if node.out and not facts.gpus_out:
        node.back = True
        reset = (node.name, "reset_gpu") in fleet.actions
        return [
            f"{TAG}{node.name}: GPU {_gpus(node.out)} {'reset and ' if reset else ''}back in "
            f"allocation; {len(serving)} pods served throughout, the node "
            f"{'was cordoned' if node.cordoned else 'never cordoned'}"
        ]
    return []


def _pods(fleet: SimFleet, node: str) -> list[str]:
    """The pods using the node's GPUs, as the cluster reports them."""
    return sorted({use.pod for use in SimGpuScope(fleet).gpu_use(node).uses})


def _gpus(gpus: list[int]) -> str:
    return ", ".join(map(str, gpus))
