"""The processes' command lines as typed models: each flag a field, declared once with its
click option (name, help, default), so that `remedy agent`'s own parse and the manifests' check
of an agent's DaemonSet (workers/manifests) read the same declaration. ``command`` makes a
model a command whose body gets the model; ``parse`` reads a command line into its fields.
options.py declares the options several commands share."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import typer
from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)


def command(model: type[M], run: Callable[[M], None], name: str = "") -> Callable[..., None]:
    """A typer command taking ``model``'s fields as its options, in their order, that calls
    ``run`` with them: ``run``'s docstring is its help, ``name`` (default: ``run``'s) its
    name."""
    hints = typing.get_type_hints(model, include_extras=True)
    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if field.is_required() else field.default,
            annotation=hints[name],
        )
        for name, field in model.model_fields.items()
    ]

    def body(**values: Any) -> None:
        run(model(**values))

    body.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    body.__annotations__ = {p.name: p.annotation for p in params}
    body.__name__ = body.__qualname__ = name or run.__name__
    body.__doc__ = run.__doc__
    return body


def parse(model: type[BaseModel], args: list[str], name: str = "command") -> Mapping[str, Any]:
    """The options ``args`` give ``model``'s command, defaults included, by field name (a
    usage error for a flag it lacks)."""
    one = typer.Typer()
    one.command(name)(command(model, lambda _: None))
    return dict(typer.main.get_command(one).make_context(name, list(args)).params)
