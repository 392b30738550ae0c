"""The slow node, found from a job's own step times: each rank's compute time per step as the
job's helper reports it, scored against the job's other ranks and the rank's own history; a node
whose ranks stay slow across a window is a suspect (``SlowNode``), a node whose ranks wait on
input instead is the application's (input skew). Pure: no clock, no I/O."""
