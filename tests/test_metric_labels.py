"""Each metric is recorded as declared (contract/metrics.py): every function of
workflows/metrics.py, called through a meter that notes what it is asked, creates the declared
kind and records the declared labels, no more and no fewer. The agent's metrics and the real
exporter's names are checked on a real scrape (tests/test_metrics.py)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from contract import metrics as metric
from workflows import metrics

KIND_OF_CREATE = {
    "create_counter": "counter",
    "create_gauge": "gauge",
    "create_gauge_float": "gauge",
    "create_histogram": "histogram",
    "create_histogram_float": "histogram",
}
DUMMY: dict[str, Any] = {
    "str": "x",
    "int": 2,
    "float": 1.5,
    "bool": True,
    "Mapping[str, int]": {"healthy": 3},
}


class Recorded:
    def __init__(self) -> None:
        self.created: dict[str, str] = {}  # name → kind
        self.labels: dict[str, set[tuple[str, ...]]] = {}  # name → label sets recorded

    def instrument(self, kind: str, name: str) -> Any:
        self.created[name] = kind

        def record(_value: float, labels: Mapping[str, str] | None = None) -> None:
            self.labels.setdefault(name, set()).add(tuple(sorted(labels or {})))

        return SimpleNamespace(add=record, set=record, record=record)


class Meter:
    def __init__(self, into: Recorded) -> None:
        self._into = into

    def __getattr__(self, create: str) -> Callable[..., Any]:
        kind = KIND_OF_CREATE[create]
        return lambda name, *_: self._into.instrument(kind, name)


def _functions() -> list[Callable[..., None]]:
    return [
        f
        for name, f in vars(metrics).items()
        if inspect.isfunction(f) and f.__module__ == metrics.__name__ and not name.startswith("_")
    ]


def _call(f: Callable[..., None]) -> None:
    params = inspect.signature(f).parameters.values()
    f(*(DUMMY[str(p.annotation)] for p in params))


def _mismatches(recorded: Recorded) -> list[str]:
    """What was created or recorded other than as declared."""
    by_name = {m.name: m for m in metric.declared()}
    wrong = []
    for name, kind in recorded.created.items():
        declared = by_name[name]
        if kind != declared.kind:
            wrong.append(f"{name}: created as a {kind}, declared a {declared.kind}")
        if recorded.labels.get(name) != {tuple(sorted(declared.labels))}:
            wrong.append(f"{name}: labels {recorded.labels.get(name)}, declared {declared.labels}")
    return wrong


@pytest.mark.parametrize("f", _functions(), ids=lambda f: f.__name__)
def test_each_recording_has_its_declared_kind_and_labels(
    f: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = Recorded()
    monkeypatch.setattr(metrics.workflow, "metric_meter", lambda: Meter(recorded))
    _call(f)
    assert recorded.created, f"{f.__name__} records nothing"
    assert _mismatches(recorded) == []


def test_every_controller_metric_is_recorded_somewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = Recorded()
    monkeypatch.setattr(metrics.workflow, "metric_meter", lambda: Meter(recorded))
    for f in _functions():
        _call(f)
    agents = {
        metric.PROBES,
        metric.PROBE_DURATION,
        metric.FINDINGS_REPORTED,
        metric.FINDINGS_FOLDED,
        metric.DEPENDENCY_OK,
    }
    assert {m.name for m in metric.declared() if m not in agents} == set(recorded.created)


def test_a_wrong_label_or_kind_is_caught() -> None:
    """The check itself: a label the declaration lacks, or another kind, does not pass."""
    recorded = Recorded()
    Meter(recorded).create_counter(*metric.NODES_CORDONED.args).add(1, {"node": "a"})
    Meter(recorded).create_counter(*metric.CORDONS_HELD.args).add(1, {"pool": "a"})
    assert _mismatches(recorded) == [
        "remedy_nodes_cordoned: labels {('node',)}, declared ('pool',)",
        "remedy_cordons_held: created as a counter, declared a gauge",
    ]


def test_exposed_names_follow_the_exporter() -> None:
    assert metric.exposed(metric.REMEDIATIONS) == ("remedy_remediations_total",)
    assert metric.exposed(metric.STORM_BREAKER_TRIPPED) == ("remedy_storm_breaker_tripped",)
    assert metric.exposed(metric.RUNG_DURATION) == (
        "remedy_rung_duration_bucket",
        "remedy_rung_duration_sum",
        "remedy_rung_duration_count",
    )
