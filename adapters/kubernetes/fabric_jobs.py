"""Fabric tests as Kubernetes Jobs (remedy/scan/fabric.py): made, read and removed.

Each Job is pinned to its node by ``nodeName`` (the node is cordoned for its check, or held by
admission's taint: the scheduler would not place it, the kubelet runs it), tolerates every taint,
takes all the node's GPUs, never restarts (``backoffLimit: 0``) and is ended by the Job
controller at ``activeDeadlineSeconds`` (a failed test: fail closed). The tool's output is its
pod's log. A pair (ib_write_bw) is two Jobs: the server on the second node, the client on the
first, which connects to the server node's InternalIP over the host network and retries while
the server starts.

Not here yet: an NCCL all-reduce across two nodes (nccl-tests needs an MPI launcher across
the pods); a pair is tested with ib_write_bw.
"""

from __future__ import annotations

import shlex
from contextlib import suppress
from dataclasses import dataclass

from kubernetes import client as k8s

from adapters.kubernetes.errors import NotFound, api_errors
from adapters.kubernetes.objects import (
    CONTROLLER_MANAGER,
    GPU_RESOURCE,
    Json,
    create_raw,
    node_gpus,
    read_raw,
)
from remedy.core.errors import ActionRefused, Conflict
from remedy.detection.fabric.nvbandwidth import D2D_READ_CE
from remedy.detection.fabric.verdict import FabricTest
from remedy.scan.fabric import FabricOutcome, FabricRun, JobState

RUN_LABEL = "remedy.io/fabric-run"
TEST_LABEL = "remedy.io/fabric-test"
JOB_LABEL = "remedy.io/fabric-job"  # on the pod template: a Job's pods, by its name
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # GPU feature discovery: NVIDIA-H100-80GB-HBM3
KEEP_FINISHED_S = 3600  # ttlSecondsAfterFinished: an hour to look, then the Job controller cleans


@dataclass(frozen=True)
class FabricImages:
    """The images that carry the tools (the fleet's own builds: no public image is assumed),
    with the tool on the PATH, and the RDMA device ib_write_bw uses."""

    nccl_tests: str  # all_reduce_perf (NVIDIA/nccl-tests)
    nvbandwidth: str  # nvbandwidth (NVIDIA/nvbandwidth)
    perftest: str  # ib_write_bw (linux-rdma/perftest)
    rdma_device: str = "mlx5_0"
    nccl_bytes: str = "256M"  # NVSentinel's loopback size (TEST_SIZE_MB 256)


class KubernetesFabricJobs:
    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        images: FabricImages,
        field_manager: str = CONTROLLER_MANAGER,
    ) -> None:
        self._api, self.namespace = api, namespace
        self.core, self.batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
        self.images, self.field_manager = images, field_manager

    def start(self, run: FabricRun) -> FabricRun:
        """Make the run's Jobs (again after a retry: one already made is left as it is). A run
        of ``gpus=0`` takes all the node's GPUs, as the node reports them (none: refused); the
        GPUs' model, when not given, is GPU feature discovery's product label."""
        if run.test is not FabricTest.IB_WRITE_BW and not (run.gpus and run.model):
            with api_errors("get", f"nodes/{run.nodes[0]}"):
                body = read_raw(self.core.read_node, run.nodes[0])
            gpus = run.gpus or node_gpus(body)
            if gpus == 0:
                raise ActionRefused(f"node {run.nodes[0]} reports no GPUs to test")
            product = body["metadata"].get("labels", {}).get(GPU_PRODUCT_LABEL, "")
            run = run.model_copy(update={"gpus": gpus, "model": run.model or product})
        jobs = self.manifests(run)
        for job in jobs:
            path = f"/apis/batch/v1/namespaces/{self.namespace}/jobs"
            # AlreadyExists: this run's (its name holds the run id), made by an earlier try
            with suppress(Conflict):
                with api_errors("create", f"jobs/{job['metadata']['name']}", missing=NotFound):
                    create_raw(self._api, path, job, self.field_manager)
        return run

    def manifests(self, run: FabricRun) -> list[Json]:
        if run.test is FabricTest.NCCL_LOOPBACK:
            gpus = str(run.gpus)
            cmd = ["all_reduce_perf", "-b", self.images.nccl_bytes, "-e", self.images.nccl_bytes]
            return [self._job(run, 0, self.images.nccl_tests, [*cmd, "-f", "2", "-g", gpus])]
        if run.test is FabricTest.NVBANDWIDTH:
            cmd = ["nvbandwidth", "-t", D2D_READ_CE]
            return [self._job(run, 0, self.images.nvbandwidth, cmd)]
        if run.test is FabricTest.IB_WRITE_BW:
            return self._write_bw(run)
        raise ActionRefused(f"{run.test} is not run as a Job yet: test a pair with ib_write_bw")

    def outcome(self, run: FabricRun) -> FabricOutcome:
        """The run's state: its client's (or only) Job; a server that failed fails the run."""
        names = job_names(run)
        states = [self._state(name) for name in names]
        for state, detail in states:
            if state in (JobState.MISSING, JobState.TIMED_OUT):
                return FabricOutcome(state=state, detail=detail)
        state, detail = states[0]
        if state is JobState.RUNNING:
            return FabricOutcome(state=state)
        if len(states) > 1 and states[1][0] is JobState.FAILED:
            state, detail = JobState.FAILED, f"the server: {states[1][1]}"
        return FabricOutcome(state=state, output=self._log(names[0]), detail=detail)

    def remove(self, run: FabricRun) -> None:
        for name in job_names(run):
            with suppress(NotFound):  # gone already: its TTL, or an earlier try, removed it
                with api_errors("delete", f"jobs/{name}", missing=NotFound):
                    self.batch.delete_namespaced_job(
                        name, self.namespace, propagation_policy="Background"
                    )

    # -- reading ----------------------------------------------------------------------------
    def _state(self, name: str) -> tuple[JobState, str]:
        try:
            with api_errors("get", f"jobs/{name}", missing=NotFound):
                job = read_raw(self.batch.read_namespaced_job, name, self.namespace)
        except NotFound:
            return JobState.MISSING, f"job {name} not found"
        for cond in job.get("status", {}).get("conditions") or []:
            if cond.get("status") != "True":
                continue
            if cond.get("type") == "Complete":
                return JobState.SUCCEEDED, ""
            if cond.get("type") == "Failed":
                said = f"{cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
                if cond.get("reason") == "DeadlineExceeded":
                    return JobState.TIMED_OUT, said
                return JobState.FAILED, said
        return JobState.RUNNING, ""

    def _log(self, job: str) -> str:
        with api_errors("list", "pods", missing=NotFound):
            pods = read_raw(
                self.core.list_namespaced_pod, self.namespace, label_selector=f"{JOB_LABEL}={job}"
            )["items"]
        if not pods:
            return ""  # no pod, no output: the verdict reads it as unreadable (fail closed)
        pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
        with api_errors("get", f"pods/{pod['metadata']['name']}/log", missing=NotFound):
            text: str = self.core.read_namespaced_pod_log(pod["metadata"]["name"], self.namespace)
        return text

    # -- the Jobs ---------------------------------------------------------------------------
    def _write_bw(self, run: FabricRun) -> list[Json]:
        client_node, server_node = run.nodes
        dev = shlex.quote(self.images.rdma_device)
        seconds = max(10, int(run.deadline.total_seconds()) // 4)
        common = f"ib_write_bw -d {dev} --report_gbits -F -D {min(seconds, 30)}"
        server_ip = shlex.quote(self._internal_ip(server_node))
        client = f"for i in $(seq 30); do {common} {server_ip} && exit 0; sleep 2; done; exit 1"
        return [
            self._job(run, 0, self.images.perftest, ["sh", "-c", client], rdma=True),
            self._job(run, 1, self.images.perftest, ["sh", "-c", common], rdma=True),
        ]

    def _internal_ip(self, node: str) -> str:
        with api_errors("get", f"nodes/{node}"):
            body = read_raw(self.core.read_node, node)
        for address in body.get("status", {}).get("addresses") or []:
            if address.get("type") == "InternalIP":
                return str(address["address"])
        raise ActionRefused(f"node {node} has no InternalIP: ib_write_bw cannot reach it")

    def _job(
        self, run: FabricRun, index: int, image: str, command: list[str], rdma: bool = False
    ) -> Json:
        node, name = run.nodes[index], job_names(run)[index]
        labels = {RUN_LABEL: run.run_id, TEST_LABEL: run.test.value}
        container: Json = {"name": "test", "image": image, "command": command}
        if run.gpus and not rdma:
            container["resources"] = {"limits": {GPU_RESOURCE: str(run.gpus)}}
        pod: Json = {
            "restartPolicy": "Never",
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [container],
        }
        if rdma:  # the NIC itself: the host's network and RDMA devices, memory it may pin
            pod["hostNetwork"] = True
            container["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
            container["volumeMounts"] = [{"name": "rdma", "mountPath": "/dev/infiniband"}]
            pod["volumes"] = [{"name": "rdma", "hostPath": {"path": "/dev/infiniband"}}]
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "activeDeadlineSeconds": int(run.deadline.total_seconds()),
                "ttlSecondsAfterFinished": KEEP_FINISHED_S,
                "template": {"metadata": {"labels": labels | {JOB_LABEL: name}}, "spec": pod},
            },
        }


def job_names(run: FabricRun) -> list[str]:
    """One per node: ``remedy-ib-write-bw-<run>-0`` the client, ``-1`` the server (at most 55
    characters: a name that is also a label value, under 63)."""
    return [
        f"remedy-{run.test.value.replace('_', '-')}-{run.run_id}-{i}" for i in range(len(run.nodes))
    ]
