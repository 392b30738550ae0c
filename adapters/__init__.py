"""Implementations of remedy's seams (``remedy/scan/cluster.py``, ``remedy/detection/host.py``,
``remedy/detection/gpu.py``):
Kubernetes (``kubernetes/``), the node's own machine (``host/``) and the simulated fleet
(``sim/``), which tests, the demo and rehearsals use in place of both. The domain never imports
these; workers wire them in."""
