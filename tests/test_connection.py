"""How remedy resolves its Temporal connection (workers/connection.py): command-line options over
TEMPORAL_* variables over the profile file, the zero-configuration default, an API key's TLS,
the client's identity, and errors that name what failed. Through a real TLS server:
tests/test_temporal_tls.py."""

from __future__ import annotations

import getpass
import socket
from pathlib import Path

import pytest
import typer
from temporalio.service import RPCError, RPCStatusCode
from typer.testing import CliRunner

from workers.cli import app
from workers.cli.common import on_temporal
from workers.connection import (
    Connection,
    ConnectOptions,
    TemporalAuthError,
    TemporalConfigError,
    TemporalUnreachable,
    failure,
    identity,
    resolve,
)


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "temporal.toml"
    path.write_text(
        '[profile.default]\naddress = "file:7233"\nnamespace = "file-ns"\n'
        '[profile.default.tls]\nserver_name = "file-name"\n'
        '[profile.cloud]\naddress = "cloud:7233"\napi_key = "from-file"\n'
    )
    return path


def test_options_beat_variables_which_beat_the_profile_file(profile_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(profile_file)}
    from_file = resolve(ConnectOptions(), "cli", env)
    assert (from_file.address, from_file.namespace) == ("file:7233", "file-ns")

    env |= {"TEMPORAL_ADDRESS": "env:7233", "TEMPORAL_TLS_SERVER_NAME": "env-name"}
    from_env = resolve(ConnectOptions(), "cli", env)
    assert (from_env.address, from_env.namespace) == ("env:7233", "file-ns")

    given = ConnectOptions(address="option:7233", namespace="option-ns", tls_server_name="opt")
    from_options = resolve(given, "cli", env)
    assert (from_options.address, from_options.namespace) == ("option:7233", "option-ns")
    # TLS settings merge field by field: the profile's [tls] turned TLS on.
    names = [c.tls.domain for c in (from_file, from_env, from_options) if c.tls is not True]
    assert names == ["file-name", "env-name", "opt"]


def test_the_profile_is_chosen_by_option_over_variable(profile_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(profile_file), "TEMPORAL_PROFILE": "cloud"}
    assert resolve(ConnectOptions(), "cli", env).address == "cloud:7233"
    assert resolve(ConnectOptions(profile="default"), "cli", env).address == "file:7233"


def test_with_nothing_configured_it_is_the_local_dev_server(tmp_path: Path) -> None:
    empty = tmp_path / "none.toml"
    empty.write_text("")
    connection = resolve(ConnectOptions(), "controller", {"TEMPORAL_CONFIG_FILE": str(empty)})
    assert connection == Connection(
        address="localhost:7233",
        namespace="default",
        tls=False,
        identity=identity("controller"),
    )


def test_an_api_key_implies_tls_unless_tls_is_turned_off(profile_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(profile_file), "TEMPORAL_PROFILE": "cloud"}
    cloud = resolve(ConnectOptions(), "cli", env)
    assert (cloud.api_key, cloud.tls) == ("from-file", True)
    assert resolve(ConnectOptions(api_key="given"), "cli", env).api_key == "given"
    insecure = ConnectOptions(tls=False, allow_insecure_api_key=True)
    assert resolve(insecure, "cli", env).tls is False
    plain = ConnectOptions(allow_insecure_api_key=True)
    assert resolve(plain, "cli", env | {"TEMPORAL_TLS": "false"}).tls is False
    for refused in ({"TEMPORAL_TLS": "false"}, {}):  # never the key in clear by accident
        options = ConnectOptions(tls=False if not refused else None)
        with pytest.raises(TemporalConfigError, match="--allow-insecure-api-key"):
            resolve(options, "cli", env | refused)


def test_the_identity_names_the_role_the_user_the_host_and_the_certificate() -> None:
    who = f"{getpass.getuser()}@{socket.gethostname()}"
    assert identity("agent") == f"remedy-agent:{who}"
    assert identity("cli", "alice") == f"remedy-cli:{who} [CN=alice]"


def test_a_missing_profile_or_file_is_one_line_and_exit_4(
    tmp_path: Path, profile_file: Path
) -> None:
    runner = CliRunner(env={"TEMPORAL_CONFIG_FILE": str(profile_file)})
    unknown = runner.invoke(app, ["--profile", "nope", "show", "n1"])
    assert unknown.stderr.splitlines() == [
        f"error: Temporal client configuration {profile_file}: Profile 'nope' not found"
    ]
    missing = runner.invoke(app, ["--config-file", str(tmp_path / "gone.toml"), "show", "n1"])
    assert missing.stderr.splitlines() == [
        f"error: Temporal client configuration {tmp_path / 'gone.toml'}: no such file"
    ]
    assert (unknown.exit_code, missing.exit_code) == (4, 4)


def test_credentials_the_server_refuses_are_an_auth_error() -> None:
    cloud = Connection(address="ns.a1b2c.tmprl.cloud:7233", tls=True, api_key="expired")
    refused = RPCError("Request unauthorized.", RPCStatusCode.UNAUTHENTICATED, b"")
    assert isinstance(failure(refused, cloud), TemporalAuthError)
    assert str(failure(refused, cloud)) == (
        "Temporal at ns.a1b2c.tmprl.cloud:7233: refused the credentials: Request unauthorized."
    )
    # The core's words when the check at connect time is refused.
    core = RuntimeError(
        "Failed client connect: `get_system_info` call error after connection: Status { code: "
        'PermissionDenied, message: "Request unauthorized.", metadata: MetadataMap {} }'
    )
    assert isinstance(failure(core, cloud), TemporalAuthError)
    nobody = failure(RuntimeError("Connection refused"), cloud)
    assert type(nobody) is TemporalUnreachable


def test_a_call_refused_for_the_credentials_is_one_line_and_exit_4(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async def denied() -> None:
        raise RPCError("namespace access denied", RPCStatusCode.PERMISSION_DENIED, b"")

    with pytest.raises(typer.Exit) as exited:
        on_temporal(denied())
    assert exited.value.exit_code == 4
    assert capsys.readouterr().err.splitlines() == [
        "error: Temporal refused the credentials: namespace access denied"
    ]
