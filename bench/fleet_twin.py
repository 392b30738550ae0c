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
from datetime import timedelta
from pathlib import Path

from pydantic import BaseModel, ValidationError

from remedy.runbook import RunbookSet, load_runbooks
from twin.causes import LLAMA3_CAUSES, TRANSIENTS, expected_count
from twin.generator import generate
from twin.job import ActionCosts, JobConfig, LadderRun, PolicyResult, simulate
from twin.ladders import ladders_for, policies
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


class TwinReport(BaseModel):
    seed: int
    job: JobConfig
    costs: ActionCosts
    causes: list[CauseCount]
    policies: list[PolicyRun]
    wall_s: float


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
    kinds = {e.kind for e in events}
    costs = ActionCosts()
    shipped = RunbookSet(load_runbooks([ROOT / "runbooks"]))
    runs = []
    for policy, choose in policies(
        shipped,
        detect=timedelta(seconds=args.detect_s),
        approval=args.approval,
        manual_detect=args.manual_detect,
        manual_step=args.manual_step,
    ):
        ladders = await ladders_for(kinds, choose)
        result = simulate(events, ladders, policy, job, costs)
        named = {
            f"{f or 'no node signal'}{' (transient)' if t else ''}": run
            for (f, t), run in sorted(ladders.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
        }
        runs.append(PolicyRun(result=result, description=policy.description, ladders=named))
        print(f"  {policy.name}: {len(ladders)} ladders climbed", flush=True)
    return TwinReport(
        seed=args.seed,
        job=job,
        costs=costs,
        causes=counts,
        policies=runs,
        wall_s=time.monotonic() - began,
    )


POLICY_HEADERS = [
    "policy",
    "goodput",
    "node availability",
    "job interruptions",
    "replacements",
    "needless replacements",
    "false recoveries",
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
            str(r.false_recoveries),
            h(r.mttr),
            h(r.job_down),
            h(r.lost_work),
            h(r.checkpoint_overhead),
        ]
        for r in (run.result for run in report.policies)
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
    print(f"({report.wall_s:.0f} s; results in {RESULTS / 'twin.json'})")


if __name__ == "__main__":
    main()
