"""Crash tests with real processes: a dev server, a controller and the simulated agents, each
killed and restarted at random over a simulated fleet kept in a file, and the promise measured
from that file and from Temporal (``make chaos``; ``python -m chaos --short`` in the tests).

Nothing in the product imports this package (an import-linter contract keeps it so)."""
