"""A GPU blocklisted while in service: its HardwareRecord sends the node that holds it to its
replace rung at once (the ``blocklisted-serial`` runbook: cordon, replace once approved),
rather than waiting for the node to fail admission some day.

The ladder that reported the last incident is still finishing when the record blocks the serial,
and a report to a running ladder would join it and be dropped: the start waits (retried) until
the node's ladder has closed."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows.common import PERMANENT_ERRORS, cause_of

with workflow.unsafe.imports_passed_through():
    from remedy.ladder.hardware import HardwareRecordState, blocklisted
    from remedy.scan.fleet import FindingStart

# The node's ladder may run for hours (an approval): keep asking, slowly, for a day.
UNTIL_THE_LADDER_CLOSES = RetryPolicy(
    initial_interval=timedelta(seconds=5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(minutes=5),
    non_retryable_error_types=PERMANENT_ERRORS,
)


async def take_out_of_service(state: HardwareRecordState) -> None:
    """Start the node's Blocklisted ladder; say in the record what came of it."""
    where = state.take_out
    assert where is not None and state.blocked_reason is not None
    node = where.node.name
    try:
        await act.REMEDIATE_FINDING.execute(
            FindingStart(
                node=where.node,
                finding=blocklisted(node, state.serial, state.blocked_reason, workflow.now()),
                task_queue=workflow.info().task_queue,
                node_task_queue=where.node_task_queue,
                after_running_ladder=True,
            ),
            start_to_close_timeout=timedelta(seconds=30),
            schedule_to_close_timeout=timedelta(days=1),
            retry_policy=UNTIL_THE_LADDER_CLOSES,
            summary=f"send {node} to its replace rung (GPU {state.serial} blocklisted)",
        )
        done = f"{workflow.now():%Y-%m-%d %H:%M} {node}: sent to its replace rung"
    except ActivityError as err:
        workflow.logger.warning("%s: blocklisted GPU left in service: %s", node, err)
        done = f"{workflow.now():%Y-%m-%d %H:%M} {node}: NOT taken out: {cause_of(err)}"
    state.taken_out = [*state.taken_out, done]
    state.take_out = None
