"""`remedy codec-server`: decrypts payloads for the Temporal Web UI and CLI (registered in
__init__.py); see docs/operations.md, "Encrypting payloads"."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from workers.cli.exits import BAD_INPUT
from workers.codec import KEY_FILE_ENV


def codec_server(
    key_file: Annotated[
        Path,
        typer.Option(
            envvar=KEY_FILE_ENV,
            help="The key file every remedy process encrypts with (one 'ID BASE64' a line).",
        ),
    ],
    bind: Annotated[str, typer.Option(help="host:port to listen on.")] = "127.0.0.1:8888",
    ui_origin: Annotated[
        list[str] | None,
        typer.Option(
            help="The Web UI's origin, e.g. http://localhost:8233 (repeat for several): the "
            "browser may call the server from there."
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar="REMEDY_CODEC_TOKEN_FILE",
            help="A file holding a token every request must carry (Authorization: Bearer); "
            "required unless --bind is a loopback address.",
        ),
    ] = None,
    allow_encode: Annotated[
        bool,
        typer.Option(
            help="Also serve /encode (off: anyone who reaches it could have the key seal "
            "payloads of their choosing). The Web UI needs it only to send signals or updates "
            "through an encrypted namespace."
        ),
    ] = False,
) -> None:
    """Serve /decode (and with --allow-encode, /encode) for the Temporal Web UI's and CLI's
    codec endpoint. It decrypts for whoever reaches it: a token is required unless it binds
    loopback."""
    from aiohttp import web

    from workers.codec import CodecKeyError, EncryptionCodec, load_keys
    from workers.codec_server import codec_app, loopback

    host, _, port = bind.rpartition(":")
    if not host or not port.isdigit():
        typer.echo(f"error: --bind {bind!r}: expected host:port", err=True)
        raise typer.Exit(BAD_INPUT)
    try:
        codec = EncryptionCodec(load_keys(key_file))
        token = token_file.read_text().strip() if token_file else None
    except CodecKeyError as exc:
        typer.echo(f"error: --key-file: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except OSError as exc:
        typer.echo(f"error: --token-file: {exc}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    if token == "":
        typer.echo(f"error: --token-file {token_file}: empty", err=True)
        raise typer.Exit(BAD_INPUT)
    if token is None and not loopback(host):
        typer.echo(
            f"error: --bind {bind}: not a loopback address, and no --token-file: anyone who "
            "reaches it could read every history in clear",
            err=True,
        )
        raise typer.Exit(BAD_INPUT)
    app = codec_app(codec, origins=ui_origin or [], token=token, encode=allow_encode)
    web.run_app(app, host=host, port=int(port), print=lambda _: None)
