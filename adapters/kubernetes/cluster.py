"""The Cluster seam on the official kubernetes client.

Cordon is ``spec.unschedulable`` plus a NoSchedule taint, with remedy's ownership recorded in
annotations; restore removes only what remedy added and never touches a cordon someone else
set. Every action leaves a Kubernetes Event on the node, so `kubectl describe node` tells the
story. A node labelled ``remedy.io/managed=false`` is never acted on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from enum import StrEnum
from typing import cast

from kubernetes import client as k8s
from pydantic import TypeAdapter, ValidationError

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.objects import RECENT_XIDS, Json, gpu_count, meta, record_event
from remedy.attribution.evidence import RecentXid, remember
from remedy.cluster import CordonOwner, DrainResult
from remedy.conditions import NodeCondition
from remedy.errors import ActionRefused, DrainBlocked, NodeGone, TransientError
from remedy.fleet import NodeFacts
from remedy.models import CordonState, NodeBoot

log = logging.getLogger(__name__)

PREFIX = "remedy.io"
CORDONED_BY = f"{PREFIX}/cordoned-by"
CORDON_REASON = f"{PREFIX}/cordon-reason"
CORDONED_AT = f"{PREFIX}/cordoned-at"
OPT_OUT_LABEL = f"{PREFIX}/managed"
POOL_LABEL = f"{PREFIX}/pool"
TAINT = {"key": f"{PREFIX}/remediating", "value": "true", "effect": "NoSchedule"}
# New nodes register with this taint (kubelet --register-with-taints) and keep it until
# admission validates them; remedy never puts it on a node that is already taking work.
ADMISSION_TAINT = {"key": f"{PREFIX}/unvalidated", "value": "true", "effect": "NoSchedule"}
VALIDATED_LABEL = f"{PREFIX}/validated"
VALIDATED_AT = f"{PREFIX}/validated-at"
GPU_SERIALS = f"{PREFIX}/gpu-serials"  # an annotation: 8 serials do not fit a label value
ADMISSION_REJECTED = f"{PREFIX}/admission-rejected"
REMEDY_CONDITIONS = ("GpuProblem", "GpuNetworkProblem")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# A drain asks GPU pods to checkpoint first; the job answers by setting CHECKPOINTED.
CHECKPOINT_REQUESTED = f"{PREFIX}/checkpoint-requested"
CHECKPOINTED = f"{PREFIX}/checkpointed"
KARPENTER_POOL_LABEL = "karpenter.sh/nodepool"
NODECLAIMS = ("karpenter.sh", "v1", "nodeclaims")
# The NVIDIA GPU operator deploys its operands where these labels are not "false".
GPU_OPERAND_LABELS = tuple(
    f"nvidia.com/gpu.deploy.{c}"
    for c in ("device-plugin", "dcgm", "dcgm-exporter", "gpu-feature-discovery")
)
GPU_OPERAND_PODS = ("device-plugin", "dcgm", "gpu-feature-discovery")
GPU_OPERANDS_SAVED = f"{PREFIX}/gpu-operand-labels"
CONFLICT_RETRIES = 5


class ReplaceProvider(StrEnum):
    AUTO = "auto"  # Karpenter when the node carries its labels, else refuse
    KARPENTER = "karpenter"
    PLAIN = "plain"  # delete the Node object; an external provisioner brings a new one
    NONE = "none"  # never replace


def _now() -> datetime:
    return datetime.now(UTC)


class KubernetesCluster:
    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        dry_run: bool = False,
        replace_provider: ReplaceProvider = ReplaceProvider.AUTO,
        clock: Callable[[], datetime] = _now,
        eviction_retry_s: float = 5.0,
        drain_timeout_s: float = 1800.0,
        kill_grace_s: int = 10,
        checkpoint_grace_s: float = 0.0,
    ) -> None:
        self._checkpoint_grace_s = checkpoint_grace_s
        self.core = k8s.CoreV1Api(api)
        self.custom = k8s.CustomObjectsApi(api)
        self.replace_provider = replace_provider
        self._api = api
        self.dry_run, self._clock = dry_run, clock
        self._eviction_retry_s, self._drain_timeout_s = eviction_retry_s, drain_timeout_s
        self._kill_grace_s = kill_grace_s

    # -- reading ---------------------------------------------------------------------------
    def _json(self, obj: object) -> Json:
        """The object as the API server sent it (camelCase JSON), not the client's models."""
        out: Json = self._api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
        return out

    def _node(self, name: str) -> Json:
        with api_errors("get", f"nodes/{name}"):
            return self._json(self.core.read_node(name))

    def _managed(self, node: Json) -> None:
        if meta(node).get("labels", {}).get(OPT_OUT_LABEL) == "false":
            raise ActionRefused(
                f"node {meta(node).get('name')} opted out of remedy ({OPT_OUT_LABEL}=false)"
            )

    # -- cordon and restore ----------------------------------------------------------------
    def cordon(self, node: str, owner: CordonOwner) -> CordonState:
        for _ in range(CONFLICT_RETRIES):  # 409: someone changed the node; read it again
            current = self._node(node)
            self._managed(current)
            annotations = meta(current).get("annotations", {})
            spec = current.get("spec", {})
            if spec.get("unschedulable"):
                ours = CORDONED_BY in annotations
                return CordonState.ALREADY_OURS if ours else CordonState.BY_OTHER
            if self.dry_run:
                self._event(node, "RemedyDryRun", f"would cordon: {owner.reason}")
                return CordonState.CORDONED
            body = {
                "metadata": {
                    "resourceVersion": meta(current).get("resourceVersion"),
                    "annotations": {
                        CORDONED_BY: owner.workflow_id,
                        CORDON_REASON: owner.reason[:256],
                        CORDONED_AT: self._clock().isoformat(),
                    },
                },
                "spec": {"unschedulable": True, "taints": [*spec.get("taints", []), TAINT]},
            }
            try:
                with api_errors("patch", f"nodes/{node}"):
                    self.core.patch_node(node, body)
            except TransientError as exc:
                if "409" in str(exc):
                    continue
                raise
            self._event(node, "RemedyCordoned", f"cordoned by {owner.workflow_id}: {owner.reason}")
            return CordonState.CORDONED
        raise TransientError(f"node {node} kept changing: {CONFLICT_RETRIES} conflicts")

    def restore(self, node: str) -> bool:
        current = self._node(node)
        if CORDONED_BY not in meta(current).get("annotations", {}):
            return False  # not remedy's cordon: leave it
        if self.dry_run:
            self._event(node, "RemedyDryRun", "would uncordon")
            return True
        taints = current.get("spec", {}).get("taints", [])
        body = {
            "metadata": {
                "resourceVersion": meta(current).get("resourceVersion"),
                "annotations": {CORDONED_BY: None, CORDON_REASON: None, CORDONED_AT: None},
            },
            "spec": {
                "unschedulable": False,
                "taints": [t for t in taints if t.get("key") != TAINT["key"]],
            },
        }
        with api_errors("patch", f"nodes/{node}"):
            self.core.patch_node(node, body)
        self._event(node, "RemedyRestored", "uncordoned: the node recovered")
        return True

    def pool_size(self, pool: str) -> int:
        """Nodes labelled ``remedy.io/pool=<pool>``; the pool "default" is the whole cluster."""
        selector = None if pool == "default" else f"{POOL_LABEL}={pool}"
        with api_errors("list", "nodes"):
            nodes = self.core.list_node(label_selector=selector)
        return len(nodes.items)

    def nodes(self) -> list[NodeFacts]:
        with api_errors("list", "nodes"):
            listed = self._json(self.core.list_node())
        return [self._facts(node) for node in listed.get("items", [])]

    def _facts(self, node: Json) -> NodeFacts:
        about = meta(node)
        labels, annotations = about.get("labels", {}), about.get("annotations", {})
        spec = node.get("spec", {})
        return NodeFacts(
            name=about["name"],
            pool=labels.get(POOL_LABEL, "default"),
            managed=labels.get(OPT_OUT_LABEL) != "false",
            unschedulable=bool(spec.get("unschedulable")),
            cordoned_by_remedy=CORDONED_BY in annotations,
            problems=[c for c in self._conditions(node) if c.status == "True"],
            awaiting_admission=_has_taint(node, ADMISSION_TAINT),
            validated=labels.get(VALIDATED_LABEL) == "true",
            rejected=annotations.get(ADMISSION_REJECTED),
        )

    def node_boot(self, node: str) -> NodeBoot:
        status = self._node(node).get("status", {})
        ready = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions", [])
        )
        return NodeBoot(boot_id=status.get("nodeInfo", {}).get("bootID", ""), ready=ready)

    # -- GPU operands around a reset --------------------------------------------------------
    def release_gpus(self, node: str) -> int:
        """NVIDIA GPU operator's way: label its operands off the node (device plugin, DCGM,
        exporter, feature discovery), remember the old labels in an annotation, and wait until
        their pods are gone, since nvidia-smi cannot reset a GPU that any process holds."""
        current = self._node(node)
        self._managed(current)
        labels = meta(current).get("labels", {})
        previous = {label: labels.get(label) for label in GPU_OPERAND_LABELS}
        if self.dry_run:
            self._event(node, "RemedyDryRun", "would stop the GPU operator's pods")
            return 0
        with api_errors("patch", f"nodes/{node}"):
            self.core.patch_node(
                node,
                {
                    "metadata": {
                        "labels": dict.fromkeys(GPU_OPERAND_LABELS, "false"),
                        "annotations": {GPU_OPERANDS_SAVED: json.dumps(previous, sort_keys=True)},
                    }
                },
            )
        operands = {meta(p)["uid"] for p in self._pods(node) if _gpu_operand(p)}
        deadline = time.monotonic() + self._drain_timeout_s
        while {meta(p)["uid"] for p in self._pods(node) if _gpu_operand(p)} & operands:
            if time.monotonic() > deadline:
                raise TransientError(f"the GPU operator's pods did not leave {node}")
            time.sleep(min(self._eviction_retry_s, 1.0))
        self._event(
            node, "RemedyGpusReleased", f"stopped {len(operands)} GPU operator pods for a GPU reset"
        )
        return len(operands)

    def return_gpus(self, node: str) -> None:
        saved = meta(self._node(node)).get("annotations", {}).get(GPU_OPERANDS_SAVED)
        if saved is None or self.dry_run:
            return
        with api_errors("patch", f"nodes/{node}"):
            self.core.patch_node(
                node,
                {
                    "metadata": {
                        "labels": json.loads(saved),
                        "annotations": {GPU_OPERANDS_SAVED: None},
                    }
                },
            )
        self._event(node, "RemedyGpusReturned", "the GPU operator's pods may run again")

    # -- conditions ------------------------------------------------------------------------
    def conditions(self, node: str) -> list[NodeCondition]:
        return self._conditions(self._node(node))

    def _conditions(self, node: Json) -> list[NodeCondition]:
        return remedy_conditions(node, self._clock())

    def set_conditions(self, node: str, conditions: list[NodeCondition]) -> None:
        # Strategic merge keys conditions by type: only remedy's own conditions are written.
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
            self.core.patch_node_status(node, body)

    def record_xids(self, node: str, xids: list[RecentXid]) -> None:
        """Add the agent's new Xids to those its node keeps (an annotation, bounded): job
        attribution reads them to tie an Xid to the job whose pod held the GPUs."""
        if not xids:
            return
        kept_json = meta(self._node(node)).get("annotations", {}).get(RECENT_XIDS)
        try:
            kept = TypeAdapter(list[RecentXid]).validate_json(kept_json or "[]")
        except ValidationError:
            kept = []  # a hand-edited annotation must not stop the agent's record
        merged = remember(kept, xids, self._clock())
        body = json.dumps(
            [x.model_dump(mode="json", exclude_none=True) for x in merged], separators=(",", ":")
        )
        with api_errors("patch", f"nodes/{node}"):
            self.core.patch_node(node, {"metadata": {"annotations": {RECENT_XIDS: body}}})

    # -- admission -------------------------------------------------------------------------
    def hold_for_admission(self, node: str) -> None:
        current = self._node(node)
        self._managed(current)
        if _has_taint(current, ADMISSION_TAINT) or self.dry_run:
            return
        taints = current.get("spec", {}).get("taints", [])
        with api_errors("patch", f"nodes/{node}"):
            self.core.patch_node(
                node,
                {
                    "metadata": {"resourceVersion": meta(current).get("resourceVersion")},
                    "spec": {"taints": [*taints, ADMISSION_TAINT]},
                },
            )

    def admit(self, node: str, serials: list[str]) -> None:
        current = self._node(node)
        self._managed(current)
        if self.dry_run:
            self._event(node, "RemedyDryRun", "would admit the node")
            return
        taints = current.get("spec", {}).get("taints", [])
        with api_errors("patch", f"nodes/{node}"):
            self.core.patch_node(
                node,
                {
                    "metadata": {
                        "resourceVersion": meta(current).get("resourceVersion"),
                        "labels": {VALIDATED_LABEL: "true"},
                        "annotations": {
                            GPU_SERIALS: ",".join(serials),
                            VALIDATED_AT: self._clock().isoformat(),
                            ADMISSION_REJECTED: None,
                        },
                    },
                    "spec": {
                        "taints": [t for t in taints if t.get("key") != ADMISSION_TAINT["key"]]
                    },
                },
            )
        self._event(node, "RemedyAdmitted", f"validated: {len(serials)} GPUs passed admission")

    def reject(self, node: str, reason: str) -> None:
        if not self.dry_run:
            with api_errors("patch", f"nodes/{node}"):
                self.core.patch_node(
                    node, {"metadata": {"annotations": {ADMISSION_REJECTED: reason[:1024]}}}
                )
        self._event(node, "RemedyAdmissionRejected", reason)

    # -- pods ------------------------------------------------------------------------------
    def _pods(self, node: str) -> list[Json]:
        with api_errors("list", "pods"):
            listed = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
        items: list[Json] = self._json(listed).get("items", [])
        return [p for p in items if p.get("spec", {}).get("nodeName") == node]  # belt and braces

    def kill_gpu_pods(self, node: str) -> int:
        self._managed(self._node(node))
        victims = [p for p in self._pods(node) if _uses_gpus(p) and not _finished(p)]
        for pod in victims:
            if self.dry_run:
                continue
            try:
                with api_errors("delete", "pods"):
                    self.core.delete_namespaced_pod(
                        meta(pod)["name"],
                        meta(pod)["namespace"],
                        grace_period_seconds=self._kill_grace_s,
                    )
            except NodeGone:
                pass  # already gone: that is what we wanted
        verb = "would delete" if self.dry_run else "deleted"
        self._event(node, "RemedyKilledJob", f"{verb} {len(victims)} pods using GPUs")
        return len(victims)

    def drain(self, node: str, on_progress: Callable[[int], None]) -> DrainResult:
        """Evict through the Eviction API with kubectl's rules: DaemonSet and mirror pods stay,
        finished pods count as done, a PodDisruptionBudget refusal (429) is retried until the
        drain times out, and a pod is gone only when its UID is."""
        self._managed(self._node(node))
        pods = self._pods(node)
        skipped = [p for p in pods if _daemonset(p) or _mirror(p)]
        pending = {meta(p)["uid"]: p for p in pods if p not in skipped and not _finished(p)}
        evicted = dict(pending)
        if self.dry_run:
            self._event(node, "RemedyDryRun", f"would evict {len(pending)} pods")
            return DrainResult(evicted=len(pending), skipped=len(skipped))
        deadline = time.monotonic() + self._drain_timeout_s
        self._checkpoint_grace(node, [p for p in pending.values() if _uses_gpus(p)], on_progress)
        while pending:
            on_progress(len(pending))
            for uid, pod in list(pending.items()):
                try:
                    self._evict(pod)
                    del pending[uid]
                except DrainBlocked:
                    continue
            if pending:
                if time.monotonic() > deadline:
                    raise DrainBlocked(
                        f"{len(pending)} pods still protected by a "
                        "PodDisruptionBudget when the drain timed out"
                    )
                time.sleep(self._eviction_retry_s)
        self._wait_gone(node, set(evicted), deadline, on_progress)
        self._event(node, "RemedyDrained", f"evicted {len(evicted)} pods, left {len(skipped)}")
        return DrainResult(evicted=len(evicted), skipped=len(skipped))

    def _checkpoint_grace(
        self, node: str, jobs: list[Json], on_progress: Callable[[int], None]
    ) -> None:
        """Tell training pods a drain is coming (an annotation the job can watch) and wait up to
        the grace period, or until each has answered that it checkpointed."""
        if not jobs or self._checkpoint_grace_s <= 0:
            return
        asked = self._clock().isoformat()
        for job in jobs:
            with api_errors("patch", "pods"):
                self.core.patch_namespaced_pod(
                    meta(job)["name"],
                    meta(job)["namespace"],
                    {"metadata": {"annotations": {CHECKPOINT_REQUESTED: asked}}},
                )
        self._event(
            node,
            "RemedyCheckpointRequested",
            f"asked {len(jobs)} GPU pods to checkpoint; evicting in at most "
            f"{self._checkpoint_grace_s:g}s",
        )
        waiting = {meta(j)["uid"] for j in jobs}
        deadline = time.monotonic() + self._checkpoint_grace_s
        while time.monotonic() < deadline:
            done = {
                meta(p)["uid"]
                for p in self._pods(node)
                if CHECKPOINTED in meta(p).get("annotations", {})
            }
            on_progress(len(waiting - done))
            if waiting <= done:
                return
            time.sleep(min(self._eviction_retry_s, 1.0))

    def _evict(self, pod: Json) -> None:
        name, namespace = meta(pod)["name"], meta(pod)["namespace"]
        body = k8s.V1Eviction(
            api_version="policy/v1",
            kind="Eviction",
            metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        )
        try:
            with api_errors("create", "pods/eviction"):
                self.core.create_namespaced_pod_eviction(name, namespace, body)
        except NodeGone:
            pass  # the pod is already gone

    def _wait_gone(
        self, node: str, uids: set[str], deadline: float, on_progress: Callable[[int], None]
    ) -> None:
        while True:
            left = {meta(p).get("uid") for p in self._pods(node)} & uids
            on_progress(len(left))
            if not left:
                return
            if time.monotonic() > deadline:
                raise TransientError(f"{len(left)} evicted pods still on {node}")
            time.sleep(min(self._eviction_retry_s, 1.0))

    # -- replace ---------------------------------------------------------------------------
    def replace(self, node: str) -> str:
        """Hand the node back to whatever provisions nodes: Karpenter (delete its NodeClaim)
        or, when configured, plain deletion of the Node object. Unknown: refuse."""
        current = self._node(node)
        self._managed(current)
        provider = self.replace_provider
        if provider is ReplaceProvider.AUTO:
            karpenter = KARPENTER_POOL_LABEL in meta(current).get("labels", {})
            provider = ReplaceProvider.KARPENTER if karpenter else ReplaceProvider.NONE
        if provider is ReplaceProvider.NONE:
            raise ActionRefused(
                f"cannot tell how this cluster provisions {node}: it is not a "
                "Karpenter node; set the replace provider to 'plain' to delete "
                "the Node object and let your provisioner bring a new one"
            )
        if provider is ReplaceProvider.KARPENTER:
            return self._replace_nodeclaim(node)
        if self.dry_run:
            self._event(node, "RemedyDryRun", "would delete the Node object")
            return f"dry run: would delete node {node}"
        # The event goes first: it is the record left for external provisioning.
        self._event(node, "RemedyReplaced", "deleted the Node object for replacement")
        with api_errors("delete", f"nodes/{node}"):
            self.core.delete_node(node)
        return f"deleted node {node}; the provisioner replaces it"

    def _replace_nodeclaim(self, node: str) -> str:
        with api_errors("list", "nodeclaims.karpenter.sh"):
            claims = cast(Json, self.custom.list_cluster_custom_object(*NODECLAIMS))
        owner = next(
            (c for c in claims.get("items", []) if c.get("status", {}).get("nodeName") == node),
            None,
        )
        if owner is None:
            raise ActionRefused(f"no Karpenter NodeClaim owns {node}: refusing to guess")
        name = meta(owner)["name"]
        if self.dry_run:
            self._event(node, "RemedyDryRun", f"would delete NodeClaim {name}")
            return f"dry run: would delete NodeClaim {name}"
        self._event(node, "RemedyReplaced", f"deleted NodeClaim {name}: Karpenter replaces it")
        with api_errors("delete", "nodeclaims.karpenter.sh"):
            self.custom.delete_cluster_custom_object(*NODECLAIMS, name)
        return f"deleted Karpenter NodeClaim {name}; Karpenter provisions a replacement"

    # -- events ----------------------------------------------------------------------------
    def _event(self, node: str, reason: str, message: str) -> None:
        record_event(
            self.core,
            k8s.V1ObjectReference(kind="Node", name=node, api_version="v1"),
            reason,
            message,
            self._clock(),
        )


def remedy_conditions(node: Json, now: datetime) -> list[NodeCondition]:
    """remedy's own conditions on a node object (``now`` stands in for a missing time)."""
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
        if c.get("type") in REMEDY_CONDITIONS
    ]


def _has_taint(node: Json, taint: Json) -> bool:
    return any(t.get("key") == taint["key"] for t in node.get("spec", {}).get("taints", []))


def _daemonset(pod: Json) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in meta(pod).get("ownerReferences", []))


def _mirror(pod: Json) -> bool:
    return MIRROR_ANNOTATION in meta(pod).get("annotations", {})


def _finished(pod: Json) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def _gpu_operand(pod: Json) -> bool:
    name = meta(pod).get("name", "")
    return _daemonset(pod) and any(part in name for part in GPU_OPERAND_PODS)


def _uses_gpus(pod: Json) -> bool:
    return gpu_count(pod) > 0
