"""The NIC seam: RDMA ports and their error counters as the probe sees them
(``adapters.host.nics`` reads sysfs, ``adapters.sim`` plays them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class NicPort:
    device: str
    port: int
    state: str  # ACTIVE, DOWN, INIT, ARMED
    phys_state: str  # LinkUp, Polling, Disabled, ...
    rate_gbps: float
    width: int = 0  # active lanes (the "4X" of "400 Gb/sec (4X NDR)"); 0: not said
    link_layer: str = ""  # InfiniBand or Ethernet (RoCE)
    model: str = ""  # the device's kind (hca_type, or the driver): peers are of one kind

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


@dataclass(frozen=True)
class PortCounters:
    """One reading of a port's error counters: each counter's value, or why it could not be
    read (a counter that cannot be read is a finding, never a zero)."""

    device: str
    port: int
    values: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)  # counter → why

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"


class NicSource(Protocol):
    def ports(self) -> list[NicPort]: ...

    def counters(self) -> list[PortCounters]: ...
