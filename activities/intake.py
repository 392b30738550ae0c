"""The controller's side of the ladder's door (remedy.ladder.intake): a report is checked here — who
sent it, against the key its node published, the controllers' seal or the operator keyring —
and given the controller's own runbook of the name it asks for.

A node's published key is read once a minute at most (a storm of reports from one node reads
it once), and again when a report does not verify with the key kept: the agent restarted and
published a new one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from activities.errors import temporal_errors
from contract import activities as act
from remedy.core.errors import NodeGone
from remedy.ladder.intake import Admission, Door, ReportToAdmit, admit
from remedy.scan.cluster import NodeMarks
from remedy.trust.identity import Sender
from remedy.trust.person_hold import NodeHold, read_hold
from remedy.trust.signing import Keyring

KEY_KEPT_S = 60.0  # how long a node's published key is taken as read
KEYS_KEPT = 10_000  # nodes whose keys are kept at once (the oldest read goes first)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class PublishedKeys:
    """Nodes' published agent keys, each read at most once per ``KEY_KEPT_S``."""

    def __init__(self, marks: NodeMarks, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._marks, self._monotonic = marks, monotonic
        self._kept: dict[str, tuple[float, str | None]] = {}
        self._lock = threading.Lock()

    def key(self, node: str, fresh: bool = False) -> str | None:
        now = self._monotonic()
        with self._lock:
            kept = self._kept.get(node)
        if kept is not None and not fresh and now - kept[0] < KEY_KEPT_S:
            return kept[1]
        key = self._marks.agent_key(node)
        with self._lock:
            self._kept.pop(node, None)
            self._kept[node] = (now, key)
            while len(self._kept) > KEYS_KEPT:
                del self._kept[next(iter(self._kept))]
        return key


class IntakeActivities:
    def __init__(
        self,
        door: Door,
        marks: NodeMarks,
        keyring: Callable[[], Keyring],
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._door, self._keys, self._keyring, self._clock = (
            door,
            PublishedKeys(marks),
            keyring,
            clock,
        )
        self._marks = marks

    @act.ADMIT_REPORT.defn
    def admit_report(self, req: ReportToAdmit) -> Admission:
        """Reading a node's key can fail (the API down): retried, never taken as no key."""
        door = Door(
            runbooks=self._door.runbooks,
            seal=self._door.seal,
            keyring=self._keyring(),
            node_queue=self._door.node_queue,
        )
        proof, node = req.report.proof, req.node.name
        by_agent = proof is not None and proof.sender is Sender.AGENT
        with temporal_errors():
            published = self._keys.key(node) if by_agent else None
            admission = admit(door, req, published, self._clock())
            if by_agent and admission.report is None and admission.sender:
                fresh = self._keys.key(node, fresh=True)  # a key published since it was read
                if fresh != published:
                    admission = admit(door, req, fresh, self._clock())
            if req.first and admission.report is not None:  # a new ladder: is the node held?
                admission = admission.model_copy(update={"held": self._held(node)})
        return admission

    def _held(self, node: str) -> NodeHold | None:
        try:
            return read_hold(self._marks.person_hold(node), self._clock())
        except NodeGone:
            return None  # the ladder finds the node gone at its first step, as before

    def all(self) -> list[Callable[..., Any]]:
        return [self.admit_report]
