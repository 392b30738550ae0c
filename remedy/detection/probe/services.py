"""The service seam: a system service's state as the node's service manager reports it
(``adapters.host.services`` asks systemd; the simulation answers for its nodes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# systemd's ActiveState values for a running service; "activating" is a start still under way,
# or a crashed service waiting to be started again (SubState "auto-restart": down).
RUNNING = frozenset({"active", "reloading"})


class ServiceUnreadable(Exception):
    """The service manager did not answer (missing, refused, hung or unparseable)."""


@dataclass(frozen=True)
class ServiceState:
    """As systemd names them (``systemctl show -p LoadState,ActiveState,SubState``)."""

    load: str  # loaded, not-found, masked, ...
    active: str  # active, reloading, inactive, failed, activating, deactivating
    sub: str  # running, dead, failed, auto-restart, start, ...

    @property
    def installed(self) -> bool:
        return self.load != "not-found"

    @property
    def starting(self) -> bool:
        return self.active == "activating" and self.sub != "auto-restart"

    def __str__(self) -> str:
        return f"{self.active} ({self.sub}), unit {self.load}"


class ServiceSource(Protocol):
    def state(self) -> ServiceState:
        """The service's state now; raise ServiceUnreadable when it cannot be read."""
        ...
