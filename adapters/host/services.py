"""A system service's state from systemd: ``systemctl show`` with the three properties the
probe reads, under a timeout (a hung systemd must not hang the probe: it is a finding)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from typing import Protocol

from adapters.host.output import command_line, tool_output
from remedy.detection.probe.services import ServiceState, ServiceUnreadable

FABRIC_MANAGER_UNIT = "nvidia-fabricmanager"  # the unit NVIDIA's packages install
SHOW_TIMEOUT_S = 5.0
_PROPERTIES = ("LoadState", "ActiveState", "SubState")


class Run(Protocol):
    def __call__(self, command: Sequence[str], timeout_s: float) -> tuple[int, str]: ...


def _run(command: Sequence[str], timeout_s: float) -> tuple[int, str]:
    done = subprocess.run(list(command), capture_output=True, text=True, timeout=timeout_s)
    return done.returncode, done.stdout if done.returncode == 0 else done.stderr or done.stdout


class SystemdUnit:
    """One unit's state, as ``systemctl show --property=...`` prints it (``Key=value`` lines;
    a unit systemd does not know prints ``LoadState=not-found`` and exits 0)."""

    def __init__(
        self, unit: str = FABRIC_MANAGER_UNIT, timeout_s: float = SHOW_TIMEOUT_S, run: Run = _run
    ) -> None:
        self.unit, self._timeout_s, self._run = unit, timeout_s, run

    def state(self) -> ServiceState:
        command = ["systemctl", "show", f"--property={','.join(_PROPERTIES)}", self.unit]
        shown = command_line(command)
        try:
            status, output = self._run(command, self._timeout_s)
        except FileNotFoundError:
            raise ServiceUnreadable("systemctl is not installed here") from None
        except PermissionError:
            raise ServiceUnreadable("systemctl cannot be run here: permission denied") from None
        except subprocess.TimeoutExpired:
            raise ServiceUnreadable(f"{shown} did not answer in {self._timeout_s:g}s") from None
        if status != 0:
            raise ServiceUnreadable(f"{shown} exited {status}: {tool_output(output, 300)}")
        return parse_show(output)

    def __str__(self) -> str:
        return f"systemd unit {self.unit}"


def parse_show(text: str) -> ServiceState:
    """``LoadState=loaded`` / ``ActiveState=failed`` / ``SubState=failed`` into a state; a
    property missing is unreadable, never taken as running."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and line.strip())
    missing = [p for p in _PROPERTIES if not values.get(p, "").strip()]
    if missing:
        raise ServiceUnreadable(f"systemctl show printed no {', '.join(missing)}")
    load, active, sub = (values[p].strip() for p in _PROPERTIES)
    return ServiceState(load=load, active=active, sub=sub)
