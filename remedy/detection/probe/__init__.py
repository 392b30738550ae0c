"""The node probe: layered checks over the GPU backend seam that fail closed."""

from remedy.detection.probe.runner import ProbeConfig, probe_node

__all__ = ["ProbeConfig", "probe_node"]
