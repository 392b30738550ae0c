"""The fleet twin: weeks of a training fleet's faults played against one job, per policy."""
