"""The parts of a runbook beyond its rungs and matches: whether a person wrote it (authoring
mode, strict), the causes and approvals it names, the retry policy."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
)

from remedy.core.durations import Duration

# The loader validates with this context (and extra="forbid"): what a person wrote is checked
# strictly — unknown fields, checks and reasons are errors. A runbook that travels inside a
# message is not: a newer remedy may know a field or a check that an older worker does not.
AUTHORING = {"authoring": True}


def _authoring(info: ValidationInfo) -> bool:
    return isinstance(info.context, dict) and bool(info.context.get("authoring"))


class Authored(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Cause(StrEnum):
    PLATFORM = "platform"  # the machine is at fault: hardware actions allowed
    APPLICATION = "application"  # the job is at fault: never reset, reboot or replace


class Approval(StrEnum):
    NONE = "none"
    REQUIRED = "required"


class IfDrainFailed(StrEnum):
    """What a rung that needs a drained node (reset_gpu, reboot, replace) does when the
    ladder's drain failed: the drain is always tried once more first."""

    ASK = "ask"  # wait for a person's approval to run it on the undrained node (the default)
    STOP = "stop"  # do not run it: the node stays cordoned for a person
    FORCE = "force"  # run it anyway, with the pods on the node (said in the attempt)


class OnApprovalTimeout(StrEnum):
    """What a rung's approval that no one answers within ``approval_timeout`` does (the rung's
    own, or the one to run it on an undrained node)."""

    NEEDS_HUMAN = "needs_human"  # the ladder ends; the node, cordoned, keeps its share (default)
    RELEASE = "release"  # the same, but the node's share goes back to the pool
    SKIP = "skip"  # the rung is not run; the ladder climbs on
    WAIT = "wait"  # no deadline: the ladder waits, holding its lease, until someone answers

    def comes_to(self) -> str:
        """What the silence comes to, in words (the ladder's details, ``explain``)."""
        return {
            OnApprovalTimeout.NEEDS_HUMAN: "stop, node stays cordoned for a human",
            OnApprovalTimeout.RELEASE: (
                "stop, node stays cordoned for a human, its share of the pool given back"
            ),
            OnApprovalTimeout.SKIP: "the rung is skipped, the ladder goes on",
            OnApprovalTimeout.WAIT: "none: it waits until someone answers",
        }[self]


class RetryPolicy(Authored):
    max_attempts: int = Field(default=3, ge=1, le=100)
    initial_interval: Duration = timedelta(seconds=10)
    backoff: float = Field(default=2.0, ge=1.0, le=10.0)
    max_interval: Duration = timedelta(minutes=5)
