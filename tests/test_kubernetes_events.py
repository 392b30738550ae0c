"""Events remedy records are the ones `kubectl describe` shows: it selects a node's or a Job's
events by the object's uid, and an Event's name must be a valid object name."""

from __future__ import annotations

from kubernetes import client as k8s

from adapters.kubernetes.jobs import KubernetesJobs
from kubeapi import ApiServer
from remedy.attribution.guard import JobRef
from tests.kube import JOBS, NODES, NOW, OWNER, call, kube, node
from tests.test_kubernetes_jobs import failed_job


def described(api: ApiServer, uid: str, namespace: str) -> list[str]:
    """The reasons `kubectl describe` lists: events selected by the involved object's uid."""
    events = k8s.CoreV1Api(api.client()).list_namespaced_event(
        namespace, field_selector=f"involvedObject.uid={uid}"
    )
    return [e.reason for e in events.items]


async def test_events_without_involved_uid_are_invisible_to_describe(api: ApiServer) -> None:
    api.objects[NODES, None, "n1"] = node()
    await call(kube(api).control.cordon, "n1", OWNER)
    uid = api.objects[NODES, None, "n1"]["metadata"]["uid"]
    assert described(api, uid, "default") == ["RemedyCordoned"]


async def test_job_events_carry_the_jobs_uid(api: ApiServer) -> None:
    api.objects[JOBS, "ml", "llm"] = failed_job(conditions=[])
    jobs = KubernetesJobs(api.client(), clock=lambda: NOW)
    await call(jobs.stop_job, JobRef(namespace="ml", name="llm"), "Xid 79 on its node")
    assert described(api, "u1", "ml") == ["RemedyJobStopped"]


async def test_event_name_longer_than_253_characters(api: ApiServer) -> None:
    long = "gpu-" + "a" * 249  # a node name may itself be 253 characters
    api.objects[NODES, None, long] = node(long)
    await call(kube(api).control.cordon, long, OWNER)
    [event] = [e for e in api.requests if e.method == "POST" and e.path.endswith("/events")]
    assert event.status == 201, "the API server refused the Event"
    assert len(event.data["metadata"]["name"]) <= 253


async def test_a_breaker_alert_is_one_warning_event_on_the_node_that_tipped_it(
    api: ApiServer,
) -> None:
    api.objects[NODES, None, "n1"] = node()
    cluster = kube(api)
    assert cluster.alerts is not None
    await call(cluster.alerts.event, "n1", "RemedyQuarantine", "pool a: storm: 3 of 10", True)
    uid = api.objects[NODES, None, "n1"]["metadata"]["uid"]
    events = k8s.CoreV1Api(api.client()).list_namespaced_event(
        "default", field_selector=f"involvedObject.uid={uid}"
    )
    assert [(e.reason, e.type, e.message) for e in events.items] == [
        ("RemedyQuarantine", "Warning", "pool a: storm: 3 of 10")
    ]
