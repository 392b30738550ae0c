"""The exit codes every `remedy` command keeps, so a script can tell why a command stopped
(docs/operations.md, "Exit codes", lists them), and the click group that gives usage errors theirs.

0 done (or nothing left to do: "already stopped"); 1 bad input: a usage error (an unknown
option, a missing or malformed argument), a broken file, or a name the configuration does not
have (a pool, a runbook, a ``--state`` word); 2 nothing to act on, or refused: no such ladder,
node, guard or scan, or the workflow refused the request (nothing waits for approval, a rung
already passed, a breaker that is not tripped); 3 `status`: something needs a person (a
breaker tripped, a silence storm, a job held); 4 no connection: the Temporal server, its TLS,
the credentials or codec key it takes, or the Kubernetes API, could not be used. A few commands
keep their own on top (``probe``: 1 unhealthy; the controller: 3 when its worker stalled)."""

from __future__ import annotations

from typing import Any

from typer._click.core import Context
from typer._click.exceptions import UsageError  # typer parses with its own copy of click
from typer.core import TyperGroup

DONE = 0
BAD_INPUT = 1
NOTHING_TO_DO = 2
ATTENTION = 3
NO_CONNECTION = 4


class RemedyGroup(TyperGroup):
    """A click group whose usage errors (and those of every command and group under it) exit
    BAD_INPUT rather than click's 2, which `remedy` keeps for "nothing to act on"."""

    def make_context(self, *args: Any, **kwargs: Any) -> Context:
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            exc.exit_code = BAD_INPUT
            raise

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except UsageError as exc:  # a subcommand's arguments (parsed as it is invoked)
            exc.exit_code = BAD_INPUT
            raise
