"""Push-based Xid errors from NVML event sets (nvmlEventTypeXidCriticalError): the agent learns
of an Xid when the driver raises it, not at the next poll."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pynvml

from remedy.gpu import NvmlApi
from remedy.models import Component, ComponentKind, Finding
from remedy.probe.checks import as_text
from remedy.xid.catalog import XidCatalog, load_catalog

log = logging.getLogger(__name__)


class XidWatcher:
    def __init__(
        self,
        node: str,
        nvml: NvmlApi,
        now: Callable[[], datetime],
        catalog: XidCatalog | None = None,
    ) -> None:
        self._node, self._nvml, self._now = node, nvml, now
        self._catalog = catalog or load_catalog()
        self._set: Any = None
        self._architecture: int | None = None
        self._serials: dict[int, str] = {}
        self._pci: dict[int, str] = {}  # the kernel log names GPUs by PCI id: one Xid, once

    def start(self) -> bool:
        """Register for Xid events on every GPU; False when NVML cannot (the caller then relies
        on the kernel log)."""
        try:
            self._nvml.nvmlInit()
            self._set = self._nvml.nvmlEventSetCreate()
            for index in range(self._nvml.nvmlDeviceGetCount()):
                handle = self._nvml.nvmlDeviceGetHandleByIndex(index)
                self._nvml.nvmlDeviceRegisterEvents(
                    handle, pynvml.nvmlEventTypeXidCriticalError, self._set
                )
                self._serials[index] = self._nvml.nvmlDeviceGetSerial(handle)
                self._pci[index] = as_text(self._nvml.nvmlDeviceGetPciInfo(handle).busId).lower()
                self._architecture = self._nvml.nvmlDeviceGetArchitecture(handle)
        except pynvml.NVMLError as exc:
            log.warning("NVML Xid events unavailable on %s: %s", self._node, exc)
            self._set = None
            return False
        return True

    def wait(self, timeout_s: float) -> list[Finding]:
        """Xids raised within ``timeout_s``: waits for the first, then takes what is queued."""
        if self._set is None:
            return []
        out: list[Finding] = []
        timeout_ms = int(timeout_s * 1000)
        while True:
            try:
                event = self._nvml.nvmlEventSetWait_v2(self._set, timeout_ms)
            except pynvml.NVMLError_Timeout:
                return out
            out.append(self._finding(event))
            timeout_ms = 0

    def _finding(self, event: Any) -> Finding:
        code = int(event.eventData)
        index = self._nvml.nvmlDeviceGetIndex(event.device)
        info = self._catalog.lookup(code, self._architecture)
        return Finding(
            node=self._node,
            check="xid",
            reason=f"Xid{code}",
            severity=info.severity,
            component=Component(
                kind=ComponentKind.GPU,
                index=index,
                serial=self._serials.get(index),
                pci_bus_id=self._pci.get(index),
            ),
            xid=code,
            evidence=f"{info.fault_class}: {info.description} (NVML event)",
            observed_at=self._now(),
        )

    def stop(self) -> None:
        if self._set is not None:
            try:
                self._nvml.nvmlEventSetFree(self._set)
                self._nvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass
            self._set = None
