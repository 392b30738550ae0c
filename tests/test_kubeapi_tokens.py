"""The emulator serves ServiceAccounts, TokenRequest and TokenReview as kube-apiserver does:
what a token request is refused for, what a review answers for a pod-bound token, and each
reason a token stops proving anything (expiry, a deleted pod or account, another audience)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import urllib3
from kubernetes import client as k8s

from kubeapi import ApiServer
from kubeapi.tokens import API_AUDIENCES
from tests.kube import NODES, node, refused
from tests.kube_tokens import (
    ACCOUNTS,
    AGENT,
    CONTROLLER,
    NAMESPACE,
    PODS,
    REVIEWS,
    account,
    agent_pod,
    request,
    review,
    token,
)

EXTRA = "authentication.kubernetes.io/"
USER = f"system:serviceaccount:{NAMESPACE}:{AGENT}"


def core(api: ApiServer) -> k8s.CoreV1Api:
    return k8s.CoreV1Api(api.client())


def agent_token(api: ApiServer, pod: str = "agent-a", node_name: str = "gpu-a") -> str:
    account(api, AGENT)
    uid = agent_pod(api, pod, node_name=node_name)
    return token(api, AGENT, pod=pod, uid=uid, audiences=["remedy"], expiration_s=600)


# -- ServiceAccounts are stored ------------------------------------------------------------------


def test_service_accounts_are_seeded_created_read_and_deleted(api: ApiServer) -> None:
    account(api, AGENT)
    body = k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name=CONTROLLER))
    core(api).create_namespaced_service_account(NAMESPACE, body)
    listed = core(api).list_namespaced_service_account(NAMESPACE)
    assert sorted(a.metadata.name for a in listed.items) == [AGENT, CONTROLLER]
    assert core(api).read_namespaced_service_account(AGENT, NAMESPACE).metadata.uid
    core(api).delete_namespaced_service_account(AGENT, NAMESPACE)
    assert (ACCOUNTS, NAMESPACE, AGENT) not in api.objects


# -- TokenRequest ----------------------------------------------------------------------------------


def test_a_token_request_defaults_to_the_api_servers_audience_for_an_hour(api: ApiServer) -> None:
    account(api, AGENT)
    answer = request(api, AGENT)
    assert answer.spec.audiences == list(API_AUDIENCES)
    assert answer.spec.expiration_seconds == 3600
    assert answer.status.expiration_timestamp == api.clock.now() + timedelta(hours=1)
    assert answer.metadata.name == AGENT and answer.metadata.namespace == NAMESPACE
    assert len(answer.status.token.split(".")) == 3  # a JWT, as kube-apiserver's are
    assert review(api, answer.status.token).authenticated  # for the API server's audience
    assert not review(api, answer.status.token, ["remedy"]).authenticated


def test_a_token_for_an_account_that_does_not_exist_is_404(api: ApiServer) -> None:
    body = refused(404, request, api, AGENT)
    assert body["message"] == f'serviceaccounts "{AGENT}" not found'


@pytest.mark.parametrize(
    ("seconds", "why"),
    [
        (599, "may not specify a duration less than 10 minutes"),
        ((1 << 32) + 1, "may not specify a duration larger than 2^32 seconds"),
    ],
)
def test_a_token_shorter_than_ten_minutes_or_longer_than_2_32_s_is_invalid(
    api: ApiServer, seconds: int, why: str
) -> None:
    account(api, AGENT)
    body = refused(422, request, api, AGENT, expiration_s=seconds)
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: '
        f"spec.expirationSeconds: Invalid value: {seconds}: {why}"
    )
    assert request(api, AGENT, expiration_s=600).spec.expiration_seconds == 600


def test_a_token_is_bound_only_to_a_pod_of_its_account_that_exists_with_that_uid(
    api: ApiServer,
) -> None:
    account(api, AGENT)
    account(api, "other")
    uid = agent_pod(api, "agent-a")
    assert refused(404, request, api, AGENT, pod="gone")["message"] == 'pods "gone" not found'
    body = refused(409, request, api, AGENT, pod="agent-a", uid="an-older-pod")
    assert "does not match the UID in record" in body["message"]
    body = refused(400, request, api, "other", pod="agent-a")
    assert body["message"] == (
        'cannot bind token for serviceaccount "other" to pod running with different '
        "serviceaccount name."
    )
    assert request(api, AGENT, pod="agent-a", uid=uid).spec.bound_object_ref.uid == uid


def test_a_token_bound_to_anything_but_a_pod_is_refused(api: ApiServer) -> None:
    account(api, AGENT)
    node_ref = k8s.V1BoundObjectReference(api_version="v1", kind="Node", name="gpu-a")
    body = k8s.AuthenticationV1TokenRequest(spec=k8s.V1TokenRequestSpec(bound_object_ref=node_ref))
    answer = refused(400, core(api).create_namespaced_service_account_token, AGENT, NAMESPACE, body)
    assert answer["message"] == "cannot bind token to object of type /v1, Kind=Node"
    body.metadata = k8s.V1ObjectMeta(name="another-account")
    body.spec.bound_object_ref = None
    answer = refused(422, core(api).create_namespaced_service_account_token, AGENT, NAMESPACE, body)
    assert "must match the service account name if specified" in answer["message"]


# -- TokenReview -----------------------------------------------------------------------------------


def test_a_review_names_the_account_its_pod_and_the_node_the_pod_runs_on(api: ApiServer) -> None:
    text = agent_token(api)
    status = review(api, text, ["remedy", "another"])
    assert status.authenticated is True
    assert status.audiences == ["remedy"]  # the intersection
    user = status.user
    assert user.username == USER
    assert user.uid == api.objects[ACCOUNTS, NAMESPACE, AGENT]["metadata"]["uid"]
    assert user.groups == [
        "system:serviceaccounts",
        f"system:serviceaccounts:{NAMESPACE}",
        "system:authenticated",
    ]
    pod = api.objects[PODS, NAMESPACE, "agent-a"]["metadata"]
    assert user.extra[EXTRA + "pod-name"] == ["agent-a"]
    assert user.extra[EXTRA + "pod-uid"] == [pod["uid"]]
    assert user.extra[EXTRA + "node-name"] == ["gpu-a"]
    assert user.extra[EXTRA + "node-uid"] == [api.objects[NODES, None, "gpu-a"]["metadata"]["uid"]]
    (credential,) = user.extra[EXTRA + "credential-id"]
    assert credential.startswith("JTI=")


def test_node_name_follows_the_pods_node(api: ApiServer) -> None:
    account(api, AGENT)
    for pod, node_name in (("agent-a", "gpu-a"), ("agent-b", "gpu-b")):
        uid = agent_pod(api, pod, node_name=node_name)
        text = token(api, AGENT, pod=pod, uid=uid, audiences=["remedy"])
        assert review(api, text, ["remedy"]).user.extra[EXTRA + "node-name"] == [node_name]
    # Not yet scheduled: no node at all. On a node not (or no longer) there: its name only.
    agent_pod(api, "pending", node_name=None)
    extra = review(api, token(api, AGENT, pod="pending", audiences=["remedy"]), ["remedy"])
    assert EXTRA + "node-name" not in extra.user.extra
    agent_pod(api, "agent-c", node_name="gpu-c")
    del api.objects[NODES, None, "gpu-c"]
    extra = review(api, token(api, AGENT, pod="agent-c", audiences=["remedy"]), ["remedy"])
    assert extra.user.extra[EXTRA + "node-name"] == ["gpu-c"]
    assert EXTRA + "node-uid" not in extra.user.extra
    # A token bound to no pod names no pod and no node.
    unbound = review(api, token(api, AGENT, audiences=["remedy"]), ["remedy"]).user.extra
    assert set(unbound) == {EXTRA + "credential-id"}


def test_expired_after_the_clock_moves_past_expiration_seconds_and_the_leeway(
    api: ApiServer,
) -> None:
    text = agent_token(api)  # 600 s
    api.clock.advance(600 + 60)  # kube-apiserver allows go-jose's 60 s of clock skew
    assert review(api, text, ["remedy"]).authenticated
    api.clock.advance(1)
    status = review(api, text, ["remedy"])
    assert not status.authenticated
    assert status.error == "service account token has expired"


def test_refused_once_the_pod_is_deleted_or_replaced(api: ApiServer) -> None:
    text = agent_token(api)
    core(api).delete_namespaced_pod("agent-a", NAMESPACE)  # its kubelet stops it at once
    status = review(api, text, ["remedy"])
    assert (status.authenticated, status.error) == (
        None,
        "service account token has been invalidated",
    )
    agent_pod(api, "agent-a")  # another pod of the same name
    status = review(api, text, ["remedy"])
    assert not status.authenticated
    assert "does not match service account pod ref claim" in status.error


def test_a_terminating_pods_token_works_until_a_minute_past_its_deletion(api: ApiServer) -> None:
    api.objects[NODES, None, "gpu-a"] = node("gpu-a", ready=False)  # its kubelet confirms nothing
    text = agent_token(api)
    core(api).delete_namespaced_pod("agent-a", NAMESPACE)  # Terminating: 30 s of grace
    api.clock.advance(30 + 60)
    assert review(api, text, ["remedy"]).authenticated
    api.clock.advance(1)
    status = review(api, text, ["remedy"])
    assert status.error == "service account token has been invalidated"


def test_refused_once_the_service_account_is_deleted_or_replaced(api: ApiServer) -> None:
    text = agent_token(api)
    core(api).delete_namespaced_service_account(AGENT, NAMESPACE)
    status = review(api, text, ["remedy"])
    assert (status.authenticated, status.error) == (None, f'serviceaccounts "{AGENT}" not found')
    account(api, AGENT)
    assert "does not match claim" in review(api, text, ["remedy"]).error


def test_wrong_audience_refused(api: ApiServer) -> None:
    text = agent_token(api)
    status = review(api, text, ["another"])
    assert not status.authenticated and not status.audiences
    assert (
        status.error == 'token audiences ["remedy"] is invalid for the target audiences ["another"]'
    )
    assert not review(api, text).authenticated  # no audiences asked: the API server's own


def test_unknown_malformed_or_foreign_tokens_are_not_authenticated(api: ApiServer) -> None:
    with ApiServer() as other:
        account(other, AGENT)
        foreign = token(other, AGENT, audiences=["remedy"])
    mine = agent_token(api)
    header, payload, _ = mine.split(".")
    for text in ("not-a-token", "a.b.c", foreign, f"{header}.{payload}.", f"{header}.x{payload}.y"):
        status = review(api, text, ["remedy"])
        assert (status.authenticated, status.error) == (None, "invalid bearer token"), text
        assert status.user.username is None


def test_an_empty_token_is_a_bad_request(api: ApiServer) -> None:
    body = refused(400, review, api, "")
    assert body["message"] == "token is required for TokenReview in authentication"


def test_reviews_and_requests_are_create_only_and_not_stored(api: ApiServer) -> None:
    text = agent_token(api)
    review(api, text, ["remedy"])
    http = urllib3.PoolManager()
    token_path = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{AGENT}/token"
    for method, path in (("GET", REVIEWS), ("DELETE", REVIEWS), ("GET", token_path)):
        assert http.request(method, api.url + path).status == 405, (method, path)
    namespaced = f"/apis/authentication.k8s.io/v1/namespaces/{NAMESPACE}/tokenreviews"
    assert http.request("POST", api.url + namespaced, json={}).status == 404
    stored = {key[0] for key in api.store.objects}
    assert not {k for k in stored if "token" in k}


def test_an_unknown_field_in_a_review_is_refused_when_strict(api: ApiServer) -> None:
    http = urllib3.PoolManager()
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"}
    body |= {"spec": {"token": "t", "bogus": 1}}
    answer = http.request("POST", f"{api.url}{REVIEWS}?fieldValidation=Strict", json=body)
    assert answer.status == 400
    assert b'unknown field \\"spec.bogus\\"' in answer.data
