"""The active checks' options (`remedy controller`, `remedy demo`): how often each pool is
looked at, when an idle node is checked and when a busy one is taken out, per pool."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, NoReturn

import typer

from remedy.core.durations import parse_duration
from remedy.disruption.budget import allowed_disruptions
from remedy.scan.active_checks import ActiveCheckPolicy
from remedy.scan.fabric import FabricPolicy
from workers.cli.exits import BAD_INPUT

EveryOption = Annotated[
    str,
    typer.Option(
        "--active-check-every",
        help="How often each pool's active checks run (a Temporal Schedule per pool); "
        "0: no active checks.",
    ),
]
IntervalOption = Annotated[
    str,
    typer.Option(
        "--active-check-interval",
        help="An idle node (no GPU pods) gets the deep diagnose once its last check is older.",
    ),
]
MaxAgeOption = Annotated[
    str,
    typer.Option(
        "--active-check-max-age",
        help="A busy node not checked for this long is taken out for its check, under the "
        "pool's disruption budget.",
    ),
]
IdleAtOnceOption = Annotated[
    str | None,
    typer.Option(
        "--active-check-idle-at-once",
        help="How many idle nodes of a pool are cordoned for their check at once (a count, a "
        "share such as 20%, or all-but-N; at least 1); the rest wait for the next round. "
        "Default: --max-disruption.",
    ),
]
PoolOption = Annotated[
    list[str] | None,
    typer.Option(
        "--active-check-pool",
        help="POOL=INTERVAL/MAX_AGE for one pool, e.g. training=12h/3d (repeatable).",
    ),
]


def active_check_policies(
    every: str,
    interval: str,
    max_age: str,
    pools: list[str] | None,
    idle_at_once: str = "20%",
    fabric: FabricPolicy | None = None,
) -> tuple[ActiveCheckPolicy, dict[str, ActiveCheckPolicy]] | None:
    """The default policy and the per-pool ones; None when active checks are off. Bad input
    is one line naming the option, and exit 1 (bad input)."""
    period = _duration("--active-check-every", every)
    if not period:
        return None
    try:
        allowed_disruptions(idle_at_once, 1)
    except ValueError as exc:
        _fail("--active-check-idle-at-once", exc)
    try:
        default = ActiveCheckPolicy(
            every=period,
            interval=_duration("--active-check-interval", interval),
            max_age=_duration("--active-check-max-age", max_age),
            idle_at_once=idle_at_once,
            fabric=fabric or FabricPolicy(),
        )
    except ValueError as exc:  # pydantic's ValidationError is one too: a zero duration
        _fail("--active-check-interval/--active-check-max-age", exc)
    per_pool = {}
    for spec in pools or []:
        try:
            pool, _, ages = spec.partition("=")
            pool_interval, sep, pool_max_age = ages.partition("/")
            if not pool or not sep:
                raise ValueError(f"{spec!r}: use POOL=INTERVAL/MAX_AGE, e.g. training=12h/3d")
            per_pool[pool] = ActiveCheckPolicy(
                every=default.every,
                interval=parse_duration(pool_interval),
                max_age=parse_duration(pool_max_age),
                idle_at_once=default.idle_at_once,
                fabric=default.fabric,
            )
        except ValueError as exc:
            _fail("--active-check-pool", exc)
    return default, per_pool


def _duration(option: str, value: str) -> timedelta:
    try:
        return timedelta(0) if value.strip() == "0" else parse_duration(value)
    except ValueError as exc:
        _fail(option, exc)


def _fail(option: str, exc: ValueError) -> NoReturn:
    typer.echo(f"error: {option}: {str(exc).splitlines()[0]}", err=True)
    raise typer.Exit(BAD_INPUT) from None
