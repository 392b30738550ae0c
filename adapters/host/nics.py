"""RDMA NIC state from sysfs (/sys/class/infiniband; EFA devices show up as rdmap*)."""

from __future__ import annotations

import re
from pathlib import Path

from remedy.detection.probe.nics import NicPort

INFINIBAND = Path("/sys/class/infiniband")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


class SysfsNics:
    def __init__(self, root: Path = INFINIBAND) -> None:
        self.root = root

    def ports(self) -> list[NicPort]:
        if not self.root.is_dir():
            return []
        found = []
        for device in sorted(self.root.iterdir()):
            for port_dir in sorted((device / "ports").glob("*")):
                found.append(
                    NicPort(
                        device=device.name,
                        port=int(port_dir.name),
                        state=_after_colon(port_dir / "state"),
                        phys_state=_after_colon(port_dir / "phys_state"),
                        rate_gbps=_rate(port_dir / "rate"),
                    )
                )
        return found


def _after_colon(path: Path) -> str:
    # sysfs writes "4: ACTIVE" and "5: LinkUp".
    text = path.read_text().strip()
    return text.split(":", 1)[1].strip() if ":" in text else text


def _rate(path: Path) -> float:
    match = _RATE.match(path.read_text())
    return float(match[1]) if match else 0.0
