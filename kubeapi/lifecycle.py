"""How objects leave: deletion with preconditions and finalizers, pods that stay Terminating
while their node is NotReady (no kubelet confirms them gone), and the Eviction API with
PodDisruptionBudgets evaluated from the pods the budget selects."""

from __future__ import annotations

import math
from typing import Any

from kubeapi.resources import BY_KEY, Resource
from kubeapi.selectors import label_selector
from kubeapi.status import ApiError, conflict
from kubeapi.store import Json, Store, now

PODS, NODES, PDBS = BY_KEY["v1/pods"], BY_KEY["v1/nodes"], BY_KEY["policy/v1/poddisruptionbudgets"]


def delete(store: Store, res: Resource, namespace: str | None, name: str, options: Json) -> Json:
    """Delete as the API server does: preconditions first (409), then either gone at once or,
    with finalizers or a pod whose node cannot confirm it, marked with a deletionTimestamp."""
    with store.lock:
        current = store.get(res, namespace, name)
        meta = current["metadata"]
        preconditions = options.get("preconditions") or {}
        if preconditions.get("uid") and preconditions["uid"] != meta["uid"]:
            raise conflict(
                res.plural,
                name,
                f"Precondition failed: UID in precondition: "
                f"{preconditions['uid']}, UID in object meta: {meta['uid']}",
            )
        wanted = preconditions.get("resourceVersion")
        if wanted and wanted != meta["resourceVersion"]:
            raise conflict(
                res.plural,
                name,
                "Precondition failed: ResourceVersion in "
                f"precondition: {wanted}, ResourceVersion in object meta: "
                f"{meta['resourceVersion']}",
            )
        grace = options.get("gracePeriodSeconds")
        if _lingers(store, res, current, grace):
            if meta.get("deletionTimestamp"):
                return current

            def mark(obj: Json) -> Json:
                obj["metadata"]["deletionTimestamp"] = now()
                obj["metadata"]["deletionGracePeriodSeconds"] = 30 if grace is None else grace
                return obj

            return store.update(res, namespace, name, mark)[0]
        store.remove((res.key, namespace if res.namespaced else None, name))
        return current


def _lingers(store: Store, res: Resource, obj: Json, grace: Any) -> bool:
    if obj["metadata"].get("finalizers"):
        return True
    if res is not PODS or grace == 0:
        return False  # a forced delete of a pod does not wait for the kubelet
    node = obj.get("spec", {}).get("nodeName")
    if not node:
        return False
    try:
        found = store.get(NODES, None, node)
    except ApiError:
        return False  # no node: the pod garbage collector removes it
    return not ready(found)


def ready(node: Json) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in node.get("status", {}).get("conditions", [])
    )


def evict(store: Store, namespace: str, name: str, eviction: Json) -> Json:
    """POST pods/<name>/eviction: a pod its budgets allow to lose is deleted, with the
    eviction's delete options; otherwise 429 (one budget says no) or 500 (several budgets)."""
    if eviction.get("kind", "Eviction") != "Eviction":
        raise ApiError(400, f"expected an Eviction, got {eviction.get('kind')!r}")
    with store.lock:
        store._namespace_open(namespace)
        pod = store.get(PODS, namespace, name)
        options = eviction.get("deleteOptions") or {}
        uid = (options.get("preconditions") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            raise conflict(
                "pods",
                name,
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {pod['metadata']['uid']}",
            )
        if not _budget_free(pod):
            budgets = [b for b in _all(store, PDBS, namespace) if _selects(b, pod)]
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the "
                    "eviction subresource does not support.",
                )
            if budgets:
                _check_budget(store, budgets[0], pod)
        delete(store, PODS, namespace, name, options)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}


def _budget_free(pod: Json) -> bool:
    """Pods whose eviction no budget guards: finished, not yet running, or already going."""
    phase = pod.get("status", {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(
        pod["metadata"].get("deletionTimestamp")
    )


def _all(store: Store, res: Resource, namespace: str) -> list[Json]:
    items: list[Json] = store.select(res, namespace, {})["items"]
    return items


def _selects(budget: Json, pod: Json) -> bool:
    selector = budget.get("spec", {}).get("selector")
    if selector is None:
        return False
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return True  # policy/v1: an empty selector selects every pod in the namespace
    return label_selector(_as_string(selector))(pod)


def _as_string(selector: Json) -> str:
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr["operator"], expr["key"], expr.get("values") or []
        if op in ("In", "NotIn"):
            parts.append(f"{key} {op.lower()} ({','.join(values)})")
        else:
            parts.append(key if op == "Exists" else f"!{key}")
    return ",".join(parts)


def _healthy(pod: Json) -> bool:
    status = pod.get("status", {})
    if pod["metadata"].get("deletionTimestamp") or status.get("phase") != "Running":
        return False
    conditions = status.get("conditions")
    if conditions is None:
        return True  # no conditions reported: running counts as ready
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _check_budget(store: Store, budget: Json, pod: Json) -> None:
    spec = budget.get("spec", {})
    namespace = pod["metadata"]["namespace"]
    selected = [p for p in _all(store, PODS, namespace) if _selects(budget, p)]
    expected = len(selected)
    healthy = sum(_healthy(p) for p in selected)
    if "minAvailable" in spec:
        desired = _count(spec["minAvailable"], expected, round_up=True)
    else:
        desired = expected - _count(spec.get("maxUnavailable", 0), expected, round_up=True)
    # An unhealthy pod may go while the budget is met (unhealthyPodEvictionPolicy default).
    allowed = healthy - desired if _healthy(pod) else (1 if healthy >= desired else 0)
    if allowed <= 0:
        name = budget["metadata"]["name"]
        raise ApiError(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            causes=[
                {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {name} "
                    f"needs {desired} healthy pods and has {healthy} currently",
                }
            ],
        )


def _count(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)
