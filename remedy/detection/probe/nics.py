"""The NIC seam: RDMA ports as the probe sees them (``adapters.host.nics`` reads sysfs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class NicPort:
    device: str
    port: int
    state: str  # ACTIVE, DOWN, INIT, ARMED
    phys_state: str  # LinkUp, Polling, Disabled, ...
    rate_gbps: float


class NicSource(Protocol):
    def ports(self) -> list[NicPort]: ...
