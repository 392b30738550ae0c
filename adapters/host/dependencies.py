"""The dependency checks on the machine the agent runs on (remedy/acting/capabilities.py says what
each enables): NVML and the GPUs it sees, the reset tool, the reboot path (checked without
rebooting), the load-test engine, the kernel log, and NIC expectations on a node with RDMA NICs.

Each check answers; none raises. What it needs from the machine comes in as arguments, so
tests give it a machine of their own."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adapters.host.dcgm import dcgm_unavailable
from adapters.host.kernel_log import KernelLogTail
from adapters.host.kernel_sources import AutoSource, JournalSource, KmsgSource
from adapters.host.nics import INFINIBAND
from adapters.host.output import tool_output
from remedy.acting.capabilities import EXPENSIVE, Dependency, DependencyCheck
from remedy.core.threads import call_with_timeout
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.runner import ProbeConfig

ENTER_TIMEOUT_S = 10.0
REBOOT_COMMAND = ("systemctl", "reboot")  # the default; the agent's --reboot-command replaces it
# A reboot path that breaks (an image update) or a DCGM host engine that stops shows in minutes.
RECHECK_EXPENSIVE_S = 600.0
# `systemctl is-system-running` states in which systemd answers (degraded: a unit failed).
SYSTEMD_UP = frozenset({"initializing", "starting", "running", "degraded", "maintenance"})
KMSG = Path("/dev/kmsg")
KERN_LOG = Path("/var/log/kern.log")

Which = Callable[[str], str | None]
Run = Callable[[Sequence[str]], tuple[int, str]]  # exit status and output


@dataclass(frozen=True)
class Machine:
    """What the checks read from the machine; the defaults are the real one."""

    nvml: Callable[[], NvmlApi]
    which: Which = shutil.which
    run: Run = field(default_factory=lambda: _run)
    has_module: Callable[[str], bool] = field(default_factory=lambda: _has_module)
    infiniband: Path = INFINIBAND
    kmsg: Path = KMSG
    kern_log: Path = KERN_LOG


@dataclass(frozen=True)
class Setup:
    """How the agent was started: what it expects and what it may do."""

    probe: ProbeConfig
    allow_reset: bool = False
    allow_reboot: bool = False
    reboot_command: tuple[str, ...] = REBOOT_COMMAND
    dcgm_host: str = ""  # dcgmi --host: the GPU operator's nvidia-dcgm, if not local


class HostDependencies:
    """Every check in the order of ``Dependency``; the expensive ones (a process to spawn: the
    reboot path, DCGM's host engine) are kept for ``RECHECK_EXPENSIVE_S`` unless a refresh is
    asked for."""

    def __init__(
        self, setup: Setup, machine: Machine, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._setup, self._machine, self._clock = setup, machine, clock
        self._cached: dict[Dependency, DependencyCheck] = {}
        self._cached_at: float | None = None

    def check(self, refresh: bool = False) -> list[DependencyCheck]:
        setup, machine = self._setup, self._machine
        stale = self._cached_at is None or self._clock() - self._cached_at > RECHECK_EXPENSIVE_S
        if refresh or stale:
            # In Dependency's order, not the set's: the processes run in a fixed order.
            self._cached = {d: _check(d, setup, machine) for d in Dependency if d in EXPENSIVE}
            self._cached_at = self._clock()
        return [self._cached.get(d) or _check(d, setup, machine) for d in Dependency]


def nvml(setup: Setup, machine: Machine) -> DependencyCheck:
    probe = setup.probe
    expected = probe.expected_gpus
    try:
        lib = machine.nvml()
        call_with_timeout(lib.nvmlInit, probe.check_timeout_s)
        try:
            seen = call_with_timeout(lib.nvmlDeviceGetCount, probe.check_timeout_s)
        finally:
            try:
                lib.nvmlShutdown()
            except Exception:  # noqa: BLE001 - the count is what was asked
                pass
    except Exception as exc:  # noqa: BLE001 - a missing library, no driver, a hang: all say why
        return DependencyCheck.of(
            Dependency.NVML, False, f"NVML cannot be used: {type(exc).__name__}: {exc}"
        )
    if expected is None:
        return DependencyCheck.of(
            Dependency.NVML,
            False,
            f"NVML sees {seen} GPUs but no count is expected (--expected-gpus {seen}): "
            "a GPU that falls off the bus would go unseen",
        )
    if seen != expected:
        return DependencyCheck.of(Dependency.NVML, False, f"NVML sees {seen} of {expected} GPUs")
    return DependencyCheck.of(Dependency.NVML, True, f"NVML sees all {seen} GPUs")


def reset_tool(setup: Setup, machine: Machine) -> DependencyCheck:
    where = machine.which("nvidia-smi")
    problems = [] if where else ["nvidia-smi is not on PATH"]
    if not setup.allow_reset:
        problems.append("GPU resets are not allowed (start the agent with --allow-reset)")
    if problems:
        return DependencyCheck.of(Dependency.RESET_TOOL, False, "; ".join(problems))
    return DependencyCheck.of(Dependency.RESET_TOOL, True, f"{where} --gpu-reset, allowed")


def reboot_path(setup: Setup, machine: Machine) -> DependencyCheck:
    """The reboot command's binary is there and, through nsenter, reaches the host's; a
    systemctl can reach systemd. Checked by entering pid 1's namespaces, looking the command up
    there and asking systemd its state — never by rebooting."""
    command = setup.reboot_command
    shown = " ".join(command)
    problems = [] if setup.allow_reboot else ["reboots are not allowed (--allow-reboot)"]
    if not command or machine.which(command[0]) is None:
        problems.append(f"{command[0] if command else 'no command'} is not on PATH ({shown})")
    elif Path(command[0]).name == "nsenter":
        problems += _through_nsenter(command, machine.run)
    elif Path(command[0]).name == "systemctl":
        problems += _systemd_answers([command[0]], machine.run)
    if problems:
        return DependencyCheck.of(Dependency.REBOOT_PATH, False, "; ".join(problems))
    return DependencyCheck.of(Dependency.REBOOT_PATH, True, f"{shown}, allowed")


def _through_nsenter(command: tuple[str, ...], run: Run) -> list[str]:
    split = command.index("--") if "--" in command else None
    enter = list(command[:split]) if split is not None else [command[0], "-t", "1", "-m"]
    status, output = run([*enter, "--", "true"])
    if status != 0:
        return [f"cannot enter the host's namespaces ({' '.join(enter)}): {output}"]
    target = command[split + 1] if split is not None and split + 1 < len(command) else None
    if target is None:
        return []
    status, _ = run([*enter, "--", "sh", "-c", f'command -v "{target}"'])
    if status != 0:
        return [f"{target} is not found on the host"]
    return _systemd_answers([*enter, "--", target], run) if target == "systemctl" else []


def _systemd_answers(systemctl: list[str], run: Run) -> list[str]:
    """A systemctl with no systemd to talk to (a container's own, say) cannot reboot."""
    status, output = run([*systemctl, "is-system-running"])
    state = output.split()[0] if output else ""
    if state in SYSTEMD_UP:
        return []
    return [f"systemctl cannot reach systemd: {output or f'exit {status}'}"]


def load_test(setup: Setup, machine: Machine) -> DependencyCheck:
    """DCGM when its host engine answers (as the deep diagnose decides it), else torch or
    cupy."""
    why_not_dcgm = dcgm_unavailable(host=setup.dcgm_host, which=machine.which, run=machine.run)
    if why_not_dcgm is None:
        engine = f"host engine at {setup.dcgm_host}" if setup.dcgm_host else "local host engine"
        return DependencyCheck.of(Dependency.LOAD_TEST, True, f"DCGM diagnostics ({engine})")
    library = next((m for m in ("torch", "cupy") if machine.has_module(m)), None)
    if library:
        return DependencyCheck.of(Dependency.LOAD_TEST, True, f"built-in load test on {library}")
    return DependencyCheck.of(
        Dependency.LOAD_TEST,
        False,
        f"no load-test engine: {why_not_dcgm}; neither torch nor cupy importable; "
        "the deep diagnose cannot run (use the GPU agent image, Dockerfile.gpu)",
    )


def kernel_log(setup: Setup, machine: Machine) -> DependencyCheck:
    """The configured source answers, as the probe will read it: the file or /dev/kmsg opens,
    the journal answers a read of no line (a read of lines would move the agent's cursor)."""
    source = setup.probe.kernel_log
    if isinstance(source, KernelLogTail | KmsgSource):
        problem = _unreadable(source.path)
        ok, detail = problem is None, problem or f"reading {source.path}"
        return DependencyCheck.of(Dependency.KERNEL_LOG, ok, detail)
    if isinstance(source, JournalSource):
        problem = _journal_silent(source, machine)
        detail = problem or f"reading the {source}: {source.check_command()[0]} answers"
        return DependencyCheck.of(Dependency.KERNEL_LOG, problem is None, detail)
    here = [str(p) for p in (machine.kmsg, machine.kern_log) if _unreadable(p) is None]
    here += ["journal"] if _journal_silent(JournalSource(), machine) is None else []
    if isinstance(source, AutoSource):
        detail = f"auto: {', '.join(here)}" if here else "auto: no kernel log source can be read"
        return DependencyCheck.of(Dependency.KERNEL_LOG, bool(here), detail)
    if source is not None:  # a source of another kind answers for itself when read
        return DependencyCheck.of(Dependency.KERNEL_LOG, True, f"reading {source}")
    return DependencyCheck.of(
        Dependency.KERNEL_LOG,
        False,
        "no kernel log configured (--kernel-log none): Xids NVML misses go unseen; readable "
        "here: " + (", ".join(here) or "none"),
    )


def _journal_silent(source: JournalSource, machine: Machine) -> str | None:
    """Why the journal gives the probe nothing (no journalctl, no such directory, no journal
    of this boot), or None when journalctl answers."""
    command = source.check_command()
    if machine.which(command[0]) is None:
        return f"{command[0]} is not on PATH"
    status, output = machine.run(command)
    if status != 0:
        return f"{' '.join(command)} exited {status}: {output or 'no output'}"
    return None


def nic_config(setup: Setup, machine: Machine) -> DependencyCheck:
    probe, infiniband = setup.probe, machine.infiniband
    try:
        devices = sorted(d.name for d in infiniband.iterdir()) if infiniband.is_dir() else []
    except OSError as exc:
        return DependencyCheck.of(Dependency.NIC_CONFIG, False, f"cannot list {infiniband}: {exc}")
    expected = probe.expected_nics
    if expected is not None:
        if len(devices) < expected:
            detail = (
                f"expects {expected} RDMA devices, {len(devices)} present: every probe will "
                "report NicMissing"
            )
        elif len(devices) > expected:
            detail = (
                f"expects {expected} RDMA devices, {len(devices)} present: a NIC that goes away "
                f"goes unseen (--expected-nics {len(devices)})"
            )
        else:
            detail = f"expects {expected} RDMA devices, {len(devices)} present"
        return DependencyCheck.of(Dependency.NIC_CONFIG, len(devices) == expected, detail)
    if not devices:
        return DependencyCheck.of(Dependency.NIC_CONFIG, True, "no RDMA NICs on this node")
    named = ", ".join(devices[:4]) + (", ..." if len(devices) > 4 else "")
    return DependencyCheck.of(
        Dependency.NIC_CONFIG,
        False,
        f"{len(devices)} RDMA devices ({named}) but no expectation (--expected-nics, "
        "--nic-rate): a NIC that goes down goes unseen",
    )


CHECKS: dict[Dependency, Callable[[Setup, Machine], DependencyCheck]] = {
    Dependency.NVML: nvml,
    Dependency.RESET_TOOL: reset_tool,
    Dependency.REBOOT_PATH: reboot_path,
    Dependency.LOAD_TEST: load_test,
    Dependency.KERNEL_LOG: kernel_log,
    Dependency.NIC_CONFIG: nic_config,
}

# Only what the node's GPUs need: a node that should have none (--expected-gpus 0) needs none.
GPU_ONLY = frozenset(
    {Dependency.NVML, Dependency.RESET_TOOL, Dependency.LOAD_TEST, Dependency.KERNEL_LOG}
)


def _check(dependency: Dependency, setup: Setup, machine: Machine) -> DependencyCheck:
    if dependency in GPU_ONLY and setup.probe.expected_gpus == 0:
        return DependencyCheck.of(
            dependency, True, "not needed: not a GPU node (--expected-gpus 0)"
        )
    return CHECKS[dependency](setup, machine)


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read, or None. Opened without blocking: /dev/kmsg is a device."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken install is no engine
        return False


def _run(command: Sequence[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            list(command), capture_output=True, text=True, timeout=ENTER_TIMEOUT_S
        )
    except FileNotFoundError:
        return 127, f"{command[0]} is not installed"
    except subprocess.TimeoutExpired:
        return 124, f"no answer within {ENTER_TIMEOUT_S:g}s"
    return done.returncode, tool_output(done.stdout + done.stderr, 300)
