"""The kubelet's pod-resources API (gRPC ``v1.PodResourcesLister/List`` on a unix socket) and
NVML's device UUIDs: which pod uses which GPU of this node (remedy/detection/pod_resources.py).

The messages are the kubelet's ``k8s.io/kubelet/pkg/apis/podresources/v1/api.proto`` (the
fields remedy reads), built at import from their field numbers rather than generated: no
protoc step, and a newer kubelet's added fields are skipped as unknown on the wire."""

from __future__ import annotations

import logging
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from remedy.detection.gpu import NvmlApi
from remedy.detection.pod_resources import KUBELET_SOCKET, ClaimDevice, ContainerDevices

log = logging.getLogger(__name__)

LIST_METHOD = "/v1.PodResourcesLister/List"
TIMEOUT_S = 10.0

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _MESSAGE, _REPEATED = _F.TYPE_STRING, _F.TYPE_MESSAGE, _F.LABEL_REPEATED
# message → (field, number, type, repeated, message type); only what remedy reads.
_MESSAGES: dict[str, list[tuple[str, int, int, bool, str]]] = {
    "ListPodResourcesRequest": [],
    "ListPodResourcesResponse": [("pod_resources", 1, _MESSAGE, True, "PodResources")],
    "PodResources": [
        ("name", 1, _STRING, False, ""),
        ("namespace", 2, _STRING, False, ""),
        ("containers", 3, _MESSAGE, True, "ContainerResources"),
    ],
    "ContainerResources": [
        ("name", 1, _STRING, False, ""),
        ("devices", 2, _MESSAGE, True, "ContainerDevices"),
        ("dynamic_resources", 5, _MESSAGE, True, "DynamicResource"),
    ],
    "ContainerDevices": [
        ("resource_name", 1, _STRING, False, ""),
        ("device_ids", 2, _STRING, True, ""),
    ],
    "DynamicResource": [
        ("claim_name", 2, _STRING, False, ""),
        ("claim_namespace", 3, _STRING, False, ""),
        ("claim_resources", 4, _MESSAGE, True, "ClaimResource"),
    ],
    "ClaimResource": [
        ("driver_name", 2, _STRING, False, ""),
        ("pool_name", 3, _STRING, False, ""),
        ("device_name", 4, _STRING, False, ""),
    ],
}


def _classes() -> dict[str, Any]:
    proto = descriptor_pb2.FileDescriptorProto(
        name="remedy/podresources_v1.proto", package="v1", syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, kind, repeated, type_name in fields:
            message.field.add(
                name=field,
                number=number,
                type=kind,
                label=_REPEATED if repeated else _F.LABEL_OPTIONAL,
                type_name=f".v1.{type_name}" if type_name else None,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"v1.{name}"))
        for name in _MESSAGES
    }


MESSAGES = _classes()


def containers_of(response: Any) -> list[ContainerDevices]:
    """A ``ListPodResourcesResponse`` as remedy's model."""
    out: list[ContainerDevices] = []
    for pod in response.pod_resources:
        for c in pod.containers:
            devices: dict[str, list[str]] = {}
            for d in c.devices:
                devices.setdefault(d.resource_name, []).extend(d.device_ids)
            claimed = [
                ClaimDevice(driver=r.driver_name, pool=r.pool_name, device=r.device_name)
                for dynamic in c.dynamic_resources
                for r in dynamic.claim_resources
            ]
            out.append(
                ContainerDevices(
                    namespace=pod.namespace,
                    pod=pod.name,
                    container=c.name,
                    devices=devices,
                    claimed=claimed,
                )
            )
    return out


class KubeletPodResources:
    """The PodResourcesSource of a real node: one List call over the kubelet's socket."""

    def __init__(self, socket: str = KUBELET_SOCKET, timeout_s: float = TIMEOUT_S) -> None:
        self._target, self._timeout_s = f"unix://{socket}", timeout_s

    def list(self) -> list[ContainerDevices]:
        with grpc.insecure_channel(self._target) as channel:
            call: grpc.UnaryUnaryMultiCallable[Any, Any] = channel.unary_unary(
                LIST_METHOD,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=MESSAGES["ListPodResourcesResponse"].FromString,
            )
            return containers_of(
                call(MESSAGES["ListPodResourcesRequest"](), timeout=self._timeout_s)
            )


def device_ids(nvml: NvmlApi) -> dict[str, int]:
    """Every GPU's UUID, and every MIG device's, with the NVML index of its GPU: what the
    device plugin's device ids name. A MIG device that cannot be read is left out (its pods
    then count on every GPU: fail closed)."""
    nvml.nvmlInit()
    try:
        ids: dict[str, int] = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            ids[nvml.nvmlDeviceGetUUID(handle)] = index
            ids.update(dict.fromkeys(_mig_uuids(nvml, handle), index))
        return ids
    finally:
        nvml.nvmlShutdown()


def _mig_uuids(nvml: Any, handle: Any) -> list[str]:
    """The MIG devices' UUIDs of a GPU in MIG mode (none otherwise, or without the calls)."""
    try:
        count = nvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    except Exception:  # noqa: BLE001 - no MIG on this GPU or this NVML: nothing to map
        return []
    uuids = []
    for i in range(count):
        try:
            uuids.append(
                nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, i))
            )
        except Exception:  # noqa: BLE001 - an empty slot (NVML_ERROR_NOT_FOUND)
            continue
    return uuids
