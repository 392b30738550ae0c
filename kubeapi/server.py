"""The strict Kubernetes API emulator: real HTTP on 127.0.0.1 from a thread, serving the
resources remedy uses the way kube-apiserver does (see ``store``, ``patch``, ``lifecycle``,
``listing``, ``disruption``).

Tests and benches seed and read objects through ``objects``, script the failures a real server
gives under load or outage with ``fail``, and read every request from ``requests``. Time is
the emulator's own (``clock``): the kubelets (``kubelets``) end a pod's grace period on it, and
the disruption controller (``disruption``) can be paused so that budgets' status lags."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any

from kubernetes import client as k8s

from kubeapi import lifecycle, listing, patch
from kubeapi import schema as schemas
from kubeapi.clock import Clock
from kubeapi.disruption import DisruptionController, evict
from kubeapi.http import Headers, Request, handler
from kubeapi.objects import Objects
from kubeapi.resources import BY_PATH, Resource
from kubeapi.status import ApiError
from kubeapi.store import Json, Store

__all__ = ["ApiServer", "Headers", "Request"]

SHUTDOWN_POLL_S = 0.02
PATCH_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}


@dataclass
class _Failure:
    method: str
    path: str
    status: int
    times: int | None
    message: str
    retry_after_s: int | None


@dataclass
class _Hook:
    method: str
    path: str
    happen: Callable[[], None]
    times: int


@dataclass
class Route:
    res: Resource
    namespace: str | None
    name: str | None
    sub: str | None


class ApiServer:
    """Start with ``ApiServer()`` (or ``with ApiServer() as api``); ``stop()`` ends it."""

    def __init__(self, *, extra_fields: dict[str, set[str]] | None = None) -> None:
        self.store = Store(extra_fields=extra_fields or {})
        self.clock: Clock = self.store.clock
        self.kubelets = lifecycle.Kubelets(self.store)
        self.disruption = DisruptionController(self.store)
        self.requests: list[Request] = []
        self.warnings: list[str] = []
        self.crashes: list[str] = []  # requests the emulator itself failed on (answered 500)
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its log
        self._failures: list[_Failure] = []
        self._hooks: list[_Hook] = []
        self._meanwhile: list[_Hook] = []
        self.objects = Objects(self.store, self.tick)
        for namespace in ("default", "kube-system"):
            self.objects["v1/namespaces", None, namespace] = {"metadata": {"name": namespace}}
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler(self))
        self._http.daemon_threads = True
        # Polled every 20 ms for shutdown, not socketserver's 0.5 s: stop() waits for it,
        # and every test with an emulator stops one.
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    def client(self) -> k8s.ApiClient:
        config = k8s.Configuration()
        config.host = self.url
        return k8s.ApiClient(config)

    def fail(
        self,
        route: str,
        status: int,
        *,
        times: int | None = 1,
        message: str = "",
        retry_after_s: int | None = None,
    ) -> None:
        """Answer ``"<method> <path>"`` with ``status`` (``times`` times; None: always)."""
        method, _, path = route.partition(" ")
        self._failures.append(_Failure(method.upper(), path, status, times, message, retry_after_s))

    def before(self, route: str, happen: Callable[[], None], *, times: int = 1) -> None:
        """Let something happen in the cluster just before ``"<method> <path>"`` is served
        (``times`` times): a pod deleted by someone else between remedy's read and its write."""
        method, _, path = route.partition(" ")
        self._hooks.append(_Hook(method.upper(), path, happen, times))

    def meanwhile(self, route: str, happen: Callable[[], None], *, times: int = 1) -> None:
        """Let something happen while ``"POST <pod>/eviction"`` is served, between its read of
        the pod's budget and its write of the budget's status (another eviction of the same
        budget, say): the write then finds the budget changed, as on a real server. It runs
        while the request holds the store: act on ``objects``, not over HTTP."""
        method, _, path = route.partition(" ")
        self._meanwhile.append(_Hook(method.upper(), path, happen, times))

    def tick(self) -> None:
        """What the cluster's controllers do before the next request is served: kubelets
        remove the pods they stopped, the disruption controller updates budgets' status."""
        self.kubelets.tick()
        self.disruption.tick()

    def compact(self) -> None:
        """etcd's compaction: a continue token, or a list at a revision, older than the latest
        write is 410 Gone from now on."""
        self.store.compact()

    def sent(self, method: str, path: str) -> list[Request]:
        return [r for r in self.requests if r.method == method and r.path == path]

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ApiServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- serving -------------------------------------------------------------------------------
    def handle(self, request: Request) -> tuple[int, Any, dict[str, str]]:
        self.requests.append(request)
        for hook in self._hooks:
            if hook.times > 0 and (hook.method, hook.path) == (request.method, request.path):
                hook.times -= 1
                hook.happen()
        scripted = self._scripted(request)
        if scripted is not None:
            return scripted
        try:
            self.tick()
            route = _route(request.path)
            status, body, warnings = self._serve(request, route)
        except ApiError as error:
            return _answer(error)
        except ValueError as bad:  # a query parameter that is not a number, say
            return _answer(ApiError(400, f"bad request: {bad}"))
        except Exception as bug:  # noqa: BLE001 - answer, never leave the client hanging
            self.crashes.append(f"{request.method} {request.path}: {bug!r}")
            return _answer(ApiError(500, f"the emulator failed: {bug!r}"))
        self.warnings += warnings
        return status, body, {"Warning": f'299 - "{warnings[0]}"'} if warnings else {}

    def _scripted(self, request: Request) -> tuple[int, Any, dict[str, str]] | None:
        for failure in self._failures:
            if failure.method == request.method and failure.path == request.path:
                if failure.times is not None:
                    if failure.times <= 0:
                        continue
                    failure.times -= 1
                return _answer(
                    ApiError(
                        failure.status,
                        failure.message or f"scripted {failure.status}",
                        retry_after_s=failure.retry_after_s,
                    )
                )
        return None

    def _serve(self, request: Request, route: Route) -> tuple[int, Any, list[str]]:
        store, res, ns, name = self.store, route.res, route.namespace, route.name
        method, query = request.method, request.query
        strict = query.get("fieldValidation") == "Strict"
        manager = _manager(request)
        if name is None:
            if method == "GET":
                found = listing.select(store, res, ns, query)
                if listing.wants_metadata_only(request.headers.get("accept") or ""):
                    found = listing.metadata_only(found)
                return 200, found, []
            if method == "POST":
                obj, warnings = store.create(
                    res, ns, _body(request), strict=strict, manager=manager
                )
                return 201, obj, warnings
            raise ApiError(405, f"{method} is not supported on a collection here")
        if route.sub == "eviction" and method == "POST" and res.plural == "pods":
            return 201, evict(store, ns or "", name, _body(request), self._during(request)), []
        if route.sub == "log" and method == "GET" and res.plural == "pods":
            store.get(res, ns, name)
            return 200, _tail(self.logs.get((ns or "", name), ""), query), []
        if route.sub not in (None, "status"):
            raise ApiError(404, f"the server could not find the requested resource ({route.sub})")
        if method == "GET":
            return 200, store.get(res, ns, name), []
        if method == "DELETE":
            options = _body(request) if request.data else {}
            if "gracePeriodSeconds" in query:
                options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            return 200, lifecycle.delete(store, res, ns, name, options), []
        if method == "PUT":
            replacement = _body(request)
            obj, warnings = store.update(
                res,
                ns,
                name,
                lambda _: replacement,
                subresource=route.sub,
                strict=strict,
                manager=manager,
            )
            return 200, obj, warnings
        if method == "PATCH":
            kind = PATCH_TYPES.get(request.headers.get("content-type", "").split(";")[0])
            if kind is None:
                raise ApiError(415, "the body of the request was in an unknown format")
            if kind == "strategic" and not res.builtin:
                raise ApiError(415, "strategic merge patch is not supported for custom resources")
            obj, warnings = store.update(
                res,
                ns,
                name,
                _patcher(res, kind, request.data),
                subresource=route.sub,
                strict=strict,
                manager=manager,
            )
            return 200, obj, warnings
        raise ApiError(405, f"{method} is not supported here")

    def _during(self, request: Request) -> Callable[[], None] | None:
        for hook in self._meanwhile:
            if hook.times > 0 and (hook.method, hook.path) == (request.method, request.path):
                hook.times -= 1
                return hook.happen
        return None


def _answer(error: ApiError) -> tuple[int, Any, dict[str, str]]:
    headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s else {}
    return error.code, error.status(), headers


def _patcher(res: Resource, kind: str, body: Any) -> Any:
    def change(obj: Json) -> Json:
        if kind == "json":
            return patch.json_patch(obj, body)
        if not isinstance(body, dict):
            raise ApiError(400, "a merge patch is a JSON object")
        if kind == "merge":
            merged: Json = patch.merge_patch(obj, body)
            return merged
        top = schemas.kind_schema(res.kind, res.group_version)
        out: Json = patch.strategic_merge_patch(obj, body, top)
        return out

    return change


def _manager(request: Request) -> str:
    """The writer managedFields name: ``fieldManager``, else the user agent's first word."""
    return (
        request.query.get("fieldManager")
        or (request.headers.get("user-agent") or "unknown").split("/")[0]
    )


def _body(request: Request) -> Json:
    if not isinstance(request.data, dict):
        raise ApiError(400, "the request body is not a JSON object")
    return request.data


def _tail(text: str, query: dict[str, str]) -> str:
    lines = int(query.get("tailLines") or 0)
    if lines:
        text = "".join(text.splitlines(keepends=True)[-lines:])
    limit = int(query.get("limitBytes") or 0)
    return text[-limit:] if limit else text


def _route(path: str) -> Route:
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        prefix, rest = "/api/v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        prefix, rest = f"/apis/{parts[1]}/{parts[2]}", parts[3:]
    else:
        raise ApiError(404, f"the server could not find the requested resource ({path})")
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and (prefix, rest[2]) in BY_PATH:
        namespace, rest = rest[1], rest[2:]
    res = BY_PATH.get((prefix, rest[0])) if rest else None
    if res is None:
        raise ApiError(404, f"the server could not find the requested resource ({path})")
    if res.namespaced and namespace is None and len(rest) > 1:
        raise ApiError(404, f"the server could not find the requested resource ({path})")
    return Route(
        res, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None
    )
