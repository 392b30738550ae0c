"""PodDisruptionBudgets as the cluster keeps them: the disruption controller writes each
budget's status from the pods it selects (``DisruptionController``), and the Eviction API
decides by that status, not by the pods — so a status that lags behind the pods is what an
eviction sees — and takes a disruption from it with a status update on the version it read:
a concurrent eviction of the same budget in between makes it a 409."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from kubeapi.clock import parse
from kubeapi.lifecycle import PODS, delete
from kubeapi.resources import BY_KEY
from kubeapi.selectors import label_selector
from kubeapi.status import ApiError, conflict
from kubeapi.store import Json, Store

PDBS = BY_KEY["policy/v1/poddisruptionbudgets"]
QUALIFIED = "poddisruptionbudgets.policy"  # as the API server names it in a conflict
DISRUPTED_FOR = timedelta(minutes=2)  # an evicted pod not gone by then counts again


def evict(
    store: Store,
    namespace: str,
    name: str,
    eviction: Json,
    meanwhile: Callable[[], None] | None = None,
) -> Json:
    """POST pods/<name>/eviction: a pod its budget allows to lose is deleted with the
    eviction's delete options; otherwise 429 (the budget says no, or its status is not yet
    current) or 500 (several budgets). ``meanwhile`` happens between reading the budget and
    writing its status back (a concurrent eviction, in a test)."""
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
            budgets = [b for b in store.items(PDBS, namespace) if _selects(b, pod)]
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the "
                    "eviction subresource does not support.",
                )
            if budgets:
                _take_disruption(store, budgets[0], pod, meanwhile)
        delete(store, PODS, namespace, name, options)
        return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}


def _take_disruption(
    store: Store, budget: Json, pod: Json, meanwhile: Callable[[], None] | None
) -> None:
    meta, status = budget["metadata"], budget.get("status") or {}
    healthy, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
    if status.get("observedGeneration", 0) < meta.get("generation", 1):
        raise _refused(
            f"The disruption budget {meta['name']} is still being processed by the server."
        )
    # An unready pod may go while the budget is met (unhealthyPodEvictionPolicy's default).
    if not _healthy(pod) and healthy >= desired > 0:
        return
    if status.get("disruptionsAllowed", 0) <= 0:
        raise _refused(
            f"The disruption budget {meta['name']} needs {desired} healthy pods and has "
            f"{healthy} currently"
        )
    if meanwhile is not None:
        meanwhile()
    read = meta["resourceVersion"]

    def decrement(current: Json) -> Json:
        if current["metadata"]["resourceVersion"] != read:
            raise conflict(
                QUALIFIED,
                meta["name"],
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        taken = current.setdefault("status", {})
        taken["disruptionsAllowed"] = taken.get("disruptionsAllowed", 0) - 1
        disrupted = taken.setdefault("disruptedPods", {})
        disrupted[pod["metadata"]["name"]] = store.clock.stamp()
        return current

    store.update(PDBS, meta["namespace"], meta["name"], decrement, subresource="status")


def _refused(why: str) -> ApiError:
    return ApiError(
        429,
        "Cannot evict pod as it would violate the pod's disruption budget.",
        causes=[{"reason": "DisruptionBudget", "message": why}],
    )


@dataclass
class DisruptionController:
    """Keeps up by default: every budget's status is synced before each request is served.
    ``paused``: the status lags — a new budget has none (its evictions answer 429 "still
    being processed"), pods that became ready or went are not counted — until ``sync``."""

    store: Store
    paused: bool = False
    _synced_at: int = field(default=-1, repr=False)  # the store's revision then: no news, no work

    def tick(self) -> None:
        if not self.paused:
            self.sync()

    def sync(self) -> None:
        store = self.store
        with store.lock:
            if store.revision == self._synced_at:
                return
            for budget in store.items(PDBS):
                status = _status(store, budget)
                if status != budget.get("status"):
                    meta = budget["metadata"]

                    def write(obj: Json, status: Json = status) -> Json:
                        obj["status"] = status
                        return obj

                    store.update(PDBS, meta["namespace"], meta["name"], write, subresource="status")
            self._synced_at = store.revision


def _status(store: Store, budget: Json) -> Json:
    """What the disruption controller writes: healthy pods not already being disrupted,
    against the budget's spec."""
    spec, meta = budget.get("spec", {}), budget["metadata"]
    selected = [p for p in store.items(PODS, meta["namespace"]) if _selects(budget, p)]
    pods = {p["metadata"]["name"]: p for p in selected}
    now = store.clock.now()
    disrupted = {
        name: at
        for name, at in ((budget.get("status") or {}).get("disruptedPods") or {}).items()
        if name in pods
        and not pods[name]["metadata"].get("deletionTimestamp")
        and parse(at) + DISRUPTED_FOR > now
    }
    expected = len(selected)
    healthy = sum(_healthy(p) and p["metadata"]["name"] not in disrupted for p in selected)
    if "minAvailable" in spec:
        desired = _count(spec["minAvailable"], expected, round_up=True)
    else:
        desired = expected - _count(spec.get("maxUnavailable", 0), expected, round_up=True)
    status: Json = {
        "observedGeneration": meta.get("generation", 1),
        "disruptionsAllowed": max(0, healthy - desired),
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    return status


def _budget_free(pod: Json) -> bool:
    """Pods whose eviction no budget guards: finished, not yet running, or already going."""
    phase = pod.get("status", {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(
        pod["metadata"].get("deletionTimestamp")
    )


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


def _count(value: Any, total: int, *, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(value)
