"""Elastic restarts on Kubernetes Jobs: the range a Job declares, its size (``parallelism``, one
pod per node), how many of its pods the healthy nodes can hold, a copy at another size, and
the checkpoint a grow waits for (the drain's annotations, asked per request).

Capacity is judged as the scheduler would for the parts remedy can read cheaply: the node is
Ready, schedulable, without remedy's problem conditions, matches the pod template's
``nodeSelector``, tolerates the node's NoSchedule/NoExecute taints, and has the GPUs a pod asks
for free of other workloads' pods (the job's own pods do not count: they make way). Node
affinity, topology spread and other resources are not looked at."""

from __future__ import annotations

import copy
from collections.abc import Iterable

from kubernetes import client as k8s

from adapters.kubernetes.drain import CHECKPOINT_REQUESTED, CHECKPOINTED
from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.job_failures import JOB_LABEL
from adapters.kubernetes.listing import list_pages
from adapters.kubernetes.objects import CONTROLLER_MANAGER, GPU_RESOURCE, Json, gpu_count, meta
from remedy.attribution.elastic import ELASTIC, ElasticRange, JobShape, declared
from remedy.core.errors import ActionRefused, NodeGone
from remedy.detection.conditions import PROBLEM_CONDITIONS

JOB_NAME = "batch.kubernetes.io/job-name"  # set by the Job controller on a Job's pods
RESIZED = "remedy.io/resized"  # on a running Job remedy ended to start it at a larger size
DONE = ("Succeeded", "Failed")


def elastic_range(job: Json) -> ElasticRange | None:
    """The Job's ``remedy.io/elastic`` annotation, else torchrun's ``--nnodes`` in a container."""
    pod_spec = job.get("spec", {}).get("template", {}).get("spec", {})
    args = [
        str(a)
        for c in pod_spec.get("containers", [])
        for a in (*c.get("command", []), *c.get("args", []))
    ]
    annotation = meta(job).get("annotations", {}).get(ELASTIC)
    try:
        return declared(annotation, args)
    except ValueError as err:  # the author's mistake: said on the restart, never guessed
        raise ActionRefused(f"job {meta(job).get('name')}: {err}") from err


def size_of(job: Json) -> int:
    return int(job.get("spec", {}).get("parallelism", 1))


def shape(core: k8s.CoreV1Api, latest: Json, guarded: str) -> JobShape:
    elastic = elastic_range(latest)
    if elastic is None:
        return JobShape(size=size_of(latest))
    return JobShape(elastic=elastic, size=size_of(latest), fits=fits(core, latest, guarded))


def fits(core: k8s.CoreV1Api, job: Json, guarded: str) -> int:
    """How many pods of the Job (one per node) the healthy nodes can hold now."""
    template = job.get("spec", {}).get("template", {})
    pod_spec = template.get("spec", {})
    asks = gpu_count(template)
    selector: dict[str, str] = pod_spec.get("nodeSelector", {})
    tolerations: list[Json] = pod_spec.get("tolerations", [])
    names = (guarded, meta(job)["name"])  # the first Job's pods, and its copy's
    used: dict[str, int] = {}
    for pod in list_pages(core.list_pod_for_all_namespaces, what="pods"):
        labels = meta(pod).get("labels", {})
        node = pod.get("spec", {}).get("nodeName")
        ours = labels.get(JOB_LABEL) == guarded or labels.get(JOB_NAME) in names
        if node and not ours and pod.get("status", {}).get("phase") not in DONE:
            used[node] = used.get(node, 0) + gpu_count(pod)
    count = 0
    for node in list_pages(core.list_node, what="nodes"):
        labels = meta(node).get("labels", {})
        if not healthy(node) or any(labels.get(k) != v for k, v in selector.items()):
            continue
        if not all(_tolerated(t, tolerations) for t in node.get("spec", {}).get("taints") or []):
            continue
        have = node.get("status", {}).get("allocatable", {}).get(GPU_RESOURCE)
        free = (int(have) if have is not None else asks) - used.get(meta(node)["name"], 0)
        if free >= asks and (asks > 0 or meta(node)["name"] not in used):
            count += 1
    return count


def healthy(node: Json) -> bool:
    listed = node.get("status", {}).get("conditions", [])
    conditions = {c.get("type"): c.get("status") for c in listed}
    return (
        conditions.get("Ready") == "True"
        and not node.get("spec", {}).get("unschedulable")
        and not any(conditions.get(c) == "True" for c in PROBLEM_CONDITIONS)
    )


def _tolerated(taint: Json, tolerations: Iterable[Json]) -> bool:
    if taint.get("effect") not in ("NoSchedule", "NoExecute"):
        return True
    for t in tolerations:
        if t.get("effect") not in (None, "", taint.get("effect")):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def resized(spec: Json, size: int) -> Json:
    """The Job's spec at ``size`` pods: ``parallelism``, and ``completions`` when it counted one
    completion per pod (an Indexed Job's ranks, or completions equal to parallelism)."""
    spec = copy.deepcopy(spec)
    old = spec.get("parallelism", 1)
    if spec.get("completionMode") == "Indexed" or spec.get("completions") == old:
        spec["completions"] = size
    spec["parallelism"] = size
    return spec


def checkpointed(core: k8s.CoreV1Api, latest: Json, asked: str) -> bool:
    """Ask the Job's running pods to checkpoint (a new request clears an old answer); whether
    every one of them answered this request."""
    name, namespace = meta(latest)["name"], meta(latest)["namespace"]
    pods = [
        p
        for p in list_pages(
            core.list_namespaced_pod, namespace, what="pods", label_selector=f"{JOB_NAME}={name}"
        )
        if p.get("status", {}).get("phase") == "Running"
    ]
    ask = {"metadata": {"annotations": {CHECKPOINT_REQUESTED: asked, CHECKPOINTED: None}}}
    answered = 0
    for pod in pods:
        notes = meta(pod).get("annotations", {})
        if notes.get(CHECKPOINT_REQUESTED) == asked:
            answered += CHECKPOINTED in notes
            continue
        try:
            with api_errors("patch", "pods"):
                core.patch_namespaced_pod(
                    meta(pod)["name"],
                    namespace,
                    ask,
                    field_manager=CONTROLLER_MANAGER,
                )
        except NodeGone:
            answered += 1  # gone: nothing left to checkpoint
    return bool(pods) and answered == len(pods)
