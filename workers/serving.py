"""The two long-lived processes, from their settings: the controller (its schedules, then its
workers until cancelled or stalled) and a node's agent (its host's activities and the probe
loop). The commands parse flags into these settings (workers/cli); the seams come from the
composition root (workers/providers)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from contract.names import CONTROLLER_TASK_QUEUE
from remedy.attribution.rules import Attributor
from remedy.disruption.budget import BudgetPolicy
from remedy.ladder.hardware import BlocklistPolicy
from remedy.redaction import Redactor
from remedy.runbook import RunbookSet
from remedy.scan.active_checks import ActiveCheckPolicy
from remedy.scan.fleet import ScanInput
from workers.agent import AgentConfig, NodeAgent
from workers.client import connect_with, ensure_search_attributes, metrics_runtime
from workers.connection import ConnectOptions
from workers.controller import WorkerTuning, controller_worker
from workers.door import DoorSettings
from workers.keyring_file import KeyringFile
from workers.providers.root import HostSettings, NodeParts, ProviderSettings, build, local_host
from workers.schedules import ensure_fleet_scan, ensure_pool_checks

ActiveChecks = tuple[ActiveCheckPolicy, dict[str, ActiveCheckPolicy]]  # the default, per pool


@dataclass(frozen=True)
class ControllerSettings:
    """Everything `remedy controller` runs with, checked and loaded."""

    provider: ProviderSettings
    connection: ConnectOptions
    runbooks: RunbookSet  # for the ladders the controller starts itself
    policy: BudgetPolicy
    blocklist: BlocklistPolicy
    scan: ScanInput
    scan_every: timedelta | None  # None: no fleet scan
    active: ActiveChecks | None  # None: no active checks
    attributor: Attributor
    redactor: Redactor
    keyring: Path | None  # the operators' keys, read anew (None: decisions unverified)
    door: DoorSettings = field(default_factory=DoorSettings)
    tuning: WorkerTuning = field(default_factory=WorkerTuning)
    stall_after: timedelta | None = None  # None: a stalled worker is not watched for
    metrics_bind: str | None = None


async def run_controller(settings: ControllerSettings) -> None:
    """Until cancelled; WorkerStalled when its workers stopped taking tasks (workers/controller.py),
    ProviderUnreachable when the provider's API cannot be used."""
    parts = build(settings.provider).controller()
    runtime = (
        metrics_runtime(settings.metrics_bind, "controller") if settings.metrics_bind else None
    )
    client = await connect_with(settings.connection, "controller", runtime=runtime)
    await ensure_search_attributes(client)
    if settings.scan_every:
        await ensure_fleet_scan(client, settings.scan_every, CONTROLLER_TASK_QUEUE, settings.scan)
    if settings.active is not None:
        await ensure_pool_checks(
            client, parts.cluster.fleet, *settings.active, CONTROLLER_TASK_QUEUE
        )
    with ThreadPoolExecutor(max_workers=32) as executor:
        workers = controller_worker(
            client,
            parts.cluster,
            executor,
            policy=settings.policy,
            runbooks=settings.runbooks,
            blocklist=settings.blocklist,
            jobs=parts.jobs,
            attributor=settings.attributor,
            redactor=settings.redactor,
            keyring=KeyringFile(settings.keyring) if settings.keyring else None,
            tuning=settings.tuning,
            door=settings.door,
        )
        await workers.run(settings.stall_after)


@dataclass(frozen=True)
class AgentSettings:
    """Everything `remedy agent` runs with, checked and loaded."""

    host: HostSettings
    provider: ProviderSettings | None  # where it publishes (None: nowhere)
    connection: ConnectOptions
    runbooks: RunbookSet
    config: AgentConfig
    metrics_bind: str | None = None


async def run_agent(settings: AgentSettings) -> None:
    """Until cancelled; ProviderUnreachable when the provider's API cannot be used."""
    host = local_host(settings.host)
    node = settings.config.node.name
    parts = build(settings.provider).node(node, host) if settings.provider else NodeParts()
    runtime = metrics_runtime(settings.metrics_bind, "agent") if settings.metrics_bind else None
    client = await connect_with(settings.connection, "agent", runtime=runtime)
    await NodeAgent(
        client,
        host,
        settings.runbooks,
        parts.marks,
        settings.config,
        gpu_use=parts.gpu_use,
        own=parts.own,
    ).run()
