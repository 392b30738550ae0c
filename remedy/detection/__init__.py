"""What is wrong with a node: the probe and its checks, the GPU (NVML) and host seams, check
names and reasons, node conditions, which pod uses which GPU, a node's facts."""
