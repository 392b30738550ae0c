"""A node held for a person (remedy.trust.person_hold), on the controller through its cluster
adapter:
the mark lands on the node itself, where the next ladder reads it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from activities.errors import temporal_errors
from contract import activities as act
from remedy.scan.cluster import NodeMarks
from remedy.trust.person_hold import HoldLift, HoldNode, HoldQuery, NodeHeld, read_hold

log = logging.getLogger(__name__)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PersonHoldActivities:
    def __init__(self, marks: NodeMarks, clock: Callable[[], datetime] = _utcnow) -> None:
        self._marks, self._clock = marks, clock

    @act.HOLD_NODE.defn
    def hold_node(self, req: HoldNode) -> NodeHeld:
        """Idempotent: a node held already keeps its first hold (who, why and since when the
        person took it), which comes back; a retry writes nothing new."""
        with temporal_errors():
            kept = read_hold(self._marks.person_hold(req.node), self._clock())
            if kept is None:
                self._marks.set_person_hold(req.node, req.hold.text())
        log.info("%s: %s", req.node, (kept or req.hold).said())
        return NodeHeld(node=req.node, hold=kept or req.hold)

    @act.READ_HOLD.defn
    def read_hold(self, req: HoldQuery) -> NodeHeld:
        with temporal_errors():
            return NodeHeld(
                node=req.node, hold=read_hold(self._marks.person_hold(req.node), self._clock())
            )

    @act.LIFT_HOLD.defn
    def lift_hold(self, req: HoldLift) -> NodeHeld:
        """The hold that was lifted (None: the node was not held)."""
        with temporal_errors():
            before = self._marks.set_person_hold(req.node, None)
        lifted = read_hold(before, self._clock())
        if lifted is not None:
            log.info("%s: handed back by %s (was %s)", req.node, req.by, lifted.said())
        return NodeHeld(node=req.node, hold=lifted)

    def all(self) -> list[Callable[..., Any]]:
        return [self.hold_node, self.read_hold, self.lift_hold]
