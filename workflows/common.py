"""What every remedy workflow shares: retry policies, naming the current run, and saying why an
activity failed."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from remedy.errors import permanent_error_types

# Retrying these cannot help: the node is gone, remedy may not act, or the action said no.
PERMANENT_ERRORS = permanent_error_types()
QUICK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    maximum_attempts=5,
    non_retryable_error_types=PERMANENT_ERRORS,
)


def this_run() -> str:
    """ "<workflow id>/<run id>": one remediation or admission of a node, told apart from the
    node's earlier ones (the workflow id is the node's)."""
    info = workflow.info()
    return f"{info.workflow_id}/{info.run_id}"


def cause_of(err: ActivityError) -> str:
    """Why an activity failed, in one line (its error's type and message)."""
    cause = err.cause
    return f"{type(cause).__name__}: {cause}" if cause else str(err)
