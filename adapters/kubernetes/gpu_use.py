"""Which pod uses which GPU of a node, from the API: pods' ``nvidia.com/gpu`` and
``nvidia.com/mig-*`` resources, and their DRA claims' allocations (resource.k8s.io/v1), with
the GPU's index read from the node's ResourceSlices.

The device plugin's pods say how many GPUs, not which: their uses carry no index (each counts
on every GPU of the node, failing closed) until the agent publishes the kubelet's
pod-resources. A DRA claim says which device: a GPU driver's device maps to its NVML index
(the ``index`` attribute; a MIG device's ``parentIndex``). A claim that cannot be read counts
as a use of an unknown GPU, as a pod whose use is unknown must."""

from __future__ import annotations

import logging

from kubernetes import client as k8s

from adapters.kubernetes.drain_rules import finished
from adapters.kubernetes.errors import NotFound, api_errors
from adapters.kubernetes.listing import list_pages
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import (
    GPU_RESOURCE,
    Json,
    claim_names,
    container_asks,
    meta,
    read_raw,
)
from remedy.acting.gpu_use import GpuClaim, GpuUse, NodeGpuUse
from remedy.core.errors import RemedyError

log = logging.getLogger(__name__)
# The DRA drivers whose devices are GPUs (NVIDIA's: whole GPUs and MIG devices).
GPU_DRIVERS = frozenset({"gpu.nvidia.com"})
Device = tuple[str, str, str]  # driver, pool, device name: how a claim names what it got


class KubernetesGpuUse:
    """The ``GpuUseSource`` of a Kubernetes cluster."""

    def __init__(self, nodes: NodeApi) -> None:
        self._nodes = nodes
        self._resource = k8s.ResourceV1Api(nodes.api)

    def gpu_use(self, node: str) -> NodeGpuUse:
        """The running pods' uses; the pods unreadable: raises (the caller fails closed)."""
        return self.of_pods(node, self._nodes.pods(node))

    def of_pods(self, node: str, pods: list[Json]) -> NodeGpuUse:
        running = [p for p in pods if not finished(p)]
        slices: dict[Device, Json] | None = None
        uses: list[GpuUse] = []
        for pod in running:
            uses += _plugin_uses(pod)
            if claim_names(pod):
                slices = self._slices(node) if slices is None else slices
                uses += self._claim_uses(pod, slices)
        return NodeGpuUse(node=node, uses=uses)

    def _claim_uses(self, pod: Json, slices: dict[Device, Json]) -> list[GpuUse]:
        namespace, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
        uses: list[GpuUse] = []
        for handle, claim_name in claim_names(pod).items():
            container = _claimed_by(pod, handle)
            unknown = GpuUse(namespace=namespace, pod=name, container=container, via=GpuClaim.DRA)
            claim = self._claim(namespace, claim_name) if claim_name else None
            if claim is None:
                uses.append(unknown)  # not read: a GPU of the node, which unknown
                continue
            results = claim.get("status", {}).get("allocation", {}).get("devices", {})
            for result in results.get("results") or []:
                if result.get("driver") not in GPU_DRIVERS:
                    continue  # a NIC's or another driver's device
                device = (result["driver"], result.get("pool", ""), result.get("device", ""))
                gpu, mig = _index(slices.get(device))
                uses.append(unknown.model_copy(update={"gpu": gpu, "mig": mig}))
        return uses

    def _claim(self, namespace: str, name: str) -> Json | None:
        try:
            with api_errors("get", f"resourceclaims/{name}", missing=NotFound):
                return read_raw(self._resource.read_namespaced_resource_claim, name, namespace)
        except (NotFound, RemedyError):
            log.warning("could not read ResourceClaim %s/%s", namespace, name, exc_info=True)
            return None

    def _slices(self, node: str) -> dict[Device, Json]:
        """The devices the node's drivers publish; none where the cluster has no DRA."""
        found: dict[Device, Json] = {}
        try:
            for piece in list_pages(
                self._resource.list_resource_slice,
                what="resourceslices",
                field_selector=f"spec.nodeName={node}",
            ):
                spec = piece.get("spec", {})
                pool = spec.get("pool", {}).get("name", "")
                for device in spec.get("devices") or []:
                    found[spec.get("driver", ""), pool, device.get("name", "")] = device
        except RemedyError:  # a 404 (no DRA served) included: no index, each use fails closed
            log.warning("could not read the ResourceSlices of %s", node, exc_info=True)
        return found


def _plugin_uses(pod: Json) -> list[GpuUse]:
    """One use per container that asks for GPUs or MIG instances (which GPU: unknown)."""
    namespace, name = meta(pod).get("namespace", ""), meta(pod).get("name", "")
    uses = []
    for container in pod.get("spec", {}).get("containers", []):
        for resource in container_asks(container):
            via = GpuClaim.DEVICE_PLUGIN if resource == GPU_RESOURCE else GpuClaim.MIG
            uses.append(GpuUse(namespace=namespace, pod=name, container=container["name"], via=via))
    return uses


def _claimed_by(pod: Json, handle: str) -> str:
    """The containers that use the pod's claim ``handle`` (comma-separated)."""
    return ",".join(
        c["name"]
        for c in pod.get("spec", {}).get("containers", [])
        if any(r.get("name") == handle for r in c.get("resources", {}).get("claims") or [])
    )


def _index(device: Json | None) -> tuple[int | None, str | None]:
    """The device's GPU index and, for a MIG device, its name; (None, None): not published."""
    if device is None:
        return None, None
    attributes = device.get("attributes") or {}
    kind = attributes.get("type", {}).get("string", "gpu")
    key = "parentIndex" if kind == "mig" else "index"
    index = attributes.get(key, {}).get("int")
    return (int(index) if index is not None else None), (
        device.get("name") if kind == "mig" else None
    )
