"""No traceback for bad input, anywhere in the CLI: every command, found in the typer app itself
(a command added later is swept too), run with no arguments, with empty ones, and with each
option empty and malformed in turn, against a server where nothing listens. Each must end in a
line of its own and an exit code (workers/cli/exits.py), never a Python exception."""

from __future__ import annotations

import asyncio
import typing
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from workers.cli import app

NOWHERE = "127.0.0.1:1"  # nothing listens: a command that gets as far as connecting says so
MALFORMED = {int: "twelve", float: "1e999x", Path: "/nonexistent/dir/file"}
ODD_TEXT = "bad\u202evalue:/ "  # a name with a bidi override, a colon, a slash and a space
# Options that would make a run do something else than fail: open a browser, serve forever on
# a real server, wait for input.
LEFT_OUT = {"--open", "--help", "--install-completion", "--show-completion"}


def commands() -> Iterator[tuple[list[str], typer.main.click.Command]]:  # type: ignore[name-defined]
    """Every leaf command of the app, with its path (`runbooks validate` is two words)."""
    root = typer.main.get_command(app)

    def walk(
        cmd: typer.main.click.Command,  # type: ignore[name-defined]
        path: list[str],
    ) -> Iterator[tuple[list[str], typer.main.click.Command]]:  # type: ignore[name-defined]
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd

    return walk(root, [])


COMMANDS = {" ".join(path): cmd for path, cmd in commands()}


def runs(path: list[str], cmd: typer.main.click.Command) -> Iterator[list[str]]:  # type: ignore[name-defined]
    """The bad inputs for one command: none at all, every argument empty, and each option empty
    then malformed (the arguments given as a name that is not there)."""
    arguments = [p for p in cmd.params if p.param_type_name == "argument"]
    options = [
        p
        for p in cmd.params
        if p.param_type_name == "option" and bool not in kinds(p) and not set(p.opts) & LEFT_OUT
    ]
    where = ["--address", NOWHERE] if any(p.opts[0] == "--address" for p in options) else []
    yield [*path, *where]
    # The options a run needs (`--runbook`, `--name`), given a plain value of their type.
    where += [arg for p in options if p.required for arg in (p.opts[0], plain(p))]
    yield [*path, *("" for _ in arguments), *where]
    yield [*path, *(malformed(a) for a in arguments), *where]
    names = [*path, *(plain(a) for a in arguments), *where]
    for option in options:
        if option.opts[0] == "--address":
            continue
        for value in ("", malformed(option)):
            yield [*names, option.opts[0], value]


def kinds(param: Any) -> set[Any]:
    """The types an option's annotation names (``int | None``: int and NoneType)."""
    annotation = param.type_descriptor.annotation
    return set(typing.get_args(annotation)) or {annotation}


# Required options given a value that lets the run go on to the arguments: a shipped runbook.
GOOD = {"runbook": "gpu-memory-ecc"}


def plain(param: Any) -> str:
    """A well-formed value no fleet has: a number for a number, a word for the rest."""
    return GOOD.get(param.name) or ("7" if kinds(param) & {int, float} else "x")


def malformed(option: Any) -> str:
    """A value of the wrong form for the option: a word for a number, a path that is not."""
    return next((MALFORMED[k] for k in kinds(option) if k in MALFORMED), ODD_TEXT)


# Commands that run the host's own tools (nvidia-smi, journalctl) when their input is good.
ON_THE_HOST = {"doctor"}


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=[pytest.mark.server] if name in ON_THE_HOST else [])
        for name in sorted(COMMANDS)
    ],
)
def test_bad_input_never_prints_a_traceback(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # `keys generate x` writes where it runs
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "TEMPORAL_ADDRESS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config, no Temporal profile
    for args in runs(name.split(), COMMANDS[name]):
        result = CliRunner().invoke(app, args)
        said = result.output
        assert "Traceback" not in said, (args, said)
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            args,
            repr(result.exception),
            said,
        )


# The commands that name something on the server, run against one: an empty or odd name must be
# refused as input, not taken apart by a workflow id, a model or the server.
NAMING = sorted(
    name
    for name, cmd in COMMANDS.items()
    if any(p.param_type_name == "argument" for p in cmd.params)
    and any(getattr(p, "opts", [""])[0] == "--address" for p in cmd.params)
)


@pytest.mark.timeout(300)
async def test_odd_names_are_refused_by_a_running_server_too(dev_env: WorkflowEnvironment) -> None:
    address = dev_env.client.service_client.config.target_host
    nobody = ["--task-queue", f"nobody-{uuid.uuid4().hex[:6]}"]  # nothing would run a ladder
    for name in NAMING:
        empty, odd = list(runs(name.split(), COMMANDS[name]))[1:3]
        for args in (empty, odd):
            args = [a if a != NOWHERE else address for a in args]
            if name == "trigger":
                args += nobody
            result = await asyncio.to_thread(CliRunner().invoke, app, args)
            assert "Traceback" not in result.output, (args, result.output)
            assert isinstance(result.exception, SystemExit), (args, repr(result.exception))
            assert result.exit_code != 0, (args, result.output)
