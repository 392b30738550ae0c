"""`remedy release-gpu`: a person returns a GPU that remedy quarantined and no ladder will
return (registered in __init__.py).

A GPU-scoped rung takes the faulty GPU out of allocation and the ladder's restore returns it;
a ladder that ends needs_human or aborted leaves it out for a person. The command runs a
GpuRelease workflow on the controller's queue, so the controller's own cluster adapter lifts it
and the workflow's history keeps who asked and why."""

from __future__ import annotations

from typing import Annotated

import typer
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from contract.names import (
    CONTROLLER_TASK_QUEUE,
    GPU_RELEASE_WORKFLOW,
    gpu_release_workflow_id,
    remediation_workflow_id,
)
from remedy.acting.gpu_scope import GpuRelease, GpuReleased
from workers.cli.common import on_temporal
from workers.cli.connection import temporal
from workers.cli.controller_answer import Refused, controller_answer
from workers.flags.options import USER, AddressOption, ByOption, TaskQueueOption, node_name


def release_gpu(
    node: Annotated[
        str, typer.Argument(help="The node whose GPU remedy quarantined.", callback=node_name)
    ],
    gpu: Annotated[int, typer.Option(min=0, help="The GPU's index on the node (NVML's).")],
    note: Annotated[str, typer.Option(help="Why (recorded).")] = "",
    address: AddressOption = None,
    by: ByOption = USER,
    task_queue: TaskQueueOption = CONTROLLER_TASK_QUEUE,
) -> None:
    """Return a GPU that remedy quarantined to allocation (its device taint goes; the node was
    never cordoned for it). Exit 2 when remedy held no quarantine of it, or a ladder still runs
    on the node (its restore returns the GPU; abort or clear it instead)."""
    from workers.client import connect_with

    async def release() -> GpuReleased:
        client = await connect_with(temporal(address), "cli")
        await _no_ladder_running(client, node)
        req = GpuRelease(node=node, gpu=gpu, by=by, note=note, identity=client.identity)
        return await controller_answer(
            client,
            GPU_RELEASE_WORKFLOW,
            req,
            workflow_id=gpu_release_workflow_id(node, gpu),
            task_queue=task_queue,
            result_type=GpuReleased,
            under_way="a release of that GPU is under way",
        )

    try:
        done = on_temporal(release())
    except Refused as exc:
        typer.echo(f"error: {node}: GPU {gpu}: {exc}", err=True)
        raise typer.Exit(2) from None
    if not done.lifted:
        typer.echo(f"error: {node}: GPU {gpu}: remedy holds no quarantine of it", err=True)
        raise typer.Exit(2)
    held = f"held by {done.held_by}" if done.held_by else "its holder unrecorded"
    typer.echo(f"{node}: GPU {gpu} back in allocation ({held}; by {by})")


async def _no_ladder_running(client: Client, node: str) -> None:
    """A running ladder returns the GPUs it holds itself, and may be resetting this one."""
    try:
        status = (await client.get_workflow_handle(remediation_workflow_id(node)).describe()).status
    except RPCError:
        return  # never remediated: nothing runs
    if status is WorkflowExecutionStatus.RUNNING:
        raise Refused(
            "a ladder still runs on the node: it returns its GPUs itself "
            "(remedy abort --restore or remedy clear)"
        )
