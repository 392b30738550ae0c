"""remedy: keeps GPU fleets healthy.

This package is the domain core: models, runbooks, the probe, the cluster and GPU seams and the
simulated fleet. It imports neither ``temporalio`` nor ``kubernetes``.
"""
