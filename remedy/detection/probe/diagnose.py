"""Deep diagnose: the probe, then sustained load on the GPUs. A GPU can answer every status
query and still fail the moment a job allocates memory; only load finds that. The load test
covers every GPU unless the request names some, and the report says which engine ran it."""

from __future__ import annotations

from remedy.core.models import Component, ComponentKind, Finding, ProbeReport
from remedy.detection.host import NodeHost
from remedy.detection.probe.load import LOAD_CHECK, LoadProblem
from remedy.detection.probe.runner import ProbeConfig, probe_node


def _blamed(problem: LoadProblem, gpus: list[Component]) -> Component:
    """The GPU a problem names, with its identity from the inventory; else the whole node."""
    if problem.gpu is None:
        return Component(kind=ComponentKind.NODE)
    known = next((g for g in gpus if g.index == problem.gpu), None)
    return known or Component(kind=ComponentKind.GPU, index=problem.gpu)


def deep_diagnose(host: NodeHost, gpus: list[int], config: ProbeConfig) -> ProbeReport:
    report = probe_node(host.name, host.nvml(), config)
    if not report.checks_run:
        return report  # the probe could not run: already unhealthy, load adds nothing
    load = host.load_test(gpus)
    findings = [
        Finding(
            node=host.name,
            check=LOAD_CHECK,
            reason=problem.reason.value,
            severity=problem.severity,
            component=_blamed(problem, report.gpus),
            evidence=problem.evidence,
            observed_at=report.started_at,
        )
        for problem in load.problems
    ]
    return report.model_copy(
        update={
            "checks_run": [*report.checks_run, LOAD_CHECK],
            "findings": [*report.findings, *findings],
            "load_engine": load.engine,
        }
    )


def passed(report: ProbeReport) -> str:
    """What a healthy report ran, with the load test's engine: "passed inventory, ..., load
    (dcgm)"."""
    engine = f" ({report.load_engine})" if report.load_engine else ""
    return f"passed {', '.join(report.checks_run)}{engine}"
