"""``python -m chaos [--short]``: the chaos run (prints the table; the full run also writes
bench/results/chaos.md). ``python -m chaos controller|agents ...``: the worker processes the
run starts."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

from chaos.config import FULL, ROOT, SHORT
from chaos.experiments import BY_KEY, EXPERIMENTS
from chaos.processes import sigterm_as_interrupt
from chaos.roles import run_agents, run_controller
from chaos.run import run
from chaos.table import markdown, problems, write_results


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    if argv and argv[0] in ("controller", "agents"):
        return _role(argv[0], argv[1:])
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--short", action="store_true", help="a few ladders per experiment")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", default="", help="experiments to run, e.g. abc")
    parser.add_argument("--workdir", type=Path, help="fleet files, logs, the SQLite files")
    parser.add_argument(
        "--at-once", type=int, help="experiments side by side (default: the size's)"
    )
    parser.add_argument("--results", type=Path, help="write chaos.md and report.md's section here")
    args = parser.parse_args(argv)
    size = SHORT if args.short else FULL
    experiments = [BY_KEY[k] for k in args.only] if args.only else EXPERIMENTS
    results = args.results or (None if args.short else ROOT / "bench" / "results")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="remedy-chaos-"))
    print(f"chaos: {size.name} run, seed {args.seed}, work in {workdir}", flush=True)
    started = time.monotonic()
    with sigterm_as_interrupt():
        at_once = args.at_once or size.at_once
        rows = asyncio.run(run(experiments, size, args.seed, workdir, at_once))
    wall_s = time.monotonic() - started
    print("\n".join(markdown(rows)))
    print(f"\nwall time {wall_s:.0f} s")
    found = problems(rows)
    print("\n".join(found) if found else "nothing found")
    if results is not None:
        write_results(rows, size, args.seed, wall_s, results)
        print(f"wrote {results / 'chaos.md'}")
    return 1 if found else 0


def _role(role: str, argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m chaos {role}")
    parser.add_argument("--address", required=True)
    parser.add_argument("--fleet", type=Path, required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--speedup", type=float, default=60.0)
    parser.add_argument("--name", default=role, help="the worker's identity: remedy-NAME:USER@HOST")
    parser.add_argument("--agents-queue", help="the controller's: the queue the agents poll")
    args = parser.parse_args(argv)
    if role == "controller":
        asyncio.run(
            run_controller(
                args.address,
                args.fleet,
                args.task_queue,
                args.speedup,
                args.name,
                args.agents_queue,
            )
        )
    else:
        asyncio.run(run_agents(args.address, args.fleet, args.task_queue, args.name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
