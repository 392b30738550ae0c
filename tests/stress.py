"""`make test-stress`: the server-backed tests with every core busy, several runs in a row.

    python -m tests.stress [--runs 3] [--load N] [-- PYTEST ARGS]

A busy loop per core (``os.cpu_count()`` unless ``--load`` says otherwise) competes with the
suite for the whole run, as the other jobs of a shared CI machine do. The loops share one
process group of their own, which is killed on the way out however the driver is left: a failed
run, Ctrl-C, SIGTERM. Every run goes to the end, so one report shows each run's result and time;
the exit status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from chaos.processes import sigterm_as_interrupt
from tests.processes import stop_group

BUSY_LOOP = "while True: pass"
PYTEST = [sys.executable, "-m", "pytest", "-m", "server", "-p", "no:cacheprovider", "-q"]


@contextmanager
def busy_cores(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` busy loops in one process group of their own, killed when the block ends."""
    loops: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            group = loops[0].pid if loops else 0  # the first one leads the group
            loops.append(
                subprocess.Popen(
                    [sys.executable, "-c", BUSY_LOOP], stdin=subprocess.DEVNULL, process_group=group
                )
            )
        yield loops
    finally:
        if loops:
            os.killpg(loops[0].pid, signal.SIGKILL)
            for loop in loops:
                loop.wait()


def run_once(pytest_args: list[str]) -> tuple[int, float]:
    """One pytest run in its own process group (stopped with the driver), and how long it took."""
    began = time.monotonic()
    pytest = subprocess.Popen([*PYTEST, *pytest_args], process_group=0)
    try:
        code = pytest.wait()
    finally:
        stop_group(pytest, signal.SIGTERM)  # its own teardown stops what it started
    return code, time.monotonic() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.stress",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=int, default=os.cpu_count() or 1, help="busy loops")
    parser.add_argument("pytest_args", nargs="*", help="after --: passed on to pytest")
    args = parser.parse_args(argv)
    results: list[tuple[int, float]] = []
    try:
        with sigterm_as_interrupt(), busy_cores(args.load):
            for n in range(1, args.runs + 1):
                print(f"== stress run {n} of {args.runs}: {args.load} busy loops", flush=True)
                results.append(run_once(args.pytest_args))
                code, took = results[-1]
                print(f"== stress run {n}: {_said(code)} in {took:.0f}s", flush=True)
    except KeyboardInterrupt as stop:
        print(f"== stopped ({stop}) after {len(results)} of {args.runs} runs", flush=True)
        return 130
    print(f"== {args.runs} runs with {args.load} busy loops:", flush=True)
    for n, (code, took) in enumerate(results, 1):
        print(f"   run {n}: {_said(code)} in {took:.0f}s")
    return 0 if all(code == 0 for code, _ in results) else 1


def _said(code: int) -> str:
    return "passed" if code == 0 else f"FAILED (pytest exit {code})"


if __name__ == "__main__":
    sys.exit(main())
