"""Deep diagnose: the probe, then sustained load on the GPUs. A GPU can answer every status
query and still fail the moment a job allocates memory; only load finds that."""

from __future__ import annotations

import re

from remedy.host import NodeHost
from remedy.models import Component, ComponentKind, Finding, ProbeReport, Severity
from remedy.probe.runner import ProbeConfig, probe_node

_GPU_LINE = re.compile(r"^GPU (\d+):")


def _blamed(problem: str, gpus: list[Component]) -> Component:
    """The GPU a load-test line names ("GPU 3: ..."), with its identity from the inventory;
    the whole node when it names none."""
    match = _GPU_LINE.match(problem)
    if match is None:
        return Component(kind=ComponentKind.NODE)
    index = int(match[1])
    known = next((g for g in gpus if g.index == index), None)
    return known or Component(kind=ComponentKind.GPU, index=index)


def deep_diagnose(host: NodeHost, gpus: list[int], config: ProbeConfig) -> ProbeReport:
    report = probe_node(host.name, host.nvml(), config)
    if not report.checks_run:
        return report  # the probe could not run: already unhealthy, load adds nothing
    problems = host.load_test(gpus)
    now = report.started_at
    load_findings = [
        Finding(
            node=host.name,
            check="load",
            reason="FailsUnderLoad",
            severity=Severity.CRITICAL,
            component=_blamed(problem, report.gpus),
            evidence=problem,
            observed_at=now,
        )
        for problem in problems
    ]
    return report.model_copy(
        update={
            "checks_run": [*report.checks_run, "load"],
            "findings": [*report.findings, *load_findings],
        }
    )
