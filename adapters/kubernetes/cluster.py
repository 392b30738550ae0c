"""The one place the Kubernetes seams are wired into a ``Cluster``.

Every action leaves a Kubernetes Event on the node, so `kubectl describe node` tells the story;
a node labelled ``remedy.io/managed=false`` is never acted on; with ``dry_run`` every
destructive action says what it would do and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from kubernetes import client as k8s

from adapters.kubernetes.admission import KubernetesAdmission
from adapters.kubernetes.breakers import NAMESPACE, KubernetesBreakerBoard
from adapters.kubernetes.control import KubernetesNodeControl
from adapters.kubernetes.drain import DRAIN_TIMEOUT_S, Drain
from adapters.kubernetes.drain_modes import DrainModes
from adapters.kubernetes.drain_rules import DrainRules
from adapters.kubernetes.fabric_jobs import FabricImages, KubernetesFabricJobs
from adapters.kubernetes.fleet import KubernetesFleetView
from adapters.kubernetes.gpu_operator import GpuOperatorHandoff
from adapters.kubernetes.gpu_scope import KubernetesGpuScope
from adapters.kubernetes.marks import KubernetesNodeMarks
from adapters.kubernetes.mig_layout import KubernetesMigLayouts
from adapters.kubernetes.nodes import NodeApi, utcnow
from adapters.kubernetes.objects import CONTROLLER_MANAGER
from adapters.kubernetes.replace import replacer_named
from remedy.scan.cluster import Cluster
from remedy.scan.monitors import MonitorTable


def kubernetes_cluster(
    api: k8s.ApiClient,
    *,
    dry_run: bool = False,
    replacer: str = "auto",
    clock: Callable[[], datetime] = utcnow,
    eviction_retry_s: float = 5.0,
    drain_timeout_s: float = DRAIN_TIMEOUT_S,
    kill_grace_s: int = 10,
    checkpoint_grace_s: float = 0.0,
    drain_rules: DrainRules | None = None,
    drain_modes: DrainModes | None = None,
    field_manager: str = CONTROLLER_MANAGER,
    namespace: str = NAMESPACE,
    fabric_images: FabricImages | None = None,
    monitors: MonitorTable | None = None,
) -> Cluster:
    """``replacer``: a name in ``adapters.kubernetes.replace.REPLACERS`` (ValueError if none).
    A drain gives up after ``drain_timeout_s``, retrying evictions a PodDisruptionBudget
    refused every ``eviction_retry_s``; the GPU operator's pods get as long to leave. Which
    pods a drain may evict (kubectl's defaults unless ``drain_rules`` says otherwise) and how,
    per namespace: drain_rules.py, drain_modes.py (ValueError if the modes' delete-after is not
    within the drain timeout). ``namespace``: remedy's own, where the breakers are published
    and the fabric tests' Jobs run (``fabric_images``: the tools' images; none: no tests).
    ``monitors``: other monitors' conditions the fleet view takes as problems."""
    modes = drain_modes or DrainModes()
    if too_long := modes.too_long_for(drain_timeout_s):
        raise ValueError(too_long)
    nodes = NodeApi(api, dry_run=dry_run, clock=clock, field_manager=field_manager)
    drain = Drain(
        nodes,
        eviction_retry_s=eviction_retry_s,
        drain_timeout_s=drain_timeout_s,
        kill_grace_s=kill_grace_s,
        checkpoint_grace_s=checkpoint_grace_s,
        rules=drain_rules,
        modes=modes,
    )
    control = KubernetesNodeControl(nodes, drain)
    return Cluster(
        control=control,
        marks=KubernetesNodeMarks(nodes),
        fleet=KubernetesFleetView(nodes, monitors=monitors),
        admission=KubernetesAdmission(nodes),
        gpus=GpuOperatorHandoff(
            nodes, wait_timeout_s=drain_timeout_s, poll_s=min(eviction_retry_s, 1.0)
        ),
        replacer=replacer_named(replacer, nodes),
        workload=drain,  # its running GPU pods: what a job kill is for, and what makes it busy
        alerts=nodes,  # an Event on the node that tipped the breaker (a Warning)
        gpu_scope=KubernetesGpuScope(nodes, drain, control),  # a DRA device taint per GPU
        mig=KubernetesMigLayouts(nodes),  # the MIG manager's labels around a reset or reboot
        breakers=KubernetesBreakerBoard(nodes, namespace),  # a ConfigMap, one key per pool
        fabric=(
            KubernetesFabricJobs(api, namespace, fabric_images, field_manager)
            if fabric_images
            else None
        ),
    )
