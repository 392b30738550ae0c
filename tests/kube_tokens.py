"""Service accounts, the pods that run under them and the tokens they are given, on the API
emulator through the official client, as the kubelet asks for a projected token."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from kubeapi import ApiServer
from tests.kube import NODES, node

ACCOUNTS = "v1/serviceaccounts"
PODS = "v1/pods"
NAMESPACE = "remedy"
AGENT = "remedy-agent"
CONTROLLER = "remedy-controller"
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


def account(api: ApiServer, name: str, namespace: str = NAMESPACE) -> None:
    api.objects[ACCOUNTS, namespace, name] = {"metadata": {"name": name}}


def agent_pod(
    api: ApiServer,
    name: str,
    *,
    node_name: str | None = "gpu-a",
    account_name: str = AGENT,
    namespace: str = NAMESPACE,
) -> str:
    """A pod under ``account_name`` on ``node_name`` (None: not scheduled), its node made
    first; its uid."""
    if node_name and (NODES, None, node_name) not in api.objects:
        api.objects[NODES, None, node_name] = node(node_name)
    spec: dict[str, Any] = {
        "serviceAccountName": account_name,
        "containers": [{"name": "agent", "image": "remedy-agent"}],
    }
    if node_name:
        spec["nodeName"] = node_name
    api.objects[PODS, namespace, name] = {"metadata": {"name": name}, "spec": spec}
    uid: str = api.objects[PODS, namespace, name]["metadata"]["uid"]
    return uid


def request(
    api: ApiServer,
    account_name: str,
    *,
    pod: str | None = None,
    uid: str | None = None,
    audiences: list[str] | None = None,
    expiration_s: int | None = None,
    namespace: str = NAMESPACE,
) -> k8s.AuthenticationV1TokenRequest:
    """A TokenRequest for ``account_name``, bound to ``pod`` if given (``uid``: its uid)."""
    bound = (
        k8s.V1BoundObjectReference(api_version="v1", kind="Pod", name=pod, uid=uid) if pod else None
    )
    body = k8s.AuthenticationV1TokenRequest(
        api_version="authentication.k8s.io/v1",
        kind="TokenRequest",
        spec=k8s.V1TokenRequestSpec(
            audiences=audiences, expiration_seconds=expiration_s, bound_object_ref=bound
        ),
    )
    answer: k8s.AuthenticationV1TokenRequest = k8s.CoreV1Api(
        api.client()
    ).create_namespaced_service_account_token(account_name, namespace, body)
    return answer


def token(api: ApiServer, account_name: str, **options: Any) -> str:
    """The token a TokenRequest gives (``options``: as ``request``'s)."""
    found: str = request(api, account_name, **options).status.token
    return found


def review(
    api: ApiServer, token_text: str, audiences: list[str] | None = None
) -> k8s.V1TokenReviewStatus:
    body = k8s.V1TokenReview(
        api_version="authentication.k8s.io/v1",
        kind="TokenReview",
        spec=k8s.V1TokenReviewSpec(token=token_text, audiences=audiences),
    )
    answer = k8s.AuthenticationV1Api(api.client()).create_token_review(body)
    status: k8s.V1TokenReviewStatus = answer.status
    return status
