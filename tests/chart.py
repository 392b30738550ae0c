"""The chart as the tests render it: ``helm template`` (.tools/bin/helm, `make tools`) with
values, as parsed objects by (kind, name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from workers.manifests import chart

Json = dict[str, Any]


def render(
    values: Json | None = None, *, namespace: str = chart.NAMESPACE, tmp: Path
) -> list[Json]:
    """The chart's objects for ``values`` (over its defaults); a missing helm fails the test
    saying how to install it, never skips it."""
    args: list[str] = []
    if values:
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        args = ["--values", str(path)]
    try:
        return chart.objects(chart.template(*args, namespace=namespace))
    except FileNotFoundError as missing:
        pytest.fail(f"{missing} (run make tools)")


def refusal(values: Json, *, tmp: Path) -> str:
    """helm's message when the chart refuses ``values``."""
    try:
        render(values, tmp=tmp)
    except ValueError as refused:
        return str(refused)
    raise AssertionError(f"the chart rendered {values}")


def named(docs: list[Json]) -> dict[tuple[str, str], Json]:
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}
