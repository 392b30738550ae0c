"""The NodeHost seam: what the node agent can do on its own machine."""

from __future__ import annotations

from typing import Protocol

from remedy.acting.capabilities import DependencyCheck
from remedy.core.models import Action
from remedy.detection.gpu import NvmlApi
from remedy.detection.probe.load import LoadReport
from remedy.detection.probe.runner import ProbeConfig


class NodeHost(Protocol):
    name: str

    @property
    def probe_config(self) -> ProbeConfig:
        """What this node should have (GPUs, NICs) and where its kernel log is."""

    def nvml(self) -> NvmlApi: ...

    def reset_gpus(self, indices: list[int], key: str) -> str:
        """Reset these GPUs (all when empty) and say what was done; raise ActionFailed when the
        reset is impossible. ``key`` (remedy/core/once.py): a repeat answers the first reset."""

    def reboot(self, key: str) -> str:
        """Reboot the node, at most once for ``key``: a repeat from a new boot answers that the
        node rebooted, one from the same boot that it was issued."""

    def run_action(self, action: Action, command: list[str], key: str) -> str:
        """Do ``action`` by running ``command`` on the node, at most once for ``key``, and say
        what was done; raise ActionFailed when it fails, ActionRefused when this node does not
        allow it (a hardware action where the agent may not reset)."""

    def load_test(self, indices: list[int]) -> LoadReport:
        """Run sustained load on these GPUs (all when empty) and say what it found; a test
        that could not run says so in the report (fail closed), it does not raise."""

    def dependencies(self, refresh: bool = False) -> list[DependencyCheck]:
        """What remedy relies on here, one check per dependency (remedy/acting/capabilities.py); the
        expensive ones come from a cache unless ``refresh``. Never raises: a check that could
        not run is a failed check."""
