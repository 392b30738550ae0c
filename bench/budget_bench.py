"""What the disruption budget costs, at fleet scale: lease grants per second and the latency a
lease adds to a ladder, through the real dev server and the real workflows.

Runs over N simulated nodes failing at once (default 1,000), each in its own pool:
  baseline   cordon → diagnose → restore          (no disruptive rung: no lease)
  unleased   cordon → drain → diagnose → restore  (the same drain, no lease: bench/unleased.py)
  free       cordon → drain → diagnose → restore  (budget 100 %: a lease never waits on others)
  contended  the same ladder, budget 50 nodes     (leases queue behind each other)
  burst      the same ladder, every ladder waiting at once behind a budget of 0 (a freeze),
             then one request raises it to 100 %: the grants of the whole pool at once
  mixed      one burst, every other ladder free (budget 100 %) and the rest unleased, each
             half on its own worker and queue in the one process; the pool's budget on the
             leased half's (its tasks ahead of that half's ladders only: the pessimistic side)

Grants per second is the burst's: N grants over the time from the raise to the last grant
delivered into a ladder's history (the grant signal's event there); the budget's
acknowledgment of each delivery (its own history, one write after another on the one
workflow), and how fast the ladders' worker takes them up (its backlog of every ladder's
tasks), are printed beside it. The
free run's rate is bounded by how fast N ladders reach their request on this machine, not by
the budget (printed beside it too). The added latency, against its target, is the mixed run's
leased half's p50 less its unleased half's: one burst, one machine's load, one budget's work on
both. Beside it, across runs: the free run's ladder p50 less the unleased run's, the median of
``PAIRS`` pairs (each pair's printed; their order alternating), which also carries the budget's
own load on the machine and the machine's drift from run to run. Free − baseline is the drain
rung and its lease. The peak is the cluster's record: nodes
drained and not yet restored at once, in the order the simulated API served the calls.

    .venv/bin/python bench/budget_bench.py [--nodes 1000] [--contended-budget 50]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

from budget_figures import PAIRS, BudgetReport, BudgetRun, budget_section, kind, report_lines
from budget_history import all_waiting, history_of, received_at
from temporalio.client import Client
from unleased import UnleasedRemediation

from adapters.sim import SimFleet
from adapters.sim.identity import as_agent
from contract.messages import NODE_UNHEALTHY
from contract.names import DISRUPTION_BUDGET_WORKFLOW, budget_task_queue, budget_workflow_id
from remedy.core.models import Action, Finding, NodeRef, Severity
from remedy.disruption.budget import BudgetPolicy, BudgetState, UnhealthyReport
from remedy.ladder.remediation import FindingReport, RemediationState
from remedy.runbook import Match, Runbook, RunbookSet, Rung
from workers.client import report_finding
from workers.controller import WORKFLOWS, controller_worker, node_agent_worker
from workers.demo import _free_port
from workers.dev_server import dev_server
from workers.door import DoorSettings
from workflows.node_remediation import NodeRemediation

RESULTS = Path(__file__).resolve().parent / "results"
# A diagnose attempt that never finishes is retried after a minute, not the default 10: on a
# machine at load 10, one attempt of 200 started and never finished, holding its run 10 min.
DIAGNOSE = Rung(action=Action.DIAGNOSE, timeout=timedelta(minutes=1))
LEASED = [Rung(action=Action.DRAIN), DIAGNOSE]
LADDERS = {
    "baseline": [DIAGNOSE],
    "unleased": LEASED,
    "free": LEASED,
    "contended": LEASED,
    "burst": LEASED,
    "mixed": LEASED,
}
UNLEASED = ("baseline", "unleased")  # no lease asked

MIXED = 3  # mixed runs: "mixed", "mixed-2", ...
FREE = BudgetPolicy(max_disruption="100%", storm_share=1.0)  # no storm: measure leases


async def raise_budget(client: Client, pool: str, queue: str, node: str, nodes: int) -> datetime:
    """The burst: one of the pool's nodes reports again, and its report carries a budget of
    100 % (a pool's policy comes with every report and request); the budget grants every
    waiter in the workflow task that takes it."""
    raised = datetime.now(UTC)
    again = UnhealthyReport(
        node=node, pool=pool, task_queue=queue, at=raised, pool_size=nodes, policy=FREE
    )
    await NODE_UNHEALTHY.send(client.get_workflow_handle(budget_workflow_id(pool)), again)
    return raised


async def one_run(client: Client, name: str, nodes: int, budget: str) -> BudgetRun:
    tag = uuid.uuid4().hex[:6]
    queue, pool = f"bench-{tag}", f"bench-{name}-{tag}"
    # One GPU per node: the probe is not what this measures.
    fleet = SimFleet(nodes=nodes, gpus_per_node=1, pool=pool, name_prefix=f"{name}-{tag}")
    runbook = Runbook(
        name=f"bench-{name}",
        match=Match(reasons=["Bench"]),
        cordon=True,
        ladder=LADDERS[kind(name)],
    )
    policy = FREE.model_copy(update={"max_disruption": budget})
    now = datetime.now(UTC)
    raised: datetime | None = None
    # The mixed run: every other node's ladder has no lease, on a worker and queue of its own
    # in this process, so both halves share one burst, one machine's load and one budget.
    queues = {queue: kind(name)} | (
        {f"{queue}-unleased": "unleased"} if kind(name) == "mixed" else {}
    )
    with ThreadPoolExecutor(max_workers=32) as executor:
        async with AsyncExitStack() as workers:
            for to, ladder in queues.items():
                await workers.enter_async_context(
                    controller_worker(
                        client,
                        fleet.cluster,
                        executor,
                        to,
                        policy,
                        RunbookSet([runbook]),
                        workflows=workflows_for(ladder),
                        door=DoorSettings(agents_queue=f"{queue}-agents"),
                    )
                )
            await workers.enter_async_context(
                node_agent_worker(client, fleet.host, executor, f"{queue}-agents")
            )
            if len(queues) > 1:  # the pool's budget in the leased half's controller, not by chance
                await client.start_workflow(
                    DISRUPTION_BUDGET_WORKFLOW,
                    BudgetState(pool=pool, policy=policy, pool_size=nodes),
                    id=budget_workflow_id(pool),
                    task_queue=budget_task_queue(queue),
                )
            start = time.perf_counter()
            gate = asyncio.Semaphore(64)

            async def report(node: str, to: str):  # type: ignore[no-untyped-def]
                async with gate:
                    return await report_finding(
                        client,
                        NodeRef(name=node, pool=pool),
                        as_agent(
                            FindingReport(finding=finding(node, now), runbook=runbook),
                            datetime.now(UTC),
                        ),
                        node_task_queue=f"{queue}-agents",
                        task_queue=to,
                    )

            handles = await asyncio.gather(
                *(
                    report(n, list(queues)[i % len(queues)])
                    for i, n in enumerate(sorted(fleet.nodes))
                )
            )
            if name == "burst":
                await all_waiting(client, pool, nodes)
                raised = await raise_budget(client, pool, queue, min(fleet.nodes), nodes)
            results = await asyncio.gather(*(h.result() for h in handles))
            wall = time.perf_counter() - start
            states: list[RemediationState] = [await h.query(NodeRemediation.state) for h in handles]
    received = [at for h in handles if raised and (at := await received_at(client, h))]
    events, delivered, sent = await history_of(client, budget_workflow_id(pool))
    after = [at for at in delivered if raised and at >= raised]  # the burst's grants
    deciding = sorted(at for at in sent.values() if raised and at >= raised)
    lasted = [
        (s.attempts[-1].finished_at - s.started_at).total_seconds()
        if s.started_at and s.attempts
        else None
        for s in states
    ]
    halves = [[x for x in lasted[i :: len(queues)] if x is not None] for i in range(len(queues))]
    leased = [s for s in states if s.lease_granted_at and s.lease_requested_at]
    waits = [
        (s.lease_granted_at - s.lease_requested_at).total_seconds()  # type: ignore[operator]
        for s in leased
    ]
    grants = sorted(s.lease_granted_at for s in leased if s.lease_granted_at)
    first = raised or (grants[0] if grants else None)
    span = (grants[-1] - first).total_seconds() if grants and first else 0.0
    return BudgetRun(
        name=name,
        nodes=nodes,
        budget=budget if kind(name) not in UNLEASED else "-",
        wall_s=wall,
        ladders_s=halves[0],
        unleased_ladders_s=halves[1] if len(halves) > 1 else [],
        lease_waits_s=waits,
        grants_per_s=len(grants) / span if span > 0 else None,
        delivered_per_s=len(after) / (max(after) - raised).total_seconds()
        if after and raised
        else None,
        received_per_s=len(received) / (max(received) - raised).total_seconds()
        if received and raised
        else None,
        decided_after_s=(deciding[0] - raised).total_seconds() if deciding and raised else None,
        deciding_tasks=len(deciding),
        peak_disrupted=fleet.most_out_at_once("drain"),
        outcomes=sorted({r.outcome.value for r in results}),
        budget_tasks=events["WORKFLOW_TASK_COMPLETED"],
        budget_events=dict(events),
    )


def workflows_for(run: str) -> list[type]:
    """The controller's workflows; the unleased run's ladder has no lease (bench/unleased.py)."""
    if run != "unleased":
        return WORKFLOWS
    return [UnleasedRemediation if w is NodeRemediation else w for w in WORKFLOWS]


def finding(node: str, at: datetime) -> Finding:
    return Finding(
        node=node, check="bench", reason="Bench", severity=Severity.CRITICAL, observed_at=at
    )


async def main(nodes: int, contended: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        # History in memory: the figures are the workflows' cost, not this disk's fsyncs.
        async with dev_server(_free_port(), _free_port(), None, Path(tmp) / "bench.log") as client:
            runs = []
            for name, budget in (
                ("baseline", "100%"),
                ("unleased", "100%"),
                ("free", "100%"),
                # The order alternates from pair to pair: a machine slowing during the
                # bench weighs on both sides.
                *(
                    (f"{run}-{i}", "100%")
                    for i in range(2, PAIRS + 1)
                    for run in (("free", "unleased") if i % 2 == 0 else ("unleased", "free"))
                ),
                # One mixed run's figure spread from 1.2 to 9.8 s: three, and their median.
                *((f"mixed-{i}" if i > 1 else "mixed", "100%") for i in range(1, MIXED + 1)),
                ("contended", contended),
                ("burst", "0"),
            ):
                runs.append(await one_run(client, name, nodes, budget))
                print(f"  {name}: {runs[-1].wall_s:.1f} s", flush=True)
    report = BudgetReport(nodes=nodes, runs=runs, finished_at=datetime.now(UTC))
    print(
        f"\nDisruption budget at {nodes} nodes failing at once "
        "(dev server + real workflows, one machine):\n"
    )
    print("\n".join(report_lines(report)))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "budget.json").write_text(report.model_dump_json(indent=2))
    (RESULTS / "budget.md").write_text("\n".join(budget_section(report)) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--contended-budget", default="50")
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.contended_budget))
