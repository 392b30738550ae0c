"""Push-based Xid errors from NVML event sets (nvmlEventTypeXidCriticalError): the agent learns
of an Xid when the driver raises it, not at the next poll."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from remedy.core.models import Component, ComponentKind, Finding
from remedy.detection import gpu as nv
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.context import as_text
from remedy.xid.catalog import Decoder, XidCatalog, load_catalog

log = logging.getLogger(__name__)


class XidWatcher:
    def __init__(
        self,
        node: str,
        nvml: NvmlApi,
        now: Callable[[], datetime],
        catalog: XidCatalog | None = None,
        defer_decoded: bool = False,
    ) -> None:
        self._node, self._nvml, self._now = node, nvml, now
        # The kernel log is read too: an Xid whose message decides its action (154's recovery,
        # 74's registers, 45's cause) is left to it. NVML's event has the code alone, and the
        # catalog's fallback would send, say, a 154 asking for nothing to a person; the one
        # sighting the dedup would keep must be the one that read the message.
        self._defer_decoded = defer_decoded
        self._catalog = catalog or load_catalog()
        self._set: Any = None
        self._architectures: dict[int, int] = {}  # index → NVML architecture: per GPU
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
                    handle, nv.nvmlEventTypeXidCriticalError, self._set
                )
                self._serials[index] = self._nvml.nvmlDeviceGetSerial(handle)
                self._pci[index] = as_text(self._nvml.nvmlDeviceGetPciInfo(handle).busId).lower()
                self._architectures[index] = self._nvml.nvmlDeviceGetArchitecture(handle)
        except nv.NVMLError as exc:
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
            except nv.NVMLError_Timeout:
                return out
            if (finding := self._finding(event)) is not None:
                out.append(finding)
            timeout_ms = 0

    def _finding(self, event: Any) -> Finding | None:
        code = int(event.eventData)
        index = self._nvml.nvmlDeviceGetIndex(event.device)
        architecture = self._architectures.get(index)
        info = self._catalog.lookup(code, architecture)
        if self._defer_decoded and info.decode is not Decoder.NONE:
            return None
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
                architecture=architecture,
            ),
            xid=code,
            evidence=f"{info.fault_class}: {info.description} (NVML event)",
            observed_at=self._now(),
            # An NVML event carries the code alone, no message to decode: the catalog's action.
            nvidia_action=info.action.value,
        )

    def stop(self) -> None:
        if self._set is not None:
            try:
                self._nvml.nvmlEventSetFree(self._set)
                self._nvml.nvmlShutdown()
            except nv.NVMLError:
                pass
            self._set = None
