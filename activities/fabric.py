"""The controller's side of the fabric tests: their Jobs made, read and judged, removed once
passed (a failed test's Jobs stay for a person to look at, until their ttlSecondsAfterFinished).
No fabric seam (a cluster without it): each test is refused, and the workflow fails it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.errors import temporal_errors
from contract import activities as act
from remedy.core.errors import ActionRefused
from remedy.detection.probe.throughput import References, load_references
from remedy.scan.fabric import FabricCheck, FabricJobs, FabricRun, verdict_of


class FabricActivities:
    def __init__(self, jobs: FabricJobs | None, refs: References | None = None) -> None:
        self._jobs, self._refs = jobs, refs

    def _seam(self) -> FabricJobs:
        if self._jobs is None:
            raise ActionRefused("no fabric test Jobs configured: set the fabric test images")
        return self._jobs

    @act.START_FABRIC_TEST.defn
    def start_fabric_test(self, run: FabricRun) -> FabricRun:
        with temporal_errors():
            return self._seam().start(run)

    @act.FABRIC_TEST_CHECK.defn
    def fabric_test_check(self, run: FabricRun) -> FabricCheck:
        with temporal_errors():
            outcome = self._seam().outcome(run)
        refs = self._refs or load_references()
        return FabricCheck(run=run, verdict=verdict_of(run, outcome, refs))

    @act.REMOVE_FABRIC_TEST.defn
    def remove_fabric_test(self, run: FabricRun) -> None:
        with temporal_errors():
            self._seam().remove(run)

    def all(self) -> list[Callable[..., Any]]:
        return [self.start_fabric_test, self.fabric_test_check, self.remove_fabric_test]
