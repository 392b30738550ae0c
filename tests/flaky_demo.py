"""`remedy demo ARGS` on a simulated API server that refuses the first cordons, as a flaky one
would: what tests/test_demo.py runs to see the demo's console report a failure the ladder
handles. Run as a script: ``python tests/flaky_demo.py --duration 6 ...``."""

from __future__ import annotations

import sys
from typing import Any

from adapters.sim.fleet import SimFleet
from remedy.core.errors import TransientError
from workers.cli import main

REFUSED_CORDONS = 2
REFUSAL = "the API server is down"


def flaky_api() -> None:
    """Every SimFleet the demo builds refuses its first cordons with a transient error."""
    built = SimFleet.__init__

    def init(self: SimFleet, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **kwargs)
        self.fail_next("cordon", TransientError(REFUSAL), REFUSED_CORDONS)

    SimFleet.__init__ = init  # type: ignore[method-assign]


if __name__ == "__main__":
    flaky_api()
    sys.argv = ["remedy", "demo", *sys.argv[1:]]
    main()
