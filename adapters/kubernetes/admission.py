"""Admission on Kubernetes: new nodes register with the admission taint (kubelet
``--register-with-taints``) and keep it until remedy validates them; admitting removes it and
labels the node validated, rejecting keeps it and records why."""

from __future__ import annotations

from adapters.kubernetes.edits import as_read, has_own_taint, patch, with_taint
from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import PREFIX, NodeApi
from adapters.kubernetes.objects import Json, meta
from remedy.core.events import EventReason

# remedy never puts this taint on a node that is already taking work.
ADMISSION_TAINT = {"key": f"{PREFIX}/unvalidated", "value": "true", "effect": "NoSchedule"}
VALIDATED_LABEL = f"{PREFIX}/validated"
VALIDATED_AT = f"{PREFIX}/validated-at"
GPU_SERIALS = f"{PREFIX}/gpu-serials"  # an annotation: 8 serials do not fit a label value
ADMISSION_REJECTED = f"{PREFIX}/admission-rejected"


class KubernetesAdmission:
    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes

    def hold_for_admission(self, node: str) -> None:
        as_read(self._nodes, node, self._hold)

    def _hold(self, current: Json) -> None:
        nodes, node = self._nodes, meta(current)["name"]
        nodes.managed(current)
        if has_own_taint(current, ADMISSION_TAINT):
            return
        if not nodes.sends(node, "hold the node for admission (taint it)"):
            return
        patch(nodes, current, {"spec": {"taints": with_taint(current, ADMISSION_TAINT)}})

    def admit(self, node: str, serials: list[str]) -> None:
        nodes = self._nodes
        current = nodes.node(node)
        nodes.managed(current)
        if not nodes.sends(node, "admit the node"):
            return
        taints = current.get("spec", {}).get("taints", [])
        with api_errors("patch", f"nodes/{node}"):
            nodes.core.patch_node(
                node,
                {
                    "metadata": {
                        "resourceVersion": meta(current).get("resourceVersion"),
                        "labels": {VALIDATED_LABEL: "true"},
                        "annotations": {
                            GPU_SERIALS: ",".join(serials),
                            VALIDATED_AT: nodes.clock().isoformat(),
                            ADMISSION_REJECTED: None,
                        },
                    },
                    "spec": {
                        "taints": [t for t in taints if t.get("key") != ADMISSION_TAINT["key"]]
                    },
                },
                field_manager=nodes.field_manager,
            )
        nodes.event(node, EventReason.ADMITTED, f"validated: {len(serials)} GPUs passed admission")

    def reject(self, node: str, reason: str) -> None:
        nodes = self._nodes
        if not nodes.sends(node, f"mark the node rejected: {reason}"):
            return
        with api_errors("patch", f"nodes/{node}"):
            nodes.core.patch_node(
                node,
                {"metadata": {"annotations": {ADMISSION_REJECTED: reason[:1024]}}},
                field_manager=nodes.field_manager,
            )
        nodes.event(node, EventReason.ADMISSION_REJECTED, reason)
