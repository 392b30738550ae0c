"""What agents and the controller publish on a node: remedy's own node conditions (strategic
merge keys them by type, so nothing else's are touched), the agent's recent Xids (an
annotation job attribution reads) and a hold for a person (remedy.trust.person_hold)."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import datetime

from pydantic import TypeAdapter, ValidationError

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import GPU_USE, RECENT_XIDS, Json, meta
from remedy.acting.gpu_use import NodeGpuUse
from remedy.attribution.evidence import RecentXid, remember
from remedy.core.errors import NodeGone
from remedy.detection.conditions import (
    GPU_ACTIVE_CHECK,
    PROBLEM_CONDITIONS,
    REMEDY_READY,
    NodeCondition,
)
from remedy.trust.identity import AGENT_KEY_ANNOTATION
from remedy.trust.person_hold import HOLD_ANNOTATION

REMEDY_CONDITIONS = (*PROBLEM_CONDITIONS, REMEDY_READY, GPU_ACTIVE_CHECK)


class KubernetesNodeMarks:
    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes

    def conditions(self, node: str) -> list[NodeCondition]:
        return remedy_conditions(self._nodes.node(node), self._nodes.clock())

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None:
        # Strategic merge keys conditions by type: only remedy's own conditions are written
        # (deploy/agent-policy.yaml lets the agent change nothing else). When to write is the
        # caller's: the agent writes on change and once per heartbeat (remedy.scan.liveness).
        body = {
            "status": {
                "conditions": [
                    {
                        "type": c.type,
                        "status": c.status,
                        "reason": c.reason,
                        "message": c.message,
                        "lastHeartbeatTime": c.last_heartbeat_time.isoformat(),
                        "lastTransitionTime": c.last_transition_time.isoformat(),
                    }
                    for c in conditions
                ]
            }
        }
        with api_errors("patch", f"nodes/{node}/status"):
            self._nodes.core.patch_node_status(node, body, field_manager=self._nodes.field_manager)

    def record_xids(self, node: str, xids: list[RecentXid]) -> None:
        """Add the agent's new Xids to those its node keeps (an annotation, bounded): job
        attribution reads them to tie an Xid to the job whose pod held the GPUs."""
        if not xids:
            return
        try:
            kept = self._kept(node)
        except ValidationError:
            kept = []  # a hand-edited annotation must not stop the agent's record
        merged = remember(kept, xids, self._nodes.clock())
        if merged == kept:
            return  # each one already kept (NVML and the kernel log both saw it): no write
        body = json.dumps(
            [x.model_dump(mode="json", exclude_none=True) for x in merged], separators=(",", ":")
        )
        with api_errors("patch", f"nodes/{node}"):
            self._nodes.core.patch_node(
                node,
                {"metadata": {"annotations": {RECENT_XIDS: body}}},
                field_manager=self._nodes.field_manager,
            )

    def publish_gpu_use(self, node: str, use: NodeGpuUse) -> None:
        """The agent's word on which pod uses which GPU (the GpuUsePublisher of
        remedy/detection/pod_resources.py): GPU-scoped rungs and the active checks read it."""
        with api_errors("patch", f"nodes/{node}"):
            self._nodes.core.patch_node(
                node,
                {"metadata": {"annotations": {GPU_USE: use.model_dump_json()}}},
                field_manager=self._nodes.field_manager,
            )

    def publish_agent_key(self, node: str, key: str) -> None:
        """The agent's key on its own node: deploy/agent-policy.yaml lets an agent write this
        annotation on the node its pod runs on only, which is what makes the key that node's."""
        with api_errors("patch", f"nodes/{node}"):
            self._nodes.core.patch_node(
                node,
                {"metadata": {"annotations": {AGENT_KEY_ANNOTATION: key}}},
                field_manager=self._nodes.field_manager,
            )

    def agent_key(self, node: str) -> str | None:
        try:
            found = self._nodes.node(node)
        except NodeGone:
            return None
        key = meta(found).get("annotations", {}).get(AGENT_KEY_ANNOTATION)
        return str(key) if key else None

    def person_hold(self, node: str) -> str | None:
        held = meta(self._nodes.node(node)).get("annotations", {}).get(HOLD_ANNOTATION)
        return str(held) if held is not None else None

    def set_person_hold(self, node: str, text: str | None) -> str | None:
        """A merge patch of the one annotation (null removes it): idempotent, and nothing
        else of the node's is touched."""
        before = self.person_hold(node)
        if before == text:
            return before  # already so: no write
        with api_errors("patch", f"nodes/{node}"):
            self._nodes.core.patch_node(
                node,
                {"metadata": {"annotations": {HOLD_ANNOTATION: text}}},
                field_manager=self._nodes.field_manager,
            )
        return before

    def xids_since(self, node: str, since: datetime) -> list[RecentXid]:
        """An unreadable annotation raises (ValidationError): a watch that cannot read the
        node's Xids must not pass as a quiet one."""
        return [x for x in self._kept(node) if x.at >= since]

    def _kept(self, node: str) -> list[RecentXid]:
        kept_json = meta(self._nodes.node(node)).get("annotations", {}).get(RECENT_XIDS)
        return TypeAdapter(list[RecentXid]).validate_json(kept_json or "[]")


def remedy_conditions(node: Json, now: datetime) -> list[NodeCondition]:
    """remedy's own conditions on a node object (``now`` stands in for a missing time)."""
    return node_conditions(node, now, REMEDY_CONDITIONS)


def node_conditions(node: Json, now: datetime, types: Collection[str]) -> list[NodeCondition]:
    """The node object's conditions of ``types`` (``now`` stands in for a missing time)."""
    return [
        NodeCondition.model_validate(
            {
                "type": c["type"],
                "status": c.get("status", "Unknown"),
                "reason": c.get("reason", ""),
                "message": c.get("message", ""),
                "last_heartbeat_time": c.get("lastHeartbeatTime") or now,
                "last_transition_time": c.get("lastTransitionTime") or now,
            }
        )
        for c in node.get("status", {}).get("conditions", [])
        if c.get("type") in types
    ]
