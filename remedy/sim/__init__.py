"""The fleet twin: simulated nodes, GPUs, faults and cluster, behind the same seams as reality."""

from remedy.sim.faults import FAULTS, FaultSpec
from remedy.sim.fleet import SimFleet

__all__ = ["FAULTS", "FaultSpec", "SimFleet"]
