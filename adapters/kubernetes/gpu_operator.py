"""The NVIDIA GPU operator stepping aside for a GPU reset: its operands (device plugin, DCGM,
exporter, feature discovery) are labelled off the node and awaited, since nvidia-smi cannot
reset a GPU that any process holds; afterwards the labels go back as they were."""

from __future__ import annotations

import json
import time

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import PREFIX, NodeApi, daemonset
from adapters.kubernetes.objects import Json, meta
from remedy.errors import TransientError

# The NVIDIA GPU operator deploys its operands where these labels are not "false".
GPU_OPERAND_LABELS = tuple(
    f"nvidia.com/gpu.deploy.{c}"
    for c in ("device-plugin", "dcgm", "dcgm-exporter", "gpu-feature-discovery")
)
GPU_OPERAND_PODS = ("device-plugin", "dcgm", "gpu-feature-discovery")
GPU_OPERANDS_SAVED = f"{PREFIX}/gpu-operand-labels"


class GpuOperatorHandoff:
    def __init__(self, nodes: NodeApi, *, wait_timeout_s: float, poll_s: float) -> None:
        self._nodes, self._wait_timeout_s, self._poll_s = nodes, wait_timeout_s, poll_s

    def release_gpus(self, node: str) -> str:
        """Label the operands off the node, remember the old labels in an annotation, and
        wait until their pods are gone. A retry finds the labels it already saved and keeps
        them: saving again would save its own "false" and the operands would never return."""
        nodes = self._nodes
        current = nodes.node(node)
        nodes.managed(current)
        labels = meta(current).get("labels", {})
        annotations = meta(current).get("annotations", {})
        previous = {label: labels.get(label) for label in GPU_OPERAND_LABELS}
        saved = annotations.get(GPU_OPERANDS_SAVED) or json.dumps(previous, sort_keys=True)
        if not nodes.sends(node, "stop the GPU operator's pods"):
            return "dry run: would stop the GPU operator's pods"
        with api_errors("patch", f"nodes/{node}"):
            nodes.core.patch_node(
                node,
                {
                    "metadata": {
                        "labels": dict.fromkeys(GPU_OPERAND_LABELS, "false"),
                        "annotations": {GPU_OPERANDS_SAVED: saved},
                    }
                },
            )
        operands = {meta(p)["uid"] for p in nodes.pods(node) if _gpu_operand(p)}
        deadline = time.monotonic() + self._wait_timeout_s
        while {meta(p)["uid"] for p in nodes.pods(node) if _gpu_operand(p)} & operands:
            if time.monotonic() > deadline:
                raise TransientError(f"the GPU operator's pods did not leave {node}")
            time.sleep(self._poll_s)
        done = f"stopped {len(operands)} GPU operator pods for a GPU reset"
        nodes.event(node, "RemedyGpusReleased", done)
        return done

    def return_gpus(self, node: str) -> None:
        nodes = self._nodes
        saved = meta(nodes.node(node)).get("annotations", {}).get(GPU_OPERANDS_SAVED)
        if saved is None or not nodes.sends(node, "let the GPU operator's pods back"):
            return
        with api_errors("patch", f"nodes/{node}"):
            nodes.core.patch_node(
                node,
                {
                    "metadata": {
                        "labels": json.loads(saved),
                        "annotations": {GPU_OPERANDS_SAVED: None},
                    }
                },
            )
        nodes.event(node, "RemedyGpusReturned", "the GPU operator's pods may run again")


def _gpu_operand(pod: Json) -> bool:
    name = meta(pod).get("name", "")
    return daemonset(pod) and any(part in name for part in GPU_OPERAND_PODS)
