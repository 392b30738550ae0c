"""The hardware record from the controller: record incidents against GPU serials
(signal-with-start of the serial's HardwareRecord) and read which serials are blocklisted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from contract import activities as act
from contract.messages import HARDWARE_RECORD, INCIDENT
from contract.names import HARDWARE_RECORD_WORKFLOW, hardware_record_workflow_id
from remedy.ladder.hardware import (
    BlockedSerial,
    Blocklisted,
    BlocklistPolicy,
    HardwareRecordState,
    IncidentReport,
    SerialsCheck,
)
from remedy.ladder.recurrence import PastIncidents


class HardwareActivities:
    def __init__(self, client: Client, policy: BlocklistPolicy) -> None:
        self._client, self._policy = client, policy

    @act.RECORD_INCIDENTS.defn
    async def record_incidents(self, report: IncidentReport) -> None:
        task_queue = activity.info().task_queue  # records run where the controller runs
        report = report.model_copy(update={"policy": self._policy})  # the controller's policy
        for serial in report.serials:
            await self._client.start_workflow(
                HARDWARE_RECORD_WORKFLOW,
                HardwareRecordState(serial=serial, policy=report.policy),
                id=hardware_record_workflow_id(serial),
                task_queue=task_queue,
                **INCIDENT.start_with(report),
                static_summary=f"hardware record of GPU {serial}",
            )

    @act.BLOCKED_SERIALS.defn
    async def blocked_serials(self, check: SerialsCheck) -> Blocklisted:
        blocked = [
            BlockedSerial(serial=record.serial, reason=record.blocked_reason)
            for record in await self._records(check.serials)
            if record.blocked_reason
        ]
        return Blocklisted(blocked=blocked)

    @act.PAST_INCIDENTS.defn
    async def past_incidents(self, check: SerialsCheck) -> PastIncidents:
        """What the records of these serials keep (a new ladder looks for a recurrence)."""
        records = await self._records(check.serials)
        return PastIncidents(incidents=[i for r in records for i in r.incidents])

    async def _records(self, serials: list[str]) -> list[HardwareRecordState]:
        records = []
        for serial in serials:
            handle = self._client.get_workflow_handle(hardware_record_workflow_id(serial))
            try:
                records.append(await HARDWARE_RECORD.ask(handle))
            except RPCError as err:
                if err.status is not RPCStatusCode.NOT_FOUND:
                    raise
                # not found: no incident ever, no record
        return records

    def all(self) -> list[Callable[..., Any]]:
        return [self.record_incidents, self.blocked_serials, self.past_incidents]
