"""The codec server the Temporal Web UI and CLI call to show encrypted payloads in clear
(``remedy codec-server``): POST /decode (and /encode when allowed: it is an encryption oracle)
with ``{"payloads": [...]}`` in proto3 JSON, answered in kind. The browser calls it from the
UI's origin, so it answers CORS for the origins it is given; with a token, a request without
``Authorization: Bearer TOKEN`` is refused, and the command wants one unless it binds
loopback. It holds the keys: run it where only the people allowed to read histories can reach
it."""

from __future__ import annotations

import binascii
import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Sequence

from aiohttp import web
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.converter import PayloadCodec

from workers.codec import CodecError

MAX_BODY = 16 * 1024 * 1024  # a history page of payloads (each at most 2 MiB in Temporal)
# What the UI sends: its namespace, and the user's token when "pass access token" is on.
ALLOWED_HEADERS = "Content-Type, X-Namespace, Authorization"

Codec = Callable[[Sequence[Payload]], Awaitable[list[Payload]]]
SHAPE = '{"payloads": [{"metadata": {...}, "data": BASE64}]}'


class BadBody(ValueError):
    """A request body that is no Payloads message; the message says why, quoting none of it."""


def payloads_of(body: bytes) -> Payloads:
    """The Payloads message of a request body in proto3 JSON; BadBody saying what is wrong."""
    if not body:
        raise BadBody(f"the body is empty: send {SHAPE}")
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # bad UTF-8 is a ValueError too; RecursionError: nesting
        raise BadBody("the body is not JSON") from None
    if not isinstance(document, dict):  # ParseDict raises TypeError on a number or null
        raise BadBody(f"the body is not a JSON object: send {SHAPE}")
    try:
        return json_format.ParseDict(document, Payloads())
    except json_format.ParseError as exc:
        # protobuf's messages quote the input: say which kind of problem, in words of our own.
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, binascii.Error):
            cause = cause.__cause__
        if cause is not None:
            raise BadBody("a payload's data or a metadata value is not base64") from None
        raise BadBody(f"the body is not a Payloads message in proto3 JSON ({SHAPE})") from None


def loopback(host: str) -> bool:
    """Whether ``host`` (as --bind names it) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


def codec_app(
    codec: PayloadCodec,
    origins: Sequence[str] = (),
    token: str | None = None,
    encode: bool = False,
) -> web.Application:
    """The server's routes; ``origins``: the Web UI's (``http://localhost:8233``), ``*`` any;
    ``encode``: serve /encode too."""

    def cors(request: web.Request, response: web.StreamResponse) -> web.StreamResponse:
        origin = request.headers.get("Origin", "")
        if origin and (origin in origins or "*" in origins):
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Access-Control-Allow-Credentials"] = "true"
            response.headers["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
            response.headers["Vary"] = "Origin"
        return response

    def authorized(request: web.Request) -> bool:
        if token is None:
            return True
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        return hmac.compare_digest(given.encode(), token.encode())

    def route(apply: Codec) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            if not authorized(request):
                return cors(request, web.json_response({"error": "unauthorized"}, status=401))
            # Malformed input is the caller's: 400 saying why. Anything else is a fault of ours
            # and goes on to aiohttp, which logs it and answers 500.
            try:
                payloads = payloads_of(await request.read())
                done = Payloads(payloads=await apply(list(payloads.payloads)))
            except (BadBody, CodecError) as exc:
                return cors(request, web.json_response({"error": str(exc)}, status=400))
            text = json_format.MessageToJson(done)
            return cors(request, web.Response(text=text, content_type="application/json"))

        return handle

    async def preflight(request: web.Request) -> web.StreamResponse:
        return cors(request, web.Response(status=204))

    app = web.Application(client_max_size=MAX_BODY)
    # Also under a namespace segment, for an endpoint templated with {namespace}.
    served = {"decode": codec.decode, **({"encode": codec.encode} if encode else {})}
    for prefix in ("", "/{namespace}"):
        for name, apply in served.items():
            app.router.add_post(f"{prefix}/{name}", route(apply))
            app.router.add_route("OPTIONS", f"{prefix}/{name}", preflight)
    return app
