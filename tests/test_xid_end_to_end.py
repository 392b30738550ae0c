"""End to end: real kernel-log lines in the simulated node's kernel log, read by its probe
(with each GPU's architecture from the inventory), and the real workflows: an application's
Xid on a MIG instance cordons nothing and reaches the job guard as the job's own; Xid 154
"Node Reboot Required" walks the reboot ladder and "None" starts nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from temporalio.testing import WorkflowEnvironment

from adapters.sim import SimFleet
from remedy.attribution.evidence import PodRun, recent_xid, tie_xids
from remedy.attribution.guard import GuardPhase, GuardPolicy
from remedy.attribution.model import PodFailure, Termination, Verdict
from remedy.core.models import Action, Finding
from remedy.detection.probe import probe_node, runner
from remedy.detection.probe.xid_events import XidWatcher
from remedy.ladder.remediation import AttemptResult, Outcome
from remedy.runbook import RunbookSet
from remedy.xid.kernel_log import XidEvent, parse_kernel_log
from tests.ladder import remediate
from tests.test_job_guard import guarded
from tests.test_xid_routing import AT, MIG_APP_XID, NODE_REBOOT_154, NONE_154
from workflows.job_guard import JobGuard


def probed(fleet: SimFleet, node: str, *lines: str) -> list[Finding]:
    fleet.log_kernel(node, *lines)
    host = fleet.host(node)
    report = probe_node(node, host.nvml(), host.probe_config)
    assert "kernel_log" in report.checks_run
    # The inventory says each GPU's generation (what the kernel-log path looks codes up by).
    assert {g.architecture for g in report.gpus} <= {5, 9}
    return [f for f in report.findings if f.check in ("xid", "nvswitch")]


async def test_e2e_an_application_xid_on_a_mig_instance_cordons_nothing_and_reaches_the_guard(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = sorted(fleet.nodes)[0]
    [finding] = probed(fleet, node, MIG_APP_XID)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.runbook == "application-xid"
    assert ran.result.outcome is Outcome.RECOVERED
    assert [(a.action, a.result) for a in ran.result.attempts if a.rung >= 0] == [
        (Action.DIAGNOSE, AttemptResult.VERIFIED)
    ]
    assert [a for n, a in fleet.actions if n == node] == []  # not even a cordon
    assert not fleet.node(node).unschedulable
    # The agent keeps it on the node; the job's guard gets it as the job's own Xid.
    fleet.cluster.marks.record_xids(node, [x for x in [recent_xid(finding)] if x])
    async with guarded(time_env, fleet, GuardPolicy()) as (handle, job, jobs):
        pod = PodRun(job=job, gpus=8, started_at=finding.observed_at - timedelta(hours=1))
        kept = fleet.cluster.marks.xids_since(node, finding.observed_at - timedelta(minutes=1))
        failed = PodFailure(
            job=job,
            pod=f"{job}-worker-0",
            node=node,
            failed_at=finding.observed_at + timedelta(seconds=5),
            termination=Termination(exit_code=1, reason="Error"),
            xids=tie_xids(node, kept, [pod]),
        )
        await handle.signal(JobGuard.pod_failed, failed)
        result = await handle.result()
    assert result.phase is GuardPhase.STOPPED and jobs.restarts == []
    [seen] = result.ledger.failures
    assert (seen.attribution.verdict, seen.attribution.rule) == (
        Verdict.APPLICATION,
        "app-xid-once",
    )
    assert "Xid 94" in " ".join(seen.attribution.evidence)
    assert not fleet.node(node).unschedulable  # the node was never blamed


async def test_e2e_xid_154_node_reboot_required_walks_the_reboot_ladder(
    time_env: WorkflowEnvironment, fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = sorted(fleet.nodes)[1]
    [finding] = probed(fleet, node, NODE_REBOOT_154)
    ran = await remediate(time_env, fleet, finding, shipped_runbooks.match(finding))
    assert ran.result.runbook == "driver-requests-reboot"
    assert ran.result.outcome is Outcome.RECOVERED
    assert [a.action for a in ran.result.attempts if a.rung >= 0] == [Action.DRAIN, Action.REBOOT]
    assert [a for n, a in fleet.actions if n == node] == ["cordon", "drain", "reboot", "restore"]
    assert fleet.node(node).boot_id == 1


async def test_e2e_xid_154_none_starts_nothing(
    fleet: SimFleet, shipped_runbooks: RunbookSet
) -> None:
    node = sorted(fleet.nodes)[2]
    [finding] = probed(fleet, node, NONE_154)
    assert not finding.unhealthy and shipped_runbooks.match(finding) is None


# -- each GPU's own architecture ---------------------------------------------------------
VOLTA, HOPPER = 5, 9


def test_the_xid_watcher_looks_each_gpu_up_by_its_own_architecture(fleet: SimFleet) -> None:
    """On a node whose GPUs differ, an Xid on the Volta GPU reads the Volta entry (64: page
    retirement), not the entry of the GPU NVML listed last."""
    node = sorted(fleet.nodes)[3]
    fleet.node(node).gpus[0].architecture = VOLTA
    watcher = XidWatcher(node, fleet.host(node).nvml(), lambda: AT)
    assert watcher.start()
    fleet.node(node).push_xid(0, 64)
    fleet.node(node).push_xid(7, 64)
    volta, hopper = sorted(watcher.wait(1.0), key=lambda f: f.component.index or 0)
    watcher.stop()
    assert (volta.component.architecture, hopper.component.architecture) == (VOLTA, HOPPER)
    assert "page retirement" in volta.evidence and "page retirement" not in hopper.evidence
    assert volta.nvidia_action == hopper.nvidia_action == "reset_gpu"


def test_the_kernel_log_is_read_with_each_gpus_architecture(
    fleet: SimFleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe's inventory says each GPU's architecture; the kernel-log path hands the
    parser that map by PCI id."""
    node = sorted(fleet.nodes)[3]
    fleet.node(node).gpus[1].architecture = VOLTA
    passed: list[object] = []

    def parse(lines: list[str], **options: object) -> list[XidEvent]:
        passed.append(options.get("architecture"))
        return parse_kernel_log(lines, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "parse_kernel_log", parse)
    [finding] = probed(fleet, node, MIG_APP_XID)
    assert finding.xid == 94
    [architectures] = passed
    assert isinstance(architectures, dict)
    assert architectures["00000000:28:00.0"] == VOLTA
    assert set(architectures.values()) == {VOLTA, HOPPER} and len(architectures) == 8


def test_an_xid_whose_line_decides_is_left_to_the_kernel_log(fleet: SimFleet) -> None:
    """NVML's event for a 154 has no message: where the kernel log is read too, the watcher
    leaves it to the log's line (which says what the driver needs), so the dedup cannot keep
    NVML's catalog guess instead. Without a kernel log, the catalog's action stands."""
    node = sorted(fleet.nodes)[3]
    for defer, expected in ((True, []), (False, [("Xid154", "contact_support")])):
        watcher = XidWatcher(node, fleet.host(node).nvml(), lambda: AT, defer_decoded=defer)
        assert watcher.start()
        fleet.node(node).push_xid(0, 154)
        fleet.node(node).push_xid(0, 48)  # the catalog decides 48: NVML reports it either way
        seen = [(f.reason, f.nvidia_action) for f in watcher.wait(1.0)]
        watcher.stop()
        assert seen == [*expected, ("Xid48", "reset_gpu")]
