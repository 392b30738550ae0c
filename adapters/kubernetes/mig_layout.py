"""A MIG node's layout on Kubernetes: the MIG manager's node labels ``nvidia.com/mig.config``
(the layout) and ``nvidia.com/mig.config.state`` (its answer), read and, around a reset or a
reboot, the state marked ``pending`` (remedy/acting/mig_layout.py). Only the state label is written,
never the layout: what layout a node has is its owners' choice."""

from __future__ import annotations

from adapters.kubernetes.edits import as_read, patch
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import Json, meta
from remedy.acting.mig_layout import MIG_CONFIG, MIG_CONFIG_STATE, MigLayout, MigState
from remedy.core.events import EventReason


def layout_of(node: Json) -> MigLayout:
    labels = meta(node).get("labels") or {}
    return MigLayout(config=labels.get(MIG_CONFIG, ""), state=labels.get(MIG_CONFIG_STATE, ""))


class KubernetesMigLayouts:
    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes

    def layout(self, node: str) -> MigLayout:
        return layout_of(self._nodes.node(node))

    def ask_layout(self, node: str) -> MigLayout:
        def mark(current: Json) -> MigLayout:
            before = layout_of(current)
            if before.has_instances and before.state != MigState.PENDING:
                self._nodes.managed(current)
                if self._nodes.sends(node, f"mark MIG layout {before.config} pending"):
                    self._set_state(current, MigState.PENDING.value)
            return before

        return as_read(self._nodes, node, mark)

    def keep_layout(self, node: str, before: MigLayout) -> None:
        def put_back(current: Json) -> None:
            now = layout_of(current)
            ours = now.config == before.config and now.state == MigState.PENDING
            if ours and before.state != MigState.PENDING:
                if self._nodes.sends(node, f"put back MIG layout state {before.state}"):
                    self._set_state(current, before.state or None)

        as_read(self._nodes, node, put_back)

    def _set_state(self, current: Json, state: str | None) -> None:
        patch(self._nodes, current, {"metadata": {"labels": {MIG_CONFIG_STATE: state}}})
        self._nodes.event(
            meta(current)["name"],
            EventReason.MIG_LAYOUT,
            f"{MIG_CONFIG_STATE}: {state or 'removed'}",
        )
