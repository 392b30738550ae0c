"""What every remedy workflow shares: retry policies and naming the current run."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

# Retrying these cannot help: the node is gone, remedy may not act, or the action said no.
PERMANENT_ERRORS = ["NodeGone", "PermissionDenied", "ActionRefused", "ActionFailed"]
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
