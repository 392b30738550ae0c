"""A node held for a person: after `remedy abort` no automation acts on it until it is handed
back, so the next report cannot start a ladder that reboots it under a person's hands.

The aborting ladder marks the node (an annotation, ``HOLD_ANNOTATION``): the mark lives where
everything that would act on the node reads it, outlives the ladder and shows in ``kubectl``.
A report for a held node starts a ladder that records the report and waits
(``Phase.HELD_FOR_PERSON``), acting on nothing, until `remedy resume-node` lifts the mark (or a
person removes the annotation); then it climbs for what it recorded, the fault checked again
first as for any ladder. `remedy abort --no-hold` leaves no mark.

Pure: the models and the annotation's text; the cluster adapters read and write it.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ValidationError

from remedy.core.models import Frozen

HOLD_ANNOTATION = "remedy.io/held-for-person"


class NodeHold(Frozen):
    """Who holds the node, why and since when (the annotation's content)."""

    by: str
    reason: str
    since: datetime
    ladder: str = ""  # the workflow id of the ladder whose abort set it

    def said(self) -> str:
        """``held for a person by carol since 12-07 10:53:40: vendor on site``"""
        return f"held for a person by {self.by} since {self.since:%m-%d %H:%M:%S}: {self.reason}"

    def text(self) -> str:
        """What the annotation holds."""
        return self.model_dump_json(exclude_defaults=True)


def held_note(hold: NodeHold, node: str, reports: int) -> str:
    """What a held ladder is doing, for `remedy show` and the UI's details."""
    return (
        f"{hold.said()}; nothing is done on the node: {reports} report(s) recorded, acted on "
        f"once `remedy resume-node {node}` hands it back"
    )


def read_hold(text: str | None, now: datetime) -> NodeHold | None:
    """The hold an annotation says (None: none). One that does not read (written by hand,
    ``kubectl annotate node N remedy.io/held-for-person=yes``) still holds: a person meant it."""
    if not text:
        return None
    try:
        return NodeHold.model_validate_json(text)
    except ValidationError:
        return NodeHold(by="(by hand)", reason=f"annotation {HOLD_ANNOTATION}", since=now)


class HoldNode(Frozen):
    """Mark the node held (an activity's request; writing the same hold again changes nothing)."""

    node: str
    hold: NodeHold


class HoldQuery(Frozen):
    """Read the node's hold (an activity's request)."""

    node: str


class HoldLift(Frozen):
    """A person hands the node back (`remedy resume-node`): the release workflow's input."""

    node: str
    by: str
    note: str = ""
    identity: str = ""  # the caller's client identity, recorded beside ``by``


class NodeHeld(Frozen):
    """The node's hold as read, or as it was when lifted (None: there was none)."""

    node: str
    hold: NodeHold | None = None
