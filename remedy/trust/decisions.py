"""What people send a ladder: an approval, a clear or an abort, each signed by who made it;
the approvals it keeps and its refusals."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import ConfigDict

from remedy.core.models import (
    Frozen,
    vouched,
)
from remedy.redaction.operator import ClientIdentity, OperatorName, OperatorReason, OperatorText
from remedy.trust.signing import Signature


class OperatorRequest(Frozen):
    """What an operator sends a ladder: a refusal never quotes the text it refused (a secret
    in a note would reach the sender's and the worker's logs)."""

    model_config = ConfigDict(frozen=True, extra="ignore", hide_input_in_errors=True)


class ApproveRequest(OperatorRequest):
    by: OperatorName
    # The rung, counted from 1 as people see it (remedy.core.numbering); None: the rung waiting now.
    # A rung other than the one waiting is approved only with ``ahead``.
    rung_number: int | None = None
    ahead: bool = False
    # The old form (clients of the release before): the ladder's index, from 0. It approves
    # only the rung waiting now; with ``rung_number`` it must name the same rung.
    rung: int | None = None
    note: OperatorText = ""
    identity: ClientIdentity = ""  # the caller's client identity, recorded beside ``by``
    signature: Signature | None = None  # the operator's (remedy.trust.signing)
    # The fingerprint of the key the workflow verified the signature with: set by the workflow
    # only (it overwrites what a caller sends), so a record with a key is a fact.
    key: str = ""


class ClearRequest(OperatorRequest):
    by: OperatorName
    reason: OperatorText = ""
    identity: ClientIdentity = ""
    signature: Signature | None = None
    key: str = ""  # as ApproveRequest's: the workflow's, never the caller's

    @property
    def who(self) -> str:
        return vouched(self.by, self.identity, self.key)


class AbortRequest(OperatorRequest):
    by: OperatorName
    reason: OperatorReason
    restore: bool = False  # also undo remedy's cordon; by default the node stays as it is
    hold: bool = True  # mark the node held for a person: no ladder acts until it is handed back
    identity: ClientIdentity = ""
    signature: Signature | None = None
    key: str = ""  # as ApproveRequest's: the workflow's, never the caller's

    @property
    def who(self) -> str:
        return vouched(self.by, self.identity, self.key)


class Consent(StrEnum):
    """What an approval agrees to."""

    RUNG = ""  # the rung itself (its runbook says `approval: required`)
    UNDRAINED = "undrained"  # running a rung that needs a drained node after the drain failed


class Approval(Frozen):
    rung: int
    by: str
    at: datetime
    note: str = ""
    identity: str = ""  # the approver's client identity (empty from older clients)
    epoch: int = 0  # the runbook it was given under: an escalation's new ladder asks again
    consent: Consent = Consent.RUNG
    key: str = ""  # the verified key's fingerprint (by is then the keyring's name)

    @property
    def who(self) -> str:
        return vouched(self.by, self.identity, self.key)


class Refusal(Frozen):
    """A decision sent as a signal that the workflow refused (a signal cannot answer, so the
    reason is kept where ``remedy show`` reads it)."""

    at: datetime
    verb: str
    why: str
