"""The NodeHost of the machine the agent runs on: real NVML, nvidia-smi for resets, the
system's reboot. Destructive actions are off unless the agent was started to allow them."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

from adapters.host.ledger import FileLedger
from adapters.host.load_test import run_load_test
from adapters.host.nvml import real_nvml
from remedy.errors import ActionFailed, ActionRefused
from remedy.gpu import NvmlApi
from remedy.models import Action
from remedy.once import once, reboot_once, unsure_not_repeated
from remedy.probe.runner import ProbeConfig

RESET_TIMEOUT_S = 120
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
        reboot_command: tuple[str, ...] = ("systemctl", "reboot"),
        state_dir: Path = DEFAULT_STATE_DIR,
        boot_id_file: Path = BOOT_ID_FILE,
        dry_run: bool = False,
    ) -> None:
        self.name = name
        self.probe_config = probe_config
        self._allow_reset, self._allow_reboot = allow_reset, allow_reboot
        self._reboot_command = reboot_command
        self.ledger = FileLedger(state_dir / "actions.json")
        self.dry_run = dry_run  # say what a reset or a reboot would do; do nothing
        self._boot_id_file = boot_id_file

    def boot_id(self) -> str:
        """The kernel's id of this boot, the same one the kubelet reports as bootID."""
        try:
            return self._boot_id_file.read_text().strip()
        except OSError as exc:
            raise ActionFailed(f"cannot read the boot id {self._boot_id_file}: {exc}") from exc

    def nvml(self) -> NvmlApi:
        return real_nvml()

    def reset_gpus(self, indices: list[int], key: str = "") -> str:
        if not self._allow_reset:
            raise ActionRefused(
                f"GPU reset is disabled on {self.name}: start the agent with --allow-reset"
            )
        targets = indices or list(range(self.probe_config.expected_gpus or 0))
        if self.dry_run:
            return f"dry run: would reset GPU {', '.join(map(str, targets)) or 'none'}"

        def reset() -> str:
            self._reset(targets)
            return f"reset GPU {', '.join(map(str, indices)) or 'all'}"

        return once(
            self.ledger, key, Action.RESET_GPU, datetime.now(UTC), reset, unsure_not_repeated
        )

    def _reset(self, targets: list[int]) -> None:
        for gpu in targets:
            # nvidia-smi refuses while processes hold the GPU; the ladder drains first.
            done = subprocess.run(
                ["nvidia-smi", "--gpu-reset", "-i", str(gpu)],
                capture_output=True,
                text=True,
                timeout=RESET_TIMEOUT_S,
            )
            if done.returncode != 0:
                raise ActionFailed(
                    f"nvidia-smi --gpu-reset -i {gpu} failed: "
                    f"{(done.stdout + done.stderr).strip()[-500:]}"
                )

    def reboot(self, key: str = "") -> str:
        if not self._allow_reboot:
            raise ActionRefused(
                f"reboot is disabled on {self.name}: start the agent with --allow-reboot"
            )

        if self.dry_run:
            return f"dry run: would reboot ({' '.join(self._reboot_command)})"

        def issue() -> str:
            subprocess.run(list(self._reboot_command), check=False, timeout=60)
            return f"reboot issued: {' '.join(self._reboot_command)}"

        now = datetime.now(UTC)
        return reboot_once(self.ledger, key, self.boot_id(), now, issue)

    def load_test(self, indices: list[int]) -> list[str]:
        gpus = indices or list(range(self.probe_config.expected_gpus or 0))
        return run_load_test(gpus)
