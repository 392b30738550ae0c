"""The suite's own rules, a pytest plugin registered by tests/conftest.py.

- **Two lanes.** A test is ``server`` when it uses a Temporal server (``time_env``,
  ``dev_env``), the Kubernetes API emulator (``api``) or child processes (``processes``), or is
  marked so; every other test is ``fast``. ``make test-fast`` runs the fast lane, and a fast
  test that starts a server or a process anyway fails, naming what it started: the lanes cannot
  drift.
- **Nothing outlives the suite.** SIGTERM stops pytest as Ctrl-C does, so every fixture's
  teardown runs. pytest is a child subreaper, so an orphaned grandchild comes back to it. After
  the last test, a process still running, a thread that would keep the interpreter from exiting
  or a task left on the event loop fails the run by name (the processes are killed): a leak is a
  failure, never a hang. A task a module's tests leave running is stopped as the module ends.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Generator
from types import FrameType
from typing import Any, NoReturn

import pytest
from temporalio.testing import WorkflowEnvironment

from kubeapi import ApiServer
from tests.processes import become_subreaper, kill_tree, leftover_children, stop_tasks_since

SERVER_FIXTURES = frozenset({"time_env", "dev_env", "api", "processes"})
# What a fast test must not do, as (owner, attribute, what it is).
TRIPWIRES: list[tuple[object, str, str]] = [
    (subprocess.Popen, "_execute_child", "a child process"),
    (WorkflowEnvironment, "start_time_skipping", "a time-skipping Temporal server"),
    (WorkflowEnvironment, "start_local", "a Temporal dev server"),
    (ApiServer, "__init__", "the Kubernetes API emulator"),
]
THREAD_GRACE_S = 10.0  # for a thread still finishing when the session ends
LEAKS = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[LEAKS] = []
    become_subreaper()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("server") or item.get_closest_marker("fast"):
            continue
        uses = set(getattr(item, "fixturenames", ()))  # a Function's; other items use none
        lane = "server" if SERVER_FIXTURES & uses else "fast"
        item.add_marker(lane)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    with _lane_kept(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _lane_kept(item):
        return (yield)


class _lane_kept:
    """In a fast test, starting a server or a process fails the test, naming it."""

    def __init__(self, item: pytest.Item) -> None:
        self.fast = item.get_closest_marker("fast") is not None
        self.nodeid = item.nodeid
        self.patch = pytest.MonkeyPatch()

    def __enter__(self) -> None:
        if self.fast:
            for owner, attribute, what in TRIPWIRES:
                self.patch.setattr(owner, attribute, self._refuse(what))

    def _refuse(self, what: str) -> Any:
        def refuse(*args: object, **kwargs: object) -> NoReturn:
            pytest.fail(
                f"{self.nodeid} is a fast test but started {what}: use the `processes`, "
                "`time_env`, `dev_env` or `api` fixture, or mark it `server`",
                pytrace=False,
            )

        return refuse

    def __exit__(self, *exc: object) -> None:
        self.patch.undo()


@pytest.fixture(scope="module", autouse=True)
async def _no_task_left_by_the_module() -> AsyncIterator[None]:
    """A task a module's tests started and left running (a worker, an agent) is stopped when
    the module ends, while the session's dev server still answers, and fails its last test:
    left for the end, a Temporal worker whose server is gone never finishes shutting down,
    and closing the loop hangs. (Per module, not per test: a module's fixture, a TLS proxy,
    serves connections from test to test.)"""
    before = asyncio.all_tasks()
    yield
    if left := await stop_tasks_since(before):
        raise AssertionError(f"tests of this module left tasks running (stopped now): {left}")


@pytest.fixture(scope="session", autouse=True)
async def _no_task_left(pytestconfig: pytest.Config) -> AsyncIterator[None]:
    """Tasks still on the session's event loop when every other fixture has ended."""
    yield
    pytestconfig.stash[LEAKS] += [f"task {t}" for t in await stop_tasks_since(set())]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """After every fixture's teardown: nothing may be left running."""
    leaks = session.config.stash[LEAKS]
    for child in leftover_children():
        leaks.append(f"process {child.pid} (killed): {child.command()}")
        kill_tree(child)
    leaks += [f"thread {t.name}" for t in _blocking_threads(THREAD_GRACE_S)]
    if not leaks:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = ["left running after the last test (a leak in a test or fixture):", *leaks]
    if reporter is not None:
        reporter.section("leaks", sep="=", red=True, bold=True)
        for line in lines:
            reporter.write_line(line, red=True)
    else:
        print("\n".join(lines), file=sys.stderr)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """A thread that would keep the interpreter from exiting (reported above) does not get to:
    the run ends with its exit status now."""
    if _blocking_threads(0):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(pytest.ExitCode.TESTS_FAILED))


def _blocking_threads(grace_s: float) -> list[threading.Thread]:
    """Non-daemon threads other than this one: the interpreter waits for them at exit."""
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.daemon and t.is_alive()
    ]
    for thread in others:
        thread.join(grace_s / len(others))
    return [t for t in others if t.is_alive()]
