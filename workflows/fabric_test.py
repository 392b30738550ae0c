"""Fabric tests from a workflow: each test's Jobs made, polled until a verdict, removed once
passed. Fail closed: Jobs that cannot be made or read, or give no verdict well past their
deadline (the Job controller should have ended them), are a failed test. Shared by the
ActiveCheck and NodeAdmission workflows, on the node they hold."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

from contract import activities as act
from workflows.common import RIDE_OUT, cause_of

with workflow.unsafe.imports_passed_through():
    from remedy.core.models import Finding
    from remedy.detection.fabric.verdict import FabricVerdict, could_not_run
    from remedy.scan.fabric import FabricPolicy, FabricRun

CLUSTER_CALL = timedelta(seconds=60)
GRACE = timedelta(minutes=2)  # past the Jobs' deadline: the Job controller did not end them


async def fabric_findings(node: str, policy: FabricPolicy) -> list[Finding]:
    """One finding per test: info when it passed, critical when not."""
    run_id = workflow.info().run_id.replace("-", "")[:12]
    findings = []
    for n, test in enumerate(policy.tests):
        run = FabricRun(run_id=f"{run_id}-{n}", test=test, nodes=[node], deadline=policy.deadline)
        verdict = await fabric_test(run, policy.poll)
        findings.append(verdict.finding(node, workflow.now()))
    return findings


async def fabric_test(run: FabricRun, poll: timedelta) -> FabricVerdict:
    where = ", ".join(run.nodes)
    try:
        made = await act.START_FABRIC_TEST.execute(
            run,
            start_to_close_timeout=CLUSTER_CALL,
            **RIDE_OUT,
            summary=f"start {run.test} on {where}",
        )
    except ActivityError as err:
        return could_not_run(run.test, run.nodes, f"its Jobs were not made: {cause_of(err)}")
    waited = timedelta(0)
    while waited <= made.deadline + GRACE:
        await workflow.sleep(poll, summary=f"{run.test} on {where}")
        waited += poll
        try:
            check = await act.FABRIC_TEST_CHECK.execute(
                made, start_to_close_timeout=CLUSTER_CALL, **RIDE_OUT, summary=f"read {run.test}"
            )
        except ActivityError as err:
            return could_not_run(run.test, run.nodes, f"its Jobs were not read: {cause_of(err)}")
        if check.verdict is not None:
            if check.verdict.passed:
                await _remove(made)
            return check.verdict
    return could_not_run(run.test, run.nodes, f"no verdict {waited} after it started")


async def _remove(run: FabricRun) -> None:
    try:
        await act.REMOVE_FABRIC_TEST.execute(
            run, start_to_close_timeout=CLUSTER_CALL, **RIDE_OUT, summary=f"remove {run.test}"
        )
    except ActivityError as err:  # their ttlSecondsAfterFinished removes them anyway
        workflow.logger.warning("could not remove the %s Jobs: %s", run.test, err)
