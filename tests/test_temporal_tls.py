"""remedy through mutual TLS: a TLS-terminating forwarder (tests/tls_proxy.py) in front of the
session's dev server requires a client certificate from a certificate authority made here.
remedy connects with the certificate — given as options, as TEMPORAL_* variables, as a profile
— and refuses without it (or with another CA's) in one line, exit 4."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from contract.names import remediation_workflow_id
from tests.processes import Children
from tests.tls_proxy import mtls_server_context, tls_forwarder
from workers.cli import app
from workers.connection import identity

REMEDY = str(Path(sys.executable).parent / "remedy")


@dataclass(frozen=True)
class Pki:
    ca: Path
    cert: Path  # the client's, CN=alice, from the CA the server trusts
    key: Path
    stranger_cert: Path  # CN=mallory, from another CA
    stranger_key: Path
    server_cert: Path
    server_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    ca, other = trustme.CA(), trustme.CA()
    files: dict[str, Path] = {}
    issued = {
        "server": ca.issue_cert("localhost", "127.0.0.1"),
        "client": ca.issue_cert("alice@example.com", common_name="alice"),
        "stranger": other.issue_cert("mallory@example.com", common_name="mallory"),
    }
    for name, cert in issued.items():
        files[f"{name}.pem"] = folder / f"{name}.pem"
        files[f"{name}.key"] = folder / f"{name}.key"
        cert.cert_chain_pems[0].write_to_path(str(files[f"{name}.pem"]))
        cert.private_key_pem.write_to_path(str(files[f"{name}.key"]))
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    return Pki(
        ca=folder / "ca.pem",
        cert=files["client.pem"],
        key=files["client.key"],
        stranger_cert=files["stranger.pem"],
        stranger_key=files["stranger.key"],
        server_cert=files["server.pem"],
        server_key=files["server.key"],
    )


@pytest.fixture(scope="module")
async def proxy(dev_env: WorkflowEnvironment, pki: Pki) -> AsyncIterator[str]:
    """host:port of an mTLS-only Temporal: the dev server behind the forwarder."""
    context = mtls_server_context(str(pki.server_cert), str(pki.server_key), str(pki.ca))
    async with tls_forwarder(dev_env.client.service_client.config.target_host, context) as at:
        yield at


async def cli(*args: str) -> tuple[int, str, str]:
    # The command runs its own event loop: keep it off this one (the forwarder's).
    result = await asyncio.to_thread(CliRunner().invoke, app, list(args))
    return result.exit_code, result.stdout, result.stderr


async def run(
    processes: Children, *args: str, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """`remedy` as a process: what an operator's shell sees."""
    done = await asyncio.to_thread(
        processes.run, [REMEDY, *args], timeout=60, env={**os.environ, **(env or {})}
    )
    return done.returncode, done.stdout, done.stderr


def trigger(node: str, queue: str) -> list[str]:
    """A write through the proxy: start (or join) the node's remediation, on a queue no worker
    polls (the workflow waits; the test ends it)."""
    return ["trigger", node, "--runbook", "gpu-memory-ecc", "--task-queue", queue]


@pytest.fixture
async def node(dev_env: WorkflowEnvironment) -> AsyncIterator[str]:
    name = f"tls-{uuid.uuid4().hex[:8]}"
    yield name
    handle: WorkflowHandle[object, object] = dev_env.client.get_workflow_handle(
        remediation_workflow_id(name)
    )
    with contextlib.suppress(RPCError):  # a test that failed before starting it
        await handle.terminate("test over")


async def callers(client: Client, node: str) -> list[str]:
    """The identity of who started the node's workflow and of each who signalled it."""
    history = await client.get_workflow_handle(remediation_workflow_id(node)).fetch_history()
    started = history.events[0].workflow_execution_started_event_attributes.identity
    signals = [
        e.workflow_execution_signaled_event_attributes.identity
        for e in history.events
        if e.HasField("workflow_execution_signaled_event_attributes")
    ]
    return [started, *signals]


async def test_remedy_connects_with_the_client_certificate_from_options_env_and_profile(
    dev_env: WorkflowEnvironment,
    proxy: str,
    pki: Pki,
    node: str,
    tmp_path: Path,
    processes: Children,
) -> None:
    queue = f"tls-{node}"
    tls = ["--tls-ca-path", str(pki.ca), "--tls-cert-path", str(pki.cert)]
    tls += ["--tls-key-path", str(pki.key)]
    by_options = await cli(*tls, *trigger(node, queue), "--address", proxy)
    assert by_options[0] == 0, by_options
    assert remediation_workflow_id(node) in by_options[1]

    # The long-lived processes' way (deploy/ sets these from a Secret), in a real process.
    by_env = await run(
        processes,
        *trigger(node, queue),
        env={
            "TEMPORAL_ADDRESS": proxy,
            "TEMPORAL_NAMESPACE": "default",
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki.ca),
            "TEMPORAL_TLS_CLIENT_CERT_PATH": str(pki.cert),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pki.key),
            "TEMPORAL_API_KEY": "sent-and-ignored-by-the-dev-server",
        },
    )
    assert by_env[0] == 0, by_env

    profile = tmp_path / "temporal.toml"
    profile.write_text(
        f'[profile.secure]\naddress = "{proxy}"\nnamespace = "default"\n'
        f'[profile.secure.tls]\nserver_ca_cert_path = "{pki.ca}"\n'
        f'client_cert_path = "{pki.cert}"\nclient_key_path = "{pki.key}"\n'
    )
    in_profile = ["--config-file", str(profile), "--profile", "secure"]
    by_profile = await cli(*in_profile, *trigger(node, queue))
    assert by_profile[0] == 0, by_profile

    # Each call is on the record as remedy's command line, with the certificate's name.
    assert await callers(dev_env.client, node) == [identity("cli", "alice")] * 4


async def test_without_a_client_certificate_remedy_refuses_in_one_line(
    proxy: str, pki: Pki, processes: Children
) -> None:
    show = ["--tls-ca-path", str(pki.ca), "show", "any", "--address", proxy]
    code, out, err = await run(processes, *show)
    assert "Traceback" not in err, err
    [line] = err.splitlines()
    assert line == (
        f"error: TLS with Temporal at {proxy}: the server closed the connection after the "
        "handshake: no client certificate was given and it likely requires one "
        "(--tls-cert-path, TEMPORAL_TLS_CLIENT_CERT_PATH)"
    )
    assert code == 4


async def test_a_certificate_from_another_authority_is_refused_by_name(
    proxy: str, pki: Pki
) -> None:
    tls = ["--tls-ca-path", str(pki.ca), "--tls-cert-path", str(pki.stranger_cert)]
    tls += ["--tls-key-path", str(pki.stranger_key)]
    code, _, err = await cli(*tls, "show", "any", "--address", proxy)
    assert err.splitlines() == [
        f"error: TLS with Temporal at {proxy}: the server closed the connection after the "
        "handshake: it likely refused the client certificate CN=mallory"
    ]
    assert code == 4


async def test_a_server_certificate_from_an_untrusted_authority_is_named(
    proxy: str, pki: Pki
) -> None:
    """No --tls-ca-path: the system's roots do not know the test's CA."""
    tls = ["--tls-cert-path", str(pki.cert), "--tls-key-path", str(pki.key)]
    code, _, err = await cli(*tls, "show", "any", "--address", proxy)
    assert err.splitlines() == [
        f"error: TLS with Temporal at {proxy}: the server's certificate is not signed by a CA "
        "this client trusts (--tls-ca-path, TEMPORAL_TLS_SERVER_CA_CERT_PATH)"
    ]
    assert code == 4


@pytest.mark.parametrize(
    ("cert", "key", "problem"),
    [
        (
            "missing.pem",
            "client.key",
            "cannot read the client certificate {dir}/missing.pem: No such file or directory",
        ),
        (
            "garbage.pem",
            "client.key",
            "the client certificate {dir}/garbage.pem is not a PEM certificate",
        ),
        (
            "client.pem",
            "garbage.pem",
            "the client key {dir}/garbage.pem is not an unencrypted PEM private key",
        ),
        (
            "client.pem",
            "stranger.key",
            "the client key {dir}/stranger.key is not the key of the "
            "client certificate {dir}/client.pem",
        ),
        (
            "client.pem",
            None,
            "a client certificate and its key go together: no client key was given",
        ),
    ],
)
async def test_a_bad_certificate_file_is_named_before_connecting(
    pki: Pki, cert: str, key: str | None, problem: str
) -> None:
    folder = pki.cert.parent
    (folder / "garbage.pem").write_text("not a certificate\n")
    tls = ["--tls-cert-path", str(folder / cert)]
    tls += ["--tls-key-path", str(folder / key)] if key else []
    # Nothing listens there: the files are checked first.
    code, _, err = await cli(*tls, "show", "any", "--address", "127.0.0.1:1")
    assert err.splitlines() == [
        f"error: TLS with Temporal at 127.0.0.1:1: {problem.format(dir=folder)}"
    ]
    assert code == 4


async def test_the_long_lived_processes_take_the_manifests_variables(
    pki: Pki, tmp_path: Path, processes: Children
) -> None:
    """The controller and the agent read TEMPORAL_ADDRESS and TEMPORAL_TLS_* (deploy/ sets
    them from a Secret): a certificate path that is not there is named, with that address."""
    kubeconfig = tmp_path / "kubeconfig"  # loaded, never reached: Temporal comes first
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    env = {
        "TEMPORAL_ADDRESS": "temporal.example:7233",
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "gone.pem"),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pki.key),
    }
    runs = await asyncio.gather(
        run(processes, "agent", "--node", "gpu-node-1", env=env),
        run(processes, "controller", "--kubeconfig", str(kubeconfig), env=env),
    )
    for code, _, err in runs:
        assert err.splitlines() == [
            "error: TLS with Temporal at temporal.example:7233: cannot read the client "
            f"certificate {tmp_path / 'gone.pem'}: No such file or directory"
        ]
        assert code == 4
