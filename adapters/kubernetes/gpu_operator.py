"""The NVIDIA GPU operator stepping aside for a GPU reset: the operands that hold the GPUs
open are labelled off the node and their pods awaited, since nvidia-smi cannot reset a GPU that
any process holds; afterwards the labels go back.

The way of NVIDIA's driver manager (k8s-driver-manager, which pauses them for a driver upgrade):
each operand's DaemonSet selects ``nvidia.com/gpu.deploy.<operand>: "true"``, and the operator
keeps any value it finds there. remedy turns only a "true" into its own mark, ``paused-for-remedy``,
and turns back only what still carries that mark. So a retried release (which finds its mark,
not "true"), a crash at any point, or someone else's value ("false", the driver manager's or
the MIG manager's pause) never loses or overwrites anything: there is nothing to remember."""

from __future__ import annotations

import json
import time

from adapters.kubernetes.edits import as_read, patch
from adapters.kubernetes.nodes import PREFIX, NodeApi, daemonset
from adapters.kubernetes.objects import Json, meta
from remedy.core.errors import TransientError
from remedy.core.events import EventReason

DEPLOY = "nvidia.com/gpu.deploy"
PAUSED = "paused-for-remedy"
# What steps aside, by its deploy label, with the ``app`` label of its pods (as the operator's
# DaemonSets set them). Each holds the GPUs open (NVML, the DCGM host engine, an MPS server):
# the device plugin (and its MPS control daemon), feature discovery, DCGM and its exporter, in
# the device-plugin stack and in the DRA stack; the MIG manager, which would otherwise apply a
# MIG change (itself a GPU reset, pausing these same labels) in the middle of remedy's.
# Not paused: the driver and the container toolkit (a reset keeps the driver loaded and needs
# it); the validators (their checks ran when the node came up; the device plugin waits for
# them again if they go); the DRA kubelet plugin, which must outlive its clients (it releases
# the claims of the DRA DCGM pods as they leave: stopped with them, they hang in Terminating —
# the operator and the driver manager stop it last, and only to unload the driver).
GPU_OPERANDS: dict[str, tuple[str, ...]] = {
    f"{DEPLOY}.device-plugin": (
        "nvidia-device-plugin-daemonset",
        "nvidia-device-plugin-mps-control-daemon",
    ),
    f"{DEPLOY}.gpu-feature-discovery": ("gpu-feature-discovery",),
    f"{DEPLOY}.dcgm": ("nvidia-dcgm",),
    f"{DEPLOY}.dcgm-exporter": ("nvidia-dcgm-exporter",),
    f"{DEPLOY}.mig-manager": ("nvidia-mig-manager",),
    f"{DEPLOY}.dcgm-dra": ("nvidia-dcgm-dra",),
    f"{DEPLOY}.dcgm-exporter-dra": ("nvidia-dcgm-exporter-dra",),
}
# Where remedy before this version saved the labels it set to "false" (read on return only,
# for a node released by an older remedy and returned by this one).
GPU_OPERANDS_SAVED = f"{PREFIX}/gpu-operand-labels"


class GpuOperatorHandoff:
    def __init__(self, nodes: NodeApi, *, wait_timeout_s: float, poll_s: float) -> None:
        self._nodes, self._wait_timeout_s, self._poll_s = nodes, wait_timeout_s, poll_s

    def release_gpus(self, node: str) -> str:
        """Mark the running operands paused, then wait until their pods are gone."""
        paused = as_read(self._nodes, node, self._pause)
        if paused is None:
            return "dry run: would stop the GPU operator's pods"
        apps = {app for label in paused for app in GPU_OPERANDS[label]}
        leaving = {meta(p)["uid"] for p in self._operand_pods(node, apps)}
        deadline = time.monotonic() + self._wait_timeout_s
        while {meta(p)["uid"] for p in self._operand_pods(node, apps)} & leaving:
            if time.monotonic() > deadline:
                raise TransientError(f"the GPU operator's pods did not leave {node}")
            time.sleep(self._poll_s)
        done = f"stopped {len(leaving)} GPU operator pods for a GPU reset"
        self._nodes.event(node, EventReason.GPUS_RELEASED, done)
        return done

    def _pause(self, current: Json) -> list[str] | None:
        """The operand labels carrying remedy's mark (a retry finds them marked already);
        None in dry run."""
        nodes, node = self._nodes, meta(current)["name"]
        nodes.managed(current)
        nodes.alone(current)
        labels = meta(current).get("labels") or {}
        if not nodes.sends(node, "stop the GPU operator's pods"):
            return None
        running = [label for label in GPU_OPERANDS if labels.get(label) == "true"]
        if running:
            patch(nodes, current, {"metadata": {"labels": dict.fromkeys(running, PAUSED)}})
        return [label for label in GPU_OPERANDS if labels.get(label) in ("true", PAUSED)]

    def _operand_pods(self, node: str, apps: set[str]) -> list[Json]:
        """The operator's pods on the node, found by their ``app`` label (in whatever
        namespace the operator runs)."""
        if not apps:
            return []
        selector = f"app in ({','.join(sorted(apps))})"
        return [
            p
            for p in self._nodes.pods(node, label_selector=selector)
            if daemonset(p) and (meta(p).get("labels") or {}).get("app") in apps
        ]

    def return_gpus(self, node: str) -> None:
        as_read(self._nodes, node, self._unpause)

    def _unpause(self, current: Json) -> None:
        """Back to "true" only what still carries remedy's mark: a label someone changed
        since ("false", their own pause) is theirs now."""
        nodes, node = self._nodes, meta(current)["name"]
        labels = meta(current).get("labels") or {}
        back: dict[str, str | None] = {
            k: "true" for k, v in labels.items() if k.startswith(f"{DEPLOY}.") and v == PAUSED
        }
        saved = (meta(current).get("annotations") or {}).get(GPU_OPERANDS_SAVED)
        if saved is not None:  # released by an older remedy: it set "false" and saved these
            back |= {k: v for k, v in json.loads(saved).items() if labels.get(k) == "false"}
        if (not back and saved is None) or not nodes.sends(
            node, "let the GPU operator's pods back"
        ):
            return
        body: Json = {"metadata": {"labels": back}}
        if saved is not None:
            body["metadata"]["annotations"] = {GPU_OPERANDS_SAVED: None}
        patch(nodes, current, body)
        nodes.event(node, EventReason.GPUS_RETURNED, "the GPU operator's pods may run again")
