"""The fleet twin: simulated nodes, GPUs, faults and cluster, behind the same seams as reality."""

from adapters.sim.faults import FAULTS, FaultSpec
from adapters.sim.fleet import SimFleet

__all__ = ["FAULTS", "FaultSpec", "SimFleet"]
