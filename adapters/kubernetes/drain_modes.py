"""How a drain treats each namespace's pods, as NVSentinel's node drainer offers:

- ``immediate``: evict through the Eviction API (PodDisruptionBudgets decide); kubectl's way
  and the default.
- ``allow-completion``: evict nothing; wait for the pods to finish on their own until the
  drain times out (long training runs that checkpoint at the end).
- ``delete-after-timeout``: evict, and delete the pods still there ``delete_after_s`` into the
  drain without a grace period (past any budget).

A namespace is matched by its name, else by the first glob pattern given (``team-*``), else
gets the default (``*``). Parsed once at the boundary (the controller's flags)."""

from __future__ import annotations

from enum import StrEnum
from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field


class DrainMode(StrEnum):
    IMMEDIATE = "immediate"
    ALLOW_COMPLETION = "allow-completion"
    DELETE_AFTER_TIMEOUT = "delete-after-timeout"


class DrainModes(BaseModel):
    """>>> modes = DrainModes.parse(["training-*=allow-completion", "*=immediate"])
    >>> modes.mode("training-llm"), modes.mode("web")
    (<DrainMode.ALLOW_COMPLETION: 'allow-completion'>, <DrainMode.IMMEDIATE: 'immediate'>)"""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default: DrainMode = DrainMode.IMMEDIATE
    namespaces: dict[str, DrainMode] = Field(default_factory=dict)
    delete_after_s: float = Field(default=600.0, gt=0)

    def mode(self, namespace: str) -> DrainMode:
        if namespace in self.namespaces:
            return self.namespaces[namespace]
        for pattern, mode in self.namespaces.items():
            if fnmatchcase(namespace, pattern):
                return mode
        return self.default

    @property
    def deletes(self) -> bool:
        """Some namespace's pods are deleted after ``delete_after_s``."""
        modes = {self.default, *self.namespaces.values()}
        return DrainMode.DELETE_AFTER_TIMEOUT in modes

    @classmethod
    def parse(cls, flags: list[str], delete_after_s: float = 600.0) -> DrainModes:
        """``NAMESPACE=MODE`` each (a glob; ``*`` the default). ValueError names what is
        wrong, pydantic's for an unknown mode."""
        default, namespaces = DrainMode.IMMEDIATE, {}
        for flag in flags:
            namespace, sep, mode = flag.partition("=")
            if not sep or not namespace.strip():
                raise ValueError(f"{flag!r}: expected NAMESPACE=MODE")
            if namespace.strip() == "*":
                default = DrainMode(mode.strip())
            else:
                namespaces[namespace.strip()] = DrainMode(mode.strip())
        return cls.model_validate(
            {"default": default, "namespaces": namespaces, "delete_after_s": delete_after_s}
        )
