"""The suite's own rules, a pytest plugin registered by tests/conftest.py.

- **Two kinds.** A test is ``server`` when it uses a Temporal server (``time_env``,
  ``dev_env``), the Kubernetes API emulator (``api``) or child processes (``processes``), or is
  marked so; every other test is ``fast``. ``make test-fast`` runs the fast ones, and a fast
  test that starts a server or a process anyway fails, naming what it started: the kinds cannot
  drift.
- **Two lanes.** A test is ``slow`` when it is marked so or listed in ``SLOW`` (the long
  scenarios: chaos, rehearsals, many-ladder runs); ``make test`` runs every other test and
  ``make test-slow`` the slow ones (``--lane test``, ``--lane slow``; bare pytest runs both),
  and CI (``.ci/run``) both. Every collected test is in exactly one lane; collection fails when
  a test is marked both fast and server, or ``SLOW`` names a file that is not there.
- **Parallel.** Under pytest-xdist (``-n``) every worker is a session of its own: its own
  session servers, subreaper, SIGTERM handler and leak checks; a worker's leaks come back to
  the controller, which fails the run with them.
- **Nothing outlives the suite.** SIGTERM stops pytest as Ctrl-C does, so every fixture's
  teardown runs. pytest is a child subreaper, so an orphaned grandchild comes back to it. After
  the last test, a process still running, a thread that would keep the interpreter from exiting
  or a task left on the event loop fails the run by name (the processes are killed): a leak is a
  failure, never a hang. A task a module's tests leave running is stopped as the module ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Generator
from pathlib import Path
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
# The slow lane (make test-slow; CI runs it after make test): test files, or node ids, of long
# scenarios, most through real processes or at scale. Together about two thirds of the suite's
# CPU seconds (bench/results/suite_time.md).
SLOW: tuple[str, ...] = (
    "tests/test_chaos.py",  # a dev server, a controller and agents killed and restarted
    "tests/test_cli_unreachable.py",  # every command as a process
    "tests/test_cli_no_traceback.py",  # every command's bad inputs, some as processes
    "tests/test_demo.py",  # the demo as a process, for seconds each
    "tests/test_ladder_model.py",  # interleavings, a server and workers each
    "tests/test_recipes.py",  # each recipe applied to a copy of the tree, its tests run there
    "tests/test_rehearse.py",  # every shipped runbook rehearsed end to end
    "tests/test_chaos_store.py",  # processes writing the chaos fleet's file at once
    "tests/test_compose.py",  # the compose setup script against a real server
    "tests/test_job_side.py",  # the example job as a process
    "tests/test_kubernetes_scale.py",  # big clusters on the emulator
    "tests/test_silence_storm.py",  # twenty silent agents, then a fault
    "tests/test_temporal_tls.py",  # the long-lived processes over TLS
    "tests/test_twin.py",  # the fleet twin's many ladders
    "tests/test_twin_gpu_hours.py",  # the twin's ladders again, counting GPU-hours
    "tests/test_yaml_limits.py",  # hostile files through the CLI's processes
    "tests/test_rollout.py",  # two controller versions, one rolled out over the other
    "tests/test_manifests.py",  # every feature's DaemonSet parsed by the agent's own CLI
    "tests/test_alerts_end_to_end.py",  # the demo, a real Prometheus and the breaker's minute
    # Single scenarios of 8 s or more (a busy machine's figures, `--durations`): bursts past a
    # cap, continued-as-new budgets, long tolerance windows, an agent as a process.
    "tests/test_budget_continued.py::test_the_budget_names_its_holders_and_waiters_after_it_continued_as_new",
    "tests/test_liveness_scan.py::test_liveness_is_judged_on_the_controllers_clock_whatever_the_nodes_clock_says",
    "tests/test_lease_answered.py::test_a_burst_past_the_updates_cap_and_a_continue_as_new_loses_no_grant",
    "tests/test_agent.py::test_agent_finds_a_fault_starts_the_ladder_and_a_dead_agent_fails_closed",
    "tests/test_budget_renewal.py::test_a_burst_of_reports_ends_in_the_run_it_began_in",
    "tests/test_lease_answer_unread.py::test_a_holder_that_asked_again_by_signal_is_told_its_grant_by_signal",
    "tests/test_pool_held_by_people.py::test_a_budget_started_afresh_serves_its_waiters_in_the_order_they_asked",
    "tests/test_node_remediation_dev_server.py::test_long_tolerance_window_continues_as_new_and_keeps_its_state",
    "tests/test_runbook_commands.py::test_schema_accepts_every_shipped_runbook",
    "tests/test_fleet_scan.py::test_scan_remediates_a_silent_bad_condition_and_admits_a_new_node",
    "tests/test_disruption_budget.py::test_budget_of_two_never_lets_more_than_two_nodes_be_disrupted",
)
ALL = "all"
LANES = ("test", "slow")
THREAD_GRACE_S = 10.0  # for a thread still finishing when the session ends
LEAKS = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[LEAKS] = []
    become_subreaper()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--lane",
        choices=[ALL, *LANES],
        default=ALL,
        help="run one lane: `test` (make test) or `slow` (make test-slow); default all",
    )


@pytest.hookimpl(tryfirst=True)  # before -m and -k read the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _check_slow_list(config.rootpath)
    both = []
    for item in items:
        fast, server = (item.get_closest_marker(kind) is not None for kind in ("fast", "server"))
        if fast and server:
            both.append(item.nodeid)
        elif not (fast or server):
            uses = set(getattr(item, "fixturenames", ()))  # a Function's; other items use none
            item.add_marker("server" if SERVER_FIXTURES & uses else "fast")
        if _lane(item) == "slow" and not item.get_closest_marker("slow"):
            item.add_marker("slow")
    if both:
        raise pytest.UsageError(f"marked both fast and server: {both}")
    lanes = {lane: [i for i in items if _lane(i) == lane] for lane in LANES}
    # Every test in exactly one lane: `make test` and `make test-slow` together run them all.
    assert sum(map(len, lanes.values())) == len(items), "a test in no lane, or in two"
    chosen = config.getoption("--lane", ALL)
    if chosen != ALL:
        config.hook.pytest_deselected(
            items=[i for lane, its in lanes.items() if lane != chosen for i in its]
        )
        items[:] = lanes[chosen]


def _lane(item: pytest.Item) -> str:
    listed = any(item.nodeid == s or item.nodeid.startswith(f"{s}::") for s in SLOW)
    return "slow" if listed or item.get_closest_marker("slow") else "test"


def _check_slow_list(root: Path) -> None:
    missing = [s for s in SLOW if not (root / s.split("::")[0]).is_file()]
    if missing:
        raise pytest.UsageError(f"tests/suite.py's SLOW names what is not there: {missing}")


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
        with contextlib.suppress(ChildProcessError):  # reaped here, not by a subreaper above
            os.waitpid(child.pid, 0)
    leaks += [f"thread {t.name}" for t in _blocking_threads(THREAD_GRACE_S)]
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller reports them
        session.config.workeroutput["leaks"] = leaks  # type: ignore[attr-defined]
        return
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


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """An xdist worker is done: its leaks are the run's (pytest_sessionfinish reports them)."""
    leaks = getattr(node, "workeroutput", {}).get("leaks", [])
    node.config.stash[LEAKS] += [f"{node.gateway.id}: {leak}" for leak in leaks]


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
