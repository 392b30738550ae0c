"""The strict Kubernetes API emulator: real HTTP on 127.0.0.1 from a thread, serving the
resources remedy uses the way kube-apiserver does (see ``store``, ``patch``, ``lifecycle``).

Tests and benches seed and read objects through ``objects``, script the failures a real server
gives under load or outage with ``fail``, and read every request from ``requests``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kubernetes import client as k8s

from kubeapi import lifecycle, patch
from kubeapi import schema as schemas
from kubeapi.resources import BY_PATH, Resource, resource
from kubeapi.status import ApiError
from kubeapi.store import Json, Key, Store

PATCH_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}


class Headers(dict[str, str]):
    """Request headers, looked up whatever their case (as HTTP says)."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__((k.lower(), v) for k, v in items)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: Headers
    data: Any
    status: int = 0


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
        self.requests: list[Request] = []
        self.warnings: list[str] = []
        self.crashes: list[str] = []  # requests the emulator itself failed on (answered 500)
        self.logs: dict[tuple[str, str], str] = {}  # (namespace, pod) -> its log
        self._failures: list[_Failure] = []
        self._hooks: list[_Hook] = []
        self.objects = Objects(self.store)
        for namespace in ("default", "kube-system"):
            self.objects["v1/namespaces", None, namespace] = {"metadata": {"name": namespace}}
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
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
                return 200, store.select(res, ns, query), []
            if method == "POST":
                obj, warnings = store.create(
                    res, ns, _body(request), strict=strict, manager=manager
                )
                return 201, obj, warnings
            raise ApiError(405, f"{method} is not supported on a collection here")
        if route.sub == "eviction" and method == "POST" and res.plural == "pods":
            return 201, lifecycle.evict(store, ns or "", name, _body(request)), []
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


class Objects:
    """``api.objects["v1/nodes", None, "n1"] = node`` seeds (through the same write path as a
    POST or PUT: validated, uid and resourceVersion assigned), reads a copy, or deletes."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __setitem__(self, key: Key, obj: Json) -> None:
        res, namespace, name = resource(key[0]), key[1], key[2]
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        meta["name"] = name
        if namespace:
            meta["namespace"] = namespace
        meta.pop("resourceVersion", None)
        with self._store.lock:
            if namespace and ("v1/namespaces", None, namespace) not in self._store.objects:
                self["v1/namespaces", None, namespace] = {"metadata": {"name": namespace}}
            if key in self._store.objects:
                self._store.objects.pop(key)
            self._store.create(res, namespace, obj, strict=True, uid=meta.pop("uid", None))

    def __getitem__(self, key: Key) -> Json:
        return self._store.get(resource(key[0]), key[1], key[2])

    def __delitem__(self, key: Key) -> None:
        self._store.get(resource(key[0]), key[1], key[2])
        self._store.remove(key)

    def __contains__(self, key: Key) -> bool:
        return key in self._store.objects

    def keys(self, res: str) -> Iterator[Key]:
        return iter([k for k in list(self._store.objects) if k[0] == res])


def _handler(api: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: the request log is api.requests

        def _do(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                data = json.loads(raw) if raw else None
            except ValueError:
                data = None
            request = Request(
                method=self.command,
                path=url.path,
                query=dict(parse_qsl(url.query)),
                headers=Headers(self.headers.items()),
                data=data,
            )
            status, body, headers = api.handle(request)
            request.status = status
            text = body if isinstance(body, str) else json.dumps(body)
            payload = text.encode()
            self.send_response(status)
            ctype = "text/plain" if isinstance(body, str) else "application/json"
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _do

    return Handler
