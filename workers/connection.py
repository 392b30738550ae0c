"""Where and how a remedy process connects to Temporal, resolved as the `temporal` CLI does: the
SDK's environment configuration (a TOML profile file, then the TEMPORAL_* variables over it),
then command-line options over both. With nothing configured: localhost:7233, namespace
default, no TLS (the dev server). Every problem found here or when connecting is one
TemporalConnectError that names what failed: the configuration, a certificate, the
credentials, or the address."""

from __future__ import annotations

import getpass
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS, DataSource
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"


class TemporalConnectError(RuntimeError):
    """remedy could not connect to Temporal; the message is one line naming what failed. A
    RuntimeError, as the SDK's own connect failure is."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"{self.what} {address}: {reason}")
        self.address = address

    what = "cannot connect to Temporal at"


class TemporalUnreachable(TemporalConnectError):
    """No Temporal server answered at the address (refused, unknown host, a malformed address,
    something else listening)."""

    what = "cannot reach Temporal at"


class TemporalConfigError(TemporalConnectError):
    """The connection's configuration is wrong: a profile file that does not parse, a profile it
    lacks, a config file that is not there. The "address" is where the configuration came
    from."""

    what = "Temporal client configuration"


class TemporalCertificateError(TemporalConnectError):
    """TLS failed: a certificate or key file missing or not PEM, a key that is not the
    certificate's, a server certificate not trusted, a client certificate the server refused."""

    what = "TLS with Temporal at"


class TemporalAuthError(TemporalConnectError):
    """The server answered and refused the credentials (UNAUTHENTICATED, PERMISSION_DENIED): a
    wrong or expired API key, a client certificate without access to the namespace."""

    what = "Temporal at"

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(address, f"refused the credentials: {reason}")


@dataclass(frozen=True)
class ConnectOptions:
    """What the command line says about the connection; None: not said (the profile file and
    the TEMPORAL_* variables decide, then the defaults)."""

    address: str | None = None
    namespace: str | None = None
    profile: str | None = None
    config_file: Path | None = None
    api_key: str | None = field(default=None, repr=False)
    tls: bool | None = None
    tls_ca_path: Path | None = None
    tls_cert_path: Path | None = None
    tls_key_path: Path | None = None
    tls_server_name: str | None = None
    allow_insecure_api_key: bool = False  # an API key over a connection without TLS


@dataclass(frozen=True)
class Connection:
    """A resolved connection: what Client.connect is given. Its repr holds no secret (the API
    key, the client key in the TLS settings, headers that may carry a token)."""

    address: str
    namespace: str = DEFAULT_NAMESPACE
    tls: TLSConfig | bool = field(default=False, repr=False)
    api_key: str | None = field(default=None, repr=False)
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)
    identity: str = ""
    client_cn: str | None = None  # the client certificate's subject CN, when there is one

    @property
    def uses_tls(self) -> bool:
        return self.tls is not False


def identity(role: str, client_cn: str | None = None) -> str:
    """Who this client is, as the server records it (a worker's polls, an update's caller):
    ``remedy-ROLE:USER@HOST``, then `` [CN=NAME]`` with a client certificate, e.g.
    ``remedy-cli:alice@laptop [CN=alice]``."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # a container's uid with no name
        user = f"uid{os.getuid()}"
    who = f"remedy-{role}:{user}@{socket.gethostname()}"
    return f"{who} [CN={client_cn}]" if client_cn else who


def plain(address: str, namespace: str = DEFAULT_NAMESPACE, role: str = "local") -> Connection:
    """A connection with no configuration read: a server remedy started itself (the demo's dev
    server, the crash tests', the benchmarks')."""
    return Connection(address=address, namespace=namespace, identity=identity(role))


def resolve(options: ConnectOptions, role: str, env: Mapping[str, str] | None = None) -> Connection:
    """The connection: options over the TEMPORAL_* variables (``env``, default the process's)
    over the profile file, then the defaults. Raises TemporalConfigError or
    TemporalCertificateError."""
    environ = os.environ if env is None else env
    profile = _profile(options, environ)
    address = options.address or profile.address or DEFAULT_ADDRESS
    api_key = options.api_key or profile.api_key
    tls_profile = _tls_overrides(profile.tls, options)
    tls: TLSConfig | bool = False
    client_cn = None
    if tls_profile is not None and tls_profile.disabled is not True:
        tls, client_cn = _tls_config(tls_profile, address)
    elif tls_profile is None and api_key:
        tls = True  # an API key implies TLS (the SDK's and the CLI's convention)
    if api_key and tls is False and not options.allow_insecure_api_key:
        raise TemporalConfigError(
            address,
            "an API key with TLS off (--no-tls, TEMPORAL_TLS=false) would cross the network in "
            "clear text: turn TLS on, or say --allow-insecure-api-key",
        )
    return Connection(
        address=address,
        namespace=options.namespace or profile.namespace or DEFAULT_NAMESPACE,
        tls=tls,
        api_key=api_key,
        rpc_metadata=dict(profile.grpc_meta),
        identity=identity(role, client_cn),
        client_cn=client_cn,
    )


def _profile(options: ConnectOptions, env: Mapping[str, str]) -> ClientConfigProfile:
    """The profile from the file, with the TEMPORAL_* variables applied."""
    config_file = options.config_file or (
        Path(env["TEMPORAL_CONFIG_FILE"]) if env.get("TEMPORAL_CONFIG_FILE") else None
    )
    # The SDK reads a named file that is not there as an empty one: fail instead of quietly
    # connecting to localhost.
    if config_file is not None and not config_file.is_file():
        raise TemporalConfigError(str(config_file), "no such file")
    try:
        return ClientConfigProfile.load(
            options.profile, config_source=config_file, override_env_vars=dict(env)
        )
    except RuntimeError as exc:  # the core's ConfigError: a TOML error, an unknown profile
        where = str(config_file) if config_file else "(the default profile file)"
        message = str(exc).removeprefix("Configuration loading error: ")
        raise TemporalConfigError(where, " ".join(message.split())) from exc


def _tls_overrides(tls: ClientConfigTLS | None, options: ConnectOptions) -> ClientConfigTLS | None:
    """The profile's TLS with the command line's over it, field by field; None when nothing
    asks for TLS."""
    given = (options.tls_ca_path, options.tls_cert_path, options.tls_key_path)
    if options.tls is None and options.tls_server_name is None and given == (None, None, None):
        return tls
    base = tls or ClientConfigTLS()
    return replace(
        base,
        disabled=base.disabled if options.tls is None else not options.tls,
        server_name=options.tls_server_name or base.server_name,
        server_root_ca_cert=options.tls_ca_path or base.server_root_ca_cert,
        client_cert=options.tls_cert_path or base.client_cert,
        client_private_key=options.tls_key_path or base.client_private_key,
    )


def _tls_config(tls: ClientConfigTLS, address: str) -> tuple[TLSConfig, str | None]:
    """The SDK's TLSConfig from files checked here, so a wrong one is named before connecting;
    and the client certificate's CN."""
    ca = _read(tls.server_root_ca_cert, "server CA certificate", address)
    cert = _read(tls.client_cert, "client certificate", address)
    key = _read(tls.client_private_key, "client key", address)
    if ca is not None:
        _certificates(ca, "server CA certificate", tls.server_root_ca_cert, address)
    client_cn = None
    if (cert is None) != (key is None):
        missing = "client key" if key is None else "client certificate"
        raise TemporalCertificateError(
            address, f"a client certificate and its key go together: no {missing} was given"
        )
    if cert is not None and key is not None:
        client_cn = _check_pair(cert, key, tls, address)
    config = TLSConfig(
        server_root_ca_cert=ca,
        domain=tls.server_name,
        client_cert=cert,
        client_private_key=key,
    )
    return config, client_cn


def _read(source: DataSource | None, what: str, address: str) -> bytes | None:
    if source is None:
        return None
    if isinstance(source, Path):
        try:
            return source.read_bytes()
        except OSError as exc:
            raise TemporalCertificateError(
                address, f"cannot read the {what} {source}: {exc.strerror or exc}"
            ) from None
    return source.encode() if isinstance(source, str) else source


def _where(source: DataSource | None) -> str:
    return f" {source}" if isinstance(source, Path) else " (given inline)"


def _certificates(
    data: bytes, what: str, source: DataSource | None, address: str
) -> list[x509.Certificate]:
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise TemporalCertificateError(
            address, f"the {what}{_where(source)} is not a PEM certificate"
        ) from None


def _check_pair(cert: bytes, key: bytes, tls: ClientConfigTLS, address: str) -> str | None:
    """The client certificate and key are PEM, belong together and the certificate is in date;
    returns its subject CN."""
    leaf = _certificates(cert, "client certificate", tls.client_cert, address)[0]
    try:
        private = serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError):  # TypeError: an encrypted key
        raise TemporalCertificateError(
            address,
            f"the client key{_where(tls.client_private_key)} is not an unencrypted PEM private key",
        ) from None
    spki = serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    if private.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
        raise TemporalCertificateError(
            address,
            f"the client key{_where(tls.client_private_key)} is not the key of the client "
            f"certificate{_where(tls.client_cert)}",
        )
    if leaf.not_valid_after_utc < datetime.now(UTC):
        raise TemporalCertificateError(
            address,
            f"the client certificate{_where(tls.client_cert)} expired on "
            f"{leaf.not_valid_after_utc:%Y-%m-%d %H:%M} UTC",
        )
    names = leaf.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else None


_DETAIL = re.compile(r'(?:message|error): "([^"]+)"')
_REFUSED_CODE = re.compile(r"code: (Unauthenticated|PermissionDenied), message: \"([^\"]*)\"")
_REFUSED_STATUS = (RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.PERMISSION_DENIED)
# rustls' words for what went wrong in the handshake, and ours.
_TLS_FAULTS = (
    (
        "UnknownIssuer",
        "the server's certificate is not signed by a CA this client trusts "
        "(--tls-ca-path, TEMPORAL_TLS_SERVER_CA_CERT_PATH)",
    ),
    (
        "NotValidForName",
        "the server's certificate is not for this name (--tls-server-name, "
        "TEMPORAL_TLS_SERVER_NAME)",
    ),
    ("Expired", "the server's certificate has expired"),
    ("InvalidContentType", "the server does not speak TLS (--no-tls, TEMPORAL_TLS=false)"),
    ("PrivateKeyParseError", "the client key is not a PEM private key"),
    ("InconsistentKeys", "the client key is not the client certificate's key"),
)
# A TLS 1.3 server refuses a client certificate after the client's side of the handshake
# completed: the client sees the connection close on its first request, in words that vary
# with the race.
_CLOSED = (
    "connection closed",
    "close_notify",
    "operation was canceled",
    "ConnectionReset",
    "BrokenPipe",
    "broken pipe",
)


def failure(exc: Exception, connection: Connection) -> TemporalConnectError:
    """The SDK's connect error, classified: credentials, TLS, else the address."""
    address = connection.address
    if isinstance(exc, RPCError) and exc.status in _REFUSED_STATUS:
        return TemporalAuthError(address, exc.message or exc.status.name)
    text = " ".join(str(exc).split()).removeprefix("Failed client connect: ")
    if refused := _REFUSED_CODE.search(text):
        return TemporalAuthError(address, refused.group(2) or refused.group(1))
    closed = any(word in text for word in _CLOSED)
    if connection.uses_tls:
        for marker, words in _TLS_FAULTS:
            if marker in text:
                return TemporalCertificateError(address, words)
        if closed:
            refusal = (
                f"it likely refused the client certificate CN={connection.client_cn}"
                if connection.client_cn
                else "no client certificate was given and it likely requires one "
                "(--tls-cert-path, TEMPORAL_TLS_CLIENT_CERT_PATH)"
            )
            return TemporalCertificateError(
                address, f"the server closed the connection after the handshake: {refusal}"
            )
    reason = _reason(text)
    if closed and not connection.uses_tls:
        reason += " (does the server want TLS? --tls, TEMPORAL_TLS=true)"
    return TemporalUnreachable(address, reason)


def _reason(text: str) -> str:
    """The words that matter in the core's error ("Connection refused", "failed to lookup
    address information: ..."), on one line."""
    details = _DETAIL.findall(text)
    return details[-1] if details else text or "connect failed"
