"""What every remedy workflow shares: retry policies, naming the current run, and saying why an
activity failed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from remedy.core.errors import NodeGone, OtherRepairer, permanent_error_types
    from remedy.ladder.remediation import Outcome

# Retrying these cannot help: the node is gone, remedy may not act, or the action said no.
PERMANENT_ERRORS = permanent_error_types()
# Every step that changes nothing on the node by itself (reports to the budget, lease requests,
# probes, reading the node, cordon and restore, records) rides out an outage of the cluster API
# or a restart of a process: retried with backoff up to a deadline of minutes, not a handful of
# quick attempts that a 45-second outage uses up.
PATIENT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=PERMANENT_ERRORS,
)
RIDE_OUT_DEADLINE = timedelta(minutes=10)
RIDE_OUT: dict[str, Any] = {
    "retry_policy": PATIENT_RETRY,
    "schedule_to_close_timeout": RIDE_OUT_DEADLINE,
}


def this_run() -> str:
    """ "<workflow id>/<run id>": one remediation or admission of a node, told apart from the
    node's earlier ones (the workflow id is the node's)."""
    info = workflow.info()
    return f"{info.workflow_id}/{info.run_id}"


def rung_key(rung: int, epoch: int = 0, again: bool = False) -> str:
    """The key of a ladder's rung (remedy/core/once.py): the workflow and its first run, which a
    continue-as-new keeps, so the key does not change with the run; after the ladder switched
    runbooks (``epoch``), the new runbook's rungs have keys of their own. ``again``: a second
    try of the rung (a drain tried once more before a rung that needs it)."""
    info = workflow.info()
    runbook = f"/runbook-{epoch}" if epoch else ""
    return f"{info.workflow_id}/{info.first_execution_run_id}{runbook}/rung-{rung}" + (
        "-again" if again else ""
    )


class LadderStop(Exception):
    """The ladder ends with this outcome."""

    def __init__(self, outcome: Outcome, detail: str) -> None:
        super().__init__(detail)
        self.outcome, self.detail = outcome, detail


class Interrupted(Exception):
    """A wait before a rung (approval, lease) ended because a worse fault came: the ladder
    switches runbooks before it climbs on."""


def node_gone(err: ActivityError) -> bool:
    """The activity found no such node in the cluster (remedy.core.errors.NodeGone)."""
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == NodeGone.__name__


def other_repairer(err: ActivityError) -> str | None:
    """Why the activity did not act, when another repairer is at work on the node
    (remedy.core.errors.OtherRepairer); None for any other failure."""
    cause = err.cause
    if isinstance(cause, ApplicationError) and cause.type == OtherRepairer.__name__:
        return cause.message
    return None


def permanent(err: ActivityError) -> bool:
    """Whether asking again cannot help: the activity's error is one of the permanent ones."""
    cause = err.cause
    return isinstance(cause, ApplicationError) and (
        cause.non_retryable or cause.type in PERMANENT_ERRORS
    )


def cause_of(err: ActivityError) -> str:
    """Why an activity failed, in one line (its error's type and message)."""
    cause = err.cause
    return f"{type(cause).__name__}: {cause}" if cause else str(err)
