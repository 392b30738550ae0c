"""HoldRelease: a person hands back a node an abort held (`remedy resume-node`). A workflow
rather than a call from the CLI, as GpuRelease is: the controller's cluster adapter (the twin's
or Kubernetes') lifts the node's mark, and the history records who asked and why. The node's
ladder, if one waits held, is nudged by the CLI and reads the mark itself."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from contract import activities as act
from workflows.common import RIDE_OUT

with workflow.unsafe.imports_passed_through():
    from contract.names import HOLD_RELEASE_WORKFLOW
    from remedy.trust.person_hold import HoldLift, NodeHeld

CLUSTER_CALL = timedelta(seconds=60)


@workflow.defn(name=HOLD_RELEASE_WORKFLOW)
class HoldRelease:
    @workflow.run
    async def run(self, req: HoldLift) -> NodeHeld:
        asked = f"hand {req.node} back, asked by {req.by or req.identity}"
        workflow.set_current_details(f"{asked}: {req.note}" if req.note else asked)
        done = await act.LIFT_HOLD.execute(
            req, start_to_close_timeout=CLUSTER_CALL, **RIDE_OUT, summary=f"lift {req.node}'s hold"
        )
        was = done.hold.said() if done.hold else "it was not held"
        workflow.set_current_details(f"{asked}: {was}")
        return done
