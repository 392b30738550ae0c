"""How objects leave: deletion with preconditions and finalizers, and pods that stay
Terminating until their node's kubelet confirms them gone (``Kubelets``): on a Ready node when
their containers stop (at most their grace period, on the emulator's clock), on a NotReady
node not at all until forced."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from kubeapi.clock import parse
from kubeapi.resources import BY_KEY, Resource
from kubeapi.status import conflict
from kubeapi.store import Json, Store

PODS, NODES = BY_KEY["v1/pods"], BY_KEY["v1/nodes"]
DEFAULT_GRACE_S = 30  # a pod's terminationGracePeriodSeconds when its spec gives none


def delete(store: Store, res: Resource, namespace: str | None, name: str, options: Json) -> Json:
    """Delete as the API server does: preconditions first (409), then either gone at once or,
    with finalizers or a pod on a node (whose kubelet must stop it), marked with a
    ``deletionTimestamp``: for a pod, when its grace period ends."""
    with store.lock:
        current = store.get(res, namespace, name)
        meta = current["metadata"]
        _preconditions(res.plural, name, meta, options.get("preconditions") or {})
        grace = _grace(res, current, options.get("gracePeriodSeconds"))
        if not (meta.get("finalizers") or (grace > 0 and _on_a_node(store, current))):
            store.remove((res.key, namespace if res.namespaced else None, name))
            return current
        if meta.get("deletionTimestamp") and not _sooner(store, meta, grace):
            return current

        def mark(obj: Json) -> Json:
            obj["metadata"]["deletionTimestamp"] = store.clock.stamp(grace)
            obj["metadata"]["deletionGracePeriodSeconds"] = grace
            return obj

        return store.update(res, namespace, name, mark, deleting=True)[0]


def _preconditions(plural: str, name: str, meta: Json, preconditions: Json) -> None:
    if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
        raise conflict(
            plural,
            name,
            f"Precondition failed: UID in precondition: "
            f"{preconditions['uid']}, UID in object meta: {meta['uid']}",
        )
    wanted = preconditions.get("resourceVersion")
    if wanted and wanted != meta["resourceVersion"]:
        raise conflict(
            plural,
            name,
            "Precondition failed: ResourceVersion in "
            f"precondition: {wanted}, ResourceVersion in object meta: "
            f"{meta['resourceVersion']}",
        )


def _grace(res: Resource, obj: Json, asked: int | None) -> int:
    """A pod's grace period: the request's, else its spec's (30 s by default); 0 for
    anything else (only finalizers keep it)."""
    if res is not PODS:
        return 0
    if asked is not None:
        return int(asked)
    return int(obj.get("spec", {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE_S))


def _on_a_node(store: Store, pod: Json) -> bool:
    """Bound to a node that still exists: only a kubelet can confirm it stopped (a pod never
    scheduled, or whose node is gone, the API server or the pod GC removes at once)."""
    node = pod.get("spec", {}).get("nodeName")
    return bool(node) and (NODES.key, None, node) in store.objects


def _sooner(store: Store, meta: Json, grace: int) -> bool:
    """A second delete with a shorter grace period brings the end forward (never later)."""
    ends = parse(meta["deletionTimestamp"])
    return store.clock.now() + timedelta(seconds=grace) < ends


def ready(node: Json) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


@dataclass
class Kubelets:
    """What the nodes' kubelets do with a Terminating pod. On a Ready node the containers
    stop ``stop_s`` seconds after SIGTERM (0: at once, so the pod is gone by the next request
    served), and never later than its grace period ends (SIGKILL); then the pod is removed.
    ``stops`` overrides it per pod, by (namespace, name); None: the container ignores
    SIGTERM and the pod stays its whole grace period — move the clock to end it. A NotReady
    node's kubelet confirms nothing: its pods stay until forced (grace 0) or the node is back.
    A pod with finalizers stays until they are removed."""

    store: Store
    stop_s: float | None = 0.0
    stops: dict[tuple[str, str], float | None] = field(default_factory=dict)

    def tick(self) -> None:
        store = self.store
        with store.lock:
            now = store.clock.now()
            for key in [k for k in store.deleting if k[0] == PODS.key]:
                pod = store.objects[key]
                if pod["metadata"].get("finalizers"):
                    continue
                node = store.objects.get((NODES.key, None, pod.get("spec", {}).get("nodeName")))
                if node is not None and not (ready(node) and now >= self._gone_at(key, pod)):
                    continue
                store.remove(key)

    def _gone_at(self, key: tuple[str, str | None, str], pod: Json) -> datetime:
        meta = pod["metadata"]
        ends = parse(meta["deletionTimestamp"])
        stop = self.stops.get((key[1] or "", key[2]), self.stop_s)
        if stop is None:
            return ends
        started = ends - timedelta(seconds=meta.get("deletionGracePeriodSeconds") or 0)
        return min(ends, started + timedelta(seconds=stop))
