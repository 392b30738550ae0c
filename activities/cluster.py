"""Cluster-side actions (controller worker), one class per seam it acts through: node control
(cordon, drain, kill job, reboot confirmation, restore), replacement, the GPU hand-off around a
reset, node marks and admission. ``cluster_activities`` registers them all, the table's cluster
actions from the table (a method named as the action)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.errors import temporal_errors
from activities.fabric import FabricActivities
from activities.mig_layout import MigLayoutActivities
from activities.person_hold import PersonHoldActivities
from activities.table import action_activities
from contract import activities as act
from remedy.acting.gpu_scope import GpuRelease, GpuReleased, GpuScopedControl
from remedy.core.actions import Where
from remedy.core.errors import ActionRefused
from remedy.core.models import (
    ActionRequest,
    ActionResult,
    BootRequest,
    ConditionsUpdate,
    CordonResult,
    NodeBoot,
    Scope,
)
from remedy.detection.conditions import recovered_conditions
from remedy.disruption.quarantine import Alert, BreakerNotice
from remedy.ladder.verification import SeenXids, XidsSince
from remedy.scan.admission import AdmissionStep
from remedy.scan.cluster import (
    AdmissionGate,
    Alerts,
    BreakerBoard,
    Cluster,
    CordonOwner,
    GpuHandoff,
    NodeControl,
    NodeMarks,
    Replacer,
    held_by,
)

log = logging.getLogger(__name__)


class NodeControlActivities:
    def __init__(
        self,
        control: NodeControl,
        poll_s: float = 5.0,
        gpus: GpuScopedControl | None = None,
        breakers: BreakerBoard | None = None,
    ) -> None:
        self._control = control
        self._poll_s = poll_s
        self._gpus = gpus  # GPU-scoped rungs (remedy/acting/gpu_scope.py)
        self._breakers = breakers  # read by a cordon sent before its budget's leave

    @act.CORDON.defn
    def cordon(self, req: ActionRequest) -> CordonResult:
        owner = CordonOwner(req.workflow_id, req.reason, held_by(self._breakers, req.breakers))
        with temporal_errors():
            state = self._control.cordon(req.node.name, owner)
        log.info("cordon %s: %s", req.node.name, state.value)
        return CordonResult(state=state)

    @act.RESTORE.defn
    def restore(self, req: ActionRequest) -> ActionResult:
        with temporal_errors():
            undone = self._control.restore(req.node.name)
            lifted = (
                self._gpus.lift_quarantine(req.node.name, req.workflow_id) if self._gpus else []
            )
        detail = "uncordoned" if undone else "no remedy cordon to undo; node left as it is"
        if lifted:
            detail += f"; GPU {', '.join(map(str, lifted))} back in allocation"
        return ActionResult(ok=True, detail=detail)

    @act.DRAIN.defn
    def drain(self, req: ActionRequest) -> ActionResult:
        with temporal_errors():
            if req.scope is Scope.GPU:
                return self._on_gpu(req, kill=False)
            # Heartbeats carry the pods left, so a long drain is visible and can be cancelled.
            detail = self._control.drain(req.node.name, activity.heartbeat, req.key)
        return ActionResult(ok=True, detail=detail)

    @act.KILL_JOB.defn
    def kill_job(self, req: ActionRequest) -> ActionResult:
        with temporal_errors():
            if req.scope is Scope.GPU:
                return self._on_gpu(req, kill=True)
            detail = self._control.kill_gpu_pods(req.node.name, req.key)
        return ActionResult(ok=True, detail=detail)

    def _on_gpu(self, req: ActionRequest, kill: bool) -> ActionResult:
        """A GPU-scoped drain or kill: the faulty GPU's pods only, the node stays schedulable."""
        if self._gpus is None:
            raise ActionRefused("this cluster adapter has no GPU-scoped actions (scope: gpu)")
        detail = self._gpus.evict_gpu_pods(
            req.node.name, req.gpu_indices, req.key, kill, req.workflow_id, req.gpu_instance
        )
        return ActionResult(ok=True, detail=detail)

    @act.RELEASE_GPU.defn
    def release_gpu(self, req: GpuRelease) -> GpuReleased:
        if self._gpus is None:
            raise ActionRefused("this cluster adapter has no per-GPU quarantine to lift")
        with temporal_errors():
            done = self._gpus.release_gpu(req.node, req.gpu)
        log.info("release GPU %s of %s by %s: %s", req.gpu, req.node, req.by, done.detail)
        return done

    @act.BOOT_ID.defn
    def boot_id(self, req: BootRequest) -> NodeBoot:
        with temporal_errors():
            return self._control.node_boot(req.node.name)

    @act.CONFIRM_REBOOT.defn
    def confirm_reboot(self, req: BootRequest) -> ActionResult:
        """Wait until the node reports a new boot id and is Ready again; the rung's timeout
        bounds the wait. A cluster API that errs meanwhile is asked again (a node coming back
        from a reboot is exactly when it may be slow). Heartbeats keep it cancellable."""
        while True:
            try:
                with temporal_errors():
                    boot = self._control.node_boot(req.node.name)
            except ApplicationError as err:
                if err.non_retryable:
                    raise
                log.warning("confirm reboot of %s: %s; asking again", req.node.name, err)
                boot = NodeBoot(boot_id=req.previous_boot_id, ready=False)
            if boot.boot_id != req.previous_boot_id and boot.ready:
                return ActionResult(ok=True, detail=f"rebooted: boot id {boot.boot_id}, Ready")
            activity.heartbeat(boot.boot_id)
            if activity.is_cancelled():
                return ActionResult(ok=False, detail="cancelled while waiting for the reboot")
            time.sleep(self._poll_s)

    def around(self) -> list[Callable[..., Any]]:
        """Its activities other than the table's actions (those: ``cluster_activities``)."""
        return [self.release_gpu, self.boot_id, self.confirm_reboot]


class ReplaceActivities:
    def __init__(self, replacer: Replacer) -> None:
        self._replacer = replacer

    @act.REPLACE.defn
    def replace(self, req: ActionRequest) -> ActionResult:
        with temporal_errors():
            detail = self._replacer.replace(req.node.name, req.node_uid)
        return ActionResult(ok=True, detail=detail)


class GpuHandoffActivities:
    def __init__(self, gpus: GpuHandoff) -> None:
        self._gpus = gpus

    @act.RELEASE_GPUS.defn
    def release_gpus(self, req: ActionRequest) -> ActionResult:
        with temporal_errors():
            detail = self._gpus.release_gpus(req.node.name)
        return ActionResult(ok=True, detail=detail)

    @act.RETURN_GPUS.defn
    def return_gpus(self, req: ActionRequest) -> ActionResult:
        with temporal_errors():
            self._gpus.return_gpus(req.node.name)
        return ActionResult(ok=True, detail="GPU operator pods may return")

    def all(self) -> list[Callable[..., Any]]:
        return [self.release_gpus, self.return_gpus]


class MarkActivities:
    def __init__(self, marks: NodeMarks) -> None:
        self._marks = marks

    @act.PUBLISH_CONDITIONS.defn
    def publish_conditions(self, update: ConditionsUpdate) -> None:
        """After a verified recovery the node's problem condition must not stay True until
        the agent's next round: the fleet scan would start a second ladder on it. Written on
        the agent's clock, its heartbeat kept: the controller's write must not make a dead
        agent look alive (remedy.detection.conditions.recovered_conditions)."""
        node = update.node.name
        with temporal_errors():
            conditions = recovered_conditions(update.report, self._marks.conditions(node))
            if conditions:
                self._marks.set_conditions(node, conditions)

    @act.XIDS_SINCE.defn
    def xids_since(self, req: XidsSince) -> SeenXids:
        with temporal_errors():
            return SeenXids(xids=self._marks.xids_since(req.node.name, req.since))

    def all(self) -> list[Callable[..., Any]]:
        return [self.publish_conditions, self.xids_since]


class AdmissionActivities:
    def __init__(self, admission: AdmissionGate) -> None:
        self._admission = admission

    @act.HOLD_FOR_ADMISSION.defn
    def hold_for_admission(self, step: AdmissionStep) -> None:
        with temporal_errors():
            self._admission.hold_for_admission(step.node.name)

    @act.ADMIT.defn
    def admit(self, step: AdmissionStep) -> None:
        with temporal_errors():
            self._admission.admit(step.node.name, step.serials)

    @act.REJECT.defn
    def reject(self, step: AdmissionStep) -> None:
        with temporal_errors():
            self._admission.reject(step.node.name, step.reason)

    def all(self) -> list[Callable[..., Any]]:
        return [self.hold_for_admission, self.admit, self.reject]


class AlertActivities:
    def __init__(self, alerts: Alerts | None, breakers: BreakerBoard | None = None) -> None:
        self._alerts = alerts
        self._breakers = breakers

    @act.PUBLISH_BREAKER.defn
    def publish_breaker(self, notice: BreakerNotice) -> None:
        log.info("breaker of %s: %s", notice.pool, notice.state.value)
        if self._breakers is not None:
            with temporal_errors():
                self._breakers.publish(notice.pool, notice.state)

    @act.ALERT.defn
    def alert(self, alert: Alert) -> None:
        log.warning("%s (%s): %s", alert.reason, alert.node, alert.message)
        if self._alerts is not None:
            with temporal_errors():
                self._alerts.event(alert.node, alert.reason, alert.message, alert.warning)

    def all(self) -> list[Callable[..., Any]]:
        return [self.alert, self.publish_breaker]


def cluster_activities(cluster: Cluster, poll_s: float = 5.0) -> list[Callable[..., Any]]:
    """Every cluster-side activity, each class given only the seam it acts through; the table's
    cluster actions registered from the table (``activities.table``)."""
    control = NodeControlActivities(cluster.control, poll_s, cluster.gpu_scope, cluster.breakers)
    return [
        *action_activities(Where.CLUSTER, control, ReplaceActivities(cluster.replacer)),
        *control.around(),
        *GpuHandoffActivities(cluster.gpus).all(),
        *MarkActivities(cluster.marks).all(),
        *PersonHoldActivities(cluster.marks).all(),
        *AdmissionActivities(cluster.admission).all(),
        *AlertActivities(cluster.alerts, cluster.breakers).all(),
        *MigLayoutActivities(cluster.mig, poll_s).all(),
        *FabricActivities(cluster.fabric).all(),
    ]
