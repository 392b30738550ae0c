"""The node's own machine, for the agent: real NVML, RDMA NICs in sysfs, the kernel log,
``nvidia-smi`` resets, the reboot and the GPU load test."""
