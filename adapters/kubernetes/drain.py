"""Emptying a node of work: drain through the Eviction API with kubectl's rules (after a
checkpoint grace for training pods), and killing the pods that hold its GPUs."""

from __future__ import annotations

import time
from collections.abc import Callable

from kubernetes import client as k8s

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.nodes import PREFIX, NodeApi, daemonset
from adapters.kubernetes.objects import Json, gpu_count, meta
from remedy.errors import DrainBlocked, NodeGone, TransientError

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# A drain asks GPU pods to checkpoint first; the job answers by setting CHECKPOINTED.
CHECKPOINT_REQUESTED = f"{PREFIX}/checkpoint-requested"
CHECKPOINTED = f"{PREFIX}/checkpointed"


class Drain:
    """The pod side of node control, with the timeouts and grace periods it runs under."""

    def __init__(
        self,
        nodes: NodeApi,
        *,
        eviction_retry_s: float = 5.0,
        drain_timeout_s: float = 1800.0,
        kill_grace_s: int = 10,
        checkpoint_grace_s: float = 0.0,
    ) -> None:
        self._nodes = nodes
        self._eviction_retry_s, self._drain_timeout_s = eviction_retry_s, drain_timeout_s
        self._kill_grace_s, self._checkpoint_grace_s = kill_grace_s, checkpoint_grace_s

    def gpu_pods(self, node: str) -> list[str]:
        """The uids of the running pods that use the node's GPUs: what a job kill is for."""
        return [meta(p)["uid"] for p in self._nodes.pods(node) if _kill(p)]

    def evictable(self, node: str) -> list[str]:
        """The uids of the pods a drain evicts (kubectl's rules: not DaemonSet or mirror pods,
        not finished ones)."""
        return [meta(p)["uid"] for p in self._nodes.pods(node) if _evict(p)]

    def kill_gpu_pods(self, node: str, only: set[str]) -> str:
        """Delete the pods of ``only`` still on the node (a pod scheduled since is not the
        job this kill was for)."""
        nodes = self._nodes
        victims = [p for p in nodes.pods(node) if _kill(p) and meta(p)["uid"] in only]
        if not nodes.sends(node, f"delete {len(victims)} pods using GPUs"):
            return f"dry run: would delete {len(victims)} pods using the node's GPUs"
        for pod in victims:
            try:
                with api_errors("delete", "pods"):
                    nodes.core.delete_namespaced_pod(
                        meta(pod)["name"],
                        meta(pod)["namespace"],
                        grace_period_seconds=self._kill_grace_s,
                    )
            except NodeGone:
                pass  # already gone: that is what we wanted
        nodes.event(node, "RemedyKilledJob", f"deleted {len(victims)} pods using GPUs")
        return f"deleted {len(victims)} pods using the node's GPUs"

    def drain(self, node: str, on_progress: Callable[[int], None], only: set[str]) -> str:
        """Evict the pods of ``only`` still on the node through the Eviction API: finished pods
        count as done, a PodDisruptionBudget refusal (429) is retried until the drain times
        out, and a pod is gone only when its UID is."""
        nodes = self._nodes
        pods = nodes.pods(node)
        skipped = [p for p in pods if daemonset(p) or _mirror(p)]
        pending = {meta(p)["uid"]: p for p in pods if _evict(p) and meta(p)["uid"] in only}
        evicted = dict(pending)
        if not nodes.sends(node, f"evict {len(pending)} pods"):
            return f"dry run: would evict {len(pending)} pods, leave {len(skipped)}"
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
        nodes.event(node, "RemedyDrained", f"evicted {len(evicted)} pods, left {len(skipped)}")
        return f"evicted {len(evicted)} pods, left {len(skipped)} DaemonSet/mirror pods"

    def _checkpoint_grace(
        self, node: str, jobs: list[Json], on_progress: Callable[[int], None]
    ) -> None:
        """Tell training pods a drain is coming (an annotation the job can watch) and wait up to
        the grace period, or until each has answered that it checkpointed."""
        if not jobs or self._checkpoint_grace_s <= 0:
            return
        nodes = self._nodes
        asked = nodes.clock().isoformat()
        for job in jobs:
            with api_errors("patch", "pods"):
                nodes.core.patch_namespaced_pod(
                    meta(job)["name"],
                    meta(job)["namespace"],
                    {"metadata": {"annotations": {CHECKPOINT_REQUESTED: asked}}},
                )
        nodes.event(
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
                for p in nodes.pods(node)
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
                self._nodes.core.create_namespaced_pod_eviction(name, namespace, body)
        except NodeGone:
            pass  # the pod is already gone

    def _wait_gone(
        self, node: str, uids: set[str], deadline: float, on_progress: Callable[[int], None]
    ) -> None:
        while True:
            left = {meta(p).get("uid") for p in self._nodes.pods(node)} & uids
            on_progress(len(left))
            if not left:
                return
            if time.monotonic() > deadline:
                raise TransientError(f"{len(left)} evicted pods still on {node}")
            time.sleep(min(self._eviction_retry_s, 1.0))


def _mirror(pod: Json) -> bool:
    return MIRROR_ANNOTATION in meta(pod).get("annotations", {})


def _finished(pod: Json) -> bool:
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def _uses_gpus(pod: Json) -> bool:
    return gpu_count(pod) > 0


def _kill(pod: Json) -> bool:
    return _uses_gpus(pod) and not _finished(pod)


def _evict(pod: Json) -> bool:
    return not (daemonset(pod) or _mirror(pod) or _finished(pod))
