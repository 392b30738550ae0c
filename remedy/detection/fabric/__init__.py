"""Tests across GPUs and nodes: the output of NVIDIA's nccl-tests (``all_reduce_perf``),
``nvbandwidth`` and perftest's ``ib_write_bw`` read as the tools print it, and the verdict on
each against the GPU model's reference. A run whose output cannot be read, or that stopped
short, is a failed test (fail closed), never a pass."""
