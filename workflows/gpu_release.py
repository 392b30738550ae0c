"""GpuRelease: a person returns a GPU that a finished ladder left quarantined (`remedy
release-gpu`). A workflow rather than a call from the CLI: the controller's cluster adapter
(the twin's or Kubernetes') is what lifts it, and the history records who asked and why."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from contract import activities as act
from workflows.common import RIDE_OUT

with workflow.unsafe.imports_passed_through():
    from contract.names import GPU_RELEASE_WORKFLOW
    from remedy.acting.gpu_scope import GpuRelease as Request
    from remedy.acting.gpu_scope import GpuReleased

CLUSTER_CALL = timedelta(seconds=60)


@workflow.defn(name=GPU_RELEASE_WORKFLOW)
class GpuRelease:
    @workflow.run
    async def run(self, req: Request) -> GpuReleased:
        asked = f"GPU {req.gpu} of {req.node}, asked by {req.by or req.identity}"
        workflow.set_current_details(f"{asked}: {req.note}" if req.note else asked)
        done = await act.RELEASE_GPU.execute(
            req,
            start_to_close_timeout=CLUSTER_CALL,
            **RIDE_OUT,
            summary=f"release GPU {req.gpu} of {req.node}",
        )
        workflow.set_current_details(f"{asked}: {done.detail}")
        return done
