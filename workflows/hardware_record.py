"""HardwareRecord: an entity workflow per GPU serial holding its incidents and blocklist state.

Why a workflow and not a database: remedy already depends on Temporal's durable store and
nothing else; signals to one workflow are applied one at a time (no lost updates when two
remediations report the same GPU), the record is readable by query and in the Web UI by its id
``hardware-record/<serial>``, and its history is the audit trail. It waits on signals only (no
timers), so an idle record costs nothing but storage; it continues as new when the history grows.
"""

from __future__ import annotations

from temporalio import workflow

from contract import search_attributes
from contract.messages import HARDWARE_RECORD, INCIDENT, UNBLOCK
from workflows.blocklist import take_out_of_service

with workflow.unsafe.imports_passed_through():
    from contract.names import HARDWARE_RECORD_WORKFLOW
    from remedy.ladder.hardware import HardwareRecordState, IncidentReport, UnblockRequest


@workflow.defn(name=HARDWARE_RECORD_WORKFLOW)
class HardwareRecord:
    @workflow.init
    def __init__(self, state: HardwareRecordState) -> None:
        self._state = state

    @INCIDENT.handler
    def incident(self, report: IncidentReport) -> None:
        self._state.add(report.incident, report.policy, report.in_service)
        self._show()

    @UNBLOCK.handler
    def unblock(self, req: UnblockRequest) -> None:
        self._state.unblock(req, workflow.now())
        self._show()

    @HARDWARE_RECORD.handler
    def record(self) -> HardwareRecordState:
        return self._state

    async def _take_out_until_continue_as_new(self) -> None:
        """A GPU blocked in service: its node goes to its replace rung, once per block."""
        while True:
            await workflow.wait_condition(
                lambda: self._state.take_out is not None or self._continue_as_new_suggested()
            )
            if self._state.take_out is None:
                return
            await take_out_of_service(self._state)
            self._show()

    @staticmethod
    def _continue_as_new_suggested() -> bool:
        return workflow.info().is_continue_as_new_suggested()

    def _show(self) -> None:
        state = self._state
        lines = [f"**GPU {state.serial}**: {len(state.incidents)} incidents"]
        if state.blocked_reason:
            lines.append(f"**BLOCKLISTED**: {state.blocked_reason}")
        lines += [f"- {line}" for line in state.taken_out[-3:]]
        lines += [
            f"- {i.at:%Y-%m-%d %H:%M} {i.node}: {i.fault} → {i.outcome}"
            + (f" by {i.action}" if i.action else "")
            for i in state.incidents[-10:]
        ]
        workflow.set_current_details("\n".join(lines))

    @workflow.run
    async def run(self, state: HardwareRecordState) -> None:
        # find the GPU's record and ladders by serial
        workflow.upsert_search_attributes([search_attributes.GPU_SERIALS.value_set([state.serial])])
        await self._take_out_until_continue_as_new()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(self._state)
