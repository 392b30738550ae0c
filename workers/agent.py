"""The node agent: one per GPU node.

It serves the node's host-local activities (probe, diagnose, reset GPU, reboot, what it can do)
on the node's own task queue, and runs the probe loop: NVML Xid events as they happen, a full
probe every interval, results published as node conditions, and a signal-with-start of the
node's remediation when a finding newly matches a runbook. Reports are edge-triggered: a fault
that persists (a node held for a human) is reported once per change, not every interval, and
a repeat the node's running ladder already has is folded, and what several checks saw of one
fault in one round goes as one report (remedy/ladder/report_changes.py); so are the
conditions, written when they change and otherwise once per heartbeat (remedy.scan.liveness), and
the node's Xids, written only when one is new; so is which pod uses which GPU (the kubelet's
pod-resources API, remedy/detection/pod_resources.py). A fault whose runbook cordons at once is
cordoned by the agent itself before it reports (``cordon_own_node``), marked as the agent's:
if the report is lost and the agent gone, the fleet scan adopts the cordon. Its dependency
checks (remedy/acting/capabilities.py) are logged at start and published with every probe, as the
``RemedyReady`` condition and the ``remedy_dependency_ok`` gauge.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.runtime import Runtime
from temporalio.service import RPCError

from contract import metrics as metric
from contract.names import CONTROLLER_TASK_QUEUE, node_task_queue, remediation_workflow_id
from remedy.acting.capabilities import Capabilities, capabilities_from
from remedy.attribution.evidence import recent_xid
from remedy.core.errors import NodeGone
from remedy.core.models import CordonState, Finding, NodeRef, ProbeReport
from remedy.detection.conditions import NodeCondition, conditions_from, ready_condition
from remedy.detection.host import NodeHost
from remedy.detection.pod_resources import GpuUseReporter
from remedy.detection.probe import probe_node
from remedy.detection.probe.xid_events import XidWatcher
from remedy.disruption.budget import CLUSTER_POOL
from remedy.ladder.intake import by_agent
from remedy.ladder.remediation import FindingReport
from remedy.ladder.report_changes import (
    Changes,
    ReportKey,
    Routing,
    one_per_fault,
    report_key,
    routing,
)
from remedy.redaction import Redactor, redacted
from remedy.runbook import Runbook, RunbookSet
from remedy.scan.cluster import CordonOwner, NodeMarks, OwnNode, held_by
from remedy.scan.liveness import AGENT_HEARTBEAT, publish_due
from remedy.trust.signing import fingerprint, public_blob
from workers.client import report_finding
from workers.controller import node_agent_worker

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class AgentConfig:
    node: NodeRef
    interval_s: float = 30.0  # between probes
    # Unchanged conditions are rewritten this often: the heartbeat the fleet scan reads.
    heartbeat_s: float = AGENT_HEARTBEAT.total_seconds()
    task_queue: str | None = None  # default: the node's own queue
    controller_task_queue: str = CONTROLLER_TASK_QUEUE
    node_pickup_timeout: timedelta = timedelta(minutes=2)
    # Hides secrets in what the node wrote (kernel lines, tools' output) before it is reported.
    redactor: Redactor = field(default_factory=Redactor)
    # Cordon the node at once for a fault whose runbook cordons (with ``own``): its ladder
    # would do the same first, a report and a workflow task later.
    self_cordon: bool = True

    @property
    def queue(self) -> str:
        return self.task_queue or node_task_queue(self.node.name)


class NodeAgent:
    def __init__(
        self,
        client: Client,
        host: NodeHost,
        runbooks: RunbookSet,
        marks: NodeMarks | None,
        config: AgentConfig,
        clock: Callable[[], datetime] = _utcnow,
        gpu_use: GpuUseReporter | None = None,
        own: OwnNode | None = None,
        key: Ed25519PrivateKey | None = None,
    ) -> None:
        """``marks``: where the node's conditions and Xids are published (None: nowhere).
        ``gpu_use``: which pod uses which GPU, published every round (None: not published).
        ``own``: what it may do to its own node (None: no cordon of its own). ``key``: what its
        reports are signed with (default: a new one), published on its node before the first
        (remedy.trust.identity): without ``marks`` nothing it reports is taken."""
        self._client, self._host, self._runbooks = client, host, runbooks
        self._key = key or Ed25519PrivateKey.generate()
        self._key_published = False
        self._marks, self.config, self._clock = marks, config, clock
        self._gpu_use = gpu_use
        self._own = own if config.self_cordon else None
        self.self_cordons: list[CordonState] = []  # what each cordon of its own did
        self._changes = Changes()  # the unhealthy findings of the last round
        # Each fault as last reported, and the ladder run it went to.
        self._sent: dict[tuple[ReportKey, Routing], WorkflowHandle[Any, Any]] = {}
        self.reports_folded = 0  # repeats the running ladder already had: not sent
        self._written: list[NodeCondition] | None = None  # what the node held when last seen
        self.reports_sent = 0
        self.last_report: ProbeReport | None = None
        self.capabilities = Capabilities()
        meter = (client.service_client.config.runtime or Runtime.default()).metric_meter
        self._probes = meter.create_counter(*metric.PROBES.args)
        self._probe_seconds = meter.create_histogram_float(*metric.PROBE_DURATION.args)
        self._findings = meter.create_counter(*metric.FINDINGS_REPORTED.args)
        self._folded = meter.create_counter(*metric.FINDINGS_FOLDED.args)
        self._dependency_ok = meter.create_gauge(*metric.DEPENDENCY_OK.args)

    def _serve(self, name: str) -> NodeHost:
        if name != self._host.name:
            raise NodeGone(f"this agent runs on {self._host.name}, not {name}")
        return self._host

    async def run(self) -> None:
        reads_log = self._host.probe_config.kernel_log is not None
        watcher = XidWatcher(
            self._host.name, self._host.nvml(), self._clock, defer_decoded=reads_log
        )
        for check in (await self.check_dependencies(refresh=True)).checks:
            (log.info if check.ok else log.warning)("dependency %s", check.line())
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="agent") as executor:
            async with node_agent_worker(
                self._client, self._serve, executor, self.config.queue, self.config.redactor
            ):
                pushing = await asyncio.to_thread(watcher.start)
                log.info(
                    "agent on %s: queue %s, Xid events %s, kernel log %s",
                    self._host.name,
                    self.config.queue,
                    "pushed by NVML" if pushing else "from the probe",
                    self._host.probe_config.kernel_log or "not read",
                )
                try:
                    while True:
                        if pushing:  # wake on the first Xid, or after one interval
                            xids = await asyncio.to_thread(watcher.wait, self.config.interval_s)
                        else:
                            await asyncio.sleep(self.config.interval_s)
                            xids = []
                        await self.tick(xids)
                finally:
                    await asyncio.to_thread(watcher.stop)

    async def check_dependencies(self, refresh: bool = False) -> Capabilities:
        """The dependency checks (the expensive ones cached unless ``refresh``), into the gauge."""
        checks = await asyncio.to_thread(self._host.dependencies, refresh)
        for check in checks:
            self._dependency_ok.set(int(check.ok), {"dependency": check.name})
        self.capabilities = capabilities_from(checks)
        return self.capabilities

    async def tick(self, xids: list[Finding]) -> ProbeReport:
        """One round: check dependencies, probe, publish conditions, report what is new. NVML's
        Xid events go through the probe's dedup first, so the probe's kernel-log read drops
        their lines."""
        host, redactor = self._host, self.config.redactor
        await self.check_dependencies()
        if (seen := host.probe_config.xids_seen) is not None:
            xids = seen.admit(xids, "nvml", self._clock())
        xids = [redacted(x, redactor) for x in xids]  # reported and published from here on
        probed = await asyncio.to_thread(probe_node, host.name, host.nvml(), host.probe_config)
        report = redacted(probed, redactor)
        self.last_report = report
        verdict = "healthy" if report.healthy else "unhealthy" if report.checks_run else "failed"
        self._probes.add(1, {"verdict": verdict})
        self._probe_seconds.record(report.duration_s)
        await self._publish(report, xids)
        # Xid events are news each time; a probe's findings only when they changed. What
        # several checks saw of one fault goes as one report.
        changed = self._changes.round([f for f in report.findings if f.unhealthy])
        matched = [(f, rb) for f in xids + changed if (rb := self._runbooks.match(f))]
        for runbook, fault in one_per_fault(matched):  # unmatched: informational
            await self._report(runbook, fault)
        return report

    async def _publish(self, report: ProbeReport, pushed: list[Finding]) -> None:
        """Conditions for the cluster, and every Xid (application ones too: a job guard ties
        them to the job that ran) kept on the node."""
        if self._marks is None:
            return
        marks, node = self._marks, self._host.name
        try:
            await self._publish_conditions(marks, report)
            xids = [x for f in [*pushed, *report.findings] if (x := recent_xid(f)) is not None]
            await asyncio.to_thread(marks.record_xids, node, xids)
        except Exception:  # noqa: BLE001 - conditions are best effort; the report still goes
            log.exception("could not publish node conditions for %s", node)
        if self._gpu_use is not None:
            try:
                await asyncio.to_thread(self._gpu_use.report)
            except Exception:  # noqa: BLE001 - the controller then reads the API's view
                log.exception("could not publish the GPU use of %s", node)

    async def _publish_conditions(self, marks: NodeMarks, report: ProbeReport) -> None:
        """Written on change and once per heartbeat; the node is read only when what the agent
        last wrote says a write is due, and the write is decided against what the node holds
        then (someone else's change to remedy's conditions is put right within a heartbeat)."""
        node, now = self._host.name, self._clock()
        heartbeat = timedelta(seconds=self.config.heartbeat_s)
        if self._written is not None:
            unchanged = self._conditions(report, self._written, now)
            if not publish_due(unchanged, self._written, now, heartbeat):
                return
        self._written = None  # until written or read again: a failed write is retried
        previous = await asyncio.to_thread(marks.conditions, node)
        conditions = self._conditions(report, previous, now)
        if publish_due(conditions, previous, now, heartbeat):
            await asyncio.to_thread(marks.set_conditions, node, conditions)
            self._written = conditions
        else:
            self._written = previous

    def _conditions(
        self, report: ProbeReport, previous: list[NodeCondition], now: datetime
    ) -> list[NodeCondition]:
        conditions = conditions_from(report, previous, now)
        return [*conditions, ready_condition(self.capabilities, previous, now)]

    async def _report(self, runbook: Runbook, fault: list[Finding]) -> None:
        """One report for the findings of one fault that the node's running ladder lacks."""
        news = []
        for finding in fault:
            labels = {"check": finding.check, "reason": finding.reason}
            if await self._ladder_has(_key(finding)):
                self.reports_folded += 1
                self._folded.add(1, labels)
            else:
                self._findings.add(1, labels)
                news.append(finding)
        if not news:
            return
        lead, *also = news
        await self._cordon_own(lead, runbook)
        try:
            await self._publish_key()
            report = FindingReport(finding=lead, runbook=runbook, also=also)
            sent = await report_finding(
                self._client,
                self.config.node,
                by_agent(report, self._key, datetime.now(UTC)),  # checked in wall time
                node_task_queue=self.config.queue,
                task_queue=self.config.controller_task_queue,
                node_pickup_timeout=self.config.node_pickup_timeout,
            )
            self.reports_sent += 1
            self._sent.update({_key(f): sent for f in news})
        except Exception:  # noqa: BLE001 - forget them so the next round reports them again
            log.exception("could not report %s on %s", lead.headline(), self._host.name)
            for finding in news:
                self._changes.forget(finding)

    async def _publish_key(self) -> None:
        """The key its reports are signed with, on its own node, once (a failure is raised:
        the report is not sent, and goes again next round)."""
        if self._key_published or self._marks is None:
            return
        key = public_blob(self._key)
        await asyncio.to_thread(self._marks.publish_agent_key, self._host.name, key)
        self._key_published = True
        log.info("agent key of %s published: %s", self._host.name, fingerprint(key))

    async def _cordon_own(self, finding: Finding, runbook: Runbook) -> None:
        """Before the report, for a runbook that cordons at once: best effort, the ladder
        cordons if this did not."""
        if self._own is None or not runbook.cordon:
            return
        try:
            done = await asyncio.to_thread(cordon_own_node, self._own, self.config.node, finding)
        except Exception:  # noqa: BLE001 - the ladder's own cordon follows
            log.exception("could not cordon %s for %s", self._host.name, finding.headline())
            return
        self.self_cordons.append(done)
        log.info("cordon of %s for %s: %s", self._host.name, finding.headline(), done.value)

    async def _ladder_has(self, fault: tuple[ReportKey, Routing]) -> bool:
        """Whether the ladder run this fault was last reported to still runs: it has the
        fault (a repeat adds nothing; its own re-probes see the fault). A finished run, or
        one the server cannot describe, gets the report: a new ladder decides."""
        sent = self._sent.get(fault)
        if sent is None:
            return False
        run = self._client.get_workflow_handle(sent.id, run_id=sent.result_run_id)
        try:
            running = (await run.describe()).status is WorkflowExecutionStatus.RUNNING
        except RPCError:
            running = False
        if not running:
            del self._sent[fault]
        return running


def _key(finding: Finding) -> tuple[ReportKey, Routing]:
    return (report_key(finding), routing(finding))


def cordon_own_node(own: OwnNode, node: NodeRef, finding: Finding) -> CordonState:
    """The agent's cordon of its own node, in one write: remedy's cordon under the id of the
    node's ladder and the reason that ladder gives, so the ladder's cordon finds it its own
    (ALREADY_OURS), restores it and owns what comes next. Not while the published breaker of
    its pool or of the cluster holds new cordons (HELD_BY_BREAKER): the ladder asks first."""
    owner = CordonOwner(
        remediation_workflow_id(node.name),
        "finding: " + finding.headline(),
        held_by(own.breakers, [node.pool, CLUSTER_POOL]),
        by_agent=True,
    )
    return own.control.cordon(node.name, owner)
