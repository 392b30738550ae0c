"""The emulator's HTTP side: a request as it came in, and the handler that answers it from
whatever serves it (``ApiServer.handle``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit


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


class Serving(Protocol):
    def handle(self, request: Request) -> tuple[int, Any, dict[str, str]]: ...


def handler(api: Serving) -> type[BaseHTTPRequestHandler]:
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
