"""The agent reads which pod uses which GPU from the kubelet's pod-resources API — a real gRPC
server on a unix socket stands in for the kubelet — maps device ids to GPU indexes with NVML's
UUIDs, and publishes it on the node, where the controller's GPU-scoped rungs read it back. A
kubelet that does not answer is published as not known, never as idle."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest

from adapters.host.pod_resources import LIST_METHOD, MESSAGES, KubeletPodResources, device_ids
from adapters.kubernetes.gpu_scope import gpu_use_of
from adapters.kubernetes.marks import KubernetesNodeMarks
from adapters.kubernetes.nodes import NodeApi
from adapters.sim import SimFleet
from kubeapi import ApiServer
from remedy.acting.gpu_use import GpuClaim, GpuUse, NodeGpuUse
from remedy.detection.pod_resources import ContainerDevices, GpuUseReporter, gpu_use_from
from tests.kube import NODES, kube, node

IDS = {"GPU-aaa": 0, "GPU-ddd": 3, "MIG-eee": 5}


def kubelets_answer() -> Any:
    """Five pods: a whole GPU, a time-sliced replica, a MIG device, a DRA claim, and a NIC."""
    answer = MESSAGES["ListPodResourcesResponse"]()

    def pod(name: str) -> Any:
        p = answer.pod_resources.add(name=name, namespace="jobs")
        return p.containers.add(name="main")

    pod("infer-3").devices.add(resource_name="nvidia.com/gpu", device_ids=["GPU-ddd"])
    pod("shared-0").devices.add(resource_name="nvidia.com/gpu", device_ids=["GPU-aaa::2"])
    pod("mig-5").devices.add(resource_name="nvidia.com/mig-3g.71gb", device_ids=["MIG-eee"])
    claim = pod("claim-6").dynamic_resources.add(claim_name="c", claim_namespace="jobs")
    claim.claim_resources.add(driver_name="gpu.nvidia.com", pool_name="n1", device_name="gpu-6")
    pod("rdma").devices.add(resource_name="rdma/ib", device_ids=["mlx5_0"])
    return answer


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="kubelet-", dir="/tmp"))  # a unix path is short
    yield folder
    shutil.rmtree(folder)


@pytest.fixture
def kubelet(socket_dir: Path) -> Iterator[Path]:
    """A gRPC server on a unix socket answering v1.PodResourcesLister/List as a kubelet."""
    socket = socket_dir / "kubelet.sock"
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    service, method = LIST_METHOD.strip("/").split("/")
    handler = grpc.unary_unary_rpc_method_handler(
        lambda request, context: kubelets_answer(),
        request_deserializer=MESSAGES["ListPodResourcesRequest"].FromString,
        response_serializer=lambda m: m.SerializeToString(),
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(service, {method: handler})]
    )
    server.add_insecure_port(f"unix://{socket}")
    server.start()
    yield socket
    server.stop(grace=None)


def test_the_kubelets_devices_become_the_gpus_each_pod_uses(kubelet: Path) -> None:
    use = gpu_use_from("n1", KubeletPodResources(str(kubelet)).list(), IDS)

    def on(pod: str, gpu: int | None, via: GpuClaim, mig: str | None = None) -> GpuUse:
        return GpuUse(namespace="jobs", pod=pod, container="main", gpu=gpu, mig=mig, via=via)

    assert use == NodeGpuUse(
        node="n1",
        uses=[
            on("infer-3", 3, GpuClaim.DEVICE_PLUGIN),
            on("shared-0", 0, GpuClaim.DEVICE_PLUGIN),
            on("mig-5", 5, GpuClaim.MIG, "MIG-eee"),
            on("claim-6", 6, GpuClaim.DRA),
        ],
    )
    assert [u.pod for u in use.on_gpu(3)] == ["infer-3"]


def test_a_device_nvml_does_not_know_counts_on_every_gpu() -> None:
    lost = ContainerDevices(namespace="a", pod="p", devices={"nvidia.com/gpu": ["GPU-zzz"]})
    [use] = gpu_use_from("n1", [lost], IDS).uses
    assert use.gpu is None  # fail closed: on every GPU


def test_nvml_names_each_gpu_by_its_uuid() -> None:
    fleet = SimFleet(nodes=1, gpus_per_node=4)
    sim = next(iter(fleet.nodes.values()))
    ids = device_ids(fleet.host(sim.name).nvml())
    assert ids == {g.uuid: g.index for g in sim.gpus}


def test_the_agent_publishes_it_and_the_controller_reads_it_back(
    api: ApiServer, kubelet: Path, socket_dir: Path
) -> None:
    api.objects[NODES, None, "n1"] = node("n1")
    marks = KubernetesNodeMarks(NodeApi(api.client()))
    reporter = GpuUseReporter("n1", KubeletPodResources(str(kubelet)), lambda: IDS, marks)
    published = reporter.report()
    gpus = kube(api).gpu_scope
    assert gpus is not None
    assert published.known and gpus.gpu_use("n1") == published

    dead = GpuUseReporter("n1", KubeletPodResources(str(socket_dir / "gone.sock"), 2), dict, marks)
    assert dead.report() == NodeGpuUse(node="n1", known=False)
    # Not the last good answer: the controller then reads the API's view instead.
    assert gpu_use_of(api.objects[NODES, None, "n1"]) == NodeGpuUse(node="n1", known=False)
