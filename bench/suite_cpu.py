"""A pytest plugin that records each test's CPU seconds: the test process's own and its reaped
children's (processes the test started and waited for), with its wall seconds, as JSON lines.

    pytest -p bench.suite_cpu --suite-cpu=FILE ...

CPU time, unlike wall time, hardly moves with the load of a shared machine: the figures of
bench/results/suite_time.md. A session server's CPU (the dev server) counts where it is reaped,
at the end of its worker's session."""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-cpu", default=None, help="append each test's CPU seconds here")


def _cpu() -> float:
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    path = item.config.getoption("--suite-cpu")
    began, cpu = time.monotonic(), _cpu()
    try:
        return (yield)
    finally:
        if path:
            row = {
                "test": item.nodeid,
                "cpu_s": round(_cpu() - cpu, 3),
                "wall_s": round(time.monotonic() - began, 3),
                "kind": "server" if item.get_closest_marker("server") else "fast",
            }
            with Path(path).open("a") as out:
                out.write(json.dumps(row) + "\n")
