"""Event reasons and metric names are declared once (remedy/core/events.py, contract/metrics.py):
no product module writes one as a literal, and no adapter writes an Event reason of its own."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from contract import metrics
from remedy.core.events import EventReason

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ["remedy", "contract", "workflows", "activities", "workers", "adapters", "twin", "chaos"]
DECLARED_IN = {ROOT / "remedy/core/events.py", ROOT / "contract/metrics.py"}
REASON_SHAPED = re.compile(r"Remedy[A-Z][A-Za-z]+")


def _strings(package: str) -> Iterator[tuple[Path, int, str]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        if path in DECLARED_IN:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield path, node.lineno, node.value


def written_again() -> list[str]:
    """``path:line value`` of each declared reason or metric name written as a literal, and of
    each reason-shaped literal in an adapter."""
    names = {m.name for m in vars(metrics).values() if isinstance(m, metrics.Metric)}
    declared = names | {r.value for r in EventReason}
    found = []
    for package in PRODUCT:
        for path, line, text in _strings(package):
            own = package == "adapters" and REASON_SHAPED.fullmatch(text)
            if text in declared or own:
                found.append(f"{path.relative_to(ROOT)}:{line} {text}")
    return found


def test_reasons_and_metric_names_are_written_once() -> None:
    assert written_again() == []


def test_every_metric_is_declared_once() -> None:
    declared = [m for m in vars(metrics).values() if isinstance(m, metrics.Metric)]
    assert len({m.name for m in declared}) == len(declared) > 0
    assert all(m.name.startswith("remedy_") for m in declared)
