"""A MIG node's layout around a reset or a reboot (remedy/acting/mig_layout.py), on the controller:
mark it pending before the action, put it back if the action did not run, and wait afterwards
for the MIG manager to apply it again."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.errors import temporal_errors
from contract import activities as act
from remedy.acting.mig_layout import MigLayout, MigLayouts, MigLayoutStep, restored
from remedy.core.models import ActionResult

log = logging.getLogger(__name__)


class MigLayoutActivities:
    def __init__(self, layouts: MigLayouts | None, poll_s: float = 5.0) -> None:
        self._layouts, self._poll_s = layouts, poll_s  # None: a cluster without MIG layouts

    @act.ASK_MIG_LAYOUT.defn
    def ask_mig_layout(self, step: MigLayoutStep) -> MigLayout:
        if self._layouts is None:
            return MigLayout()  # no layout: the ladder waits for none
        with temporal_errors():
            return self._layouts.ask_layout(step.node.name)

    @act.KEEP_MIG_LAYOUT.defn
    def keep_mig_layout(self, step: MigLayoutStep) -> None:
        if self._layouts is not None:
            with temporal_errors():
                self._layouts.keep_layout(step.node.name, step.before)

    @act.MIG_LAYOUT_RESTORED.defn
    def mig_layout_restored(self, step: MigLayoutStep) -> ActionResult:
        """Wait until the MIG manager answers for the layout; the rung's timeout bounds the
        wait (then the ladder counts it not recovered). Heartbeats keep it cancellable."""
        node, layouts = step.node.name, self._layouts
        if layouts is None:
            return ActionResult(ok=True, detail="no MIG layout to wait for")
        while True:
            with temporal_errors():
                done, said = restored(step.before, layouts.layout(node))
            if done is not None:
                log.info("MIG layout of %s: %s", node, said)
                return ActionResult(ok=done, detail=said)
            activity.heartbeat(said)
            if activity.is_cancelled():
                return ActionResult(ok=False, detail=f"cancelled while waiting: {said}")
            time.sleep(self._poll_s)

    def all(self) -> list[Callable[..., Any]]:
        return [self.ask_mig_layout, self.keep_mig_layout, self.mig_layout_restored]
