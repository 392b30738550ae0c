"""GPU-scoped rungs on Kubernetes (remedy/acting/gpu_scope.py): quarantine the faulty GPU with a DRA
device taint and evict only the pods on it.

One mechanism: a ``DeviceTaintRule`` (resource.k8s.io/v1beta2, Kubernetes' DRA device
taints) per GPU, NoSchedule, selecting the NVIDIA DRA driver's device ``gpu-<index>`` in the
node's pool (the driver names its pool after the node). The scheduler then allocates that GPU
to no new claim; the node stays schedulable and its other GPUs keep serving. Pods that get
GPUs from the device plugin (``nvidia.com/gpu``) are not held off by it: the device plugin has
no per-GPU exclusion a controller can set through the API (it marks a device unhealthy only
from its own health checks), so on such clusters the rule is recorded and the eviction is what
helps. The GPUs held and by which ladder are in the node annotation ``remedy.io/gpus-out``
(restore lifts only its own ladder's); the eviction is keyed in the node's ledger like a drain.

Which pod uses which GPU is not in the API for the device plugin: it is read from the node
annotation ``remedy.io/gpu-use`` (a ``NodeGpuUse`` the agent publishes from the kubelet's
pod-resources API). No annotation, or one that does not parse: the rung is refused, never
guessed."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from kubernetes import client as k8s
from pydantic import ValidationError

from adapters.kubernetes.control import KubernetesNodeControl
from adapters.kubernetes.drain import Drain
from adapters.kubernetes.edits import as_read, patch
from adapters.kubernetes.errors import NotFound, api_errors
from adapters.kubernetes.nodes import PREFIX, NodeApi
from adapters.kubernetes.objects import GPU_USE, Json, create_raw, meta, node_gpus
from remedy.acting.gpu_scope import GpuReleased, check_gpu_index, pods_on
from remedy.acting.gpu_use import NodeGpuUse
from remedy.core.errors import ActionRefused, Conflict
from remedy.core.events import EventReason
from remedy.core.models import Action

GPUS_OUT = f"{PREFIX}/gpus-out"  # {"<gpu index>": "<the ladder's workflow id>"}
DRA_DRIVER = "gpu.nvidia.com"
RULES_PATH = "/apis/resource.k8s.io/v1beta2/devicetaintrules"
TAINT = {"key": f"{PREFIX}/gpu-quarantined", "value": "true", "effect": "NoSchedule"}


def rule_name(node: str, gpu: int) -> str:
    return f"remedy-{node}-gpu-{gpu}"


def gpus_out(node: Json) -> dict[int, str]:
    """The GPUs remedy quarantined on the node, and the ladder holding each."""
    try:
        held = json.loads(meta(node).get("annotations", {}).get(GPUS_OUT, "{}"))
        return {int(g): str(by) for g, by in held.items()}
    except (ValueError, AttributeError):
        return {}


def gpu_use_of(node: Json) -> NodeGpuUse:
    name = meta(node)["name"]
    text = meta(node).get("annotations", {}).get(GPU_USE)
    try:
        return NodeGpuUse.model_validate_json(text) if text else NodeGpuUse(node=name, known=False)
    except ValidationError:
        return NodeGpuUse(node=name, known=False)


class KubernetesGpuScope:
    """The GpuScopedControl seam (remedy/acting/gpu_scope.py) and a GpuUseSource from the agent's
    annotation."""

    def __init__(self, nodes: NodeApi, drain: Drain, control: KubernetesNodeControl) -> None:
        self._nodes, self._drain, self._control = nodes, drain, control
        self._dra = k8s.ResourceV1beta2Api(nodes.api)

    def gpu_use(self, node: str) -> NodeGpuUse:
        return self._use(self._nodes.node(node))

    def _use(self, node: Json) -> NodeGpuUse:
        """The agent's report when it published one; else what the API tells (a DRA claim's
        device exactly, a device-plugin or MIG pod on every GPU: evicted, never left on it)."""
        use = gpu_use_of(node)
        return use if use.known else self._drain.use.gpu_use(meta(node)["name"])

    def evict_gpu_pods(
        self,
        node: str,
        gpus: list[int],
        key: str,
        kill: bool,
        owner: str,
        instance: int | None = None,
    ) -> str:
        nodes = self._nodes
        current = nodes.node(node)
        nodes.managed(current)
        nodes.alone(current)
        if not gpus:
            raise ActionRefused("a GPU-scoped rung cannot say which pods to spare: no GPU named")
        use = self._use(current)
        on = ", ".join(map(str, gpus))
        if not nodes.sends(node, f"quarantine GPU {on} and {'kill' if kill else 'evict'} its pods"):
            return f"dry run: would quarantine GPU {on} and evict the pods using it"
        self._quarantine(node, gpus, owner)
        wanted = {(u.namespace, u.pod) for u in pods_on(use, gpus, instance)}
        planned = [
            meta(p)["uid"]
            for p in nodes.pods(node)
            if (meta(p).get("namespace"), meta(p)["name"]) in wanted
        ]

        def act_on(uids: Sequence[str]) -> str:
            if kill:
                return self._drain.kill_gpu_pods(node, only=set(uids))
            return self._drain.drain(node, lambda _: None, only=set(uids))

        action = Action.KILL_JOB if kill else Action.DRAIN
        done = self._control.keyed(node, key, action, planned, act_on)
        return f"GPU {on} quarantined (DRA device taint); {done}"

    def _quarantine(self, node: str, gpus: list[int], owner: str) -> None:
        for gpu in gpus:
            rule: Json = {
                "apiVersion": "resource.k8s.io/v1beta2",
                "kind": "DeviceTaintRule",
                "metadata": {"name": rule_name(node, gpu), "labels": {f"{PREFIX}/node": node}},
                "spec": {
                    "deviceSelector": {"driver": DRA_DRIVER, "pool": node, "device": f"gpu-{gpu}"},
                    "taint": TAINT,
                },
            }
            try:
                with api_errors("create", "devicetaintrules"):
                    create_raw(self._nodes.api, RULES_PATH, rule, self._nodes.field_manager)
            except Conflict:
                pass  # there already: a retry, or another ladder's hold on that GPU

        def record(current: Json) -> None:
            held = gpus_out(current)
            for gpu in gpus:
                held.setdefault(gpu, owner)
            patch(self._nodes, current, {"metadata": {"annotations": {GPUS_OUT: _dump(held)}}})

        as_read(self._nodes, node, record)
        self._nodes.event(node, EventReason.GPU_QUARANTINED, f"GPU {gpus} out of allocation")

    def lift_quarantine(self, node: str, workflow_id: str) -> list[int]:
        lifted = self._lift(node, lambda held: [g for g, by in held.items() if by == workflow_id])
        return sorted(lifted)

    def release_gpu(self, node: str, gpu: int) -> GpuReleased:
        """Also a rule whose record on the node is gone (a hold interrupted between the
        two writes): a quarantine nobody would ever lift otherwise."""
        check_gpu_index(node, gpu, node_gpus(self._nodes.node(node)))
        if not self._nodes.sends(node, f"return GPU {gpu} to allocation"):
            return GpuReleased(node=node, gpu=gpu, detail="dry run: would return it")
        lifted = self._lift(node, lambda _: [gpu])
        if gpu not in lifted:
            return GpuReleased(node=node, gpu=gpu, detail=f"GPU {gpu} is not quarantined")
        held_by = lifted[gpu]
        return GpuReleased(
            node=node,
            gpu=gpu,
            lifted=True,
            held_by=held_by,
            detail=f"GPU {gpu} back in allocation (device taint {rule_name(node, gpu)} deleted)",
        )

    def _lift(self, node: str, pick: Callable[[dict[int, str]], list[int]]) -> dict[int, str]:
        """Delete the picked GPUs' device taints and their record on the node: the GPUs
        lifted (held in the record, or only a rule), each with its holder ("" unrecorded)."""

        def lift(current: Json) -> dict[int, str]:
            held = gpus_out(current)
            picked = pick(held)
            if not picked or not self._nodes.sends(node, f"return GPU {picked} to allocation"):
                return {}
            lifted = {g: held.pop(g) for g in picked if g in held}
            for gpu in picked:
                try:
                    with api_errors("delete", "devicetaintrules", missing=NotFound):
                        self._dra.delete_device_taint_rule(rule_name(node, gpu))
                    lifted.setdefault(gpu, "")
                except NotFound:
                    pass  # gone already: as wanted
            if len(held) < len(gpus_out(current)):
                body = {"metadata": {"annotations": {GPUS_OUT: _dump(held) if held else None}}}
                patch(self._nodes, current, body)
            return lifted

        lifted = as_read(self._nodes, node, lift)
        if lifted:
            on = sorted(lifted)
            self._nodes.event(node, EventReason.GPU_RETURNED, f"GPU {on} back in allocation")
        return lifted


def _dump(held: dict[int, str]) -> str:
    return json.dumps({str(g): by for g, by in sorted(held.items())}, separators=(",", ":"))
