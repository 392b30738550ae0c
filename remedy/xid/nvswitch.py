"""NVSwitch SXid lines (Hopper and earlier HGX baseboards) out of a kernel log.

The driver prints ``nvidia-nvswitchN: SXid (PCI:DDDD:BB:DD.F): %05d, `` then ``Fatal, …`` /
``Non-fatal, …`` / ``Correctable, …`` (``intr_nvswitch.h``), usually followed by ``Severity …``
and ``Data {…}`` lines with the same number that only dump registers. SXid numbers were
renumbered between driver branches (28006 → 29006 at R550), so the fatality word on the line
decides, never a table keyed by number.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from remedy.core.models import Severity
from remedy.xid.actions import SEVERITY, XidAction
from remedy.xid.lines import PCI, normalize_pci, not_from_the_kernel, timestamp, uptime

_SXID = re.compile(
    r"nvidia-(?P<switch>nvswitch\d{1,4}): SXid "
    rf"\(PCI:{PCI}\): "
    r"(?P<code>\d{1,6}), (?P<rest>.*)$"
)
_LINK = re.compile(r"^Link (?P<link>-?\d{1,4})\b")
# Register dumps that belong to the SXid line before them (error_nvswitch.c, SOE halt dumps).
_FOLLOW_UP = re.compile(r"^(?:Severity \d|Data \{|SOE HALT data\[)")


class Fatality(StrEnum):
    FATAL = "fatal"
    NON_FATAL = "non_fatal"
    CORRECTABLE = "correctable"
    # No Fatal/Non-fatal word (e.g. `26006, SOE HALTED`): NVIDIA says nothing on the line.
    UNKNOWN = "unknown"


_WORDS = {
    "Fatal": Fatality.FATAL,
    "Non-fatal": Fatality.NON_FATAL,
    "Correctable": Fatality.CORRECTABLE,
}
# What remedy does about each. A fatal SXid leaves the switch (and NVLink through it) unusable
# until the whole baseboard is reset; remedy's GPU reset goes one GPU at a time, so that fabric
# reset is a reboot (runbooks/nvswitch.yaml).
ACTIONS: dict[Fatality, XidAction] = {
    Fatality.FATAL: XidAction.REBOOT,
    Fatality.NON_FATAL: XidAction.IGNORE,
    Fatality.CORRECTABLE: XidAction.IGNORE,
    Fatality.UNKNOWN: XidAction.CONTACT_SUPPORT,  # fail closed: a person reads it
}


class SXidEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    switch: str  # nvswitch3 (the driver prints it as nvidia-nvswitch3)
    pci_bus_id: str  # domain:bus:device, lower case, as for Xids
    code: int
    fatality: Fatality
    link: int | None = None  # the NVLink port, when the line names one
    message: str = ""  # the text after the fatality word
    action: XidAction
    severity: Severity
    line: int  # 1-based line number in the input
    timestamp: datetime | None = None
    uptime_s: float | None = None


def parse_sxids(lines: Iterable[str]) -> list[SXidEvent]:
    """Every SXid event in ``lines``; register-dump lines are part of the event before them.
    Lines it cannot read are skipped."""
    events: list[SXidEvent] = []
    last: dict[str, int] = {}  # switch → the SXid number of its last event
    for number, line in enumerate(lines, start=1):
        match = None if not_from_the_kernel(line) else _SXID.search(line.rstrip("\r\n"))
        if match is None:
            continue
        switch, code, rest = match["switch"], int(match["code"]), match["rest"].strip()
        word, _, text = rest.partition(",")
        fatality = _WORDS.get(word)
        if fatality is None:
            if _FOLLOW_UP.match(rest) or last.get(switch) == code:
                continue
            fatality, text = Fatality.UNKNOWN, rest
        last[switch] = code
        text = text.strip()
        link = _LINK.match(text)
        action = ACTIONS[fatality]
        events.append(
            SXidEvent(
                switch=switch,
                pci_bus_id=normalize_pci(match["pci"]),
                code=code,
                fatality=fatality,
                link=int(link["link"]) if link else None,
                message=text,
                action=action,
                severity=SEVERITY[action],
                line=number,
                timestamp=timestamp(line),
                uptime_s=uptime(line),
            )
        )
    return events
