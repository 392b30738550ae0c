"""One pod's eviction and what the answer means, after Karpenter's eviction queue
(pkg/controllers/node/termination/terminator/eviction.go) and the API's documented codes:
the eviction names the pod's UID, so a pod recreated under the same name is never evicted
by mistake."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from adapters.kubernetes.errors import NAMESPACE_TERMINATING, NotFound, api_errors, api_status
from adapters.kubernetes.objects import Json, meta, read_raw
from remedy.core.errors import Conflict

# The eviction subresource's 500 for a pod that more than one budget selects.
SEVERAL_BUDGETS = "more than one PodDisruptionBudget"


class Answer(Enum):
    EVICTED = "evicted"  # the API server is deleting it: wait until its UID is gone
    GONE = "gone"  # 404, or 409 and the pod we meant is no longer there under that UID
    RETRY = "retry"  # 409 and our pod still there: its budget changed meanwhile (ask again)
    BLOCKED = "blocked"  # a budget said no (429) or cannot decide (500, several budgets)
    NAMESPACE_TERMINATING = "namespace terminating"  # 403: it goes with its namespace


@dataclass(frozen=True)
class Outcome:
    answer: Answer
    reason: str = ""


def evict(core: k8s.CoreV1Api, pod: Json, field_manager: str) -> Outcome:
    """POST the pod's Eviction with ``preconditions.uid``; other failures raise as
    ``api_errors`` maps them (a 429 here is a budget, not throttling)."""
    name, namespace = meta(pod)["name"], meta(pod)["namespace"]
    body = k8s.V1Eviction(
        api_version="policy/v1",
        kind="Eviction",
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        delete_options=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=meta(pod)["uid"])),
    )
    with api_errors("create", "pods/eviction"):
        try:
            core.create_namespaced_pod_eviction(name, namespace, body, field_manager=field_manager)
        except ApiException as exc:
            status = api_status(exc)
            if status.code == 404:
                return Outcome(Answer.GONE)
            if status.code == 409:
                return _conflict(core, pod, status.message)
            if status.code == 429:
                return Outcome(Answer.BLOCKED, f"a PodDisruptionBudget: {status.message}")
            if status.code == 500 and SEVERAL_BUDGETS in status.message:
                return Outcome(Answer.BLOCKED, f"several PodDisruptionBudgets: {status.message}")
            if status.code == 403 and NAMESPACE_TERMINATING in status.causes:
                return Outcome(Answer.NAMESPACE_TERMINATING, status.message)
            raise
    return Outcome(Answer.EVICTED)


def _conflict(core: k8s.CoreV1Api, pod: Json, message: str) -> Outcome:
    """A 409 is either the UID precondition (another pod has the name: ours is gone) or the
    pod's budget updated by a concurrent eviction between the server's read and its write
    ("the object has been modified"): the pod as it is now tells which."""
    name, namespace = meta(pod)["name"], meta(pod)["namespace"]
    try:
        with api_errors("get", f"pods/{name}", missing=NotFound):
            now = read_raw(core.read_namespaced_pod, name, namespace)
    except NotFound:
        return Outcome(Answer.GONE)
    if meta(now).get("uid") != meta(pod)["uid"]:
        return Outcome(Answer.GONE)
    return Outcome(Answer.RETRY, f"a conflict, the pod still there: {message}")


def delete(core: k8s.CoreV1Api, pod: Json, grace_s: int) -> None:
    """Delete the pod by name and UID (409: another pod has the name now, ours is gone; 404
    gone too): done either way."""
    try:
        with api_errors("delete", "pods", missing=NotFound):
            core.delete_namespaced_pod(
                meta(pod)["name"],
                meta(pod)["namespace"],
                grace_period_seconds=grace_s,
                body=k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=meta(pod)["uid"])),
            )
    except (NotFound, Conflict):
        pass
