"""The NodeHost of the machine the agent runs on: real NVML, nvidia-smi for resets, the
system's reboot. Destructive actions are off unless the agent was started to allow them."""

from __future__ import annotations

import shlex
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from adapters.host.dependencies import REBOOT_COMMAND, HostDependencies, Machine, Setup
from adapters.host.ledger import FileLedger
from adapters.host.load_test import DEFAULT_LOAD_TEST, LoadTestConfig, run_load_test
from adapters.host.mig import refuse_unless_idle
from adapters.host.nvml import real_nvml
from adapters.host.output import command_line, tool_output
from remedy.acting.capabilities import DependencyCheck
from remedy.core.actions import ACTIONS
from remedy.core.errors import ActionFailed, ActionRefused
from remedy.core.models import Action
from remedy.core.once import once, reboot_once, unsure_not_repeated
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.load import LoadReport
from remedy.detection.probe.runner import ProbeConfig

RESET_TIMEOUT_S = 120
REBOOT_COMMAND_TIMEOUT_S = 60
DEFAULT_REBOOT_COMMAND = shlex.join(REBOOT_COMMAND)  # as the command-line option spells it
# On the node's own disk (a hostPath in deploy/agent.yaml): it must outlive the agent and a reboot.
DEFAULT_STATE_DIR = Path("/var/lib/remedy")
BOOT_ID_FILE = Path("/proc/sys/kernel/random/boot_id")


def boot_time(proc_stat: Path = Path("/proc/stat")) -> datetime | None:
    """When this machine booted (``btime``): kernel-log Xids before it belong to an earlier boot."""
    try:
        for line in proc_stat.read_text().splitlines():
            if line.startswith("btime "):
                return datetime.fromtimestamp(int(line.split()[1]), UTC)
    except OSError:
        pass
    return None


class LocalHost:
    def __init__(
        self,
        name: str,
        probe_config: ProbeConfig,
        *,
        allow_reset: bool = False,
        allow_reboot: bool = False,
        reboot_command: tuple[str, ...] = REBOOT_COMMAND,
        state_dir: Path = DEFAULT_STATE_DIR,
        boot_id_file: Path = BOOT_ID_FILE,
        dry_run: bool = False,
        load_test: LoadTestConfig = DEFAULT_LOAD_TEST,
    ) -> None:
        self.name = name
        self.probe_config = probe_config
        self._allow_reset, self._allow_reboot = allow_reset, allow_reboot
        self._reboot_command = reboot_command
        self.ledger = FileLedger(state_dir / "actions.json")
        self.dry_run = dry_run  # say what a reset or a reboot would do; do nothing
        self._boot_id_file = boot_id_file
        self._dependencies = HostDependencies(
            Setup(probe_config, allow_reset, allow_reboot, reboot_command, load_test.dcgm_host),
            Machine(self.nvml),
        )
        self._load_test = load_test

    def boot_id(self) -> str:
        """The kernel's id of this boot, the same one the kubelet reports as bootID."""
        try:
            return self._boot_id_file.read_text().strip()
        except OSError as exc:
            raise ActionFailed(f"cannot read the boot id {self._boot_id_file}: {exc}") from exc

    def nvml(self) -> NvmlApi:
        return real_nvml()

    def reset_gpus(self, indices: list[int], key: str) -> str:
        if not self._allow_reset:
            raise ActionRefused(
                f"GPU reset is disabled on {self.name}: start the agent with --allow-reset"
            )
        targets = indices or self._every_gpu()
        if not targets:
            raise ActionFailed(
                f"no GPU to reset on {self.name}: the ladder named none and NVML sees none"
            )
        which = ", ".join(map(str, targets))
        if self.dry_run:
            return f"dry run: would reset GPU {which}"
        # A reset destroys every MIG instance of the GPU: refuse while any has processes.
        refuse_unless_idle(self.nvml(), targets, self.name)

        def reset() -> str:
            for gpu in targets:
                # nvidia-smi refuses while processes hold the GPU; the ladder drains first.
                _run(["nvidia-smi", "--gpu-reset", "-i", str(gpu)], RESET_TIMEOUT_S)
            return f"reset GPU {which}"

        return once(
            self.ledger,
            key,
            Action.RESET_GPU,
            _utcnow,
            reset,
            unsure_not_repeated,
            raised_means_failed=True,  # a reset that failed did not happen: retry may run it
        )

    def _every_gpu(self) -> list[int]:
        """Every GPU NVML sees (the probe's expected count when NVML cannot answer)."""
        nvml = self.nvml()
        try:
            nvml.nvmlInit()
            try:
                return list(range(nvml.nvmlDeviceGetCount()))
            finally:
                nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - a broken NVML: fall back on what the node should have
            return list(range(self.probe_config.expected_gpus or 0))

    def reboot(self, key: str) -> str:
        if not self._allow_reboot:
            raise ActionRefused(
                f"reboot is disabled on {self.name}: start the agent with --allow-reboot"
            )

        if self.dry_run:
            return f"dry run: would reboot ({' '.join(self._reboot_command)})"

        def issue() -> str:
            _run(list(self._reboot_command), REBOOT_COMMAND_TIMEOUT_S)
            return f"reboot issued: {' '.join(self._reboot_command)}"

        return reboot_once(self.ledger, key, self.boot_id(), _utcnow, issue)

    def run_action(self, action: Action, command: list[str], key: str) -> str:
        if ACTIONS[action].hardware and not self._allow_reset:
            raise ActionRefused(
                f"{action.value} is disabled on {self.name}: start the agent with --allow-reset"
            )
        shown = command_line(command)
        if self.dry_run:
            return f"dry run: would run {shown}"

        def run() -> str:
            _run(command, RESET_TIMEOUT_S)
            return f"ran {shown}"

        return once(
            self.ledger, key, action, _utcnow, run, unsure_not_repeated, raised_means_failed=True
        )

    def load_test(self, indices: list[int]) -> LoadReport:
        # Every GPU unless the request names some: a slow rank hides on an untouched GPU.
        return run_load_test(indices or self._every_gpu(), self._load_test)

    def dependencies(self, refresh: bool = False) -> list[DependencyCheck]:
        return self._dependencies.check(refresh)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _run(command: list[str], timeout_s: float) -> None:
    """Run a command that must work: a missing tool, a non-zero exit or a hang is a failure
    with its reason (permanent: running it again will not help)."""
    tool, shown = command[0], command_line(command)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise ActionFailed(f"{tool} is not installed on this node (not found on PATH)") from None
    except PermissionError:
        raise ActionFailed(f"{tool} cannot be run on this node: permission denied") from None
    except subprocess.TimeoutExpired:
        raise ActionFailed(f"{shown} did not finish within {timeout_s:g}s") from None
    if done.returncode != 0:
        # stderr says why; stdout only when the tool wrote its error there (nvidia-smi does)
        output = tool_output(done.stderr.strip() or done.stdout, 500) or "no output"
        raise ActionFailed(f"{shown} exited {done.returncode}: {output}")
