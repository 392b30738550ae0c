"""How every command connects to Temporal: the options `remedy` takes before the command
(``remedy --tls-cert-path c.pem --tls-key-path c.key approve NODE``), each command's own
``--address``, then the profile file and the TEMPORAL_* variables (workers/connection.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from workers.connection import ConnectOptions

_PANEL = "Temporal connection (over the profile file and TEMPORAL_* variables)"
# What `remedy` was given before the command; set once per invocation by the app's callback.
_given = ConnectOptions()


def temporal_options(
    namespace: Annotated[
        str | None,
        typer.Option(
            help="Temporal namespace (env TEMPORAL_NAMESPACE; default: default).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    profile: Annotated[
        str | None,
        typer.Option(
            help="Profile in the profile file (env TEMPORAL_PROFILE; default: default).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            help="The profile file, TOML (env TEMPORAL_CONFIG_FILE; default: "
            "temporalio/temporal.toml in the user's config folder, e.g. ~/.config).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            help="API key; implies TLS (env TEMPORAL_API_KEY, which keeps it out of `ps`).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    tls: Annotated[
        bool | None,
        typer.Option("--tls/--no-tls", help="Use TLS (env TEMPORAL_TLS).", rich_help_panel=_PANEL),
    ] = None,
    tls_ca_path: Annotated[
        Path | None,
        typer.Option(
            help="CA certificate that signed the server's (PEM) "
            "(env TEMPORAL_TLS_SERVER_CA_CERT_PATH; default: the system's).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    tls_cert_path: Annotated[
        Path | None,
        typer.Option(
            help="Client certificate for mTLS (PEM) (env TEMPORAL_TLS_CLIENT_CERT_PATH).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    tls_key_path: Annotated[
        Path | None,
        typer.Option(
            help="Client certificate's private key (PEM) (env TEMPORAL_TLS_CLIENT_KEY_PATH).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    tls_server_name: Annotated[
        str | None,
        typer.Option(
            help="Server name to verify the server's certificate against "
            "(env TEMPORAL_TLS_SERVER_NAME; default: the address's host).",
            rich_help_panel=_PANEL,
        ),
    ] = None,
    allow_insecure_api_key: Annotated[
        bool,
        typer.Option(
            help="Send the API key even with TLS off (refused otherwise: it would cross the "
            "network in clear text).",
            rich_help_panel=_PANEL,
        ),
    ] = False,
) -> None:
    """remedy keeps GPU fleets healthy."""
    global _given
    _given = ConnectOptions(
        namespace=namespace,
        profile=profile,
        config_file=config_file,
        api_key=api_key,
        tls=tls,
        tls_ca_path=tls_ca_path,
        tls_cert_path=tls_cert_path,
        tls_key_path=tls_key_path,
        tls_server_name=tls_server_name,
        allow_insecure_api_key=allow_insecure_api_key,
    )


def temporal(address: str | None) -> ConnectOptions:
    """The connection options of the command running now: `remedy`'s, with its --address."""
    return replace(_given, address=address) if address else _given
