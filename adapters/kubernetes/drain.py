"""Emptying a node of work: drain through the Eviction API with kubectl's rules (after a
checkpoint grace for training pods), and killing the pods that hold its GPUs.

A drain is one loop until its timeout: read the node's pods, count a target done when its UID
is gone or it finished (a pod deleted meanwhile is done, never "the node is gone"), act on the
rest by their namespace's mode (drain_modes.py), and wait. Which pods are targets and which
are refused is drain_rules.py; one eviction and its answers is eviction.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes import client as k8s

from adapters.kubernetes import eviction
from adapters.kubernetes.drain_modes import DrainMode, DrainModes
from adapters.kubernetes.drain_rules import (
    DrainRules,
    PodPlan,
    finished,
    name,
    plan,
    stuck_terminating,
    terminating,
)
from adapters.kubernetes.errors import NotFound, api_errors
from adapters.kubernetes.eviction import Answer
from adapters.kubernetes.gpu_use import KubernetesGpuUse
from adapters.kubernetes.nodes import PREFIX, NodeApi, ready
from adapters.kubernetes.objects import Json, meta
from remedy.attribution.goodput import Event, parse
from remedy.core.errors import DrainBlocked, RemedyError, TransientError
from remedy.core.events import EventReason

# A drain asks GPU pods to checkpoint first; the job answers by setting CHECKPOINTED, or (with
# no right to patch its pod) by a line in its log (remedy_job's acknowledge).
CHECKPOINT_REQUESTED = f"{PREFIX}/checkpoint-requested"
CHECKPOINTED = f"{PREFIX}/checkpointed"
ACK_LINES = 50  # of the pod's log, read for its answer
NAMED = 10  # pods named in a message, at most
DRAIN_TIMEOUT_S = 1800.0


@dataclass
class _Progress:
    """What the drain did to its targets so far, by UID."""

    tried: dict[str, float] = field(default_factory=dict)  # last eviction or delete, monotonic
    blocked: dict[str, str] = field(default_factory=dict)  # the last refusal's reason
    deleted: set[str] = field(default_factory=set)  # past delete_after_s
    stuck: set[str] = field(default_factory=set)  # Terminating on a NotReady node: not waited


class Drain:
    """The pod side of node control, with the timeouts, grace periods and rules it runs
    under."""

    def __init__(
        self,
        nodes: NodeApi,
        *,
        eviction_retry_s: float = 5.0,
        drain_timeout_s: float = DRAIN_TIMEOUT_S,
        kill_grace_s: int = 10,
        checkpoint_grace_s: float = 0.0,
        rules: DrainRules | None = None,
        modes: DrainModes | None = None,
    ) -> None:
        self._nodes, self._apps = nodes, k8s.AppsV1Api(nodes.api)
        self._eviction_retry_s, self._drain_timeout_s = eviction_retry_s, drain_timeout_s
        self._kill_grace_s, self._checkpoint_grace_s = kill_grace_s, checkpoint_grace_s
        self._rules, self._modes = rules or DrainRules(), modes or DrainModes()
        self.use = KubernetesGpuUse(nodes)

    def gpu_pods(self, node: str) -> list[str]:
        """The uids of the running pods that use the node's GPUs (whole, MIG instances or
        DRA claims): what a job kill is for, and what makes a node busy."""
        return self._gpu_uids(node, self._nodes.pods(node))

    def _gpu_uids(self, node: str, pods: list[Json]) -> list[str]:
        using = {(u.namespace, u.pod) for u in self.use.of_pods(node, pods).uses}
        return [meta(p)["uid"] for p in pods if (meta(p).get("namespace"), name_of(p)) in using]

    def evictable(self, node: str) -> list[str]:
        """The uids of the pods a drain is for: those it evicts and those it must refuse (a
        drain that left them would claim an empty node)."""
        planned = self._plan(self._nodes.pods(node))
        return [meta(p)["uid"] for p in [*planned.evict, *sum(planned.refused.values(), [])]]

    def kill_gpu_pods(self, node: str, only: set[str]) -> str:
        """Delete the pods of ``only`` still on the node (a pod scheduled since is not the
        job this kill was for)."""
        nodes = self._nodes
        victims = [p for p in nodes.pods(node) if meta(p)["uid"] in only and not finished(p)]
        if not nodes.sends(node, f"delete {len(victims)} pods using GPUs"):
            return f"dry run: would delete {len(victims)} pods using the node's GPUs"
        for pod in victims:
            eviction.delete(nodes.core, pod, self._kill_grace_s)  # gone already: as wanted
        nodes.event(node, EventReason.KILLED_JOB, f"deleted {len(victims)} pods using GPUs")
        return f"deleted {len(victims)} pods using the node's GPUs"

    def drain(self, node: str, on_progress: Callable[[int], None], only: set[str]) -> str:
        """Empty the node of the pods of ``only`` still on it, or refuse (ActionRefused,
        before touching any) when some are pods kubectl's rules keep: see drain_rules.py."""
        nodes = self._nodes
        planned = self._plan(nodes.pods(node))
        planned.refused = {
            why: mine for why, pods in planned.refused.items() if (mine := _of(pods, only))
        }
        refusal = planned.refusal(node)
        if refusal is not None:
            raise refusal
        targets = {meta(p)["uid"]: p for p in _of(planned.evict, only)}
        left = len(planned.left)
        if not nodes.sends(node, f"evict {len(targets)} pods"):
            return f"dry run: would evict {len(targets)} pods, leave {left}"
        started = time.monotonic()
        gpu = set(self._gpu_uids(node, list(targets.values())))
        self._checkpoint_grace(node, [p for u, p in targets.items() if u in gpu], on_progress)
        done = self._until_gone(node, targets, started, on_progress)
        nodes.event(node, EventReason.DRAINED, f"evicted {len(targets)} pods, left {left}")
        said = f"evicted {len(targets)} pods, left {left} DaemonSet/mirror pods"
        waited = [p for p in targets.values() if self._mode(p) is DrainMode.ALLOW_COMPLETION]
        if waited:
            said += f"; {len(waited)} of them left to finish (allow-completion)"
        if done.deleted:
            said += (
                f"; deleted {len(done.deleted)} still there after {self._modes.delete_after_s:g}s"
            )
        if done.stuck:
            said += f"; {len(done.stuck)} left Terminating on the NotReady node"
        return said

    def _mode(self, pod: Json) -> DrainMode:
        return self._modes.mode(meta(pod).get("namespace", ""))

    def _plan(self, pods: list[Json]) -> PodPlan:
        return plan(pods, self._rules, self._daemonset_exists)

    def _daemonset_exists(self, namespace: str, name: str) -> bool:
        try:
            with api_errors("get", "daemonsets", missing=NotFound):
                self._apps.read_namespaced_daemon_set(name, namespace, _preload_content=False)
        except NotFound:
            return False
        return True

    def _until_gone(
        self,
        node: str,
        targets: dict[str, Json],
        started: float,
        on_progress: Callable[[int], None],
    ) -> _Progress:
        """Act on the targets still on the node and wait, until none is left or the drain
        times out (DrainBlocked naming what blocks, or TransientError)."""
        nodes, done = self._nodes, _Progress()
        deadline = started + self._drain_timeout_s
        while True:
            on_node = {meta(p).get("uid"): p for p in nodes.pods(node)}
            waiting = {
                uid: pod
                for uid in targets
                if (pod := on_node.get(uid)) is not None and not finished(pod)
            }
            if any(terminating(p) for p in waiting.values()):  # the node's kubelet finishes them?
                node_ready, now = ready(nodes.node(node)), nodes.clock()
                for uid, pod in list(waiting.items()):
                    if stuck_terminating(pod, node_ready, now, self._rules):
                        done.stuck.add(uid)
                        del waiting[uid]
            on_progress(len(waiting))
            if not waiting:
                return done
            if time.monotonic() > deadline:
                raise self._timed_out(node, waiting, done)
            for uid, pod in waiting.items():
                self._act(uid, pod, started, done)
            # Evicted pods leaving: look again soon; only refusals and waits: at the retry pace.
            held = all(
                u in done.blocked or self._mode(p) is DrainMode.ALLOW_COMPLETION
                for u, p in waiting.items()
            )
            time.sleep(self._eviction_retry_s if held else min(self._eviction_retry_s, 1.0))

    def _act(self, uid: str, pod: Json, started: float, done: _Progress) -> None:
        """One target's step by its namespace's mode, an eviction at most every
        ``eviction_retry_s`` (a budget's no is asked again then)."""
        mode, now = self._mode(pod), time.monotonic()
        if mode is DrainMode.ALLOW_COMPLETION or now - done.tried.get(uid, -1e9) < (
            self._eviction_retry_s
        ):
            return
        if mode is DrainMode.DELETE_AFTER_TIMEOUT and now - started >= self._modes.delete_after_s:
            if uid in done.deleted and terminating(pod):
                return  # its grace period runs: the drain waits until it is gone
            done.tried[uid] = now
            done.deleted.add(uid)
            declared = pod.get("spec", {}).get("terminationGracePeriodSeconds")
            eviction.delete(self._nodes.core, pod, self._modes.delete_grace(declared))
            return
        if terminating(pod):
            return  # being deleted: wait for it
        done.tried[uid] = now
        outcome = eviction.evict(self._nodes.core, pod, self._nodes.field_manager)
        if outcome.answer is Answer.BLOCKED:
            done.blocked[uid] = outcome.reason
        elif outcome.answer is not Answer.RETRY:  # a budget's last no still stands then
            done.blocked.pop(uid, None)  # evicted, gone, or going: the next read tells

    def _timed_out(self, node: str, waiting: dict[str, Json], done: _Progress) -> Exception:
        blocked = [
            f"{name(p)} ({done.blocked[u]})" for u, p in waiting.items() if u in done.blocked
        ]
        if blocked:
            return DrainBlocked(
                f"{len(blocked)} pods still protected by a PodDisruptionBudget when the drain "
                f"timed out: {', '.join(blocked[:NAMED])}"
            )
        running = [name(p) for p in waiting.values() if self._mode(p) is DrainMode.ALLOW_COMPLETION]
        if running:
            return DrainBlocked(
                f"{len(running)} pods of allow-completion namespaces still running when the "
                f"drain timed out: {', '.join(running[:NAMED])}"
            )
        names = ", ".join(name(p) for p in list(waiting.values())[:NAMED])
        return TransientError(f"{len(waiting)} evicted pods still on {node}: {names}")

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
            try:
                with api_errors("patch", "pods", missing=NotFound):
                    nodes.core.patch_namespaced_pod(
                        meta(job)["name"],
                        meta(job)["namespace"],
                        {"metadata": {"annotations": {CHECKPOINT_REQUESTED: asked}}},
                        field_manager=nodes.field_manager,
                    )
            except NotFound:
                continue  # gone already: nothing to checkpoint
        nodes.event(
            node,
            EventReason.CHECKPOINT_REQUESTED,
            f"asked {len(jobs)} GPU pods to checkpoint; evicting in at most "
            f"{self._checkpoint_grace_s:g}s",
        )
        waiting = {meta(j)["uid"] for j in jobs}
        deadline = time.monotonic() + self._checkpoint_grace_s
        while time.monotonic() < deadline:
            on_node = {meta(p)["uid"]: p for p in nodes.pods(node)}
            done = {u for u in waiting if u not in on_node or self._answered(on_node[u], asked)}
            on_progress(len(waiting - done))
            if waiting <= done:
                return
            time.sleep(min(self._eviction_retry_s, 1.0))

    def _answered(self, pod: Json, asked: str) -> bool:
        if CHECKPOINTED in meta(pod).get("annotations", {}):
            return True
        containers = pod.get("spec", {}).get("containers", [])
        try:
            with api_errors("get", "pods/log"):
                log = self._nodes.core.read_namespaced_pod_log(
                    meta(pod)["name"],
                    meta(pod)["namespace"],
                    container=containers[0]["name"] if containers else None,
                    tail_lines=ACK_LINES,
                )
        except RemedyError:
            return False  # no log to read (yet): the annotation or the grace decides
        return any(p.event is Event.ACKNOWLEDGED and p.request == asked for p in parse(str(log)))


def _of(pods: list[Json], only: set[str]) -> list[Json]:
    return [p for p in pods if meta(p)["uid"] in only]


def name_of(pod: Json) -> str:
    return str(meta(pod).get("name", ""))
