"""What the fleet scan reads: every node's facts from the cluster, and which nodes already have
a remediation or an admission running (from Temporal's visibility store)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.client import Client

from activities.errors import temporal_errors
from contract import activities as act
from contract.names import (
    ACTIVE_CHECK_WORKFLOW,
    NODE_ADMISSION_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
)
from remedy.redaction import Redactor, redacted
from remedy.scan.cluster import FleetView
from remedy.scan.fleet import FleetNodes, OpenWork


class FleetActivities:
    def __init__(self, client: Client, fleet: FleetView, redactor: Redactor | None = None) -> None:
        self._client, self._fleet = client, fleet
        self._redactor = redactor or Redactor()

    @act.FLEET_NODES.defn
    def fleet_nodes(self) -> FleetNodes:
        """Redacted: a condition another writer set (node-problem-detector) may quote the
        kernel, and the scan's ladders carry its message as evidence."""
        with temporal_errors():
            return redacted(FleetNodes(nodes=self._fleet.nodes()), self._redactor)

    @act.OPEN_WORK.defn
    async def open_work(self) -> OpenWork:
        return OpenWork(
            remediating=await self._running(NODE_REMEDIATION_WORKFLOW),
            admitting=await self._running(NODE_ADMISSION_WORKFLOW),
            checking=await self._running(ACTIVE_CHECK_WORKFLOW),
        )

    async def _running(self, workflow_type: str) -> list[str]:
        """Node names of running workflows of this type (ids are "<kind>/<node>")."""
        query = f"WorkflowType = '{workflow_type}' AND ExecutionStatus = 'Running'"
        return sorted({w.id.split("/", 1)[-1] async for w in self._client.list_workflows(query)})

    def all(self) -> list[Callable[..., Any]]:
        return [self.fleet_nodes, self.open_work]
