"""The demo's shared inference node on the dev server: its GPU fails under the GPU-scoped
example runbook, and the demo says that only that GPU's pod was evicted, the node stayed
schedulable (degraded) and the GPU came back; the ladder's own record agrees."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.testing import WorkflowEnvironment

from remedy.core.models import Action
from remedy.ladder.remediation import AttemptResult, Outcome
from tests.conftest import ROOT
from workers.demo_config import DemoConfig
from workers.demo_run import run_demo
from workflows.node_remediation import NodeRemediation

BOUND_S = 180  # against a hang on a busy machine, not a measure: the demo ends when it is done


async def test_the_demo_shows_one_gpu_taken_out_and_returned_on_a_shared_node(
    dev_env: WorkflowEnvironment,
) -> None:
    name = f"shared-{uuid.uuid4().hex[:8]}"
    config = DemoConfig(
        nodes=6,  # a job on the first 4, then the shared node and the idle one
        jobs=1,
        fault_every_s=60,  # one random fault elsewhere: no storm to hold the shared node's ladder
        speedup=3600,
        runbooks=ROOT / "runbooks",
        shared_runbooks=ROOT / "examples" / "runbooks",
        node_prefix=name,
        pool=name,
        task_queue=name,
        agents_task_queue=f"{name}-agents",
        job_namespace=name,
        joining_nodes=0,
        active_checks=None,
    )
    node = f"{name}-004"
    said: list[str] = []
    back = asyncio.Event()

    def echo(line: str) -> None:
        said.append(line)
        if line.startswith(f"  gpu    {node}: GPU 3 ") and "back in allocation" in line:
            back.set()

    demo = asyncio.create_task(run_demo(dev_env.client, config, echo=echo))
    try:
        await asyncio.wait_for(back.wait(), BOUND_S)
        handle = dev_env.client.get_workflow_handle_for(
            NodeRemediation.run, f"node-remediation/{node}"
        )
        result = await asyncio.wait_for(handle.result(), BOUND_S)
    finally:
        demo.cancel()  # as Ctrl-C: the demo summarises and stops its workers
        summary = await demo

    assert (
        f"Shared node      {node}: 8 one-GPU inference pods; its agent also loads "
        "inference-gpu-ecc (scope: gpu)" in said
    )
    [fault] = [line for line in said if line.startswith(f"  fault  {node}: ")]
    assert fault.startswith(f"  fault  {node}: Xid 48 on GPU 3 ") and fault.endswith(
        "→ inference-gpu-ecc"
    )
    gpu_lines = [line for line in said if line.startswith(f"  gpu    {node}: ")]
    assert gpu_lines == [
        f"  gpu    {node}: GPU 3 quarantined; evicted only infer-{node}-3, 7 of 8 pods serve on; "
        "node schedulable, status degraded",
        f"  gpu    {node}: GPU 3 reset and back in allocation; 7 pods served throughout, the node "
        "never cordoned",
    ]
    # The ladder's record: the GPU-scoped drain and reset, no cordon, the GPU lifted at the end.
    assert result.runbook == "inference-gpu-ecc" and result.outcome is Outcome.RECOVERED
    actions = [a.action for a in result.attempts]
    assert Action.CORDON not in actions
    drain = next(a for a in result.attempts if a.action is Action.DRAIN)
    assert f"GPU 3 quarantined; evicted 1 pods using it: ['infer-{node}-3']" in drain.detail
    reset = next(a for a in result.attempts if a.action is Action.RESET_GPU)
    assert reset.result is AttemptResult.VERIFIED
    restore = result.attempts[-1]
    assert restore.action is Action.RESTORE and "GPU 3 back in allocation" in restore.detail
    assert f"node-remediation/{node}" in summary.workflow_ids
