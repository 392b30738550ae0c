"""Conditions other monitors set (node-problem-detector, the EKS node monitoring agent, GCM
through NPD), taken as remedy's faults by an operator's table (remedy/scan/monitors.py).

The condition samples are the monitors' own words: AKS's NPD GPU conditions
(learn.microsoft.com/azure/aks/node-problem-detector, the "GPU only" rows), the EKS agent's
``AcceleratedHardwareReady=False`` with reason ``NvidiaXID13Error`` / ``DCGMError``
(github.com/aws/eks-node-monitoring-agent: its chart's README on DCGMError, the node repair
override examples)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.testing import WorkflowEnvironment

from adapters.kubernetes.nodes import utcnow
from adapters.sim import SimFleet
from contract.names import remediation_workflow_id
from kubeapi import ApiServer
from remedy.core.yaml_source import YamlFileError
from remedy.detection.conditions import NodeCondition
from remedy.detection.node_facts import NodeFacts
from remedy.ladder.remediation import Outcome, RemediationResult
from remedy.runbook import RunbookSet
from remedy.scan.fleet import (
    OpenWork,
    ScanInput,
    current_problems,
    finding_from_condition,
    plan_scan,
)
from remedy.scan.monitors import MonitorRule, MonitorTable, load_monitor_tables
from tests.conftest import running_workers
from tests.kube import NODES, NOW, kube, node
from tests.test_fleet_scan import closed, scans_after
from workers.schedules import ensure_fleet_scan

EXAMPLES = sorted((Path(__file__).parents[1] / "examples" / "monitors").glob("*.yaml"))
TABLE = load_monitor_tables(EXAMPLES)


def said(
    kind: str, status: str, reason: str, message: str = "", age_s: float = 30
) -> NodeCondition:
    at = NOW - timedelta(seconds=age_s)
    return NodeCondition(
        type=kind,
        status="True" if status == "True" else "False",
        reason=reason,
        message=message,
        last_heartbeat_time=at,
        last_transition_time=at,
    )


# (the monitor's condition) -> the runbook remedy's shipped set climbs for it
SHIPPED_CASES = [
    (said("NVLinkStatusInactive", "True", "NVLinkStatusInactive"), "NvLinkDown", "nvlink"),
    (
        said("GPUMissing", "True", "GPUMissing", "Observed GPU count does not match"),
        "GpuMissing",
        "gpu-fallen-off-bus",
    ),
    (
        said(
            "XIDErrors",
            "True",
            "XIDErrors",
            "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        ),
        "Xid79",
        "gpu-fallen-off-bus",
    ),
    (said("AcceleratedHardwareReady", "False", "NvidiaXID48Error"), "Xid48", "gpu-memory-ecc"),
    (said("IBLinkFlapping", "True", "IBLinkFlapping"), "NicLinkFlapping", "nic-link-failing"),
    (said("GPUClockThrottling", "True", "GPUClockThrottling"), "HwSlowdown", "thermal"),
]


@pytest.mark.parametrize(("condition", "reason", "runbook"), SHIPPED_CASES)
def test_each_shipped_example_starts_the_runbook_of_remedys_own_fault(
    condition: NodeCondition, reason: str, runbook: str, shipped_runbooks: RunbookSet
) -> None:
    [taken] = TABLE.taken([condition])
    finding = finding_from_condition("n1", taken)
    matched = shipped_runbooks.match(finding)
    assert taken.status == "True" and taken.reason == reason
    assert condition.type in taken.message and condition.reason in taken.message
    assert matched is not None and matched.name == runbook, matched


def test_what_says_no_problem_or_names_no_code_is_not_taken() -> None:
    not_taken = [
        said("AcceleratedHardwareReady", "True", "AcceleratedHardwareIsReady"),  # healthy
        said("AcceleratedHardwareReady", "False", "DCGMError"),  # the monitor's tool, no Xid
        said("NVLinkStatusInactive", "False", "NVLinkStatusActive"),  # NPD: False is fine
        said("XIDErrors", "True", "XIDErrors", "XID errors present in kernel log"),  # no code
        said("KernelDeadlock", "True", "DockerHung"),  # a condition no rule names
    ]
    assert TABLE.taken(not_taken) == []


def test_a_rule_may_cover_only_some_reasons_and_the_first_rule_wins() -> None:
    table = MonitorTable(
        rules=[
            MonitorRule(type="GpuHealth", reasons=["NVLinkDown"], reason="NvLinkDown"),
            MonitorRule(type="GpuHealth", reason="GpuMissing"),
        ]
    )
    taken = table.taken([said("GpuHealth", "True", "NVLinkDown")])
    other = table.taken([said("GpuHealth", "True", "Lost")])
    assert [c.reason for c in taken] == ["NvLinkDown"] and [c.reason for c in other] == [
        "GpuMissing"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("rules:\n  - type: X\n    reason: NvLinkDwn\n", "3: rules.0.reason: unknown reason"),
        ("rules:\n  - type: X\n", "2: rules.0: give one of reason"),
        ("rules:\n  - type: X\n    reason: NvLinkDown\n    xid_from: reason\n", "give one of"),
        ("rules:\n  - type: GpuProblem\n    reason: NvLinkDown\n", "remedy's own condition"),
        ("rules:\n  - type: X\n    reason: NvLinkDown\n    colour: red\n", "rules.0.colour"),
    ],
)
def test_a_bad_table_names_file_line_and_field_and_nothing_is_taken(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "table.yaml"
    path.write_text(text)
    with pytest.raises(YamlFileError, match=problem) as refused:
        load_monitor_tables([EXAMPLES[0], path])
    assert str(path) in str(refused.value)


def test_another_monitors_condition_is_judged_by_its_own_rewrite_schedule() -> None:
    """An NPD condition rewritten every 5 minutes is not stale because remedy's agent wrote a
    heartbeat since; one 16 minutes older than the agent's is (its monitor is gone). Both on
    the node's clock: no clock of the controller's is compared."""
    theirs = said("NVLinkStatusInactive", "True", "NvLinkDown", age_s=4 * 60)
    gone = said("GPUMissing", "True", "GpuMissing", age_s=16 * 60)
    ours = said("GpuProblem", "True", "Xid79", age_s=4 * 60)
    facts = NodeFacts(
        name="n1",
        pool="gpu",
        problems=[theirs, gone, ours],
        last_heartbeat=NOW,
        silent_for=timedelta(0),
    )
    assert current_problems(facts, silent_after=timedelta(minutes=3)) == [theirs]


def _npd_writes(api: ApiServer, name: str, condition: dict[str, Any]) -> None:
    """As node-problem-detector does: a patch of the node's status, through the API server."""
    k8s.CoreV1Api(api.client()).patch_node_status(name, {"status": {"conditions": [condition]}})


def test_an_npd_condition_set_through_the_api_server_starts_the_mapped_runbook(
    api: ApiServer, shipped_runbooks: RunbookSet
) -> None:
    api.objects[NODES, None, "n1"] = node("n1")
    api.objects[NODES, None, "n2"] = node("n2")
    stamp = NOW.isoformat().replace("+00:00", "Z")
    _npd_writes(
        api,
        "n1",
        {
            "type": "NVLinkStatusInactive",
            "status": "True",
            "reason": "NVLinkStatusInactive",
            "message": "NVLink 0-1 connection down",
            "lastHeartbeatTime": stamp,
            "lastTransitionTime": stamp,
        },
    )
    facts = kube(api, monitors=TABLE).fleet.nodes()
    without = kube(api).fleet.nodes()  # no table: remedy takes only its own conditions
    plan = plan_scan(facts, OpenWork())
    [sick] = plan.remediate
    finding = finding_from_condition(sick.name, sick.problems[0])
    matched = shipped_runbooks.match(finding)
    assert sick.name == "n1" and finding.reason == "NvLinkDown"
    assert "NVLink 0-1 connection down" in finding.evidence
    assert matched is not None and matched.name == "nvlink"
    assert all(not f.problems for f in without)


def test_remedys_own_network_condition_rebuilt_by_the_scan_climbs_the_nic_runbook(
    shipped_runbooks: RunbookSet,
) -> None:
    """Found here: a finding rebuilt from a condition matched only runbooks that name reasons
    or Xids, so the agent's own GpuNetworkProblem (NicPortDown), seen by the scan with no agent
    report, went to default-unknown-fault (cordon, hold for a person) instead of nic-degraded.
    The check is the one that reports the reason."""
    rebuilt = finding_from_condition("n1", said("GpuNetworkProblem", "True", "NicPortDown"))
    unknown = finding_from_condition("n1", said("GpuProblem", "True", "NoSuchReason"))
    names = [getattr(shipped_runbooks.match(f), "name", None) for f in (rebuilt, unknown)]
    assert names == ["nic-degraded", "default-unknown-fault"]


async def test_the_scan_climbs_the_mapped_runbook_for_an_npd_condition_on_kubernetes(
    dev_env: WorkflowEnvironment, api: ApiServer, shipped_runbooks: RunbookSet
) -> None:
    """End to end: NPD sets NVLinkStatusInactive through the strict API server, no agent
    reports anything; the fleet scan (on the Kubernetes adapter, with the AKS table) starts
    the node's ladder, which climbs `nvlink` (cordon, drain, reset) and is verified by remedy's
    own probe, which sees the links down until the reset. Real time on the dev server: the
    runbooks' minutes become milliseconds."""
    pool = f"pool-{uuid.uuid4().hex[:8]}"
    fleet = SimFleet(nodes=1, name_prefix="k8s", pool=pool)
    [name] = sorted(fleet.nodes)
    fleet.node(name).pods = []  # idle: the GPU reset can run
    fleet.inject(name, "nvlink_down", gpu=1)  # what NPD saw, and remedy's probe sees too
    api.objects["v1/namespaces", None, "remedy"] = {"metadata": {"name": "remedy"}}  # breakers
    api.objects[NODES, None, name] = node(name, labels={"remedy.io/pool": pool})
    _npd_writes(
        api,
        name,
        {
            "type": "NVLinkStatusInactive",
            "status": "True",
            "reason": "NVLinkStatusInactive",
            "message": "NVLink 1-2 connection down",
            "lastHeartbeatTime": NOW.isoformat().replace("+00:00", "Z"),
            "lastTransitionTime": NOW.isoformat().replace("+00:00", "Z"),
        },
    )
    fast = RunbookSet(r.scaled(3600) for r in shipped_runbooks)
    cluster = kube(api, monitors=TABLE, clock=utcnow)
    schedule_id = f"scan-{uuid.uuid4().hex[:8]}"
    async with running_workers(dev_env.client, fleet, cluster=cluster, runbooks=fast) as queues:
        await ensure_fleet_scan(
            dev_env.client,
            timedelta(seconds=1),
            queues.controller,
            ScanInput(node_task_queue=queues.agents, admit_new_nodes=False),
            schedule_id=schedule_id,
        )
        schedule = dev_env.client.get_schedule_handle(schedule_id)
        ladder = dev_env.client.get_workflow_handle(
            remediation_workflow_id(name), result_type=RemediationResult
        )
        try:
            await closed(dev_env.client, ladder.id, within_s=60)
            first = (await ladder.describe()).run_id
            # NPD has not cleared its condition yet (its next run will): the scans that see it
            # again start nothing, the same observation a ladder handled.
            await scans_after(schedule, 3)
            last = (await ladder.describe()).run_id
        finally:
            await schedule.delete()
        result = await ladder.result()
    assert result.runbook == "nvlink" and result.outcome is Outcome.RECOVERED, result
    assert last == first
    assert result.sent_by == "the controller"  # no agent reported: the scan started it
    assert (name, "reset_gpu") in fleet.actions
