"""How a drain treats each namespace's pods, as NVSentinel's node drainer offers:

- ``immediate``: evict through the Eviction API (PodDisruptionBudgets decide); kubectl's way
  and the default.
- ``allow-completion``: evict nothing; wait for the pods to finish on their own until the
  drain times out (long training runs that checkpoint at the end).
- ``delete-after-timeout``: evict, and delete the pods still there ``delete_after_s`` into the
  drain (past any budget) with each pod's own grace period, at most ``delete_grace_max_s``,
  and wait until they are gone: a replacement (a StatefulSet's, same name) must not start
  while the old containers still hold the GPUs.

A namespace is matched by its name, else by the first glob pattern given (``team-*``), else
gets the default (``*``). Parsed once at the boundary (the controller's flags)."""

from __future__ import annotations

from enum import StrEnum
from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_GRACE_S = 30  # a pod's terminationGracePeriodSeconds when it declares none


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
    delete_grace_max_s: int | None = Field(default=None, ge=0)  # None: each pod's own

    def delete_grace(self, declared: int | None) -> int:
        """The grace period a delete past the timeout gives a pod that declares ``declared``
        (``terminationGracePeriodSeconds``; None: Kubernetes' default, 30).

        >>> DrainModes().delete_grace(None), DrainModes(delete_grace_max_s=60).delete_grace(3600)
        (30, 60)"""
        own = DEFAULT_GRACE_S if declared is None else declared
        return own if self.delete_grace_max_s is None else min(own, self.delete_grace_max_s)

    def mode(self, namespace: str) -> DrainMode:
        if namespace in self.namespaces:
            return self.namespaces[namespace]
        for pattern, mode in self.namespaces.items():
            if fnmatchcase(namespace, pattern):
                return mode
        return self.default

    def too_long_for(self, drain_timeout_s: float) -> str | None:
        """Why the deletes could not be over within a drain of ``drain_timeout_s`` (None:
        they can): their start, plus the bound on their grace period if there is one."""
        ends = self.delete_after_s + (self.delete_grace_max_s or 0)
        if not self.deletes or ends < drain_timeout_s:
            return None
        bound = self.delete_grace_max_s
        grace = f" plus its longest delete grace ({bound}s)" if bound else ""
        return (
            f"the drain's delete-after ({self.delete_after_s:g}s){grace} must be shorter than "
            f"its timeout ({drain_timeout_s:g}s)"
        )

    @property
    def deletes(self) -> bool:
        """Some namespace's pods are deleted after ``delete_after_s``."""
        modes = {self.default, *self.namespaces.values()}
        return DrainMode.DELETE_AFTER_TIMEOUT in modes

    @classmethod
    def parse(
        cls, flags: list[str], delete_after_s: float = 600.0, delete_grace_max_s: int | None = None
    ) -> DrainModes:
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
            {
                "default": default,
                "namespaces": namespaces,
                "delete_after_s": delete_after_s,
                "delete_grace_max_s": delete_grace_max_s,
            }
        )
