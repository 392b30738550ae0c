"""Reading Kubernetes objects as the API server sends them (camelCase JSON dicts), and the
names on them that remedy's adapters share."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from adapters.kubernetes.errors import api_errors

log = logging.getLogger(__name__)

Json = dict[str, Any]
GPU_RESOURCE = "nvidia.com/gpu"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"  # GPU feature discovery: the node's physical GPUs
MIG_RESOURCE = "nvidia.com/mig-"  # a prefix: nvidia.com/mig-1g.10gb, one MIG instance each
# The Xids a node's agent keeps on its node (JSON, oldest first): job attribution reads them.
RECENT_XIDS = "remedy.io/recent-xids"
GPU_USE = "remedy.io/gpu-use"  # the agent's NodeGpuUse, as JSON (from the kubelet's pod-resources)
NAME_MAX = 253  # an object name: a DNS subdomain
# Who writes, as every write names it (fieldManager): the API server's managedFields then tell
# the controller's changes from the agent's, and both from kubectl's. The controller's is the
# name remedy's node changes have always carried (edits.set_by_others_since reads it).
CONTROLLER_MANAGER = "remedy"
AGENT_MANAGER = "remedy-agent"


def as_json(api: k8s.ApiClient, obj: object) -> Json:
    """The object as the API server sent it (camelCase JSON), not the client's models."""
    out: Json = api.sanitize_for_serialization(obj)  # type: ignore[no-untyped-call]
    return out


def read_raw(read: Callable[..., Any], *args: Any, **options: Any) -> Json:
    """What a generated read or list method (``BatchV1Api.read_namespaced_job`` …) answers, as
    the API server sent it: the client's models keep only the fields of their own version."""
    response = read(*args, _preload_content=False, **options)
    out: Json = json.loads(response.data)
    return out


def create_raw(api: k8s.ApiClient, path: str, body: Json, field_manager: str) -> Json:
    """POST ``body`` as it is to ``path``. The generated create methods validate the body
    against the client's models first, which refuse a field of a newer server (a copy of an
    object read with ``read_raw`` may carry one)."""
    request = api.param_serialize(
        method="POST",
        resource_path=path,
        query_params=[("fieldManager", field_manager)],
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response: Any = api.call_api(*request)
    data: bytes = response.read()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(
            http_resp=response, body=data.decode(errors="replace"), data=None
        )
    out: Json = json.loads(data)
    return out


def meta(obj: Json) -> Json:
    found: Json = obj.get("metadata", {})
    return found


def node_gpus(node: Json) -> int:
    """The node's physical GPUs: GPU feature discovery's count (it stays the GPUs under MIG),
    else the device plugin's ``nvidia.com/gpu`` capacity; 0 when neither says."""
    said = meta(node).get("labels", {}).get(GPU_COUNT_LABEL, "")
    if said.isdigit():
        return int(said)
    capacity = node.get("status", {}).get("capacity", {}).get(GPU_RESOURCE, "0")
    return int(capacity) if str(capacity).isdigit() else 0


def container_asks(container: Json) -> dict[str, int]:
    """The GPU devices a container asked for (limits, else requests), by resource: whole
    GPUs (``nvidia.com/gpu``) and MIG instances (``nvidia.com/mig-<profile>``)."""
    resources = container.get("resources", {})
    asked = resources.get("requests", {}) | resources.get("limits", {})
    return {
        name: int(count)
        for name, count in asked.items()
        if (name == GPU_RESOURCE or name.startswith(MIG_RESOURCE)) and int(count) > 0
    }


def gpu_count(pod: Json) -> int:
    """Whole GPUs the pod's containers asked for (limits, else requests): what a job's size
    and its GPU-hours count. A MIG instance is a share of a GPU, not one: see ``uses_gpus``."""
    containers = pod.get("spec", {}).get("containers", [])
    return sum(container_asks(c).get(GPU_RESOURCE, 0) for c in containers)


def claim_names(pod: Json) -> dict[str, str | None]:
    """The pod's DRA claims: its name for each → the ResourceClaim object's name (None: made
    from a template and not named in the pod's status yet)."""
    spec = pod.get("spec", {}).get("resourceClaims") or []
    made = {
        s.get("name"): s.get("resourceClaimName")
        for s in pod.get("status", {}).get("resourceClaimStatuses") or []
    }
    return {c["name"]: c.get("resourceClaimName") or made.get(c["name"]) for c in spec}


def uses_gpus(pod: Json) -> bool:
    """Asks for GPUs or MIG instances, or holds a DRA claim (which may be a GPU's: where the
    claim is not read, a claim counts as one, failing closed)."""
    containers = pod.get("spec", {}).get("containers", [])
    return any(container_asks(c) for c in containers) or bool(claim_names(pod))


def timestamp(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def record_event(
    core: k8s.CoreV1Api,
    about: k8s.V1ObjectReference,
    reason: str,
    message: str,
    now: datetime,
    *,
    warning: bool = False,
    field_manager: str = CONTROLLER_MANAGER,
) -> None:
    """A Kubernetes Event on the object (`kubectl describe` shows it when ``about`` carries the
    object's uid: describe selects events by it): a courtesy, so a failure to record it is
    logged and swallowed — the action it tells of already happened."""
    namespace = about.namespace or "default"  # a node's events go to "default", like kubectl's
    event = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(name=event_name(about.name or ""), namespace=namespace),
        involved_object=about,
        reason=reason,
        message=message[:1024],
        type="Warning" if warning else "Normal",
        source=k8s.V1EventSource(component="remedy"),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
    )
    try:
        with api_errors("create", "events"):
            core.create_namespaced_event(namespace, event, field_manager=field_manager)
    except Exception:  # noqa: BLE001
        log.warning("could not record event %s on %s", reason, about.name, exc_info=True)


def event_name(about: str) -> str:
    """Named like kubectl's events (``<object>.<hex>``): unique without relying on
    generateName, and within the 253 characters a name may have however long the object's."""
    suffix = f".remedy.{uuid.uuid4().hex[:12]}"
    return about[: NAME_MAX - len(suffix)].rstrip(".-") + suffix
