"""What the fleet scan reads: every node's facts from the cluster, and which nodes already have
a remediation or an admission running (from Temporal's visibility store)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.client import Client, WorkflowExecution

from activities.errors import temporal_errors
from contract import activities as act
from contract import search_attributes
from contract.names import (
    ACTIVE_CHECK_WORKFLOW,
    NODE_ADMISSION_WORKFLOW,
    NODE_REMEDIATION_WORKFLOW,
)
from remedy.redaction import Redactor, redacted
from remedy.scan.cluster import FleetView
from remedy.scan.fleet import STARTING, FleetNodes, LadderSeen, OpenWork


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
        remediations = await self._running(NODE_REMEDIATION_WORKFLOW)
        return OpenWork(
            remediating=_nodes(remediations),
            admitting=_nodes(await self._running(NODE_ADMISSION_WORKFLOW)),
            checking=_nodes(await self._running(ACTIVE_CHECK_WORKFLOW)),
            ladders=[_ladder(w) for w in remediations],
        )

    async def _running(self, workflow_type: str) -> list[WorkflowExecution]:
        query = f"WorkflowType = '{workflow_type}' AND ExecutionStatus = 'Running'"
        return [w async for w in self._client.list_workflows(query)]

    def all(self) -> list[Callable[..., Any]]:
        return [self.fleet_nodes, self.open_work]


def _nodes(running: list[WorkflowExecution]) -> list[str]:
    """Node names of running workflows (ids are "<kind>/<node>")."""
    return sorted({w.id.split("/", 1)[-1] for w in running})


def _ladder(w: WorkflowExecution) -> LadderSeen:
    """A ladder's pool and phase from its search attributes (a ladder too new to have set
    them: no pool, starting, since it started)."""
    attrs = w.typed_search_attributes
    return LadderSeen(
        node=w.id.split("/", 1)[-1],
        pool=attrs.get(search_attributes.POOL) or "",
        phase=attrs.get(search_attributes.PHASE) or STARTING,
        since=attrs.get(search_attributes.PHASE_SINCE) or w.start_time,
    )
