"""The NodeHost of the machine the agent runs on: real NVML, nvidia-smi for resets, the
system's reboot. Destructive actions are off unless the agent was started to allow them."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

from adapters.host.load_test import run_load_test
from adapters.host.nvml import real_nvml
from remedy.errors import ActionFailed, ActionRefused
from remedy.gpu import NvmlApi
from remedy.probe.runner import ProbeConfig

RESET_TIMEOUT_S = 120


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
    ) -> None:
        self.name = name
        self.probe_config = probe_config
        self._allow_reset, self._allow_reboot = allow_reset, allow_reboot
        self._reboot_command = reboot_command

    def nvml(self) -> NvmlApi:
        return real_nvml()

    def reset_gpus(self, indices: list[int]) -> None:
        if not self._allow_reset:
            raise ActionRefused(
                f"GPU reset is disabled on {self.name}: start the agent with --allow-reset"
            )
        targets = indices or list(range(self.probe_config.expected_gpus or 0))
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

    def reboot(self) -> None:
        if not self._allow_reboot:
            raise ActionRefused(
                f"reboot is disabled on {self.name}: start the agent with --allow-reboot"
            )
        subprocess.run(list(self._reboot_command), check=False, timeout=60)

    def load_test(self, indices: list[int]) -> list[str]:
        gpus = indices or list(range(self.probe_config.expected_gpus or 0))
        return run_load_test(gpus)
