"""The Kubernetes provider's entry: its settings, checked once, and what it builds from them for
the composition root (workers/providers): the controller's ``Cluster`` and guarded jobs, and
the agent's marks and its own node."""

from __future__ import annotations

from typing import Literal

from kubernetes import client as k8s
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from adapters.kubernetes.breakers import NAMESPACE
from adapters.kubernetes.cluster import kubernetes_cluster
from adapters.kubernetes.config import KubeconfigError, api_client, request_timeout
from adapters.kubernetes.drain import DRAIN_TIMEOUT_S
from adapters.kubernetes.drain_modes import DrainModes
from adapters.kubernetes.drain_rules import DrainRules
from adapters.kubernetes.fabric_jobs import FabricImages
from adapters.kubernetes.jobs import KubernetesJobs
from adapters.kubernetes.marks import KubernetesNodeMarks
from adapters.kubernetes.nodes import NodeApi
from adapters.kubernetes.objects import AGENT_MANAGER
from adapters.kubernetes.replace import REPLACERS
from remedy.detection.pod_resources import KUBELET_SOCKET
from remedy.scan.cluster import Cluster, OwnNode
from remedy.scan.monitors import load_monitor_tables

__all__ = ["KubeconfigError", "KubernetesSettings"]


class KubernetesSettings(BaseModel):
    """How remedy reaches a Kubernetes cluster and what it may do there. The field names are
    the flags' (``remedy controller --drain-force``); a problem is a ValueError naming the
    field, the cross-field ones prefixed ``FIELD: ``."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["kubernetes"] = "kubernetes"
    kubeconfig: str | None = None  # None: in-cluster, then ~/.kube/config
    kube_timeout: float | None = Field(default=None, gt=0)  # each call's read timeout
    namespace: str = NAMESPACE  # remedy's own: where its breakers are published
    dry_run: bool = False  # destructive actions say what they would do
    replace_provider: str = "auto"  # a name in adapters/kubernetes/replace.py's REPLACERS
    checkpoint_grace: float = 0.0  # seconds GPU pods get to checkpoint before eviction
    drain_delete_emptydir_data: bool = False
    drain_force: bool = False
    drain_skip_wait_for_delete_timeout: float = 60.0
    drain_mode: list[str] = []  # NAMESPACE=MODE
    drain_delete_after: float = 600.0
    drain_delete_grace_max: int | None = None
    watch_jobs: bool = True  # guarded jobs (remedy.io/guard=true) for the job guards
    # The agent's: cordon its own node at once (unless a breaker holds cordons), and the
    # kubelet's pod-resources socket ("": which pod uses which GPU is not published).
    self_cordon: bool = True
    pod_resources: str = KUBELET_SOCKET
    # The fabric tests' tools ("": that test cannot run; none set: no fabric test Jobs).
    fabric_nccl_tests_image: str = ""
    fabric_nvbandwidth_image: str = ""
    fabric_perftest_image: str = ""
    fabric_rdma_device: str = "mlx5_0"
    # The controller's: tables of other monitors' node conditions it takes as faults
    # (remedy.scan.monitors; examples/monitors/). Empty: remedy's own conditions only.
    monitor_conditions: list[str] = []

    @field_validator("monitor_conditions")
    @classmethod
    def _tables_load(cls, paths: list[str]) -> list[str]:
        load_monitor_tables(paths)  # YamlFileError (a ValueError): file, line, field
        return paths

    @field_validator("replace_provider")
    @classmethod
    def _known_replacer(cls, name: str) -> str:
        if name not in REPLACERS:
            raise ValueError(f"unknown replace provider {name!r} (known: {', '.join(REPLACERS)})")
        return name

    @model_validator(mode="after")
    def _drain_fits(self) -> KubernetesSettings:
        try:
            modes = self.drain_modes()
        except ValueError as exc:
            raise ValueError(f"drain_mode: {str(exc).splitlines()[0]}") from None
        if too_long := modes.too_long_for(DRAIN_TIMEOUT_S):
            field = (
                "drain_delete_grace_max" if self.drain_delete_grace_max else "drain_delete_after"
            )
            raise ValueError(f"{field}: {too_long}")
        return self

    def drain_rules(self) -> DrainRules:
        return DrainRules(
            delete_emptydir_data=self.drain_delete_emptydir_data,
            force=self.drain_force,
            skip_wait_for_delete_timeout_s=self.drain_skip_wait_for_delete_timeout,
        )

    def drain_modes(self) -> DrainModes:
        return DrainModes.parse(
            self.drain_mode, self.drain_delete_after, self.drain_delete_grace_max
        )

    def fabric_images(self) -> FabricImages | None:
        images = FabricImages(
            nccl_tests=self.fabric_nccl_tests_image,
            nvbandwidth=self.fabric_nvbandwidth_image,
            perftest=self.fabric_perftest_image,
            rdma_device=self.fabric_rdma_device,
        )
        return images if images.nccl_tests or images.nvbandwidth or images.perftest else None

    def api(self) -> k8s.ApiClient:
        """The API client (KubeconfigError: none usable, one line saying why)."""
        return api_client(self.kubeconfig, timeout=request_timeout(self.kube_timeout))


def controller_cluster(settings: KubernetesSettings, api: k8s.ApiClient) -> Cluster:
    """The controller's seams, written as the controller."""
    return kubernetes_cluster(
        api,
        dry_run=settings.dry_run,
        replacer=settings.replace_provider,
        checkpoint_grace_s=settings.checkpoint_grace,
        drain_rules=settings.drain_rules(),
        drain_modes=settings.drain_modes(),
        namespace=settings.namespace,
        fabric_images=settings.fabric_images(),
        monitors=load_monitor_tables(settings.monitor_conditions),
    )


def guarded_jobs(settings: KubernetesSettings, api: k8s.ApiClient) -> KubernetesJobs | None:
    """The jobs the job guards watch (None: not watched)."""
    return KubernetesJobs(api, dry_run=settings.dry_run) if settings.watch_jobs else None


def agent_marks(api: k8s.ApiClient) -> KubernetesNodeMarks:
    """Where an agent publishes its node's conditions, Xids and key, written as the agent."""
    return KubernetesNodeMarks(NodeApi(api, field_manager=AGENT_MANAGER))


def own_node(settings: KubernetesSettings, api: k8s.ApiClient) -> OwnNode | None:
    """What an agent may do to its own node: the controller's cordon, written as the agent,
    held by the published breakers (None: no cordon of its own)."""
    if not settings.self_cordon:
        return None
    on = kubernetes_cluster(api, field_manager=AGENT_MANAGER, namespace=settings.namespace)
    return OwnNode(on.control, on.breakers) if on.breakers else None
