"""RDMA NIC state and error counters from sysfs (/sys/class/infiniband; EFA devices show up
as rdmap*). Layout and formats: linux Documentation/ABI/stable/sysfs-class-infiniband and
drivers/infiniband/core/sysfs.c (``rate`` is ``"%d%s Gb/sec (%dX%s)"``; the PMA counters under
``ports/N/counters/``); EFA has no PMA and keeps its port stats under ``ports/N/hw_counters/``
(drivers/infiniband/hw/efa/efa_verbs.c)."""

from __future__ import annotations

import re
from pathlib import Path

from remedy.detection.probe.nic_counters import EFA_COUNTERS, EFA_OPTIONAL, IB_COUNTERS
from remedy.detection.probe.nics import NicPort, PortCounters

INFINIBAND = Path("/sys/class/infiniband")
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec(?:\s*\((\d+)X)?")


class SysfsNics:
    def __init__(self, root: Path = INFINIBAND, exclude: frozenset[str] = frozenset()) -> None:
        self.root = root
        self.exclude = exclude  # devices left out: not read, not counted

    def ports(self) -> list[NicPort]:
        found = []
        for device, port_dir in self._ports():
            rate, width = _rate(port_dir / "rate")
            found.append(
                NicPort(
                    device=device.name,
                    port=int(port_dir.name),
                    state=_after_colon(port_dir / "state"),
                    phys_state=_after_colon(port_dir / "phys_state"),
                    rate_gbps=rate,
                    width=width,
                    link_layer=_text(port_dir / "link_layer"),
                    model=_text(device / "hca_type") or re.sub(r"\d+", "", device.name),
                )
            )
        return found

    def counters(self) -> list[PortCounters]:
        """Every port's error counters; one that cannot be read says why (fail closed)."""
        readings = []
        for device, port_dir in self._ports():
            values: dict[str, int] = {}
            unreadable: dict[str, str] = {}
            if (port_dir / "counters").is_dir():
                wanted, folder = IB_COUNTERS, port_dir / "counters"
            elif (port_dir / "hw_counters").is_dir():
                folder = port_dir / "hw_counters"
                wanted = EFA_COUNTERS + tuple(c for c in EFA_OPTIONAL if (folder / c).exists())
            else:
                wanted, folder = (), port_dir
                unreadable["counters"] = "no counters/ or hw_counters/ folder"
            for counter in wanted:
                try:
                    values[counter] = _counter(folder / counter)
                except (OSError, ValueError) as exc:
                    unreadable[counter] = str(exc)
            readings.append(PortCounters(device.name, int(port_dir.name), values, unreadable))
        return readings

    def _ports(self) -> list[tuple[Path, Path]]:
        if not self.root.is_dir():
            return []
        return [
            (device, port_dir)
            for device in sorted(self.root.iterdir())
            if device.name not in self.exclude
            for port_dir in sorted((device / "ports").glob("*"))
        ]


def _counter(path: Path) -> int:
    text = path.read_text().strip()
    if not text.isdigit():  # "N/A (no PMA)" on older kernels, where the PMA query failed
        raise ValueError(f"reads {text!r}")
    return int(text)


def _after_colon(path: Path) -> str:
    # sysfs writes "4: ACTIVE" and "5: LinkUp".
    text = path.read_text().strip()
    return text.split(":", 1)[1].strip() if ":" in text else text


def _rate(path: Path) -> tuple[float, int]:
    match = _RATE.match(path.read_text())
    if not match:
        return 0.0, 0
    return float(match[1]), int(match[2] or 0)


def _text(path: Path) -> str:
    """An optional attribute (link_layer, hca_type): empty where the driver has none."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""
