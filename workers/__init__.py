"""Processes: the controller worker, the simulated node agents, the embedded dev stack, the CLI.
This is the one layer that wires seams, activities and workflows together."""
