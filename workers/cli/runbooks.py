"""`remedy runbooks`: validate, explain and rehearse runbooks, and print their JSON Schema."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from remedy.runbook import RunbookError
from remedy.runbook.advice import disagreements
from remedy.runbook.loader import load_runbook_sources
from remedy.xid import load_catalog
from workers.cli.common import runbook_or_exit, runbooks_or_exit
from workers.cli.exits import BAD_INPUT
from workers.flags.options import DEFAULT_RUNBOOKS, JsonOption, RunbooksOption
from workers.providers.sim import FAULTS

app = typer.Typer(help="Author and check runbooks.", no_args_is_help=True)

NameArgument = Annotated[str, typer.Argument(help="The runbook's name.")]


@app.command("validate")
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Runbook files or folders.")],
    strict: Annotated[
        bool, typer.Option("--strict", help="Exit 1 when there is any warning, too.")
    ] = False,
) -> None:
    """Check runbooks: exit 0 when all are valid, else one FILE:LINE: FIELD: message per error
    and exit 1. Warnings (a disruptive rung with no approval for a fault that passes by itself,
    an empty ladder that does next to nothing, two runbooks that match a finding alike, a ladder
    against NVIDIA's advice) go to stderr and leave the exit at 0, or make it 1 with --strict."""
    from remedy.runbook.lint import lint

    try:
        sources = load_runbook_sources(paths)
    except RunbookError as exc:
        for problem in exc.problems:
            typer.echo(str(problem), err=True)
        if len(exc.problems) > 1:  # one problem is one line; exit 1 says nothing loaded
            typer.echo(f"{len(exc.problems)} problems; nothing loaded", err=True)
        raise typer.Exit(1) from None
    catalog = load_catalog()
    warnings = [str(w) for w in lint(sources)]
    for source in sources:
        runbook = source.runbook
        ladder = " → ".join(r.action.value for r in runbook.ladder) or "hold for a human"
        typer.echo(f"ok  {runbook.name}: {ladder}")
        # Valid, but not what NVIDIA does first for the Xids it matches: say so, do not refuse.
        warnings += disagreements(runbook, catalog)
    for line in warnings:
        typer.echo(f"warning: {line}", err=True)
    if strict and warnings:
        typer.echo(f"{len(warnings)} warnings (--strict)", err=True)
        raise typer.Exit(1)


@app.command("explain")
def explain(
    name: NameArgument,
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
) -> None:
    """The ladder in plain words: what happens when, and the latest each rung can start."""
    from remedy.runbook.explain import explain as explain_runbook

    typer.echo("\n".join(explain_runbook(runbook_or_exit(runbooks, name))))


@app.command("rehearse")
def rehearse(
    name: NameArgument,
    fault: Annotated[
        str | None,
        typer.Option(
            help="The simulated fault that is really there (it decides which rung fixes the node):"
            f" one of {', '.join(FAULTS)}, or none. Default: one the runbook matches."
        ),
    ] = None,
    approve: Annotated[
        bool,
        typer.Option(
            help="Give every approval the moment it is asked; --no-approve lets them time out."
        ),
    ] = True,
    gpu: Annotated[int, typer.Option(min=0, max=7, help="The faulty GPU.")] = 0,
    runbooks: RunbooksOption = DEFAULT_RUNBOOKS,
    as_json: JsonOption = False,
) -> None:
    """Climb the runbook for real on Temporal's time-skipping server against one simulated
    node, and print the timeline it produces (hours of workflow time in about a second)."""
    from workers.rehearse import RehearsalStuck, timeline
    from workers.rehearse import rehearse as run_rehearsal

    chosen = runbook_or_exit(runbooks, name)
    others = runbooks_or_exit(runbooks) if chosen.proves else None
    try:
        done = asyncio.run(run_rehearsal(chosen, fault, approve=approve, gpu=gpu, others=others))
    except KeyError as exc:
        typer.echo(f"error: --fault: {exc.args[0]}", err=True)
        raise typer.Exit(BAD_INPUT) from None
    except RehearsalStuck as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(done.model_dump_json(indent=2) if as_json else "\n".join(timeline(done)))


@app.command("schema")
def schema() -> None:
    """The runbook format as JSON Schema, for editor completion and checks. Save it and point
    the YAML language server at it: `# yaml-language-server: $schema=runbook.schema.json`."""
    import json

    from remedy.runbook.schema import json_schema

    typer.echo(json.dumps(json_schema(), indent=2))
