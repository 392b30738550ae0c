"""Detection → cordon at fleet scale, through the real dev server and the real workflows.

1. 10 %, 25 % and 50 % of a 1,500-node fleet fail at once: every node's agent reports its finding
   (signal-with-start of its NodeRemediation) at the same moment; the latency of a node is from
   its report to its cordon taking effect in the (simulated) cluster. Also: remediations
   started per second. Next to each, the baseline (a one-activity workflow, the same burst, the
   same server, the same run: bench/cordon_floor.py) and the ratio of the P90s: target ≤ 1.1.
   Beside it, the same baseline started the way an agent reports (signal-with-start: a second
   report joins the running ladder): what that delivery costs this server, apart from remedy's
   own work. Each share runs ``--rounds`` bursts of each kind, the order alternating; every
   figure is the median of its rounds', after one burst thrown away (the warm-up), and the
   ratio the median of the rounds' ratios (remedy's P90 over the same round's baseline's).
2. The agents cordon their own nodes (50 % of the fleet failing, the breaker's limit raised as
   an operator who knows the faults are real would): from the agent seeing its finding to the
   cordon, target P90 ≤ 1 s; and how many ladders adopted their agent's cordon.
3. The controller worker's memory with 10,000 nodes in remediation, with remedy's default
   workflow cache: the worker runs in a child process (its RSS is read from /proc), 10,000
   ladders are started and parked in their tolerance windows, counted through the search
   attributes; then the target (≤ 300 MB) and what the cache costs (a query to an evicted
   ladder, replayed first, against a cached one): bench/memory_bench.py.

Prints the figures next to their targets and writes bench/results/scale.json for
bench/report.py.

    .venv/bin/python bench/scale_bench.py [--nodes 1500] [--rounds 5] [--agent-share 0.5]
        [--memory-nodes 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from burst import PARK, pct, report_all
from cordon_floor import floor_run
from memory_bench import memory_run
from pydantic import BaseModel
from scale_figures import (
    AgentRun,
    ScaleReport,
    ShareRun,
    rounds_line,
    table,
)
from temporalio.client import Client

from adapters.sim import SimFleet
from adapters.sim.cluster import SimNodeControl
from remedy.core.models import CordonState, Finding, NodeRef
from remedy.disruption.budget import BudgetPolicy
from remedy.runbook import RunbookSet
from remedy.scan.cluster import CordonOwner, OwnNode
from workers.agent import cordon_own_node
from workers.controller import controller_worker
from workers.demo import _free_port
from workers.dev_server import dev_server
from workers.door import DoorSettings

RESULTS = Path(__file__).resolve().parent / "results"
# Bursts of each kind per share; every figure is the median of its rounds'. One burst's P90
# swings by a third from one to the next on a shared 2-core machine (150 of 1,500, the same
# code: 1.63-2.50 s), more than the 10 % the target allows.
ROUNDS = 5
KINDS = ("remedy", "baseline", "baseline by signal-with-start")


class TimedControl(SimNodeControl):
    """The simulated node control, noting when each cordon took effect and what each cordon
    call answered (an agent's, then its ladder's)."""

    def __init__(self, fleet: SimFleet) -> None:
        super().__init__(fleet)
        self.cordoned_at: dict[str, float] = {}
        self.answers: dict[str, list[CordonState]] = {}

    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        state = super().cordon(node, owner)
        if state is CordonState.CORDONED:
            self.cordoned_at.setdefault(node, time.perf_counter())
        self.answers.setdefault(node, []).append(state)
        return state


class Burst(BaseModel):
    failing: list[str]
    latencies: list[float]
    started_s: float
    wall_s: float
    adopted: int


async def burst(client: Client, nodes: int, share: float, agents_cordon: bool) -> Burst:
    """``share`` of a fleet of ``nodes`` fails at once; with ``agents_cordon`` each agent
    cordons its own node before it reports, and the burst ends once every ladder's cordon
    came (adopting the agent's). The breaker's limit is raised: these faults are real."""
    tag = uuid.uuid4().hex[:6]
    queue, pool = f"scale-{tag}", f"scale-{tag}"
    fleet = SimFleet(nodes=nodes, gpus_per_node=1, pool=pool, name_prefix=f"n{tag}")
    control = TimedControl(fleet)
    cluster = dataclasses.replace(fleet.cluster, control=control)
    assert cluster.breakers is not None
    own = OwnNode(control, cluster.breakers)
    failing = sorted(fleet.nodes)[: round(nodes * share)]
    policy = BudgetPolicy(storm_share=1.0)

    async def agent_cordon(node: str, seen: Finding) -> None:
        await asyncio.to_thread(cordon_own_node, own, NodeRef(name=node, pool=pool), seen)

    def done() -> bool:
        if not agents_cordon:
            return len(control.cordoned_at) >= len(failing)
        return sum(len(control.answers.get(n, [])) >= 2 for n in failing) >= len(failing)

    with ThreadPoolExecutor(max_workers=32) as executor:
        door = DoorSettings(agents_queue=f"{queue}-agents")  # the controller knows PARK
        async with controller_worker(
            client, cluster, executor, queue, policy, RunbookSet([PARK]), door=door
        ):
            start = time.perf_counter()
            first = agent_cordon if agents_cordon else None
            sent = await report_all(client, failing, pool, queue, first)
            started = time.perf_counter() - start
            deadline = time.perf_counter() + 600
            while not done() and time.perf_counter() < deadline:
                await asyncio.sleep(0.05)
            wall = time.perf_counter() - start
    latencies = [control.cordoned_at[n] - sent[n] for n in failing if n in control.cordoned_at]
    if len(latencies) < len(failing):
        raise RuntimeError(f"only {len(latencies)} of {len(failing)} nodes were cordoned")
    adopted = sum(control.answers[n][1:2] == [CordonState.ALREADY_OURS] for n in failing)
    return Burst(
        failing=failing, latencies=latencies, started_s=started, wall_s=wall, adopted=adopted
    )


async def agent_run(client: Client, nodes: int, share: float) -> AgentRun:
    ran = await burst(client, nodes, share, agents_cordon=True)
    return AgentRun(
        nodes=nodes,
        failing=len(ran.failing),
        p50_s=pct(ran.latencies, 0.5),
        p90_s=pct(ran.latencies, 0.9),
        max_s=max(ran.latencies),
        adopted=ran.adopted,
        wall_s=ran.wall_s,
    )


async def share_run(client: Client, nodes: int, share: float, rounds: int) -> ShareRun:
    """``rounds`` bursts of each kind, remedy first in the even rounds and last in the odd
    ones, so that a machine slowing or speeding up during the share weighs on both sides."""
    ladders: list[Burst] = []
    floors: list[list[float]] = []
    signalled: list[list[float]] = []
    names = [f"floor-{i:05d}" for i in range(round(nodes * share))]
    for i in range(rounds):
        for kind in KINDS if i % 2 == 0 else KINDS[::-1]:
            if kind == "remedy":
                ladders.append(await burst(client, nodes, share, agents_cordon=False))
            else:
                done = floors if kind == "baseline" else signalled
                done.append(await floor_run(client, names, signal=kind != "baseline"))

    latencies = [b.latencies for b in ladders]
    return ShareRun(
        nodes=nodes,
        failing=len(names),
        share=share,
        p50_s=statistics.median([pct(one, 0.5) for one in latencies]),
        p90_s=statistics.median([pct(one, 0.9) for one in latencies]),
        p99_s=statistics.median([pct(one, 0.99) for one in latencies]),
        max_s=statistics.median([max(one) for one in latencies]),
        starts_per_s=statistics.median([len(b.failing) / b.started_s for b in ladders]),
        wall_s=statistics.median([b.wall_s for b in ladders]),
        floor_p50_s=statistics.median([pct(one, 0.5) for one in floors]),
        floor_p90_s=statistics.median([pct(one, 0.9) for one in floors]),
        floor_signal_p90_s=statistics.median([pct(one, 0.9) for one in signalled]),
        rounds=[
            (pct(a, 0.9), pct(b, 0.9), pct(c, 0.9))
            for a, b, c in zip(latencies, floors, signalled, strict=True)
        ],
    )


async def main(
    nodes: int, shares: list[float], rounds: int, agent_share: float, memory_nodes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port = _free_port()
        async with dev_server(port, _free_port(), None, Path(tmp) / "scale.log") as client:
            # Thrown away: a fresh server, client and worker pay their warm-up in a first burst.
            warm = await burst(client, nodes, shares[0], agents_cordon=False)
            await floor_run(client, [f"warm-{n}" for n in warm.failing])
            print(f"  warm-up burst, thrown away: p90 {pct(warm.latencies, 0.9):.2f} s")
            runs = []
            for share in shares:
                runs.append(await share_run(client, nodes, share, rounds))
                r = runs[-1]
                print(
                    f"  {r.failing} of {nodes}: p90 {r.p90_s:.2f} s, baseline "
                    f"{r.floor_p90_s:.2f} s, ratio {r.ratio:.2f}; by signal-with-start "
                    f"{r.floor_signal_p90_s or 0:.2f} s (medians; rounds, remedy/baseline: "
                    f"{rounds_line(r)})",
                    flush=True,
                )
            agent = await agent_run(client, nodes, agent_share) if agent_share else None
            if agent:
                print(f"  agents' own cordons: p90 {agent.p90_s:.3f} s", flush=True)
        memory = None
        if memory_nodes:
            # A server of its own: the bursts above leave thousands of ladders parked on theirs
            # (once, with them, the controller's workflow tasks timed out and it stopped polling).
            port = _free_port()
            async with dev_server(port, _free_port(), None, Path(tmp) / "memory.log") as client:
                memory = await memory_run(client, f"127.0.0.1:{port}", memory_nodes)
    report = ScaleReport(shares=runs, memory=memory, agent=agent)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scale.json").write_text(report.model_dump_json(indent=2))
    print("\n" + "\n".join(table(report)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1500)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.10, 0.25, 0.50])
    parser.add_argument(
        "--rounds", type=int, default=ROUNDS, help="bursts of each kind per share (median)"
    )
    parser.add_argument(
        "--agent-share",
        type=float,
        default=0.5,
        help="the share failing when the agents cordon their own nodes (0: skip)",
    )
    parser.add_argument(
        "--memory-nodes",
        type=int,
        default=10000,
        help="nodes in remediation for the memory figure (0: skip)",
    )
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.shares, args.rounds, args.agent_share, args.memory_nodes))
