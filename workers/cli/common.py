"""What several commands share: loading runbooks and rules or exiting, running against Temporal
with one error for a server it cannot reach, and serving until Ctrl-C."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from remedy.runbook import Runbook, RunbookError, RunbookSet, load_runbooks
from workers.cli.exits import BAD_INPUT, NO_CONNECTION

if TYPE_CHECKING:
    from remedy.attribution.rules import Attributor
    from remedy.redaction import Redactor

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def runbooks_or_exit(*folders: Path) -> RunbookSet:
    """The runbooks, all or nothing: a broken one is FILE:LINE: FIELD lines and exit 1."""
    try:
        return RunbookSet(load_runbooks(list(folders)))
    except RunbookError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        raise typer.Exit(BAD_INPUT) from None


def runbook_or_exit(folder: Path, name: str) -> Runbook:
    """One runbook by name: exit 1 (bad input) when a runbook is broken or none has that name."""
    try:
        return runbooks_or_exit(folder).get(name)
    except KeyError as exc:
        typer.echo(f"error: {exc.args[0]}", err=True)
        raise typer.Exit(BAD_INPUT) from None


def attributor_or_exit(rules: Path | None) -> Attributor:
    """The attribution rules, all or nothing: a broken file is FILE:LINE: FIELD lines, exit 1."""
    from remedy.attribution.rules import Attributor, RulesError, load_rules

    try:
        return Attributor(load_rules(rules) if rules else None)
    except RulesError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(BAD_INPUT) from None


def redactor_or_exit(patterns: Path | None) -> Redactor:
    """The default redaction rules with the file's: a broken file is FILE:LINE: FIELD lines,
    exit 1."""
    from remedy.redaction import RedactionError, load_redactor

    try:
        return load_redactor(patterns)
    except RedactionError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(BAD_INPUT) from None


def settings_or_exit(model: type[M], flags: Mapping[str, str] | None = None, /, **values: Any) -> M:
    """``model`` made from flags' ``values``; each problem is one line naming its flag (the
    field's name, else ``flags``'), ``error: --FLAG: why`` (a file's flag with its path), and
    exit 1. A problem across fields names its field first: ``FIELD: why``."""
    try:
        return model(**values)
    except ValidationError as exc:
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            why = error["msg"].removeprefix("Value error, ")
            if not field:
                field, _, why = why.partition(": ")
            flag = "--" + (flags or {}).get(field, field).replace("_", "-")
            if isinstance(error.get("input"), Path):
                flag = f"{flag} {error['input']}"
            typer.echo(f"error: {flag}: {why}", err=True)
        raise typer.Exit(BAD_INPUT) from None


def on_temporal(main: Coroutine[Any, Any, T]) -> T:
    """Run what a command does against Temporal. Every command that connects goes through here
    (or serve): a connection that fails is one line naming what failed, e.g. ``error: cannot
    reach Temporal at ADDRESS: reason`` or ``error: TLS with Temporal at ADDRESS: reason``, and
    exit 4, as is a provider's API it cannot use (a kubeconfig that does not load), a call the
    server refuses for the credentials, and a payload this process's codec key cannot open (a
    wrong key file, or none); what the command itself catches (RPCError: "not found") it still
    says in its own words. Exit 4: no connection (exits.py)."""
    from temporalio.service import RPCError, RPCStatusCode

    from workers.codec import codec_problem
    from workers.connection import TemporalConnectError
    from workers.providers.parts import ProviderUnreachable

    try:
        return asyncio.run(main)
    except (TemporalConnectError, ProviderUnreachable) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(NO_CONNECTION) from None
    except (KeyError, ValueError, RuntimeError) as exc:  # a payload this process cannot open
        if (problem := codec_problem(exc)) is None:
            raise
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(NO_CONNECTION) from None
    except RPCError as exc:  # credentials the server refused on a later call, not "not found"
        if exc.status is RPCStatusCode.UNAVAILABLE:  # the server went away after the connect
            typer.echo(f"error: lost Temporal: {exc.message}", err=True)
        elif exc.status in (RPCStatusCode.UNAUTHENTICATED, RPCStatusCode.PERMISSION_DENIED):
            typer.echo(f"error: Temporal refused the credentials: {exc.message}", err=True)
        else:
            raise
        raise typer.Exit(NO_CONNECTION) from None


def serve(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a long-lived process (agent, controller) until Ctrl-C, logging to stderr; a
    Temporal server it cannot reach at start-up is one line and exit 4 (see on_temporal)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    try:
        on_temporal(main())
    except KeyboardInterrupt:
        pass
