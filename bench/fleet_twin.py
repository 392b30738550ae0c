"""The fleet twin: a Llama 3-shaped training fleet (2,048 nodes × 8 GPUs, 54 days, the 419
unexpected interruptions by cause, plus transients) played against one lockstep job under three
policies — remedy's shipped runbooks, "replace on any fault", and manual operations.

Each kind of fault is climbed for real once per policy (NodeRemediation on Temporal's
time-skipping server, see twin/ladders.py); the 54 days pass on a virtual clock. Prints the
comparison and writes bench/results/twin.json for bench/report.py.

    .venv/bin/python bench/fleet_twin.py [--seed 7] [--days 54] [--spares 32] ...
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ValidationError

from remedy.runbook import RunbookSet, load_runbooks
from twin.causes import LLAMA3_CAUSES, TRANSIENTS, expected_count
from twin.checkpoint import lost_fraction, young_daly
from twin.generator import FaultEvent, FaultKind, generate
from twin.gpu_scope import GpuHours, gpu_hours_kept
from twin.job import ActionCosts, JobConfig, LadderRun, Policy, PolicyResult, simulate
from twin.ladders import ORACLE, ladders_for, oracle_ladders, policies
from twin.population import PopulationConfig, PopulationResult, job_success, sample_jobs
from workers.tables import plain

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


class CauseCount(BaseModel):
    cause: str
    expected: float
    generated: int


class PolicyRun(BaseModel):
    result: PolicyResult
    description: str
    ladders: dict[str, LadderRun]  # "fault" or "fault (transient)" → what the ladder did


class OptionRun(BaseModel):
    """One policy's goodput with the job's options (elastic restarts, checkpoint-coordinated
    drains) on and off, at one number of spares."""

    policy: str
    spares: int
    goodput: dict[str, float]  # option → goodput


class CheckpointAdvice(BaseModel):
    mtbf: timedelta  # the job's, measured: the period over its interruptions under remedy
    interval: timedelta  # the job's
    optimal: timedelta  # Young/Daly
    lost_at_interval: float  # first-order lost fraction
    lost_at_optimal: float
    goodput_at_interval: float  # the twin's, remedy
    goodput_at_optimal: float


class TwinReport(BaseModel):
    seed: int
    job: JobConfig
    costs: ActionCosts
    causes: list[CauseCount]
    policies: list[PolicyRun]
    options: list[OptionRun] = []
    checkpoint: CheckpointAdvice | None = None
    population: PopulationConfig | None = None
    job_success: list[PopulationResult] = []
    gpu_hours: GpuHours | None = None  # the same faults on a shared inference fleet
    wall_s: float

    def result(self, policy: str) -> PolicyResult:
        return next(run.result for run in self.policies if run.result.policy == policy)


def hours(text: str) -> timedelta:
    return timedelta(hours=float(text))


def minutes(text: str) -> timedelta:
    return timedelta(minutes=float(text))


async def run(args: argparse.Namespace) -> TwinReport:
    began = time.monotonic()
    job = JobConfig(
        nodes=args.nodes,
        spares=args.spares,
        days=args.days,
        checkpoint_interval=args.checkpoint_interval,
        checkpoint_cost=timedelta(seconds=args.checkpoint_cost_s),
        restart=args.restart,
    )
    causes = [*LLAMA3_CAUSES, TRANSIENTS]
    fleet = job.nodes + job.spares
    events = generate(causes, fleet, job.duration, args.seed)
    generated = Counter(e.cause for e in events)
    counts = [
        CauseCount(
            cause=c.name,
            expected=expected_count(c, fleet, job.duration),
            generated=generated[c.name],
        )
        for c in causes
    ]
    population = PopulationConfig(seed=args.seed)
    jobs = sample_jobs(causes, population)
    kinds = {e.kind for e in events} | {e.kind for j in jobs for e in j.events}
    costs = ActionCosts()
    shipped = RunbookSet(load_runbooks([ROOT / "runbooks"]))
    scoped = RunbookSet(load_runbooks([ROOT / "runbooks", ROOT / "examples" / "runbooks"]))
    real = await _real_ladders(args, shipped, kinds)
    runs, played, successes = [], [], []
    for policy, ladders in [*real, (ORACLE, oracle_ladders(kinds))]:
        result = simulate(events, ladders, policy, job, costs, seed=args.seed)
        named = {
            f"{f or 'no node signal'}{' (transient)' if t else ''}": run
            for (f, t), run in sorted(ladders.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
        }
        runs.append(PolicyRun(result=result, description=policy.description, ladders=named))
        played.append(Played(events, policy, ladders, job, costs, args.seed))
        successes.append(job_success(jobs, ladders, policy, population))
    return TwinReport(
        seed=args.seed,
        job=job,
        costs=costs,
        causes=counts,
        policies=runs,
        options=[
            option_run(history, spares)
            for spares in sorted({job.spares, 0}, reverse=True)
            for history in played
        ],
        checkpoint=checkpoint_advice(played[0]),
        population=population,
        job_success=successes,
        gpu_hours=await gpu_hours_kept(events, real[0][1], shipped, scoped, real[0][0], costs),
        wall_s=time.monotonic() - began,
    )


async def _real_ladders(
    args: argparse.Namespace, shipped: RunbookSet, kinds: set[FaultKind]
) -> list[tuple[Policy, dict[FaultKind, LadderRun]]]:
    out = []
    for policy, choose in policies(
        shipped,
        detect=timedelta(seconds=args.detect_s),
        approval=args.approval,
        manual_detect=args.manual_detect,
        manual_step=args.manual_step,
    ):
        out.append((policy, await ladders_for(kinds, choose)))
        print(f"  {policy.name}: {len(kinds)} ladders climbed", flush=True)
    return out


ELASTIC_SHARE = 0.9  # an elastic job carries on with 90 % of its nodes (torchrun MIN:MAX)


@dataclass(frozen=True)
class Played:
    """One policy's history on the twin, to play again with the job changed."""

    events: list[FaultEvent]
    policy: Policy
    ladders: dict[FaultKind, LadderRun]
    job: JobConfig
    costs: ActionCosts
    seed: int

    def again(self, **job: object) -> PolicyResult:
        changed = self.job.model_copy(update=job)
        return simulate(self.events, self.ladders, self.policy, changed, self.costs, self.seed)


def option_run(played: Played, spares: int) -> OptionRun:
    smallest = max(1, int(played.job.nodes * ELASTIC_SHARE))
    configs: dict[str, dict[str, object]] = {
        "as is": {},
        "coordinated drains": {"coordinated_drains": True},
        "elastic": {"elastic_min": smallest},
        "both": {"coordinated_drains": True, "elastic_min": smallest},
    }
    goodput = {
        name: played.again(**update, spares=spares).goodput for name, update in configs.items()
    }
    return OptionRun(policy=played.policy.name, spares=spares, goodput=goodput)


def checkpoint_advice(played: Played) -> CheckpointAdvice:
    """The job's checkpoint interval beside the one that loses least for its failure rate,
    measured on the twin's own run under the policy."""
    job = played.job
    now = played.again()
    mtbf = job.duration / max(now.interruptions, 1)
    optimal = timedelta(seconds=round(young_daly(job.checkpoint_cost, mtbf).total_seconds()))
    return CheckpointAdvice(
        mtbf=mtbf,
        interval=job.checkpoint_interval,
        optimal=optimal,
        lost_at_interval=lost_fraction(
            job.checkpoint_interval, job.checkpoint_cost, mtbf, job.restart
        ),
        lost_at_optimal=lost_fraction(optimal, job.checkpoint_cost, mtbf, job.restart),
        goodput_at_interval=now.goodput,
        goodput_at_optimal=played.again(checkpoint_interval=optimal).goodput,
    )


POLICY_HEADERS = [
    "policy",
    "goodput",
    "node availability",
    "job interruptions",
    "replacements",
    "needless replacements",
    "false recoveries (came back)",
    "MTTR (h)",
    "job down (h)",
    "work lost (h)",
    "checkpoints (h)",
]


def policy_rows(report: TwinReport) -> list[list[str]]:
    """One row per policy (POLICY_HEADERS): printed here, a Markdown table in the report."""

    def h(delta: timedelta) -> str:
        return f"{delta / timedelta(hours=1):.1f}"

    return [
        [
            r.policy,
            f"{r.goodput:.2%}",
            f"{r.availability:.3%}",
            str(r.interruptions),
            str(r.replacements),
            str(r.needless_replacements),
            f"{r.false_recoveries} ({r.comebacks})",
            h(r.mttr),
            h(r.job_down),
            h(r.lost_work),
            h(r.checkpoint_overhead),
        ]
        for r in (run.result for run in report.policies)
    ]


def gpu_hours_line(gpu: GpuHours) -> str:
    """The figure beside its baseline, e.g. ``GPU-hours out ...: 1,234 node-scoped, 456 with
    GPU-scoped rungs: 778 kept (63.0 %)``."""
    return (
        f"GPU-hours out, the same faults on a shared inference fleet: {gpu.node_scoped:,.0f} "
        f"node-scoped (the shipped runbooks), {gpu.gpu_scoped:,.0f} with GPU-scoped rungs "
        f"({', '.join(gpu.runbooks) or 'none matched'}): {gpu.kept:,.0f} kept "
        f"({gpu.kept_share:.1%})"
    )


def gpu_hours_section(gpu: GpuHours) -> list[str]:
    """The figure in the report, with what it assumes."""
    return [
        "",
        "### GPU-hours kept by GPU-scoped remediation",
        "",
        f"The same fault events (seed, nodes, times) on a shared inference fleet of "
        f"{gpu.gpus_per_node}-GPU nodes, each GPU serving its own pods, remediated twice in "
        "this run: with the shipped runbooks (every rung takes the node and all its GPUs out) "
        "and with examples/runbooks beside them (a `scope: gpu` rung takes out only the faulty "
        "GPU); the GPU-scoped ladders were climbed for real like the others (twin/gpu_scope.py).",
        "",
        *(
            f"| {a} | {b} |"
            for a, b in [
                ("remediation", "GPU-hours out"),
                ("---", "---"),
                ("node-scoped (the shipped runbooks): the baseline", f"{gpu.node_scoped:,.0f}"),
                (
                    f"GPU-scoped where a runbook says so ({', '.join(gpu.runbooks) or 'none'})",
                    f"{gpu.gpu_scoped:,.0f}",
                ),
                ("**kept in service**", f"**{gpu.kept:,.0f}** ({gpu.kept_share:.1%})"),
            ]
        ),
        "",
        f"{gpu.outages} outages took GPUs out; {gpu.gpu_scoped_outages} of them were climbed "
        "GPU-scoped (the faults a GPU-scoped runbook matches); the rest take the node either "
        "way (e.g. a GPU off the bus, a hang, a NIC: reboots and replacements). A GPU-scoped "
        "outage costs its one GPU for the whole outage, the node's "
        "other GPUs only from a node-level rung on; a fault on a node already out is part of "
        "that outage. Not counted: the evicted pods' own restart elsewhere, and the job view "
        "above, where a lockstep job stops with any of its GPUs.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--days", type=float, default=54)
    parser.add_argument("--nodes", type=int, default=2048, help="nodes the job spans")
    parser.add_argument("--spares", type=int, default=32, help="spare nodes, paid for")
    parser.add_argument(
        "--checkpoint-interval",
        type=minutes,
        default=minutes("15"),
        help="minutes of training between checkpoints",
    )
    parser.add_argument(
        "--checkpoint-cost-s",
        type=float,
        default=30,
        help="seconds the job pauses to write a checkpoint",
    )
    parser.add_argument(
        "--restart",
        type=minutes,
        default=minutes("5"),
        help="minutes to reschedule and reload after an interruption",
    )
    parser.add_argument(
        "--detect-s",
        type=float,
        default=30,
        help="automated policies: seconds from a fault to the node cordoned",
    )
    parser.add_argument(
        "--approval",
        type=hours,
        default=hours("1"),
        help="remedy: hours until a person approves a replacement",
    )
    parser.add_argument(
        "--manual-detect",
        type=hours,
        default=hours("1"),
        help="manual: hours until a person finds and cordons the bad node",
    )
    parser.add_argument(
        "--manual-step",
        type=hours,
        default=hours("2"),
        help="manual: hours until a person takes each further step",
    )
    args = parser.parse_args()
    print(
        f"fleet twin: {args.nodes} + {args.spares} nodes, {args.days:g} days, seed {args.seed}",
        flush=True,
    )
    try:
        report = asyncio.run(run(args))
    except ValidationError as exc:  # e.g. --days 0: one line naming the flag, no traceback
        error = exc.errors()[0]
        parser.error(f"--{str(error['loc'][0]).replace('_', '-')}: {error['msg']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "twin.json").write_text(report.model_dump_json(indent=2))
    print("\n".join(plain(POLICY_HEADERS, policy_rows(report))))
    if report.gpu_hours:
        print(gpu_hours_line(report.gpu_hours))
    print(f"({report.wall_s:.0f} s; results in {RESULTS / 'twin.json'})")


if __name__ == "__main__":
    main()
