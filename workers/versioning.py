"""The controller's Worker Deployment Version (Temporal Worker Versioning), named from the
package's version: deployment ``remedy``, build id the version in pyproject.toml (``0.13.0``).

How each workflow moves between versions is said here, once (``BEHAVIORS``): a node's ladder
and the other finite per-node workflows are PINNED to the version they started on, the
perpetual ones (budgets, hardware records, job guards, fleet scans) AUTO_UPGRADE to the current
version (docs/operations.md, "Upgrading"). Not on their ``@workflow.defn``: the dev server
fails the workflow task of an unversioned worker that names a behavior ("versioning behavior
cannot be specified without deployment options being set with versioned mode"), so a versioned
worker gets subclasses that name theirs (``behaving``).

Off unless ``REMEDY_WORKER_VERSIONING`` is ``on`` (deploy/controller.yaml has the line): a versioned
worker takes no task until its version is made current (``temporal worker deployment
set-current-version``, or ``make_current`` here). The dev server (1.32) supports it
(tests/test_rollout.py); the time-skipping test server does not ("Worker Versioning not yet
supported in test server") and ignores a worker's deployment options: its tests run
unversioned.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from importlib.metadata import version

from temporalio import workflow
from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

from contract import names
from workflows.active_check import ActiveCheck
from workflows.active_checks import ActiveChecks
from workflows.disruption_budget import DisruptionBudget
from workflows.fleet_scan import FleetScan
from workflows.gpu_release import GpuRelease
from workflows.hardware_record import HardwareRecord
from workflows.hold_release import HoldRelease
from workflows.job_guard import JobGuard
from workflows.node_admission import NodeAdmission
from workflows.node_remediation import NodeRemediation

DEPLOYMENT = "remedy"
SWITCH = "REMEDY_WORKER_VERSIONING"  # "on": the controller's workers are versioned
BUILD_ID = "REMEDY_BUILD_ID"  # another build id than the package's version (a test's, an rc's)
PINNED, AUTO_UPGRADE = VersioningBehavior.PINNED, VersioningBehavior.AUTO_UPGRADE
# Each workflow of the controller: its name, and how it moves to a new version. Finite, per
# node or per round: pinned (a ladder finishes on the code it started on; its continue-as-new
# starts on the current version). Perpetual: moved to the current version, so they change
# with patches (contract/patches.py). A job guard lives as long as its job: perpetual.
BEHAVIORS: dict[type, tuple[str, VersioningBehavior]] = {
    NodeRemediation: (names.NODE_REMEDIATION_WORKFLOW, PINNED),
    ActiveChecks: (names.ACTIVE_CHECKS_WORKFLOW, PINNED),
    ActiveCheck: (names.ACTIVE_CHECK_WORKFLOW, PINNED),
    NodeAdmission: (names.NODE_ADMISSION_WORKFLOW, PINNED),
    GpuRelease: (names.GPU_RELEASE_WORKFLOW, PINNED),
    HoldRelease: (names.HOLD_RELEASE_WORKFLOW, PINNED),
    DisruptionBudget: (names.DISRUPTION_BUDGET_WORKFLOW, AUTO_UPGRADE),
    HardwareRecord: (names.HARDWARE_RECORD_WORKFLOW, AUTO_UPGRADE),
    JobGuard: (names.JOB_GUARD_WORKFLOW, AUTO_UPGRADE),
    FleetScan: (names.FLEET_SCAN_WORKFLOW, AUTO_UPGRADE),
}


def current_version(build_id: str | None = None) -> WorkerDeploymentVersion:
    """This build's version: ``remedy`` and ``build_id``, else ``REMEDY_BUILD_ID``, else the
    package's version (as installed: its metadata, read by importlib.metadata)."""
    return WorkerDeploymentVersion(
        DEPLOYMENT, build_id or os.environ.get(BUILD_ID) or version("remedy")
    )


def deployment_config(
    build_id: str | None = None, *, enabled: bool | None = None
) -> WorkerDeploymentConfig | None:
    """The controller's workers' ``deployment_config``: None (unversioned) unless ``enabled``,
    which defaults to ``REMEDY_WORKER_VERSIONING=on``."""
    if enabled is None:
        enabled = os.environ.get(SWITCH, "off").lower() == "on"
    if not enabled:
        return None
    return WorkerDeploymentConfig(current_version(build_id), use_worker_versioning=True)


async def make_current(client: Client, build_id: str, identity: str = "remedy") -> None:
    """``temporal worker deployment set-current-version --deployment-name remedy --build-id
    BUILD_ID``, through the client (the version's workers must be polling already)."""
    await client.workflow_service.set_worker_deployment_current_version(
        SetWorkerDeploymentCurrentVersionRequest(
            namespace=client.namespace,
            deployment_name=DEPLOYMENT,
            build_id=build_id,
            identity=identity,
        )
    )


def behaving(workflows: Sequence[type], config: WorkerDeploymentConfig | None) -> list[type]:
    """``workflows`` as a worker with ``config`` registers them: unchanged when unversioned,
    else each as a subclass whose definition names its behavior (``BEHAVIORS``)."""
    return list(workflows) if config is None else [_with_behavior(cls) for cls in workflows]


@cache
def _with_behavior(cls: type) -> type:
    name, behavior = BEHAVIORS[cls]
    spec = {"__module__": cls.__module__, "__qualname__": cls.__qualname__, "__doc__": cls.__doc__}
    return workflow.defn(name=name, versioning_behavior=behavior)(type(cls.__name__, (cls,), spec))
