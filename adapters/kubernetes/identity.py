"""The node-identity seams (remedy.identity) on Kubernetes: the controller reviews a report's
bound service-account token with TokenReview (``KubernetesIdentity``), and an agent reads the
token the kubelet projects into its pod (``FileCredential``).

A reviewed token's verdict is kept for 60 s by the token's SHA-256 (never the token): a storm of
reports from one agent costs one TokenReview, and a deleted pod's token keeps working at most
that long (kube's own webhook token authenticator caches for minutes)."""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from concurrent.futures import Future
from pathlib import Path

from kubernetes import client as k8s

from adapters.kubernetes.errors import api_errors
from remedy.errors import ActionRefused, PermissionDenied
from remedy.identity import AUDIENCE, MAX_TOKEN, IdentityRefused, Speaker

NODE_NAME = "authentication.kubernetes.io/node-name"  # kube-apiserver ≥ 1.30, pod-bound tokens
CACHE_S = 60.0
CACHE_MAX = 10_000  # verdicts kept; the oldest go first
_ACCOUNT = "system:serviceaccount:"
_REVIEWS = "tokenreviews.authentication.k8s.io"
_PROJECTED = "mount the projected service-account token (audience remedy), deploy/agent.yaml"
Verdict = Speaker | str  # a speaker, or why the token proves nothing


class KubernetesIdentity:
    """``agents`` and ``controllers``: service accounts as ``namespace:name``
    (``remedy:remedy-agent``). An agent's token speaks for the node its pod runs on, a
    controller's for any node. ``clock``: seconds, for the cache (monotonic)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        agents: Collection[str],
        controllers: Collection[str],
        audience: str = AUDIENCE,
        clock: Callable[[], float] = time.monotonic,
        cache_s: float = CACHE_S,
        cache_max: int = CACHE_MAX,
    ) -> None:
        self._auth = k8s.AuthenticationV1Api(api)
        self.agents = frozenset(_username(a) for a in agents)
        self.controllers = frozenset(_username(c) for c in controllers)
        if both := self.agents & self.controllers:
            # An agent's token would speak for every node: refuse to start, not to judge.
            raise ValueError(f"an account is either an agent or a controller: {sorted(both)}")
        self.audience, self._clock = audience, clock
        self._cache_s, self._cache_max = cache_s, cache_max
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[float, Verdict]] = OrderedDict()
        self._flights: dict[str, Future[Verdict]] = {}  # reviews in progress, by key

    def review(self, token: str) -> Speaker:
        if not token:
            raise IdentityRefused(f"no token: the sender must {_PROJECTED}")
        if len(token) > MAX_TOKEN:
            raise IdentityRefused(
                f"a token of {len(token)} characters is no service-account token (at most "
                f"{MAX_TOKEN})"
            )
        verdict = self._verdict(hashlib.sha256(token.encode()).hexdigest(), token)
        if isinstance(verdict, str):
            raise IdentityRefused(verdict)
        return verdict

    def _verdict(self, key: str, token: str) -> Verdict:
        with self._lock:
            cached = self._cached(key)
            if cached is not None:
                return cached
            flight = self._flights.get(key)
            waiting = flight is not None
            if flight is None:
                flight = self._flights[key] = Future()
        # One review per token at a time: the others wait for its verdict.
        return _awaited(flight) if waiting else self._ask(key, token, flight)

    # -- the review ----------------------------------------------------------------------------
    def _ask(self, key: str, token: str, flight: Future[Verdict]) -> Verdict:
        try:
            verdict = self._judge(self._token_review(token))
        except BaseException as error:
            with self._lock:
                del self._flights[key]
            flight.set_exception(error)  # not cached: the next report asks again
            raise
        with self._lock:
            self._cache[key] = (self._clock(), verdict)
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_max:
                self._cache.popitem(last=False)
            del self._flights[key]
        flight.set_result(verdict)
        return verdict

    def _token_review(self, token: str) -> k8s.V1TokenReviewStatus | None:
        body = k8s.V1TokenReview(
            api_version="authentication.k8s.io/v1",
            kind="TokenReview",
            spec=k8s.V1TokenReviewSpec(token=token, audiences=[self.audience]),
        )
        # 403: PermissionDenied naming the RBAC the controller lacks; 5xx, 429, no connection:
        # TransientError, retried.
        with api_errors("create", _REVIEWS, missing=_not_served):
            answer = self._auth.create_token_review(body)
        return answer.status

    def _judge(self, status: k8s.V1TokenReviewStatus | None) -> Verdict:
        if status is None or not status.authenticated:
            why = (status.error if status else None) or "no reason given"
            return f"the token was not authenticated: {why}"
        if self.audience not in (status.audiences or []):
            # An API server that ignores the audiences asked for (its authenticator is not
            # audience-aware) would accept a token minted for anyone.
            return (
                f"the review does not say the token is for audience {self.audience} (it says "
                f"{status.audiences or 'none'})"
            )
        user = status.user or k8s.V1UserInfo()
        username = user.username or ""
        if username in self.controllers:
            return Speaker(subject=username, controller=True)
        if username not in self.agents:
            return (
                f"{username or 'an unnamed user'} is neither remedy's agent "
                f"({_listed(self.agents)}) nor its controller ({_listed(self.controllers)})"
            )
        nodes = [n for n in (user.extra or {}).get(NODE_NAME) or [] if n]
        if len(nodes) != 1:
            return f"{username}'s token is not bound to a pod on a node: {_PROJECTED}"
        return Speaker(subject=username, node=nodes[0])

    def _cached(self, key: str) -> Verdict | None:
        found = self._cache.get(key)
        if found is None:
            return None
        if self._clock() - found[0] >= self._cache_s:
            del self._cache[key]
            return None
        return found[1]


class FileCredential:
    """The agent's token, read from the file the kubelet projects (and rotates) at each call."""

    def __init__(self, path: str) -> None:
        self.path = path

    def token(self) -> str:
        try:
            text = Path(self.path).read_text()
        except (OSError, UnicodeDecodeError) as error:
            why = error.strerror if isinstance(error, OSError) else "not text"
            raise PermissionDenied(
                f"no service-account token at {self.path} ({why}): {_PROJECTED}"
            ) from None
        token = text.strip()
        if not token:
            raise PermissionDenied(
                f"the service-account token at {self.path} is empty: {_PROJECTED}"
            )
        return token


def _username(account: str) -> str:
    namespace, _, name = account.partition(":")
    if not namespace or not name or ":" in name:
        raise ValueError(f"a service account is namespace:name, not {account!r}")
    return f"{_ACCOUNT}{namespace}:{name}"


def _listed(usernames: frozenset[str]) -> str:
    return ", ".join(sorted(u.removeprefix(_ACCOUNT) for u in usernames)) or "none"


def _awaited(flight: Future[Verdict]) -> Verdict:
    try:
        return flight.result()
    except Exception as error:
        # The first caller's error, as this caller's own (its traceback is that thread's).
        raise copy.copy(error) from error


def _not_served(detail: str) -> Exception:
    return ActionRefused(f"{detail}: this API server does not serve TokenReview")
