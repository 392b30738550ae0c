"""The node-identity seams on Kubernetes, against the API emulator's TokenReview through the
official client: who a token speaks for, each reason it is refused, the 60 s cache that turns a
storm of reports into one review, and the agent's projected token read anew at each call."""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from adapters.kubernetes.identity import FileCredential, KubernetesIdentity
from kubeapi import ApiServer
from remedy.errors import PermissionDenied, TransientError
from remedy.identity import MAX_TOKEN, IdentityRefused, Speaker
from tests.kube_tokens import (
    AGENT,
    CONTROLLER,
    NAMESPACE,
    PODS,
    REVIEWS,
    account,
    agent_pod,
    token,
)

AGENT_USER = f"system:serviceaccount:{NAMESPACE}:{AGENT}"
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:{CONTROLLER}"


class Clock:
    """The cache's clock, moved by the test (the emulator's own clock decides expiry)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def identity(api: ApiServer, clock: Clock, **options: Any) -> KubernetesIdentity:
    return KubernetesIdentity(
        api.client(),
        agents=[f"{NAMESPACE}:{AGENT}"],
        controllers=[f"{NAMESPACE}:{CONTROLLER}"],
        clock=clock,
        **options,
    )


def pod_token(api: ApiServer, pod: str, account_name: str = AGENT, node_name: str = "gpu-a") -> str:
    """What the kubelet projects into ``pod`` (run under ``account_name`` on ``node_name``)."""
    if (("v1/serviceaccounts", NAMESPACE, account_name)) not in api.objects:
        account(api, account_name)
    uid = agent_pod(api, pod, node_name=node_name, account_name=account_name)
    return token(api, account_name, pod=pod, uid=uid, audiences=["remedy"], expiration_s=600)


def reviews(api: ApiServer) -> int:
    return len(api.sent("POST", REVIEWS))


def refusal(seam: KubernetesIdentity, text: str) -> str:
    with pytest.raises(IdentityRefused) as refused:
        seam.review(text)
    message = str(refused.value)
    assert text not in message  # a refusal never quotes the token
    return message


def test_an_agents_token_speaks_for_the_node_its_pod_runs_on(api: ApiServer, clock: Clock) -> None:
    seam = identity(api, clock)
    speaker = seam.review(pod_token(api, "agent-a", node_name="gpu-a"))
    assert speaker == Speaker(subject=AGENT_USER, node="gpu-a")
    assert speaker.why_not_for("gpu-a") == ""
    assert speaker.why_not_for("gpu-b") != ""
    assert seam.review(pod_token(api, "agent-b", node_name="gpu-b")).node == "gpu-b"


def test_the_controllers_token_speaks_for_any_node(api: ApiServer, clock: Clock) -> None:
    text = pod_token(api, "controller-0", account_name=CONTROLLER, node_name="cpu-1")
    speaker = identity(api, clock).review(text)
    assert speaker == Speaker(subject=CONTROLLER_USER, controller=True)
    assert speaker.why_not_for("gpu-a") == ""


def test_a_token_of_another_account_is_refused(api: ApiServer, clock: Clock) -> None:
    message = refusal(identity(api, clock), pod_token(api, "job-0", account_name="training"))
    assert message == (
        f"system:serviceaccount:{NAMESPACE}:training is neither remedy's agent "
        f"({NAMESPACE}:{AGENT}) nor its controller ({NAMESPACE}:{CONTROLLER})"
    )


def test_an_agent_token_bound_to_no_pod_on_a_node_is_refused(api: ApiServer, clock: Clock) -> None:
    account(api, AGENT)
    unbound = token(api, AGENT, audiences=["remedy"])
    message = refusal(identity(api, clock), unbound)
    assert "not bound to a pod on a node" in message and "deploy/agent.yaml" in message


def test_an_expired_token_is_refused(api: ApiServer, clock: Clock) -> None:
    text = pod_token(api, "agent-a")
    api.clock.advance(600 + 60 + 1)  # its 600 s, and kube-apiserver's 60 s of leeway
    message = refusal(identity(api, clock), text)
    assert message == "the token was not authenticated: service account token has expired"


def test_a_token_for_another_audience_is_refused(api: ApiServer, clock: Clock) -> None:
    account(api, AGENT)
    uid = agent_pod(api, "agent-a")
    for_the_api = token(api, AGENT, pod="agent-a", uid=uid)  # the API server's audience
    assert "is invalid for the target audiences" in refusal(identity(api, clock), for_the_api)


def test_a_deleted_pods_token_is_refused_once_the_cache_forgets_it(
    api: ApiServer, clock: Clock
) -> None:
    seam = identity(api, clock)
    text = pod_token(api, "agent-a")
    assert seam.review(text).node == "gpu-a"
    k8s.CoreV1Api(api.client()).delete_namespaced_pod("agent-a", NAMESPACE)
    assert (PODS, NAMESPACE, "agent-a") not in api.objects
    clock.now += 59.9
    assert seam.review(text).node == "gpu-a"  # the cached verdict, at most 60 s old
    assert reviews(api) == 1
    clock.now += 0.1
    assert refusal(seam, text) == (
        "the token was not authenticated: service account token has been invalidated"
    )
    assert reviews(api) == 2


def test_a_storm_of_reports_with_one_token_makes_one_review(api: ApiServer, clock: Clock) -> None:
    seam = identity(api, clock)
    text = pod_token(api, "agent-a")
    # The first review is slow to answer, so that the others come while it is under way.
    api.before(f"POST {REVIEWS}", lambda: time.sleep(0.2))
    with ThreadPoolExecutor(max_workers=16) as pool:
        speakers = list(pool.map(lambda _: seam.review(text), range(100)))
    assert {s.node for s in speakers} == {"gpu-a"}
    assert reviews(api) == 1


def test_a_refusal_is_cached_too(api: ApiServer, clock: Clock) -> None:
    seam = identity(api, clock)
    for _ in range(5):
        refusal(seam, "not-a-token")
    assert reviews(api) == 1


def test_the_cache_keeps_its_newest_verdicts_only(api: ApiServer, clock: Clock) -> None:
    seam = identity(api, clock, cache_max=2)
    first, second, third = (pod_token(api, f"agent-{n}", node_name=f"gpu-{n}") for n in "abc")
    for text in (first, second, third, third, second):
        seam.review(text)
    assert reviews(api) == 3
    seam.review(first)  # dropped for the third
    assert reviews(api) == 4


def test_a_server_error_is_retried_and_not_cached(api: ApiServer, clock: Clock) -> None:
    seam = identity(api, clock)
    text = pod_token(api, "agent-a")
    api.fail(f"POST {REVIEWS}", 500, message="etcdserver: request timed out")
    with pytest.raises(TransientError) as failed:
        seam.review(text)
    assert not failed.value.permanent
    assert text not in str(failed.value)
    assert seam.review(text).node == "gpu-a"  # the next report asks again
    assert reviews(api) == 2


def test_no_api_server_is_retried(clock: Clock) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{port}"
    config.retries = 0
    seam = KubernetesIdentity(
        k8s.ApiClient(config), agents=["remedy:remedy-agent"], controllers=[], clock=clock
    )
    with pytest.raises(TransientError):
        seam.review("a.b.c")


def test_a_controller_without_rbac_for_tokenreviews_is_a_permanent_error(
    api: ApiServer, clock: Clock
) -> None:
    text = pod_token(api, "agent-a")
    api.fail(f"POST {REVIEWS}", 403, times=None, message="tokenreviews is forbidden")
    with pytest.raises(PermissionDenied) as denied:
        identity(api, clock).review(text)
    assert denied.value.permanent
    assert "'create' on tokenreviews.authentication.k8s.io" in str(denied.value)


@pytest.mark.parametrize("text", ["", "x" * (MAX_TOKEN + 1)])
def test_an_empty_or_oversized_token_is_refused_without_asking(
    api: ApiServer, clock: Clock, text: str
) -> None:
    with pytest.raises(IdentityRefused):
        identity(api, clock).review(text)
    assert reviews(api) == 0


def test_accounts_are_named_once_as_namespace_and_name(api: ApiServer) -> None:
    with pytest.raises(ValueError, match="either an agent or a controller"):
        KubernetesIdentity(api.client(), agents=["remedy:x"], controllers=["remedy:x"])
    with pytest.raises(ValueError, match="namespace:name"):
        KubernetesIdentity(api.client(), agents=["remedy-agent"], controllers=[])


# -- the agent's side --------------------------------------------------------------------------


def test_the_projected_token_is_read_anew_at_each_call(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first-token\n")
    credential = FileCredential(str(path))
    assert credential.token() == "first-token"
    path.write_text("rotated-token")  # the kubelet rotates it before it expires
    assert credential.token() == "rotated-token"


@pytest.mark.parametrize("content", [None, "", " \n"])
def test_a_missing_or_empty_token_file_says_to_mount_the_projected_token(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(PermissionDenied) as denied:
        FileCredential(str(path)).token()
    assert str(path) in str(denied.value) and "deploy/agent.yaml" in str(denied.value)
