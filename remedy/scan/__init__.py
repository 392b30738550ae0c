"""The fleet as the scan sees it, and the cluster seams: node status, liveness, admission,
active checks, orphaned cordons, stalled workers."""
