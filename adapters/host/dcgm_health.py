"""DCGM's health watches and dcgm-exporter's metrics, read on the node for the probe (the
agent's ``--dcgm-health`` and ``--dcgm-exporter``): each bounded in time (and the metrics in
size), each failure raised for the check to report (fail closed, never healthy)."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Sequence

from adapters.host.dcgm import run_bounded
from adapters.host.output import command_line, tool_output
from remedy.detection.dcgm_exporter import MAX_BYTES
from remedy.detection.probe.dcgm_sources import HealthUnreadable, MetricsUnreadable, NotWatched

# Within the probe's own limit for a check (--timeout, 5 s by default: HostSettings passes
# a share of it), so that a slow dcgmi or exporter is this check's finding, not a timed-out
# check (probe-failure's ladder reboots).
HEALTH_TIMEOUT_S = 4.0
METRICS_TIMEOUT_S = 4.0
# dcgmi's own words (NVIDIA/DCGM dcgmi/Health.cpp, CheckWatches; NVIDIA/DCGM issue #176).
_NOT_ENABLED = "Health watches not enabled"

# (command, seconds) → exit status (None: hung, killed), output
Run = Callable[[Sequence[str], float], tuple[int | None, str]]


def _run(command: Sequence[str], timeout_s: float) -> tuple[int | None, str]:
    return run_bounded(list(command), timeout_s, keep_stdout=True)


class DcgmiHealth:
    """``dcgmi health -c -j`` against the host engine (``host``: dcgmi's --host; empty: local).

    Where the engine has no watches set and ``set_watches`` is on, the first probe that finds
    none sets them all (``dcgmi health -s a``, as NVSentinel's gpu-health-monitor sets its own)
    and still says "not watched": DCGM needs samples (about a minute) before a check means
    anything. The GPU operator's DCGM sets none by itself."""

    def __init__(
        self,
        dcgmi: str = "dcgmi",
        host: str = "",
        set_watches: bool = True,
        timeout_s: float = HEALTH_TIMEOUT_S,
        run: Run = _run,
    ) -> None:
        self._dcgmi, self._host, self._set, self._run = dcgmi, host, set_watches, run
        self.timeout_s = timeout_s

    def _command(self, *args: str) -> list[str]:
        return [self._dcgmi, "health", *args, *(["--host", self._host] if self._host else [])]

    def check(self) -> str:
        command = self._command("-c", "-j")
        code, out = self._run(command, self.timeout_s)
        shown = command_line(command)
        if code is None:
            raise HealthUnreadable(f"{shown} did not answer within {self.timeout_s:g}s (killed)")
        if _NOT_ENABLED in out:
            raise NotWatched(f"DCGM has no health watches set ({shown}): {self._watch()}")
        if code != 0:
            raise HealthUnreadable(f"{shown} exited {code}: {tool_output(out, 300)}")
        return out

    def _watch(self) -> str:
        if not self._set:
            return "set them with `dcgmi health -s a`"
        command = self._command("-s", "a")
        code, out = self._run(command, self.timeout_s)
        if code == 0:
            return "set them now (`dcgmi health -s a`); the next probes read them"
        said = "did not answer" if code is None else f"exited {code}: {tool_output(out, 200)}"
        return f"setting them failed: {command_line(command)} {said}"

    def __str__(self) -> str:
        return f"dcgmi health at {self._host or 'localhost'}"


Fetch = Callable[[str, float, int], bytes]


def _fetch(url: str, timeout_s: float, limit: int) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as answer:  # noqa: S310 - the flag's URL
        return bytes(answer.read(limit))


class ExporterMetrics:
    """dcgm-exporter's ``/metrics`` over HTTP, at most ``MAX_BYTES`` (more is refused: not
    cut, which could drop a GPU's line) within ``timeout_s``."""

    def __init__(self, url: str, timeout_s: float = METRICS_TIMEOUT_S, fetch: Fetch = _fetch):
        self.url, self.timeout_s, self._fetch = url, timeout_s, fetch

    def fetch(self) -> str:
        try:
            body = self._fetch(self.url, self.timeout_s, MAX_BYTES + 1)
        except (urllib.error.URLError, OSError, ValueError) as exc:  # refused, timed out, bad URL
            raise MetricsUnreadable(f"{self.url}: {type(exc).__name__}: {exc}") from None
        if len(body) > MAX_BYTES:
            raise MetricsUnreadable(f"{self.url} answered more than {MAX_BYTES} bytes")
        return body.decode("utf-8", errors="replace")

    def __str__(self) -> str:
        return f"dcgm-exporter at {self.url}"
