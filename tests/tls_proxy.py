"""A TLS-terminating forwarder for the tests: the dev server speaks gRPC in plaintext (HTTP/2 with
prior knowledge), so bytes piped after a TLS handshake that agreed on ALPN "h2" are gRPC as a
TLS-serving Temporal would speak it. Client certificates are required and checked against the
test's certificate authority, as an mTLS-only Temporal (or Temporal Cloud) does."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


def mtls_server_context(cert_pem: str, key_pem: str, ca_pem: str) -> ssl.SSLContext:
    """A server side that presents ``cert_pem`` and requires a client certificate signed by
    ``ca_pem`` (file paths)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=ca_pem)
    context.load_cert_chain(cert_pem, key_pem)
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["h2"])
    return context


@asynccontextmanager
async def tls_forwarder(upstream: str, context: ssl.SSLContext) -> AsyncIterator[str]:
    """Serve TLS on a free local port, piping each connection to ``upstream`` (host:port);
    yields the forwarder's host:port. On exit it stops listening and ends every pipe."""
    host, port = upstream.rsplit(":", 1)
    connections: set[asyncio.Task[None]] = set()

    async def forward(client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            server_in, server_out = await asyncio.open_connection(host, int(port))
            try:
                await asyncio.gather(_pipe(client_in, server_out), _pipe(server_in, client_out))
            finally:
                await _close(server_out)
        except asyncio.CancelledError:
            pass  # the forwarder stops: the connection ends here
        finally:
            await _close(client_out)
            connections.discard(task)

    listener = await asyncio.start_server(forward, "127.0.0.1", 0, ssl=context)
    try:
        yield f"127.0.0.1:{listener.sockets[0].getsockname()[1]}"
    finally:
        listener.close()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        await listener.wait_closed()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until either side ends; then close the sink, which ends the other direction too."""
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        sink.close()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.CancelledError):
        await writer.wait_closed()
